"""harness.preflight.check_job: once per job, the task's config left as it is."""
from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from harness import preflight
from harness.hardware.device import describe_device, select_execution_mode

SMALL_TILES = ["kernel.tiles.BLOCK_M=16", "kernel.tiles.BLOCK_N=16", "kernel.tiles.BLOCK_K=16"]


def test_check_job_leaves_the_config_as_it_is_and_returns_what_it_resolved():
    """target=auto and tune=table giving way to a launch config given: resolved in the returned
    config and typed config, not in the config the task received."""
    with initialize_config_module("swizzlebench_conf", version_base="1.3"):
        cfg = compose("config", overrides=["shape=tiny", *SMALL_TILES])
    before = OmegaConf.to_container(cfg, resolve=False)
    assert cfg.target.name == "auto" and cfg.tune.name == "table"
    notices: list[str | None] = []
    checked = preflight.check_job(cfg, describe_device(select_execution_mode()), SMALL_TILES, notices)
    assert OmegaConf.to_container(cfg, resolve=False) == before
    assert checked.config.target.name != "auto" and checked.job.target.name == checked.config.target.name
    assert checked.config.tune.name == "none" and checked.job.tune.name == "none"
    assert any(n and n.startswith("target=auto resolved to") for n in notices)
    assert any(n and n.startswith("tune=table:") for n in notices)


def _run_main(argv: list[str], monkeypatch) -> list[tuple[str, ...]]:
    """``python -m harness ARGV`` in this process, with a spy on check_job: the overrides of
    each call."""
    calls: list[tuple[str, ...]] = []
    real = preflight.check_job

    def spy(cfg, device, overrides, notices=None):
        calls.append(tuple(overrides))
        return real(cfg, device, overrides, notices)

    monkeypatch.setattr(preflight, "check_job", spy)
    monkeypatch.setattr(sys, "argv", ["harness", *argv])
    main = importlib.import_module("harness.__main__").main
    try:
        main()
    finally:
        GlobalHydra.instance().clear()
    return calls


@pytest.mark.parametrize(("flags", "swizzles", "jobs"), [(["-m"], "swizzle=identity,xcd", 2),
                                                      (["-m"], "swizzle=xcd", 1), ([], "swizzle=xcd", 1)])
def test_check_job_runs_once_per_job(tmp_path, monkeypatch, flags, swizzles, jobs):
    """A CPU multirun checks each job once (the sweep's refusal, its check taken by the job's
    task), with a swept value or none; a single run checks its job once."""
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/store.db"
    args = [swizzles, "shape=tiny", "shape.select=[t1]", "profiler=none", *SMALL_TILES,
            f"tracking.uri={uri}", "experiment=once", f"hydra.sweep.dir={tmp_path}/m", f"hydra.run.dir={tmp_path}/r"]
    calls = _run_main([*flags, *args], monkeypatch)
    assert len(calls) == jobs and len(set(calls)) == jobs, calls
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("once").experiment_id],
                              "tags.`swizzlebench.kind` = 'job'")
    assert sorted(r.info.status for r in runs) == ["FINISHED"] * jobs


#: What runs before the task function, or beside it, and reads the composed config: the entry
#: point and the task function itself, the check, the schema, Hydra's callbacks, the search's
#: sweeper and proposer, and the report and tools commands.
BEFORE_THE_TASK = ("harness/__main__.py", "harness/preflight.py", "harness/schema.py", "harness/callbacks.py",
                   "harness/search/", "harness/report/", "harness/tools/")


def _takes_cfg(arg: ast.arg) -> bool:
    """A parameter holding the composed config: annotated ``DictConfig``, or named ``cfg``
    with no type (a typed ``cfg: Config`` is a launch config, :class:`kernels.tuning.Config`)."""
    annotation = ast.unparse(arg.annotation) if arg.annotation is not None else None
    return (annotation is not None and "DictConfig" in annotation) or (arg.arg == "cfg" and annotation is None)


def _functions(tree: ast.AST):
    """The functions of a module, but for the methods of a Hydra callback (a class deriving
    from ``Callback``: Hydra hands them the sweep's config around the tasks, not after one)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any(ast.unparse(b).endswith("Callback") for b in node.bases):
            node.body = []
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]


def cfg_takers(root: Path) -> list[str]:
    """``path:line function`` of each function of the pipeline (harness/ after the task
    function) that takes the composed config."""
    out = []
    for path in sorted((root / "harness").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(BEFORE_THE_TASK):
            continue
        for node in _functions(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                args = node.args
                if any(_takes_cfg(a) for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]):
                    out.append(f"{rel}:{node.lineno} {getattr(node, 'name', 'lambda')}")
    return out


def test_no_function_after_the_task_takes_cfg():
    """The task function checks the config once (harness.preflight.checked_job) and hands
    typed objects down (harness.app.run_hydra_job): nothing after it reads ``cfg``."""
    assert cfg_takers(Path(__file__).resolve().parents[1]) == []


def test_the_cfg_check_finds_a_taker(tmp_path):
    pkg = tmp_path / "harness" / "run"
    pkg.mkdir(parents=True)
    (pkg / "m.py").write_text("def a(cfg, x): pass\ndef b(job: 'DictConfig'): pass\n"
                              "def c(cfg: Config): pass\ndef d(settings): pass\n"
                              "class E(Callback):\n    def on_job_end(self, config: DictConfig): pass\n")
    (tmp_path / "harness" / "preflight.py").write_text("def check(cfg): pass\n")
    assert cfg_takers(tmp_path) == ["harness/run/m.py:1 a", "harness/run/m.py:2 b"]
