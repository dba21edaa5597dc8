"""Bring your own kernel and swizzle: examples/byo copied to a temporary directory outside
the package and used as a user would, through the real CLI (``--config-dir conf``) against
a temporary SQLite MLflow store; plus the import-path checks and the spec hashes in process."""
import dataclasses
import hashlib
import json
import os
import shutil
import sys
import types
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from harness.hardware.device import describe_device
from harness.run.steps import JobOptions, run_job
from harness.job.result import FAILED
from harness.job.spec_config import swizzle_choice
from harness.job.spec import JobSpec
from harness.job.user_code import load_kernel, load_remap
from kernels.problem import ConvShape
from tests.test_cli import _harness
from tests.profilers.test_profiler_pipeline import STANDINS

EXAMPLE = Path(__file__).parents[1] / "examples" / "byo"
SMALL_TILES = ["kernel.tiles.BLOCK_M=16", "kernel.tiles.BLOCK_F=8"]   # tiny grids of 2 to 4 tiles
#: The documented multirun (docs/byo.md, examples/byo/README.md), after ``--config-dir conf``.
DOCUMENTED = ["-m", "kernel=mykernel", "swizzle=snake,identity", "shape=tiny", "profiler=none"]

#: Written by the test next to the example: a remap that is no permutation, one that is not jit.
BAD_REMAPS = '''
import triton
import triton.language as tl


@triton.jit
def collide(pid, num_pid_m, num_pid_n, NUM_XCDS: tl.constexpr, GROUP_SIZE: tl.constexpr):
    return pid // 2


@triton.jit
def three_args(pid, num_pid_m, num_pid_n):
    return pid


def not_jit(pid, num_pid_m, num_pid_n, NUM_XCDS, GROUP_SIZE):
    return pid
'''


@pytest.fixture(scope="module")
def user_dir(tmp_path_factory) -> Path:
    """The example as a user's own directory: mykernels.py, myremaps.py, conf/; plus
    badremaps.py and conf/kernel/broken.yaml (a kernel import path that does not exist)."""
    tmp = tmp_path_factory.mktemp("byo") / "user"
    shutil.copytree(EXAMPLE, tmp)
    (tmp / "badremaps.py").write_text(BAD_REMAPS)
    broken = (tmp / "conf" / "kernel" / "mykernel.yaml").read_text().replace("mykernels:PixelConv", "mykernels:Nope")
    (tmp / "conf" / "kernel" / "broken.yaml").write_text(broken.replace("name: mykernel", "name: broken"))
    return tmp


def _runs(user_dir: Path, args: list[str], name: str, env: dict | None = None) -> dict[str, object]:
    """Run ``python -m harness --config-dir conf ARGS`` in the user's directory; its job runs
    by run name."""
    uri = f"sqlite:///{user_dir}/{name}.db"
    args = ["--config-dir", "conf", *args, f"tracking.uri={uri}", f"experiment={name}",
            f"hydra.sweep.dir={user_dir}/multirun-{name}", f"hydra.run.dir={user_dir}/run-{name}"]
    proc = _harness(args, cwd=user_dir, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name(name).experiment_id], max_results=100)
    return {r.data.tags["job"]: r for r in runs if r.data.tags.get("swizzlebench.kind") == "job"}


def test_documented_command_is_the_tested_one():
    command = " ".join(["python -m harness --config-dir conf", *DOCUMENTED])
    for doc in (Path(__file__).parents[1] / "docs" / "byo.md", EXAMPLE / "README.md"):
        assert command in doc.read_text(), doc


def test_user_kernel_and_swizzle_multirun_finish(user_dir):
    """The command of docs/byo.md and examples/byo/README.md: the user's kernel under the
    user's swizzle and a built-in."""
    runs = _runs(user_dir, DOCUMENTED, "byo")
    assert sorted(runs) == sorted(f"mykernel/{s}/tiny-{t}/w4" for s in ("snake", "identity") for t in ("t1", "t2", "t3"))
    for name, run in runs.items():
        params, tags = run.data.params, run.data.tags
        assert run.info.status == "FINISHED", tags.get("status_reason")
        assert run.data.metrics["max_rel_err"] < 5e-3
        assert tags["gate.permutation"].startswith("permutation of ")
        assert params["kernel"] == "mykernel" and params["kernel.target"] == "mykernels:PixelConv"
        assert params["tile.BLOCK_M"] == "64" and params["tile.BLOCK_F"] == "32"
        if params["swizzle"] == "snake":
            assert params["swizzle.fn"] == "myremaps:snake"
        else:
            assert "swizzle.fn" not in params


def test_user_code_imports_in_isolated_and_profiler_workers(user_dir):
    """isolation.mode=process (a spawned worker) and the profiler's worker process (the
    stand-in ncu runs it in another directory) both import the user's modules.  Without the
    compile stage, whose helper process is a third importer and not this test's subject (the
    documented multirun above compiles the user's kernel)."""
    env = {"PATH": f"{STANDINS}{os.pathsep}{os.environ['PATH']}"}
    runs = _runs(user_dir, ["kernel=mykernel", "swizzle=custom", "swizzle.fn=myremaps:snake", "shape=tiny",
                            "shape.select=[t1]", *SMALL_TILES, "isolation.mode=process", "profiler=ncu",
                            "profiler.repeats=1", "compile.enabled=false"], "workers", env=env)
    run = runs["mykernel/myremaps:snake/tiny-t1/w4"]
    assert run.info.status == "FINISHED", run.data.tags.get("status_reason")
    assert run.data.params["grid.num_pids"] == "4" and "l2_hit_rate" in run.data.metrics


def test_bad_user_code_fails_its_job_with_a_clear_reason(user_dir):
    """A bad import path fails at plan, a remap that is no permutation at the permutation
    gate, and profiler=sim says that the kernel has no address model.  Without the compile
    stage (its helper process), which none of these reasons comes from."""
    runs = _runs(user_dir, ["-m", "kernel=mykernel", "swizzle=custom",
                            "swizzle.fn=myremaps:nope,badremaps:collide,myremaps:snake", "shape=tiny",
                            "shape.select=[t1]", *SMALL_TILES, "profiler=sim", "compile.enabled=false"], "bad")
    assert len(runs) == 3 and all(r.info.status == "FAILED" for r in runs.values())
    reason = {name.split("/")[1]: r.data.tags["status_reason"] for name, r in runs.items()}
    gate = {name.split("/")[1]: r.data.tags["failed_gate"] for name, r in runs.items()}
    assert reason["myremaps:nope"].startswith(
        "plan error: ValueError: swizzle.fn='myremaps:nope' could not be imported "
        "(AttributeError: module 'myremaps' has no attribute 'nope'); expected a @triton.jit function")
    assert reason["badremaps:collide"] == (
        "swizzle badremaps:collide: not a permutation of 4 pids: 2 never run, 2 run twice; "
        "first collision pid 1 -> 0 (as pid 0)")
    assert gate["badremaps:collide"] == "permutation"
    assert reason["myremaps:snake"] == ("profile error: kernel mykernel has no address model (load_plan); "
                                        "use profiler=none or a hardware profiler (ncu, rocprofv3)")
    assert runs["mykernel/myremaps:snake/tiny-t1/w4"].data.metrics["max_rel_err"] < 5e-3   # verified first


# ---------------------------------------------------------------------------------------
# In process: the checks on import paths, labels, and the hashes of existing specs.

@pytest.fixture
def importable(user_dir, monkeypatch):
    monkeypatch.syspath_prepend(str(user_dir))


@pytest.mark.parametrize("path, message", [
    ("badremaps:not_jit", "swizzle.fn='badremaps:not_jit' is of type function, not a @triton.jit function; "
                          "expected a @triton.jit function remap(pid, num_pid_m, num_pid_n, NUM_XCDS"),
    ("badremaps:three_args", "swizzle.fn='badremaps:three_args' takes 3 parameters (pid, num_pid_m, num_pid_n); "
                             "expected a @triton.jit function"),
    ("nomodule.remaps:x", "swizzle.fn='nomodule.remaps:x' could not be imported (ModuleNotFoundError: No module "
                          "named 'nomodule'); expected"),
    ("a:b:c", "swizzle.fn='a:b:c' is not an import path"),
])
def test_user_remap_checks(importable, path, message):
    with pytest.raises(ValueError) as info:
        load_remap(path)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_user_remap_and_kernel_load(importable):
    assert load_remap("myremaps:snake") is load_remap("myremaps.snake")
    kernel = load_kernel("mykernels.PixelConv", "mine")
    assert kernel.name == "mine" and kernel.tile_names == ("BLOCK_M", "BLOCK_F")
    with pytest.raises(ValueError, match=r"kernel._target_='kernels.base:Operands' is class Operands, not a "
                                         r"ConvKernel subclass"):
        load_kernel("kernels.base:Operands", "x")
    with pytest.raises(ValueError, match="class ConvKernel lacks launch, tile_grid, to_layout, jit_kernel"):
        load_kernel("kernels.base:ConvKernel", "x")


def test_kernel_import_path_that_does_not_resolve_fails_the_job(importable):
    spec = dataclasses.replace(_spec(), kernel="broken", kernel_target="mykernels:Nope")
    result = run_job(spec, describe_device("interpreter"), JobOptions(interpret_tiles={}))
    assert result.status == FAILED and result.failed_gate == "plan"
    assert result.reason.startswith(
        "plan error: ValueError: kernel._target_='mykernels:Nope' could not be imported (AttributeError: module "
        "'mykernels' has no attribute 'Nope'); expected a subclass of kernels.base.ConvKernel")


def test_a_module_probed_by_the_sweep_is_not_probed_again_by_the_processes_it_starts(tmp_path, monkeypatch):
    """A user module is imported first in a probe process (harness.job.user_code); the probe
    is handed to the processes the sweep starts (a job worker, a profiler's worker) through
    ``PROBED_ENV``, so that they do not pay it again.  A module of that name found elsewhere
    (another folder first on ``sys.path``) is probed afresh, and one that ends its process
    there is still caught; one this process has imported already is not probed (importing it
    again runs none of its code)."""

    from harness.job import user_code

    for folder, source in (("a", "X = 1\n"), ("b", "import os\nos._exit(3)\n")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "probed_mod.py").write_text(source)
    monkeypatch.setenv(user_code.PROBED_ENV, "{}")   # restored after the test
    monkeypatch.syspath_prepend(str(tmp_path / "a"))
    probes, probe = [], user_code._probe
    monkeypatch.setattr(user_code, "_probe", lambda module: probes.append(module) or probe(module))
    user_code._import_ends_process.cache_clear()
    try:
        user_code._import_ends_process("probed_mod")   # the sweep's process
        user_code._import_ends_process.cache_clear()    # a process it started: its environment, no cache
        user_code._import_ends_process("probed_mod")
        assert probes == ["probed_mod"]
        monkeypatch.syspath_prepend(str(tmp_path / "b"))
        user_code._import_ends_process.cache_clear()
        with pytest.raises(ImportError, match="ended its process with exit status 3"):
            user_code._import_ends_process("probed_mod")
        assert probes == ["probed_mod", "probed_mod"]
        user_code._import_ends_process.cache_clear()
        monkeypatch.setitem(sys.modules, "probed_mod", types.ModuleType("probed_mod"))   # b's, imported here
        user_code._import_ends_process("probed_mod")
        assert probes == ["probed_mod", "probed_mod"]
    finally:
        user_code._import_ends_process.cache_clear()


@pytest.mark.parametrize("how", ["_probe_forked", "_probe_fresh"])
def test_a_probe_reports_how_its_import_ended(tmp_path, monkeypatch, capfd, how):
    """Either probe (a fork of this process, or a fresh interpreter where this process runs
    other threads) gives the import's exit status: 0 when the module imports or raises
    (left to this process's import to report), its own status when it ends its process;
    what the module prints does not reach this process's output."""
    from harness.job import user_code

    modules = {"fine_mod": "print('imported')\n", "raising_mod": "import sys\nsys.exit(2)\n",
               "exiting_mod": "import os\nos._exit(3)\n"}
    for name, source in modules.items():
        (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    probe = getattr(user_code, how)
    assert [probe(name) for name in modules] == [0, 0, 3]
    assert "imported" not in "".join(capfd.readouterr())
    assert not set(modules) & set(sys.modules)   # imported in the child only


def test_a_process_that_started_cuda_probes_in_a_fresh_interpreter(monkeypatch):
    """A forked child cannot use its parent's CUDA context: once this process has started
    CUDA, the probe is a fresh interpreter (a module that uses the GPU at import must not fail
    there when it would not in the job); before, a fork."""
    from harness.job import user_code

    chosen = []
    monkeypatch.setattr(user_code, "_probe_forked", lambda module: chosen.append("fork") or 0)
    monkeypatch.setattr(user_code, "_probe_fresh", lambda module: chosen.append("fresh") or 0)
    monkeypatch.setattr("threading.active_count", lambda: 1)
    fake_torch = types.SimpleNamespace(cuda=types.SimpleNamespace(is_initialized=lambda: False))
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    user_code._probe("any_mod")
    fake_torch.cuda.is_initialized = lambda: True
    user_code._probe("any_mod")
    assert chosen == ["fork", "fresh"]


def test_swizzle_labels_of_import_paths():
    def choice(**swizzle):
        return swizzle_choice({"expr": None, "file": None, "label": None, **swizzle})

    assert choice(name="custom", fn="mypkg.remaps:hilbert") == ("mypkg.remaps:hilbert", None)
    assert choice(name="custom", fn="mypkg.remaps:hilbert", label="hil") == ("hil", None)
    assert choice(name="snake", fn="myremaps:snake") == ("snake", None)
    with pytest.raises(ValueError, match="needs exactly one of swizzle.expr"):
        choice(name="custom", fn="mypkg.remaps:hilbert", expr="pid")


def _spec() -> JobSpec:
    return JobSpec(kernel="igemm", tiles=(("BLOCK_M", 16), ("BLOCK_N", 16), ("BLOCK_K", 16)), swizzle="xcd",
                   num_xcds=8, group_size=8, shape=ConvShape("l1", 1, 3, 8, 8, 4, 3, 3), shape_preset="p",
                   num_warps=8, num_stages=3, target="mi300x", seed=0, baseline="identity")


def test_specs_without_user_code_keep_their_hashes():
    """Resume finds runs by spec hash: adding the import-path fields must not change the
    hash of any spec that does not use them (the hash as computed before they existed)."""
    spec = _spec()
    later = ("kernel_target", "swizzle_fn", "timing", "compare_configs", "baseline_tiles", "baseline_num_warps",
             "baseline_num_stages")   # fields added later, each hashed only when set
    before = {k: v for k, v in dataclasses.asdict(spec).items() if k not in later}
    assert spec.spec_hash == hashlib.sha256(json.dumps(before, sort_keys=True, default=str).encode()).hexdigest()[:16]
    # a job timed another way (compare.timer / compare.placements) is another job
    assert dataclasses.replace(spec, timing="cupti/placements=8").spec_hash != spec.spec_hash
    # so is one that asks another question (compare.configs=tuned_each: best vs best)
    assert dataclasses.replace(spec, compare_configs="tuned_each").spec_hash != spec.spec_hash
    mine = dataclasses.replace(spec, swizzle="snake", swizzle_fn="myremaps:snake")
    assert mine.spec_hash != dataclasses.replace(spec, swizzle="snake").spec_hash
    assert JobSpec.from_dict(mine.to_dict()) == mine
    assert mine.has_baseline and mine.baseline_spec().swizzle_fn is None
