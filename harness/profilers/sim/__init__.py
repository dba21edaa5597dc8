"""A trace-driven simulated L2: the profiler backend that needs no GPU (``profiler=sim``).

What it models (MI300X by default; NVIDIA as one L2 domain):

* **Dispatch** (:mod:`.dispatch`).  Programs start in launch order, pid 0, 1, 2, ..., and run
  on XCD ``pid % num_xcds`` (round-robin, the SPX-mode rule).  Each XCD keeps
  ``compute_units / num_xcds * occupancy`` programs resident; when one finishes, the XCD's next
  program in launch order takes its place.
* **Work.**  A program walks its work items (:class:`kernels.access.Schedule`): one tile in the
  plain launch, where program ``pid`` computes tile ``table[pid]`` (the swizzle's remap
  table); with a persistent grid (``min(work, compute_units)`` programs, one per SM / CU)
  program ``pid`` stays resident and computes items ``pid, pid + P, ...`` one after the other;
  with split-K an item is one split of a tile's K steps.
* **Interleaving** (:mod:`.replay`).  Resident programs advance in lock step, round-robin, one
  K-step (:mod:`kernels.access`) per turn: the step's distinct cache lines, input lines first.
  The turn of an item's last step then performs its epilogue.
* **Caches** (:mod:`.caches`, :mod:`.lru`).  XCD ``x`` looks up L2 domain ``x * l2_domains //
  num_xcds``; each domain is its own set-associative LRU cache of ``l2_bytes`` (MI300X: 4 MB,
  16 ways, 128 B lines, one per XCD).  A store is a lookup like a load (write-allocate, no
  fetch); on NVIDIA (``l2_writes: hit``) every store is a hit, as ncu counts it.  Optionally
  L2 read misses go on to one memory-side cache shared by all domains (the MI300X Infinity
  Cache, "MALL").  Caches start cold.
* **Partitions and sets** (:mod:`.address`; NVIDIA: ``l2_partitions: 2``, ``l2_set_hash``).  A
  line's home partition and, with the set hash, its set are hashes of its 128 B block; a
  program reads through its cluster's partition, and a miss of a line homed in the other is
  looked up again at home (ncu's ``srcunit_ltcfabric`` lookups).  The read hit rate is that of
  the first lookups (ncu's tex-unit read lookups); the all-traffic rate counts the fabric
  lookups too.
* **Request coalescing** (NVIDIA, when calibrated).  Each slot keeps its program's clock in
  K-steps; a read of a line its merge unit requested less than ``coalesce_window`` steps
  before is merged with that request and is no lookup (``merged_reads``).
* **Requests of 128 B and register spills** (NVIDIA: ``l2_request_bytes``).  A load's run
  across a 128 B boundary is two requests (ncu counts one more read hit for the second when its
  line misses); each output row's store is its own request; a kernel that spills stores the
  spilled lines once per work item, all hits (:func:`.replay.spill_lookups`).
* **Store requests of 32 B** (MI300X: ``l2_store_request_bytes``).  A store reaches the L2 in
  requests of that size, each a lookup: a written line is looked up once per distinct piece
  written (the first, to an absent line, a miss that allocates it).
* **Timed run** (:mod:`.job`).  A job's run can be several launches (igemm_fast: the fold pass,
  the conv, the split-K sum pass).  The reading is the conv's, from cold caches, as ncu
  (``--cache-control all``) measures it; the whole run, caches carried from launch to launch,
  is reported beside it.

The parameters are a :class:`.target.SimTarget` (:mod:`.target`); the outputs a
:class:`.result.SimResult`: hits and misses in line lookups, loads and stores together (ncu's
``lts__t_sectors_lookup_hit`` / ``_miss``, rocprofv3's TCC_HIT / TCC_MISS) and of the loads
alone, per XCD and per domain hit rates (%), bytes the L2 fetched from below it (read misses x
line size) and, with the MALL, bytes read from memory.  The error bands a job's figures carry
are :mod:`.bands`'; the profiler backend is :mod:`.profiler`.  What each rule rests on, and the
validation, are in docs/simulator.md.
"""
