"""Renaming a verdict word is a change of one line in one module (:mod:`harness.job.verdict`):
a copy of the product with that one line changed runs a CPU sweep through the real CLI, and
the new word is what the job line, the MLflow tag and the report say."""
import difflib
import os
import shutil
from pathlib import Path

from mlflow.tracking import MlflowClient

from harness.job.verdict import Kind
from tests.cli_fork import run_cli

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("harness", "kernels", "swizzles", "hydra_plugins", "conf")
NEW_WORD = "unclocked"


def test_renaming_a_verdict_word_is_one_line(tmp_path):
    src = tmp_path / "src"
    for name in PRODUCT:
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    module = src / "harness/job/verdict.py"
    before = module.read_text()
    line = f'    NOT_TIMED = "{Kind.NOT_TIMED.word}"\n'
    assert before.count(line) == 1
    module.write_text(before.replace(line, f'    NOT_TIMED = "{NEW_WORD}"\n'))
    diff = [d for d in difflib.unified_diff(before.splitlines(), module.read_text().splitlines(), lineterm="", n=0)
            if d[:1] in "+-" and not d.startswith(("+++", "---"))]
    assert diff == [line.rstrip("\n").replace("    ", "-    ", 1), f'+    NOT_TIMED = "{NEW_WORD}"'], diff

    uri = f"sqlite:///{tmp_path}/store.db"
    args = ["-m", "kernel=igemm", "swizzle=identity,xcd", "shape=tiny", "shape.select=[t1]",
            "kernel.tiles.BLOCK_M=16", "kernel.tiles.BLOCK_N=16", "kernel.tiles.BLOCK_K=16",
            f"tracking.uri={uri}", "experiment=rename", f"hydra.sweep.dir={tmp_path}/multirun"]
    # The copy's simulator has no numba cache (numba keys it on the source's folder): its plain
    # Python functions (NUMBA_DISABLE_JIT) predict the same hit rates without compiling them all.
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONUNBUFFERED": "1", "NUMBA_DISABLE_JIT": "1"}
    proc = run_cli(args, cwd=src, env=env, timeout=600)   # the copy's harness: its folder comes first
    assert proc.returncode == 0, proc.stderr[-3000:]
    old = Kind.NOT_TIMED.word
    (line,) = [x for x in proc.stdout.splitlines() if "igemm/xcd/tiny-t1" in x and "FINISHED" in x]
    assert f"), {NEW_WORD}  " in line and old not in line, line          # the job line
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("rename")
    (run,) = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("job") == "igemm/xcd/tiny-t1/w8"]
    assert run.data.tags["verdict"].startswith(f"{NEW_WORD} (no GPU"), run.data.tags   # the MLflow tag
    (page,) = (src / "reports" / "rename").glob("*/index.html")   # the sweep reports into its folder
    text = page.read_text()
    assert f"Time verdicts over 1 compared cells: {NEW_WORD}." in text              # the report
    for said in (f">{old}<", f": {old}", f"({old})"):   # nowhere as a verdict (prose may say it)
        assert said not in text, [t for t in text.splitlines() if said in t][:3]
