"""The compile stage: the job's kernel x swizzle x config compiled ahead of time for the
job's *target*, on any machine, and what the compiler made of it.

A Triton wheel carries both GPU backends, so a machine with no GPU can still build the
AMDGCN and HSACO an MI300X (gfx942) would run, or the cubin of an H100 (sm_90).  That is a
real check the Triton interpreter cannot make (it accepts kernels a GPU rejects), and real
data: registers, shared memory / LDS, spills, the occupancy they allow, and a few counts
from the assembly that explain speed (matrix instructions, global load widths).

How it compiles exactly what the job would launch:

1. **Record the launches.**  The kernel family's own ``bind`` and ``run`` are called on
   operands allocated on torch's ``meta`` device (shapes and strides, no memory), with
   ``JITFunction.run`` replaced by a recorder: every ``kernel[grid](...)`` of the launch (the
   conv, and passes such as igemm_fast's fold and split-K sum) is captured with its
   arguments, nothing runs.
2. **Specialise them as Triton's launcher would for the target.**  Triton's own binder
   (``create_function_from_signature`` with the target's backend) turns the arguments into
   the signature, constexprs and divisibility attributes, so the compiled kernel is the one
   the JIT cache would hold on that GPU.  Meta tensors report address 0: pointers are taken
   as 16-byte aligned, as the caching allocators of torch give them.
3. **Compile** with ``triton.compile(..., target=GPUTarget(...))`` and read the resources
   from the code object (AMD: ``.vgpr_count``, ``.sgpr_count``, scratch, spill counts in the
   AMDGCN text) or the cubin (NVIDIA: ``cuobjdump -res-usage`` and ``nvdisasm``, shipped in
   the Triton wheel).  Occupancy follows from :mod:`harness.hardware.arch`.
4. **Check the launcher** (NVIDIA, Triton 3.6): the launcher source Triton would generate at
   the kernel's first launch, so that a signature it cannot launch fails here too.

A config the target cannot run fails here, before anything is verified, timed or
simulated: the compiler's own first error line, or (shared memory / LDS over the target's
limit, which Triton only finds when it loads the kernel) the same "out of resource" words.

Jobs reach this module through :mod:`harness.compile.client` (a cache of reports,
and a helper process where the Triton interpreter runs: its jit kernels cannot be compiled).

Length: the four steps above and both vendors' readers of what was built, in order; split,
a recorded launch and its specialisation would cross a module line at every step.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.cache_home import cache_root
from harness.hardware.arch import ArchLimits, Resources, arch_limits, occupancy
from harness.storage.field_names import Metric, Param


class CompileFailed(Exception):
    """The job's config does not compile for (or does not fit) its target; the message is
    one line: the compiler's first error, or the resource that does not fit."""


@dataclass(frozen=True)
class KernelBuild:
    """One jit kernel of a launch, as compiled for the target."""

    name: str
    num_warps: int
    registers: int | None       # AMD: VGPRs incl. AGPRs per lane; NVIDIA: registers per thread
    shared_bytes: int           # LDS / shared memory per program, bytes
    spill_bytes: int            # AMD scratch / NVIDIA stack frame + local memory per thread, bytes
    spills: int                 # AMD: VGPRs spilled to scratch; NVIDIA: spill stores (STL instructions) in SASS
    sgprs: int | None = None    # AMD scalar registers
    sgpr_spills: int = 0        # AMD SGPRs spilled into VGPR lanes (no memory traffic)
    agprs: int | None = None    # AMD accumulation registers (part of ``registers``)
    occupancy: dict | None = None            # harness.hardware.arch.Occupancy.as_dict()
    counts: dict[str, int] = field(default_factory=dict)   # instruction counts (see _counts_*)
    compiler_waves_per_simd: int | None = None  # AMD: LLVM's own "; Occupancy:" figure, for checking
    triton_hash: str = ""       # Triton's cache key of the binary: equal to the JIT's on the target GPU


@dataclass(frozen=True)
class CompileReport:
    """The job's launch compiled for ``arch``: its main kernel first, then its other passes."""

    arch: str
    kernels: tuple[KernelBuild, ...]
    seconds: float              # wall time of this compile, s (0 when answered from the cache)
    cached: bool = False

    @property
    def main(self) -> KernelBuild:
        return self.kernels[0]

    @property
    def programs_per_cu(self) -> int | None:
        """Programs of the main kernel resident per CU / SM (the simulator's residency)."""
        occ = self.main.occupancy
        return None if occ is None else int(occ["programs_per_cu"])

    def as_params(self) -> dict[str, str]:
        m = self.main
        params = {Param.COMPILE_ARCH: self.arch, Param.COMPILE_KERNEL: m.name,
                  Param.COMPILE_KERNELS: ",".join(k.name for k in self.kernels)}
        if m.occupancy is not None:
            params[Param.COMPILE_LIMITER] = m.occupancy["limiter"]
        return params

    def as_metrics(self) -> dict[str, float]:
        """MLflow metrics of the main kernel (counts, bytes; ``compile.seconds`` in s)."""
        m, M = self.main, Metric
        out = {M.COMPILE_SECONDS: self.seconds, M.COMPILE_SHARED_BYTES: m.shared_bytes,
               M.COMPILE_SPILL_BYTES: m.spill_bytes, M.COMPILE_SPILLS: m.spills,
               M.COMPILE_SPILL_BYTES_PER_PROGRAM: spill_bytes_per_program(self.arch, m.spill_bytes, m.num_warps)}
        if m.sgprs is not None:
            out[M.COMPILE_SGPR_SPILLS] = m.sgpr_spills
        for key, value in ((M.COMPILE_REGISTERS, m.registers), (M.COMPILE_SGPRS, m.sgprs),
                           (M.COMPILE_AGPRS, m.agprs), (M.COMPILE_COMPILER_WAVES_PER_SIMD, m.compiler_waves_per_simd)):
            if value is not None:
                out[key] = value
        if m.occupancy is not None:
            out[M.COMPILE_PROGRAMS_PER_CU] = m.occupancy["programs_per_cu"]
            out[M.COMPILE_WARPS_PER_CU] = m.occupancy["warps_per_cu"]
            if m.occupancy["waves_per_simd"] is not None:
                out[M.COMPILE_WAVES_PER_SIMD] = m.occupancy["waves_per_simd"]
        out.update({M.COMPILE_COUNT_PREFIX + k: v for k, v in m.counts.items()})
        return {k: float(v) for k, v in out.items()}

    def summary(self) -> str:
        """One clause for the job line, e.g. ``gfx942: 184 VGPR, 32768 B LDS, 2 WG/CU (registers)``."""
        m = self.main
        amd = arch_limits(self.arch).vendor == "amd"
        regs = "?" if m.registers is None else str(m.registers)
        parts = [f"{regs} {'VGPR' if amd else 'regs'}", f"{m.shared_bytes} B {'LDS' if amd else 'smem'}"]
        if m.occupancy is not None:
            parts.append(f"{m.occupancy['programs_per_cu']} {'WG/CU' if amd else 'CTA/SM'} ({m.occupancy['limiter']})")
        spilled = [k for k in self.kernels if k.spills or k.spill_bytes]
        if spilled:
            parts.append("SPILLS " + ", ".join(f"{k.name}: {k.spills} spills, {k.spill_bytes} B per thread" for k in spilled))
        return f"{self.arch}: " + ", ".join(parts) + (" (cached)" if self.cached else "")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "CompileReport":
        return cls(d["arch"], tuple(KernelBuild(**k) for k in d["kernels"]), float(d["seconds"]),
                   bool(d.get("cached", False)))


# -----------------------------------------------------------
# 1. Record the launches of one run of the kernel family.

@dataclass
class Launch:
    """One ``kernel[grid](*args, **kwargs)`` the family's launcher made."""

    fn: object
    args: tuple
    kwargs: dict


@contextlib.contextmanager
def recording_launches():
    """Within the block, ``kernel[grid](...)`` records a :class:`Launch` instead of running."""
    from triton.runtime.jit import JITFunction

    launches: list[Launch] = []
    original = JITFunction.run

    def record(self, *args, grid, warmup, **kwargs):
        launches.append(Launch(self, args, kwargs))

    JITFunction.run = record
    try:
        yield launches
    finally:
        JITFunction.run = original


def meta_operands(shape, with_bias: bool, layout: str):
    """The conv's operands as shapes without memory (torch's ``meta`` device)."""
    import torch

    from harness.measure.correctness import INPUT_LAYOUTS
    from kernels.base import Operands

    dtype = getattr(torch, shape.dtype)
    x = torch.empty((shape.N, shape.C, shape.H, shape.W), dtype=dtype, device="meta")
    w = torch.empty((shape.F, shape.C, shape.R, shape.S), dtype=dtype, device="meta")
    bias = torch.empty((shape.F,), dtype=dtype, device="meta") if with_bias else None
    return Operands(x.contiguous(memory_format=INPUT_LAYOUTS[layout]), w, bias)


def spill_bytes_per_program(arch: str, spill_bytes: int, num_warps: int) -> int:
    """Bytes one program spills: ``spill_bytes`` per thread (AMD: per lane) times its threads."""
    return int(spill_bytes) * int(num_warps) * arch_limits(arch).warp_size


def record_job(spec) -> tuple[object, list[Launch]]:
    """The kernel family of ``spec`` and the launches one run of it makes (nothing runs)."""
    from harness.job.plan import plan_arm

    kernel, arm = plan_arm(spec)   # the compile stage gets the spec across a process boundary: planned here
    ops = meta_operands(spec.shape, kernel.has_bias, spec.input_layout)
    with recording_launches() as launches:
        run, _ = kernel.bind(ops, spec.shape, arm.tiles, arm.binding, arm.launch)
        run()
    if not launches:
        raise CompileFailed(f"kernel {spec.kernel!r} launched no @triton.jit kernel (nothing to compile)")
    jit_kernel = kernel.jit_kernel_for(arm.tiles)
    main = [launch for launch in launches if launch.fn is jit_kernel]
    return kernel, main + [launch for launch in launches if launch.fn is not jit_kernel]


# -----------------------------------------------------------
# 2 + 3. Specialise and compile one launch for the target; read its resources.

def compile_launch(launch: Launch, limits: ArchLimits) -> KernelBuild:
    """Compile one recorded launch for ``limits.arch`` and report its resources."""
    import triton
    from triton._utils import find_paths_if, get_iterable_path
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature

    fn, target = launch.fn, limits.triton_target()
    backend = make_backend(target)
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    bound, specialization, kwargs = binder(*launch.args, **launch.kwargs)
    if hasattr(fn, "_pack_args"):     # newer Triton: the launcher's own packing, as JITFunction.run calls it
        options, signature, constexprs, attrs = fn._pack_args(backend, launch.kwargs, bound, specialization, kwargs)
    else:                             # Triton 3.6: the same steps, inline in JITFunction.run
        options = backend.parse_options(kwargs)
        sigvals = [s[0] for s in specialization]
        signature = {p.name: v for p, v in zip(fn.params, sigvals)}
        constexprs = {path: get_iterable_path(list(bound.values()), path)
                      for path in find_paths_if(sigvals, lambda _, v: v == "constexpr")}
        attrvals = [s[1] for s in specialization]
        attrs = {path: backend.parse_attr(get_iterable_path(attrvals, path))
                 for path in find_paths_if(attrvals, lambda _, v: isinstance(v, str))}
    if fn.is_gluon():                 # a Gluon kernel (kernels.igemm_ws): its own front end, as its launcher uses
        from triton.experimental.gluon._runtime import GluonASTSource as ASTSource
    with _stderr_captured() as err:
        try:
            compiled = triton.compile(ASTSource(fn, signature, constexprs, attrs), target=target,
                                      options=options.__dict__)
        except Exception as exc:
            raise CompileFailed(f"{fn.__name__} does not compile for {limits.arch}: "
                                f"{compiler_error(exc, err.read())}") from None
    if limits.vendor == "nvidia":
        _check_launcher(fn.__name__, compiled, limits.arch)
    build = (_amd_build if limits.vendor == "amd" else _nvidia_build)(fn.__name__, compiled, options.num_warps, limits)
    build = dataclasses.replace(build, triton_hash=str(getattr(compiled, "hash", "")))
    if build.shared_bytes > limits.shared_per_program:   # Triton would raise this when loading the kernel
        raise CompileFailed(f"{fn.__name__} out of resource on {limits.arch}: {'LDS' if limits.vendor == 'amd' else 'shared memory'}, "
                            f"Required: {build.shared_bytes}, Hardware limit: {limits.shared_per_program} "
                            "(smaller tiles or fewer num_stages)")
    return build


def _check_launcher(name: str, compiled, arch: str) -> None:
    """Generate the launcher source Triton 3.6 would build for this kernel at its first launch
    (its NVIDIA driver's ``make_launcher``: pure Python, no GPU) and raise CompileFailed if that
    fails: a signature the launcher cannot take (e.g. TMA descriptors inside a tuple argument)
    compiles and fails only when launched.  Other Triton versions build launchers differently
    and are not checked here."""
    driver = importlib.import_module("triton.backends.nvidia.driver")
    make_launcher = getattr(driver, "make_launcher", None)
    if make_launcher is None:
        return
    src = compiled.src
    constants = {(src.fn.arg_names.index(k),) if isinstance(k, str) else k: v
                 for k, v in getattr(src, "constants", {}).items()}
    try:
        make_launcher(constants, dict(src.signature), getattr(compiled.metadata, "tensordesc_meta", None))
    except Exception as exc:  # noqa: BLE001 (any failure here is a failed launch to be)
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CompileFailed(f"{name} compiles for {arch} but Triton cannot build its launcher: {detail} "
                            "(the signature, e.g. tensor descriptors inside a tuple argument)") from None


def compiler_error(exc: BaseException, stderr: str) -> str:
    """The first meaningful line of a compiler failure: Triton's own message for an error in
    the kernel's source (with its line; the innermost, where the error is in a jit function the
    kernel calls), else the first ``error:`` line the compiler printed,
    else the exception's first line."""
    # An error inside a jit function the kernel calls arrives as a chain of CompilationErrors
    # (``__cause__``), each but the last with no message of its own: report the innermost, and
    # name the function its line is in.
    nested = False
    while (type(exc).__name__ == "CompilationError" and not getattr(exc, "error_message", None)
           and type(exc.__cause__).__name__ == "CompilationError"):
        exc, nested = exc.__cause__, True
    message = getattr(exc, "error_message", None)   # triton.compiler.errors.CompilationError
    if message:
        where = getattr(getattr(exc, "node", None), "lineno", None)
        called = re.search(r"def (\w+)", str(getattr(exc, "src", "") or "")) if nested else None
        place = f"line {where} of {called.group(1)}" if called else f"kernel source line {where}"
        return str(message).strip().splitlines()[0] + (f" ({place})" if where else "")
    for line in stderr.splitlines():
        if "error:" in line:
            return line.strip()[:300]
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300] if text else ''}"


@contextlib.contextmanager
def _stderr_captured():
    """Capture what native code (MLIR, LLVM) writes to file descriptor 2 in the block."""
    with tempfile.TemporaryFile(mode="w+") as tmp:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            yield tmp
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)


def _meta(text: str, key: str) -> int | None:
    found = re.search(rf"^\s*\.{key}:\s+(\d+)", text, re.M)
    return int(found.group(1)) if found else None


#: Width in bits of AMD load/store suffixes.
_AMD_WIDTH = {"ubyte": 8, "sbyte": 8, "ushort": 16, "sshort": 16, "short_d16": 16, "dword": 32, "dwordx2": 64,
              "dwordx3": 96, "dwordx4": 128, "b32": 32, "b64": 64, "b96": 96, "b128": 128}


def _counts_amd(asm: str) -> dict[str, int]:
    """MFMA instructions, and global/buffer loads and stores by width in bits (``loads.128``),
    counted in the AMDGCN text (each instruction once, however often a loop runs it)."""
    counts: dict[str, int] = {"mma": len(re.findall(r"^\s*v_mfma", asm, re.M))}
    for kind, width in re.findall(r"^\s*(?:global|buffer)_(load|store)_(\w+)", asm, re.M):
        bits = _AMD_WIDTH.get(width.removeprefix("lds_"))
        if bits:
            key = f"{kind}s.{bits}"
            counts[key] = counts.get(key, 0) + 1
    return counts


def _amd_build(name: str, compiled, num_warps: int, limits: ArchLimits) -> KernelBuild:
    asm = compiled.asm["amdgcn"]
    vgprs, sgprs = _meta(asm, "vgpr_count"), _meta(asm, "sgpr_count")
    shared = int(compiled.metadata.shared)      # Triton's LDS is allocated at launch, not in the code object
    occ = occupancy(limits, Resources(num_warps, vgprs or 0, shared, sgprs or 0)) if vgprs else None
    llvm = re.search(r";\s*Occupancy:\s*(\d+)", asm)
    return KernelBuild(
        name=name, num_warps=num_warps, registers=vgprs, shared_bytes=shared,
        spill_bytes=_meta(asm, "private_segment_fixed_size") or 0,
        spills=_meta(asm, "vgpr_spill_count") or 0, sgpr_spills=_meta(asm, "sgpr_spill_count") or 0, sgprs=sgprs, agprs=_meta(asm, "agpr_count"), occupancy=occ.as_dict() if occ else None,
        counts=_counts_amd(asm), compiler_waves_per_simd=int(llvm.group(1)) if llvm else None)


def _nvidia_tool(name: str) -> str | None:
    import triton

    path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", name)
    return path if os.path.exists(path) else None


def _counts_nvidia(sass: str) -> dict[str, int]:
    """SASS counts: HGMMA/HMMA (tensor-core instructions), UTMALDG/UTMASTG (TMA), global loads
    and stores by width in bits (LDG, LDGSTS = cp.async, STG), of those loads the cp.async ones
    (``loads_async``; the rest are plain loads, which the SM's L1 caches: a 3-channel stem's
    input loads), STL (spill stores)."""
    counts = {"mma": 0, "tma_loads": 0, "tma_stores": 0, "spill_stores": 0, "loads_async": 0}
    for op, suffix in re.findall(r"\b(HGMMA|HMMA|UTMALDG|UTMASTG|LDGSTS|LDG|STG|STL)((?:\.[\w]+)*)", sass):
        if op in ("HGMMA", "HMMA"):
            counts["mma"] += 1
        elif op in ("UTMALDG", "UTMASTG"):
            counts["tma_loads" if op == "UTMALDG" else "tma_stores"] += 1
        elif op == "STL":
            counts["spill_stores"] += 1
        else:
            width = re.search(r"\.(128|64|U16|S16|U8|S8)\b", suffix)
            bits = {"128": 128, "64": 64, "U16": 16, "S16": 16, "U8": 8, "S8": 8}[width.group(1)] if width else 32
            key = f"{'stores' if op == 'STG' else 'loads'}.{bits}"
            counts[key] = counts.get(key, 0) + 1
            counts["loads_async"] += op == "LDGSTS"
    return counts


@functools.lru_cache(maxsize=256)
def _cubin_facts(cubin: bytes, cuobjdump: str, nvdisasm: str) -> tuple[str, tuple[tuple[str, int], ...]]:
    """A cubin's ``cuobjdump -res-usage`` line and the instruction counts of its ``nvdisasm``
    listing (:func:`_counts_nvidia`; empty where the listing is).  The two tools take about
    0.4 s a kernel, and the jobs of a sweep, and later sweeps, often compile to one binary:
    kept per process and on disk, ``<cache root>/sass/<sha256>.json``, keyed by the cubin's
    bytes and the tools' files (path, size, modification time)."""
    tools = "|".join(f"{t}:{st.st_size}:{st.st_mtime_ns}" for t, st in ((t, os.stat(t)) for t in (cuobjdump, nvdisasm)))
    path = cache_root() / "sass" / f"{hashlib.sha256(cubin + tools.encode()).hexdigest()}.json"
    try:
        usage, counts = json.loads(path.read_text())
        return usage, tuple((k, int(v)) for k, v in counts)
    except (OSError, ValueError, TypeError):
        pass
    with tempfile.TemporaryDirectory() as tmp:
        cubin_path = os.path.join(tmp, "k.cubin")
        Path(cubin_path).write_bytes(cubin)
        usage = subprocess.run([cuobjdump, "-res-usage", cubin_path], capture_output=True, text=True).stdout
        sass = subprocess.run([nvdisasm, cubin_path], capture_output=True, text=True).stdout
    counts = tuple(_counts_nvidia(sass).items()) if sass else ()
    if usage and sass:          # a tool's failure is not kept
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp_path = path.with_suffix(f".{os.getpid()}.tmp")
            tmp_path.write_text(json.dumps([usage, counts]))
            os.replace(tmp_path, path)
        except OSError:
            pass                # a read-only cache costs only time
    return usage, counts


def _nvidia_build(name: str, compiled, num_warps: int, limits: ArchLimits) -> KernelBuild:
    shared = int(compiled.metadata.shared)
    regs = local = None
    counts: dict[str, int] = {}
    cuobjdump, nvdisasm = _nvidia_tool("cuobjdump"), _nvidia_tool("nvdisasm")
    if cuobjdump and nvdisasm:
        usage, facts = _cubin_facts(bytes(compiled.asm["cubin"]), cuobjdump, nvdisasm)
        counts = dict(facts)
        found = re.search(r"REG:(\d+)", usage)
        regs = int(found.group(1)) if found else None
        # spilled registers live in the stack frame (STACK), local arrays in LOCAL: bytes per thread
        local = sum(int(v) for v in re.findall(r"(?:STACK|LOCAL):(\d+)", usage))
    occ = occupancy(limits, Resources(num_warps, regs, shared)) if regs else None
    return KernelBuild(name=name, num_warps=num_warps, registers=regs, shared_bytes=shared, spill_bytes=local or 0,
                       spills=counts.get("spill_stores", 0), occupancy=occ.as_dict() if occ else None, counts=counts)


def compile_spec(spec, arch: str) -> CompileReport:
    """Compile every launch of ``spec`` for ``arch`` in this process (which must not be
    running the Triton interpreter).  Raises CompileFailed."""
    limits = arch_limits(arch)
    start = time.perf_counter()
    kernel, launches = record_job(spec)
    try:
        kernel.check_target(spec.shape, kernel.check_tiles(spec.tiles_dict), limits.vendor, limits.arch)
    except ValueError as exc:
        raise CompileFailed(str(exc)) from None
    builds, seen = [], set()
    for launch in launches:
        if launch.fn.__name__ not in seen:        # a pass launched twice is compiled once
            seen.add(launch.fn.__name__)
            builds.append(compile_launch(launch, limits))
    return CompileReport(arch, tuple(builds), round(time.perf_counter() - start, 3))
