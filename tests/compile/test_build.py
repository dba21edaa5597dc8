"""The compile stage (harness/compile/build.py): every built-in kernel x swizzle compiled
for gfx942 (MI300X) and sm_90 (H100) on this CPU-only machine, the occupancy rules against
hand-counted cases and against LLVM's own figure, and a config the target cannot take
failing at the compile gate with the compiler's or our one-line reason."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from harness.hardware.arch import ARCHS, Resources, occupancy
from harness.compile.build import CompileFailed
from harness.job.spec import JobSpec
from harness.tune.search import candidates
from kernels.tuning import DeviceTraits
from kernels import KERNELS
from kernels.problem import ConvShape
from tests.cli_fork import run_cli

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
#: A ResNet-50 stage-1 3x3 layer at batch 32 (what the GPU would run: full size).
LAYER = ConvShape("l02", 32, 64, 56, 56, 64, 3, 3, 1, 1)


def builtin_swizzles() -> list[str]:
    """Every built-in swizzle config's name (families with their default parameters)."""
    names = []
    for path in sorted((CONF / "swizzle").glob("*.yaml")):
        if path.stem == "custom":
            continue
        cfg = OmegaConf.create({"target": {"num_xcds": 8}, "swizzle": OmegaConf.load(path)})
        names.append(str(cfg.swizzle.name))
    return names


def spec_for(kernel: str, swizzle: str, shape: ConvShape = LAYER, tiles: dict | None = None,
             warps: int | None = None, stages: int | None = None) -> JobSpec:
    conf = yaml.safe_load((CONF / "kernel" / f"{kernel}.yaml").read_text())
    return JobSpec(kernel=kernel, tiles=tuple({**conf["tiles"], **(tiles or {})}.items()), swizzle=swizzle,
                   num_xcds=8, group_size=8, shape=shape, shape_preset="test", num_warps=warps or conf["num_warps"],
                   num_stages=stages or conf["num_stages"], target="test", seed=0)


# -----------------------------------------------------------
# Occupancy, by hand.

def test_amd_occupancy_by_hand():
    gfx942 = ARCHS["gfx942"]
    # 184 VGPRs -> 512 // 184 = 2 waves per SIMD; 4 waves per workgroup, one per SIMD -> 2 WG;
    # 32 KB of LDS -> 65536 // 32768 = 2: a tie, registers named first
    occ = occupancy(gfx942, Resources(num_warps=4, registers=184, shared_bytes=32768, sgprs=85))
    assert (occ.programs_per_cu, occ.waves_per_simd, occ.limiter) == (2, 2, "registers")
    # 98 VGPRs -> 104 allocated -> 4 waves per SIMD; 8 waves per WG = 2 per SIMD -> 2 WG by
    # registers; 48 KB LDS -> 1 WG: LDS decides
    occ = occupancy(gfx942, Resources(num_warps=8, registers=98, shared_bytes=49152, sgprs=40))
    assert (occ.programs_per_cu, occ.waves_per_simd, occ.limiter) == (1, 4, "shared")
    # tiny kernel: 8 waves per SIMD cap; 1 wave per WG -> 4 x 8 = 32 WG (the per-CU cap too)
    occ = occupancy(gfx942, Resources(num_warps=1, registers=16, shared_bytes=0, sgprs=16))
    assert (occ.programs_per_cu, occ.waves_per_simd, occ.limiter) == (32, 8, "warps")
    # 512 registers (256 VGPR + 256 AGPR) -> 1 wave per SIMD; 4 waves -> 1 WG
    assert occupancy(gfx942, Resources(4, 512, 0, 100)).programs_per_cu == 1


def test_nvidia_occupancy_by_hand():
    sm90 = ARCHS["sm_90"]
    # 156 regs -> 156 * 32 = 4992 per warp (a multiple of 256) -> 65536 // 4992 = 13 warps
    # -> 3 blocks of 4 warps; 48 KB + 1 KB reserved -> 233472 // 50176 = 4 blocks
    occ = occupancy(sm90, Resources(num_warps=4, registers=156, shared_bytes=49152))
    assert (occ.programs_per_cu, occ.limiter) == (3, "registers")
    # 40 regs -> 1280 per warp -> 51 warps -> 6 blocks of 8; 96 KB -> 2 blocks: shared decides
    occ = occupancy(sm90, Resources(num_warps=8, registers=40, shared_bytes=98304))
    assert (occ.programs_per_cu, occ.limiter) == (2, "shared")
    # 32 regs, 1 warp, no shared memory: 64 warps, but at most 32 blocks
    occ = occupancy(sm90, Resources(num_warps=1, registers=32, shared_bytes=0))
    assert (occ.programs_per_cu, occ.limiter) == (32, "programs")


# -----------------------------------------------------------
# Every built-in kernel x every built-in swizzle, for both targets.

#: Families built for one target only: igemm_ws (Gluon, sm_90, Triton 3.6), compiled with every
#: config x swizzle by tests/kernels/test_igemm_ws.py.
EVERY_TARGET = sorted(set(KERNELS) - {"igemm_ws"})


#: The swizzles every kernel is compiled with in the default run: the plain order and one that
#: reads both of the swizzle's launch parameters (NUM_XCDS, GROUP_SIZE).
KERNEL_SWIZZLES = ("identity", "xcd_grouped")


def _compiles(compiler, kernel: str, swizzle: str, arch: str) -> None:
    """``kernel`` with ``swizzle`` builds for ``arch`` into a main kernel that holds registers,
    fits at least one program per SM / CU and the target's shared memory."""
    report = compiler.compile(spec_for(kernel, swizzle), arch)
    main = report.main
    assert report.arch == arch and main.name == KERNELS[kernel].jit_kernel.__name__
    assert main.registers and main.registers > 0, (swizzle, main)
    assert main.occupancy is not None and main.occupancy["programs_per_cu"] >= 1, (swizzle, main)
    assert main.shared_bytes <= ARCHS[arch].shared_per_program


@pytest.mark.parametrize("arch", ["gfx942", "sm_90"])
def test_every_swizzle_compiles_into_the_default_kernel_for_the_target(compiler, arch):
    for swizzle in builtin_swizzles():
        _compiles(compiler, "igemm_fast", swizzle, arch)


@pytest.mark.parametrize("arch", ["gfx942", "sm_90"])
@pytest.mark.parametrize("kernel", EVERY_TARGET)
def test_every_kernel_compiles_for_the_target(compiler, kernel, arch):
    for swizzle in KERNEL_SWIZZLES:
        _compiles(compiler, kernel, swizzle, arch)


@pytest.mark.slow   # 160 builds, about 70 CPU-s on an empty Triton cache; .ci/run runs it
@pytest.mark.parametrize("arch", ["gfx942", "sm_90"])
@pytest.mark.parametrize("kernel", EVERY_TARGET)
def test_every_kernel_and_swizzle_compiles_for_the_target(compiler, kernel, arch):
    """The whole cross product; the default run compiles each swizzle into igemm_fast and
    each kernel with :data:`KERNEL_SWIZZLES`."""
    for swizzle in builtin_swizzles():
        _compiles(compiler, kernel, swizzle, arch)


def test_amd_waves_per_simd_agree_with_llvm(compiler):
    """LLVM writes its own waves-per-SIMD figure (registers only) into the AMDGCN text."""
    for kernel in EVERY_TARGET:
        main = compiler.compile(spec_for(kernel, "identity"), "gfx942").main
        assert main.compiler_waves_per_simd is not None
        assert main.occupancy["waves_per_simd"] == main.compiler_waves_per_simd, (kernel, main)


def test_every_igemm_fast_flag_path_compiles_with_all_its_passes(compiler):
    """Persistent + split-K (with the sum pass), the fold pass of a strided few-channel layer,
    the NCHW input of a 1x1 layer, and the AMD knobs; TMA on sm_90 only."""
    stem = ConvShape("stem", 32, 3, 224, 224, 64, 7, 7, 2, 3)
    one = ConvShape("l04", 32, 64, 56, 56, 256, 1, 1, 1, 0)
    cases = [
        ("gfx942", LAYER, {"SPLIT_K": 2, "PERSISTENT": 1}, ["igemm_fast_kernel", "split_k_sum_kernel"]),
        ("gfx942", stem, {"FOLD": 1, "PACK_K": 2}, ["igemm_fast_kernel", "fold_input_kernel"]),
        ("gfx942", one, {"NCHW_IN": 1}, ["igemm_fast_kernel"]),
        ("gfx942", LAYER, {"WAVES_PER_EU": 2, "MATRIX_INSTR_NONKDIM": 16, "KPACK": 2}, ["igemm_fast_kernel"]),
        ("sm_90", one, {"TMA": 1, "TMA_STORE": 1}, ["igemm_fast_kernel"]),
    ]
    for arch, shape, tiles, names in cases:
        report = compiler.compile(spec_for("igemm_fast", "xcd", shape, tiles), arch)
        assert [k.name for k in report.kernels] == names, (tiles, report.kernels)
    tma = compiler.compile(spec_for("igemm_fast", "xcd", one, {"TMA": 1, "TMA_STORE": 1}), "sm_90").main
    assert tma.counts["tma_loads"] > 0 and tma.counts["tma_stores"] > 0


def test_nvidia_counts_tell_cp_async_from_plain_loads(compiler):
    """igemm on sm_90: a 3-channel stem's input cannot be loaded 4 bytes at a time, so every
    load is a plain LDG (cached in L1); a 1x1 layer of 64 channels loads by cp.async (LDGSTS)."""
    stem = ConvShape("stem", 32, 3, 224, 224, 64, 7, 7, 2, 3)
    one = ConvShape("l04", 32, 64, 56, 56, 256, 1, 1, 1, 0)
    plain = compiler.compile(spec_for("igemm", "identity", stem), "sm_90").main.counts
    assert plain["loads_async"] == 0 and plain.get("loads.16", 0) > 0, plain
    wide = compiler.compile(spec_for("igemm", "identity", one), "sm_90").main.counts
    assert 0 < wide["loads_async"] <= sum(v for k, v in wide.items() if k.startswith("loads.")), wide


def test_a_config_the_target_cannot_hold_fails_with_the_resource(compiler):
    big = {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 128}
    with pytest.raises(CompileFailed, match=r"out of resource on gfx942: LDS, Required: 131072, Hardware limit: 65536"):
        compiler.compile(spec_for("igemm_fast", "identity", tiles=big, warps=8, stages=2), "gfx942")
    with pytest.raises(CompileFailed, match=r"TMA=1 needs NVIDIA tensor descriptors .* target arch gfx942"):
        compiler.compile(spec_for("igemm_fast", "identity", tiles={"TMA": 1}), "gfx942")
    with pytest.raises(CompileFailed, match=r"WAVES_PER_EU=2 is an AMD backend option .* sm_90 is nvidia"):
        compiler.compile(spec_for("igemm_fast", "identity", tiles={"WAVES_PER_EU": 2}), "sm_90")


def test_nvidia_spills_are_counted_in_instructions_and_stack_bytes(compiler):
    """igemm's 128x128 tile at 8 warps on a C=8 layer runs out of sm_90's 255 registers
    (Triton 3.9: the narrow K loop is unrolled): the spill stores (STL) in the SASS and the
    stack frame that holds them (cuobjdump STACK) are both reported, and the same config on
    a C=64 layer (158 registers) reports neither."""
    tiny = ConvShape("t1", 1, 8, 8, 8, 8, 3, 3, 1, 1)
    spilled = compiler.compile(spec_for("igemm", "scatter", shape=tiny, warps=8), "sm_90").kernels[0]
    assert spilled.registers == 255 and spilled.spills > 0 and spilled.spill_bytes > 0
    assert spilled.spill_bytes % 4 == 0
    fits = compiler.compile(spec_for("igemm", "scatter", warps=8), "sm_90").kernels[0]
    assert fits.spills == 0 and fits.spill_bytes == 0


def test_reports_are_cached_and_keyed_on_what_is_compiled(compiler):
    spec = spec_for("igemm", "xcd")
    first = compiler.compile(spec, "gfx942")
    again = compiler.compile(spec, "gfx942")
    assert again.cached and again.seconds == 0.0 and again.main == first.main
    other = compiler.compile(spec_for("igemm", "xcd", warps=4), "gfx942")   # another config: compiled anew
    assert not other.cached and other.main.num_warps == 4


# -----------------------------------------------------------
# tune=fastest on an MI300X: every gfx942 candidate compiles.

#: One layer per K order the space has: a 3x3 in tap order, a 1x1 (tap, packed, NCHW in
#: place), the 3-channel stem (packed, rows, folded tap and rows), a short 7x7 layer (split-K).
SPACE_SHAPES = [ConvShape("l02", 32, 64, 56, 56, 64, 3, 3, 1, 1), ConvShape("l16", 32, 1024, 14, 14, 256, 1, 1, 1, 0),
                ConvShape("stem", 32, 3, 224, 224, 64, 7, 7, 2, 3), ConvShape("l23", 32, 512, 7, 7, 512, 3, 3, 1, 1)]


def test_sass_facts_are_kept_on_disk_per_cubin_and_tools(tmp_path, monkeypatch):
    """cuobjdump's usage line and nvdisasm's counts come from the disk cache the second time
    (the process cache cleared, the tools not run); another cubin or other tools run the tools
    again; a tool's failure is not kept."""
    from harness.compile import build

    monkeypatch.setenv("SWIZZLEBENCH_CACHE", str(tmp_path / "cache"))
    kept = tmp_path / "cache" / "sass"

    def tools(folder: str, usage: str, sass: str) -> tuple[str, str]:
        paths = []
        for name, text in (("cuobjdump", usage), ("nvdisasm", sass)):
            tool = tmp_path / folder / name
            tool.parent.mkdir(exist_ok=True)
            tool.write_text(f"#!/bin/sh\necho '{text}'\n" if text else "#!/bin/sh\nexit 1\n")
            tool.chmod(0o755)
            paths.append(str(tool))
        return paths[0], paths[1]

    real = tools("real", "Function k: REG:42 STACK:0 SHARED:0", "HGMMA.64x128x16.F32 R0 ; UTMALDG.2D [UR4] ;")
    build._cubin_facts.cache_clear()
    first = build._cubin_facts(b"cubin-a", *real)
    assert first[0].startswith("Function k: REG:42") and dict(first[1]) == {**dict(first[1]), "mma": 1, "tma_loads": 1}
    assert len(list(kept.glob("*.json"))) == 1
    build._cubin_facts.cache_clear()
    broken = tools("broken", "", "")
    assert build._cubin_facts(b"cubin-a", *broken) == ("", ())      # other tools: run, failed, not kept
    assert len(list(kept.glob("*.json"))) == 1

    def no_tools(*args, **kwargs):
        raise AssertionError("the tools ran: the disk cache was not read")

    monkeypatch.setattr(build.subprocess, "run", no_tools)
    build._cubin_facts.cache_clear()
    assert build._cubin_facts(b"cubin-a", *real) == first
    with pytest.raises(AssertionError, match="the tools ran"):
        build._cubin_facts(b"cubin-b", *real)                          # another cubin: not kept


def test_amd_space_has_no_tma_and_tries_the_amd_knobs():
    space = candidates("igemm_fast", SPACE_SHAPES[0], DeviceTraits.for_target("mi300x", "gfx942", 304))
    tiles = [c.tiles_dict for c in space]
    assert not any(t["TMA"] or t["TMA_STORE"] for t in tiles)
    assert {c.num_stages for c in space} == {2}
    for knob in ("WAVES_PER_EU", "MATRIX_INSTR_NONKDIM", "KPACK"):
        assert any(t.get(knob) for t in tiles), knob
    assert not any(t.get("WAVES_PER_EU") for t in [c.tiles_dict for c in candidates(
        "igemm_fast", SPACE_SHAPES[0], DeviceTraits.for_target("h100", "sm_90", 132))])


def test_igemm_best_on_gfx942_is_igemm_fast_s_space_and_compiles(compiler):
    """igemm_best on an MI300X: its space there is igemm_fast's as WS=0 configs (igemm_ws is
    sm_90's), each compiles for gfx942 to igemm_fast's kernel, and a WS=1 config fails the
    compile gate with igemm_ws's one-line reason."""
    from kernels.tuning import Config

    traits, shape = DeviceTraits.for_target("mi300x", "gfx942", 304), SPACE_SHAPES[0]
    space = candidates("igemm_best", shape, traits)
    assert space == [Config.make({"WS": 0, **c.tiles_dict}, c.num_warps, c.num_stages)
                     for c in candidates("igemm_fast", shape, traits)]
    for cfg in space:
        report = compiler.compile(spec_for("igemm_best", "identity", shape, cfg.tiles_dict, cfg.num_warps,
                                           cfg.num_stages), "gfx942")
        assert report.main.name == "igemm_fast_kernel"
    ws = {"WS": 1, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "PERSISTENT": 1, "TMA_STORE": 1, "MAXNREG": 0}
    with pytest.raises(CompileFailed, match=r"^kernel 'igemm_ws' is a Gluon kernel for Hopper \(sm_90\); on gfx942"):
        compiler.compile(spec_for("igemm_best", "identity", shape, ws, 8, 4), "gfx942")


@pytest.mark.slow   # ~125 CPU-s on an empty Triton cache; .ci/run runs it
@pytest.mark.parametrize("shape", SPACE_SHAPES, ids=lambda s: s.name)
def test_igemm_fast_gfx942_candidate_space_compiles_without_a_failure(compiler, shape):
    """Every candidate of four layers' gfx942 spaces, not only the heaviest per code path
    (tests/kernels/test_amd_space_compiles.py, the default run's sample of the same spaces)."""
    traits = DeviceTraits.for_target("mi300x", "gfx942", 304)
    failed = []
    for cfg in candidates("igemm_fast", shape, traits):
        try:
            compiler.compile(spec_for("igemm_fast", "identity", shape, cfg.tiles_dict, cfg.num_warps, cfg.num_stages),
                             "gfx942")
        except CompileFailed as exc:
            failed.append((cfg.label, str(exc)))
    assert failed == []


# -----------------------------------------------------------
# Through the real CLI.

def _harness(args, cwd, timeout=600):
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONUNBUFFERED": "1", "MLFLOW_DISABLE_TELEMETRY": "true"}
    return run_cli(args, cwd, env, timeout)


def _runs(uri: str, experiment: str, kind: str = "job"):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id], max_results=1000) if exp else []
    return [r for r in runs if r.data.tags.get("swizzlebench.kind") == kind]


#: Compiles igemm's kernel by hand, with the signature written out as a user of Triton would
#: (not through the harness's recorder), and prints the code object's VGPR count and LLVM's
#: waves per SIMD: the compiler's own metadata to check the logged figures against.  Pointers
#: carry what Triton's HIP launcher gives a tensor under 2 GB: 16-byte alignment and a 32-bit
#: range (``tt.pointer_range``, which lets the AMD backend use buffer loads; without it the
#: same kernel takes 118 VGPRs instead of 98).
HAND_COMPILE = textwrap.dedent("""
    import json, re, sys, triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from kernels.igemm import igemm_conv2d_kernel
    from swizzles import SWIZZLES
    N, C, H, W, F, R, S, stride, padding, warps, stages = map(int, sys.argv[1:12])
    P, Q = (H + 2 * padding - R) // stride + 1, (W + 2 * padding - S) // stride + 1
    ints = dict(N=N, C=C, H=H, W=W, F=F, R=R, S=S, P=P, Q=Q, stride=stride, padding=padding)
    sig, consts, attrs = {}, {}, {}
    for i, name in enumerate(igemm_conv2d_kernel.arg_names):
        if name.endswith("_ptr"):
            sig[name] = "*fp16"; attrs[(i,)] = [["tt.divisibility", 16], ["tt.pointer_range", 32]]
        elif name in ints and ints[name] == 1:
            sig[name] = "constexpr"; consts[name] = 1
        elif name in ints:
            sig[name] = "i32"
            if ints[name] % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
    tiles = json.loads(sys.argv[12])
    for name, value in dict(SWIZZLE=SWIZZLES[sys.argv[13]], NUM_XCDS=8, GROUP_SIZE=8, DOT_IN_FP32=False, **tiles).items():
        sig[name] = "constexpr"; consts[name] = value
    k = triton.compile(ASTSource(igemm_conv2d_kernel, sig, consts, attrs), target=GPUTarget("hip", "gfx942", 64),
                       options={"num_warps": warps, "num_stages": stages})
    asm = k.asm["amdgcn"]
    print(json.dumps({"vgpr": int(re.search(r"\\.vgpr_count:\\s+(\\d+)", asm).group(1)),
                      "waves": int(re.search(r";\\s*Occupancy:\\s*(\\d+)", asm).group(1)), "lds": k.metadata.shared}))
""")


#: Layers the design card's sweep runs through the CLI: the 7x7 stem (l01) and a 1x1 layer
#: (l02, compiled by hand below).  Its other 21 layers are compiled in this process from the
#: same job configs (:func:`_every_job_of_the_card`): each job's path through the CLI is the
#: same whatever its layer (the 84 jobs more cost about 6 CPU-s of MLflow and Hydra work, and
#: more wall time under load); what differs per layer is the compile, and every layer gets it.
CARD_CLI_LAYERS = ["l01", "l02"]


def _every_job_of_the_card(uri: str, runs) -> dict[str, list]:
    """Every job of the design card's sweep (all 23 ResNet layers of each target x swizzle),
    its spec built from the sweep's own job config (the ``config.yaml`` its runs logged) as the
    CLI builds it, compiled through the report cache the CLI used: {target: [(spec, report)]}.
    The specs of the layers the CLI ran must have the CLI runs' spec hashes."""
    from mlflow.tracking import MlflowClient

    from harness.compile.client import client
    from harness.job.shapes import expand_preset
    from harness.job.spec_config import build_spec
    from harness.preflight import typed_config
    from harness.schema import Config

    mlflow, out = MlflowClient(tracking_uri=uri), {}
    by_job = {}
    for run in runs:
        by_job.setdefault((run.data.tags["target"], run.data.params["swizzle"]), []).append(run)
    for (target, _), job_runs in sorted(by_job.items()):
        logged = OmegaConf.load(mlflow.download_artifacts(job_runs[0].info.run_id, "config.yaml"))
        job = typed_config(OmegaConf.merge(OmegaConf.structured(Config), logged))
        preset = {**OmegaConf.to_container(logged.shape, resolve=True), "select": None}
        specs = [build_spec(job, entry.shape, entry.preset, "none") for entry in expand_preset(preset)]
        hashes = {s.shape.name: s.spec_hash for s in specs}
        assert {r.data.params["shape.name"]: r.data.tags["spec_hash"] for r in job_runs} == {
            name: hashes[name] for name in CARD_CLI_LAYERS}
        out.setdefault(target, []).extend((spec, client().compile(spec, job.target.arch)) for spec in specs)
    return out


def test_design_card_sweep_compiles_every_job_for_gfx942_and_sm_90(tmp_path):
    """``python -m harness -m swizzle=xcd,grouped shape=resnet target=mi300x compile.only=true``
    (and target=h100): every job compiled for the target's arch, the CLI's jobs FINISHED with
    their reports logged (:data:`CARD_CLI_LAYERS`); one job's logged VGPR count and waves per
    SIMD equal what a hand-written triton.compile reports."""
    uri = f"sqlite:///{tmp_path}/store.db"
    select = f"shape.select=[{','.join(CARD_CLI_LAYERS)}]"
    proc = _harness(["-m", "kernel=igemm", "target=mi300x,h100", "swizzle=xcd,grouped", "shape=resnet", select,
                     "compile.only=true", f"tracking.uri={uri}", "experiment=compile", f"hydra.sweep.dir={tmp_path}/m"],
                    cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = _every_job_of_the_card(uri, _runs(uri, "compile"))
    for target, arch in (("mi300x", "gfx942"), ("h100", "sm_90")):
        runs = [r for r in _runs(uri, "compile") if r.data.tags["target"] == target]
        assert len(runs) == 2 * len(CARD_CLI_LAYERS) and all(r.info.status == "FINISHED" for r in runs)
        assert {r.data.params["compile.arch"] for r in runs} == {arch}
        assert all(r.data.metrics["compile.registers"] > 0 and r.data.metrics["compile.programs_per_cu"] >= 1
                   for r in runs)
        assert "time_ms_median" not in runs[0].data.metrics and "l2_hit_rate" not in runs[0].data.metrics
        # every job of the card: 23 layers x 2 swizzles, each with its own report for the arch
        reports = jobs[target]
        assert len(reports) == 46 and len({spec.spec_hash for spec, _ in reports}) == 46
        for spec, report in reports:
            assert report.arch == arch and report.main.registers > 0, (spec.run_name, report)
            assert report.main.occupancy["programs_per_cu"] >= 1, (spec.run_name, report)
        # the CLI's jobs: the report of the same spec, as the CLI logged it
        logged = {(r.data.params["swizzle"], r.data.params["shape.name"]): r.data.metrics for r in runs}
        for spec, report in reports:
            if (spec.swizzle, spec.shape.name) in logged:
                assert report.as_metrics()["compile.registers"] == logged[spec.swizzle, spec.shape.name][
                    "compile.registers"]
    run = next(r for r in _runs(uri, "compile") if r.data.tags["target"] == "mi300x"
               and r.data.tags.get("job") == "igemm/xcd/resnet-l02/w8")
    p, m = run.data.params, run.data.metrics
    shape = [p[f"shape.{k}"] for k in ("N", "C", "H", "W", "F", "R", "S", "stride", "padding")]
    tiles = json.dumps({k[5:]: int(v) for k, v in p.items() if k.startswith("tile.")})
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    hand = subprocess.run([sys.executable, "-c", HAND_COMPILE, *shape, p["num_warps"], p["num_stages"], tiles, "xcd"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert hand.returncode == 0, hand.stderr[-2000:]
    truth = json.loads(hand.stdout.strip().splitlines()[-1])
    assert m["compile.registers"] == truth["vgpr"]
    assert m["compile.waves_per_simd"] == m["compile.compiler_waves_per_simd"] == truth["waves"]
    assert m["compile.shared_bytes"] == truth["lds"]
    assert m["compile.programs_per_cu"] == min(4 * truth["waves"] // int(p["num_warps"]), 65536 // truth["lds"])


def test_tma_on_mi300x_is_refused_before_any_job(tmp_path):
    uri = f"sqlite:///{tmp_path}/store.db"
    proc = _harness(["-m", "kernel=igemm_fast", "kernel.tiles.TMA=1", "target=mi300x", "shape=tiny",
                     f"tracking.uri={uri}", "experiment=tma", f"hydra.sweep.dir={tmp_path}/m"], cwd=tmp_path)
    assert proc.returncode != 0
    line = ("error: kernel.tiles: kernel 'igemm_fast': TMA=1 needs NVIDIA tensor descriptors (Hopper, sm_90 or newer); "
            "target arch gfx942 (amd) has none: use TMA=0 (target mi300x)")
    assert line in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert _runs(uri, "tma") == [] and _runs(uri, "tma", kind="sweep") == []   # refused before any run


def test_a_job_that_does_not_fit_the_target_is_a_failed_run_and_the_sweep_goes_on(tmp_path):
    """256x256x128 tiles need 128 KB of LDS on gfx942 (64 KB per CU): the compile gate
    fails those jobs, the 64x64 ones of the same sweep finish."""
    uri = f"sqlite:///{tmp_path}/store.db"
    proc = _harness(["-m", "kernel=igemm_fast", "kernel.tiles.BLOCK_M=64,256", "kernel.tiles.BLOCK_N=64,256",
                     "kernel.tiles.BLOCK_K=128", "launch.num_warps=8", "launch.num_stages=2", "target=mi300x",
                     "shape=tiny", "shape.select=[t1]", "compile.only=true", f"tracking.uri={uri}", "experiment=fit",
                     f"hydra.sweep.dir={tmp_path}/m"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    runs = {r.data.params.get("tile.BLOCK_M", "") + "x" + r.data.params.get("tile.BLOCK_N", ""): r
            for r in _runs(uri, "fit")}
    assert runs["64x64"].info.status == "FINISHED"
    failed = runs["256x256"]
    assert failed.info.status == "FAILED"
    assert ("compile for mi300x: igemm_fast_kernel out of resource on gfx942: LDS, Required: 131072, "
            "Hardware limit: 65536") in failed.data.tags["status_reason"]


def test_the_simulated_l2_takes_its_residency_from_the_compiled_kernel(tmp_path):
    """profiler=sim: programs resident per CU are the compile stage's, not DEFAULT_OCCUPANCY."""
    uri = f"sqlite:///{tmp_path}/store.db"
    proc = _harness(["kernel=igemm", "kernel.tiles.BLOCK_M=32", "kernel.tiles.BLOCK_N=32", "kernel.tiles.BLOCK_K=32",
                     "launch.num_warps=1", "target=mi300x", "profiler=sim", "shape=tiny", "shape.select=[t1]",
                     f"tracking.uri={uri}", "experiment=res"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run, = _runs(uri, "res")
    m = run.data.metrics
    assert m["compile.programs_per_cu"] > 2      # a small one-wave kernel: many per CU, not the default 2
    assert m["sim.programs_per_cu"] == m["compile.programs_per_cu"]


def test_the_simulated_l2_counts_the_compiled_kernels_spills_as_stores(tmp_path):
    """profiler=sim on an H100: a config that spills on sm_90 (igemm 128x128 at 8 warps on a
    C=8 layer, as above) logs its spill bytes per program, and the simulation adds one write
    lookup per spilled sector and work item (plus the far partition's for half of them)."""
    from harness.profilers.sim.job import Remap, simulate_job
    from harness.profilers.sim.replay import spill_lookups
    from harness.profilers.sim.target import SimTarget
    from swizzles import SWIZZLES

    uri = f"sqlite:///{tmp_path}/store.db"
    layer = "{name: t1, N: 1, C: 8, H: 8, W: 8, F: 8, R: 3, S: 3, stride: 1, padding: 1}"
    proc = _harness(["kernel=igemm", "launch.num_warps=8", "target=h100", "profiler=sim", "shape=tiny",
                     f"shape.shapes=[{layer}]", f"tracking.uri={uri}", "experiment=spill"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run, = _runs(uri, "spill")
    m = run.data.metrics
    assert m["compile.spill_bytes"] > 0
    assert m["compile.spill_bytes_per_program"] == m["compile.spill_bytes"] * 8 * 32
    target = yaml.safe_load((Path(__file__).resolve().parents[2] / "conf" / "target" / "h100.yaml").read_text())
    tiny = ConvShape("t1", 1, 8, 8, 8, 8, 3, 3, 1, 1)
    tiles = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}
    plain = simulate_job("igemm", tiny, tiles, Remap(SWIZZLES["identity"], 1, 8), target,
                         int(m["compile.programs_per_cu"]))
    per_item = spill_lookups(int(m["compile.spill_bytes_per_program"]),
                             SimTarget.from_target(target, int(m["compile.programs_per_cu"])))
    assert per_item > 0
    assert m["sim.l2_write_lookups"] == plain.write_hits + plain.write_misses + per_item * 1   # one tile


def test_an_error_in_a_called_jit_function_is_named_by_its_own_message_and_line(tmp_path):
    """Triton reports an error inside a jit function the kernel calls as a chain of
    CompilationErrors whose outer one says only where the call is ("at 2:16:"): the refusal's
    line is the innermost error, with its line in the called function.  Compiled for sm_90 in
    a process without the interpreter (this one runs under it)."""
    script = tmp_path / "nested.py"
    script.write_text(textwrap.dedent("""\
        import triton
        import triton.language as tl
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource

        from harness.compile.build import compiler_error

        @triton.jit
        def _inner(x):
            return x.no_such_attribute

        @triton.jit
        def _outer(p):
            tl.store(p, _inner(tl.load(p)))

        try:
            triton.compile(ASTSource(_outer, signature={"p": "*fp32"}), target=GPUTarget("cuda", 90, 32))
        except Exception as exc:
            print(str(exc).splitlines()[0])
            print(compiler_error(exc, ""))
        """))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    first, line = proc.stdout.splitlines()[-2:]
    assert first.startswith("at "), proc.stdout       # what the exception's first line alone says
    assert line == "AttributeError(\"'tensor' object has no attribute 'no_such_attribute'\") (line 2 of _inner)", line
