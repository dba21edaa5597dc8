"""Finding swizzles: the search sweeper (a Hydra sweeper plugin), its parameter space
and the oracle for formula proposers (its trial rows: harness.storage.search_trials)."""
