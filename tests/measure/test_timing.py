"""Operand placements as the unit of replication (harness/measure/timing.py, stats.py):
the speedup's CI is taken over placements, so an effect that is only an accident of where
one set of buffers landed is not reported as a verdict."""
from __future__ import annotations

import math
import os
from pathlib import Path

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from mlflow.tracking import MlflowClient

from harness.job.verdict import Kind
from harness.measure.stats import clustered_ratio, paired_ratio
from harness.measure.timing import PairedSettings, time_interleaved
from tests.standins.placement_timer import PLACEMENT_EFFECTS
from tests.cli_fork import run_cli

ROOT = Path(__file__).resolve().parents[2]
STANDIN = "tests.standins.placement_timer:time_ms"


def test_clustered_ratio_is_a_t_interval_over_cluster_means():
    rng = np.random.default_rng(0)
    base = np.full(40, 1.0)
    clusters = np.repeat(np.arange(4), 10)
    shift = np.array([0.02, -0.01, 0.03, 0.0])[clusters]
    cand = base * np.exp(-shift + 0.001 * rng.standard_normal(40))
    est = clustered_ratio(base, cand, clusters)
    means = np.array([np.mean(np.log(base / cand)[clusters == c]) for c in range(4)])
    t = 3.182446305284263                      # Student's t, 97.5 %, 3 degrees of freedom
    half = t * means.std(ddof=1) / 2
    assert est.estimate == pytest.approx(math.exp(means.mean()))
    assert est.ci_lo == pytest.approx(math.exp(means.mean() - half))
    assert est.ci_hi == pytest.approx(math.exp(means.mean() + half))
    # the rounds' own interval is far narrower: it cannot see the spread between clusters
    naive = paired_ratio(base, cand)
    assert naive.ci_hi - naive.ci_lo < (est.ci_hi - est.ci_lo) / 5
    # one cluster: the rounds' interval
    assert clustered_ratio(base, cand, np.zeros(40)) == naive


def test_rounds_cycle_through_the_placements_and_each_gets_a_batch():
    # the placements' effects average to zero, so the CI never ends the rounds: max_rounds does
    # (10 rounds per placement), not max_time_s (which would spend its 5 s of wall time)
    settings = PairedSettings(min_rounds=10, check_every=5, placements=8, timer=STANDIN, max_time_s=5, max_rounds=80)
    arms = [{"baseline": None, "candidate": None, "vendor": None}] * 8
    samples = time_interleaved(arms, settings, seed=1, tracked=("baseline", "candidate"))
    assert samples.rounds >= 40 and samples.rounds % 5 == 0
    assert samples.placements[:40] == [p for p in range(8) for _ in range(5)]
    # every placement effect is in the per-placement spread (%)
    assert samples.placement_spread("baseline", "candidate") == pytest.approx(
        np.std(np.log1p(PLACEMENT_EFFECTS), ddof=1) * 100, rel=0.1)


def test_a_bad_timer_is_refused_with_what_is_valid():
    with pytest.raises(ValueError, match=r"compare.timer='clock' is invalid; valid: events, cupti"):
        PairedSettings(timer="clock")
    with pytest.raises(ValueError, match=r"compare.placements=0 must be a whole number >= 1"):
        PairedSettings(placements=0)


def _run(tmp_path: Path, placements: tuple[int, ...]) -> dict[int, dict]:
    """One multirun, a job per placement count (in sweep order): that job's run and its
    progress lines, by placement count.  Over placements whose effects average to zero the CI
    does not reach ``compare.target_precision``: 160 rounds (20 a placement) end it, not
    ``compare.max_time_s`` (3 s of wall time)."""
    uri = f"sqlite:///{tmp_path}/p.db"
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    proc = run_cli(["-m", "kernel=igemm", "swizzle=custom", "swizzle.expr=num_pids - 1 - pid", "shape=tiny",
                   "shape.select=[t1]", "kernel.tiles.BLOCK_M=16", "kernel.tiles.BLOCK_N=16",
                   "kernel.tiles.BLOCK_K=16", "profiler=none", "target=h100", f"compare.timer={STANDIN}",
                   f"compare.placements={','.join(map(str, placements))}", "compare.max_rounds=160",
                   f"tracking.uri={uri}",
                   "experiment=placements", f"hydra.sweep.dir={tmp_path}/m"],
                   tmp_path, env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("placements")
    runs = sorted((r for r in client.search_runs([exp.experiment_id])
                   if r.data.tags.get("swizzlebench.kind") == "job"), key=lambda r: r.info.start_time)
    assert len(runs) == len(placements)
    return {n: {"run": run, "stdout": "\n".join(line for line in proc.stdout.splitlines()
                                                 if line.startswith(f"[job {job} |"))}
            for job, (n, run) in enumerate(zip(placements, runs))}


def test_a_placement_effect_is_a_verdict_for_one_placement_and_not_over_eight(tmp_path):
    """Through the real CLI with the stand-in timer: on one placement the candidate reads
    +3 % slower with a tight CI ("slower"); over eight placements whose effects average to
    zero the CI covers 1 and the verdict is "no difference detected"."""
    both = _run(tmp_path, (1, 8))
    one, eight = both[1], both[8]
    r1, r8 = one["run"].data, eight["run"].data
    assert r1.tags["verdict"] == "slower"
    assert r1.metrics["speedup_ci_hi"] < 1.0 and r1.metrics["paired_placements"] == 1
    assert "speedup_placement_sd_pct" not in r1.metrics
    assert r8.tags["verdict"].startswith(Kind.NO_DIFFERENCE.word)
    assert r8.metrics["speedup_ci_lo"] < 1.0 < r8.metrics["speedup_ci_hi"]
    assert r8.metrics["paired_placements"] == 8
    assert r8.metrics["speedup_placement_sd_pct"] > 1.0
    assert "over 8 operand placements" in r8.tags["timing"]
    assert "stand-in timer" in r8.tags["timing"]
    assert Kind.NO_DIFFERENCE.word in eight["stdout"]
    # every timed cell is placed on the target's measured roofline (a tiny conv: memory-bound)
    assert r8.tags["bound"].startswith("memory-bound, at ") and "(memory-bound, at " in eight["stdout"]
    assert 0 < r8.metrics["pct_of_roofline"] < 100 and r8.metrics["arith_intensity"] > 0


class FakeRecord:
    """A stand-in for torch's ``_KinetoEvent``: the fields as zero-argument methods; those
    not given read as torch's empty defaults (for torch.profiler's own parser)."""

    EMPTY = {"shapes": [], "concrete_inputs": [], "stack": [], "structured_input_shapes": [],
             "structured_input_strides": [], "dtypes": [], "kwinputs": {}, "extra_meta": {}, "overload_name": "",
             "activity_type": "", "metadata_json": "", "is_hidden_event": False, "is_user_annotation": False,
             "is_python_function": False, "flow_start": False, "cuda_elapsed_us": -1}

    def __init__(self, name: str, device: str, corr: int, linked: int, start_ns: int, end_ns: int,
                 thread: int = 1, is_async: bool = False) -> None:
        from torch.autograd import DeviceType

        self.fields = {"name": name, "device_type": getattr(DeviceType, device), "correlation_id": corr,
                       "linked_correlation_id": linked, "start_ns": start_ns, "end_ns": end_ns,
                       "start_thread_id": thread, "end_thread_id": thread, "fwd_thread_id": thread,
                       "is_async": is_async}

    def __getattr__(self, key: str):
        value = self.__dict__["fields"].get(key, self.EMPTY.get(key, 0))
        return lambda: value


def _launch_records(launch_range: str) -> list[FakeRecord]:
    """Two timed launches, ns, laid out as torch 2.11 records them on an H100
    (benchmarks/probes/kineto_records.py): launch 0 a vendor conv (two kernels of 30 and 5 µs,
    enqueued by cudaLaunchKernel under nested aten ops), launch 1 a Triton kernel of 40 µs
    (cuLaunchKernelEx, linked to no op); each range also has a GPU-side annotation record;
    around them device records that belong to no launch.  Correlation ids of ops and of
    runtime calls overlap, as they do.  Listed out of time order, as kineto may."""
    us = 1000
    return [
        FakeRecord(f"{launch_range}1", "CPU", 8, 0, 300 * us, 400 * us),
        FakeRecord("cuLaunchKernelEx", "CPU", 4, 0, 350 * us, 360 * us),           # id 4 is also an aten op's
        FakeRecord("triton_kernel", "CUDA", 4, 0, 2000 * us, 2040 * us),
        FakeRecord(f"{launch_range}1", "CUDA", 8, 0, 2000 * us, 2040 * us),        # annotation: not a kernel
        FakeRecord("kernel_b", "CUDA", 55, 4, 1030 * us, 1035 * us),
        FakeRecord("kernel_a", "CUDA", 54, 4, 1000 * us, 1030 * us),
        FakeRecord(f"{launch_range}0", "CPU", 2, 0, 100 * us, 200 * us),
        FakeRecord(f"{launch_range}0", "CUDA", 2, 0, 1000 * us, 1090 * us),        # spans a gap: not kernel time
        FakeRecord("aten::conv2d", "CPU", 3, 0, 110 * us, 190 * us),
        FakeRecord("aten::cudnn_convolution", "CPU", 4, 0, 120 * us, 180 * us),
        FakeRecord("cudaLaunchKernel", "CPU", 54, 4, 130 * us, 140 * us),
        FakeRecord("cudaLaunchKernel", "CPU", 55, 4, 141 * us, 150 * us),
        FakeRecord("aten::zero_", "CPU", 1, 0, 0, 90 * us),                       # the L2 clear: outside
        FakeRecord("cudaLaunchKernel", "CPU", 51, 1, 10 * us, 20 * us),
        FakeRecord("flush_kernel", "CUDA", 51, 1, 500 * us, 900 * us),
        FakeRecord("cudaLaunchKernel", "CPU", 59, 0, 390 * us, 410 * us, is_async=True),   # async: not attributed
        FakeRecord("async_kernel", "CUDA", 59, 0, 3000 * us, 3009 * us),
        FakeRecord("cudaLaunchKernel", "CPU", 60, 0, 310 * us, 320 * us, thread=2),        # another thread
        FakeRecord("other_thread_kernel", "CUDA", 60, 0, 4000 * us, 4011 * us),
        FakeRecord("orphan_kernel", "CUDA", 99, 0, 5000 * us, 5011 * us),                  # no runtime call
    ]


def test_kineto_records_give_each_launch_the_kernels_launched_inside_its_range():
    from harness.measure.cupti import LAUNCH_RANGE, kineto_launch_kernel_ms

    records = _launch_records(LAUNCH_RANGE)
    assert kineto_launch_kernel_ms(records, 2) == pytest.approx([0.035, 0.040], rel=1e-12)
    with pytest.raises(RuntimeError, match="1 of 3 launches have no kernel record"):
        kineto_launch_kernel_ms(records, 3)       # a launch the profiler lost: refused, not guessed


def test_cupti_durations_are_mapped_back_to_their_arm_round_and_launch():
    """``timer=cupti``: the profiler's per-launch ranges, in launch order, fill the same
    [arm][round][launch] layout as the event times (here from made-up kineto records, ns)."""
    from harness.measure.cupti import LAUNCH_RANGE
    from harness.measure.timing import GpuTimer

    orders = [["a", "b"], ["b", "a"]]
    event_times = {"a": [[9.0, 9.0], [9.0, 9.0]], "b": [[9.0, 9.0], [9.0, 9.0]]}
    launch_ns = [1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000]    # a r0 x2, b r0 x2, b r1 x2, a r1 x2
    records = [r for i, ns in enumerate(launch_ns)
               for r in (FakeRecord(f"{LAUNCH_RANGE}{i}", "CPU", 2 * i + 1, 0, 100 * i, 100 * i + 50),
                         FakeRecord("cuLaunchKernelEx", "CPU", 1000 + i, 0, 100 * i + 10, 100 * i + 20),
                         FakeRecord("kernel", "CUDA", 1000 + i, 0, 10**6 * i, 10**6 * i + ns))]
    timer = object.__new__(GpuTimer)
    timer.profile = SimpleNamespace(profiler=SimpleNamespace(kineto_results=SimpleNamespace(events=lambda: records)))
    timer.launches = len(launch_ns)
    got = timer.kernel_times(event_times, orders)
    assert got == {"a": [[0.001, 0.002], [0.007, 0.008]], "b": [[0.003, 0.004], [0.005, 0.006]]}
    timer.launches += 1                              # a launch the profiler lost: refused, not guessed
    with pytest.raises(RuntimeError, match="1 of 9 launches have no kernel record"):
        timer.kernel_times(event_times, orders)


@pytest.mark.parametrize("layout,bias", [("channels_last", True), ("nchw", False)])
def test_a_placements_operands_are_a_copy_at_other_addresses_in_the_same_layout(layout, bias):
    from harness.measure.correctness import copy_operands, make_operands
    from kernels.problem import ConvShape

    shape = ConvShape("t", N=2, C=8, H=5, W=6, F=4, R=3, S=3, padding=1)
    ops = make_operands(shape, bias, 7, "cpu", layout)
    copy = copy_operands(ops)
    for name in ("x", "w", "bias"):
        a, b = getattr(ops, name), getattr(copy, name)
        if a is None:
            assert b is None
            continue
        assert torch.equal(a, b) and a.dtype == b.dtype and a.stride() == b.stride()
        assert a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr()
    assert copy.x.is_contiguous(memory_format=torch.channels_last if layout == "channels_last"
                                else torch.contiguous_format)
