"""The real CLI in a subprocess, from a directory outside the checkout, against a
temporary SQLite MLflow store, asserted through MlflowClient."""
import html
import os
import re
import shlex
import shutil
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from harness.storage.run_fields import FIRST_VIEW_COLUMNS, FIRST_VIEW_WIDTHS, NAME_COLUMN
from tests.cli_fork import run_cli
from tests.mlflow_server import running_mlflow_server
from tests.report.test_browser import CHROMIUM, assert_cells_fit, chromium
from tests.storage.test_mlflow_server import _column_ids
from harness.job.verdict import Kind

SMALL_TILES = ["kernel.tiles.BLOCK_M=16", "kernel.tiles.BLOCK_N=16", "kernel.tiles.BLOCK_K=16"]


def _harness(args, cwd, timeout=600, env=None):
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONUNBUFFERED": "1", **(env or {})}
    return run_cli(args, cwd, env, timeout)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    uri = f"sqlite:///{tmp}/store.db"
    args = ["-m", "kernel=igemm", "swizzle=identity,seed_xcd,xcd", "shape=tiny", *SMALL_TILES,
            f"tracking.uri={uri}", "experiment=cli-test", f"hydra.sweep.dir={tmp}/multirun"]
    proc = _harness(args, cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("cli-test")
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    return proc, client, runs


def test_one_parent_run_per_multirun(sweep):
    _, _, runs = sweep
    parents = [r for r in runs if r.data.tags.get("swizzlebench.kind") == "sweep"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert parents[0].info.run_name == "sweep swizzle[3] igemm tiny"      # short: axes, then group choices
    assert "swizzle=identity,seed_xcd,xcd" in parents[0].data.params["sweep.overrides"]
    assert parents[0].data.tags["mlflow.note.content"].startswith("python -m harness -m kernel=igemm swizzle=")
    experiment = sweep[1].get_experiment(parents[0].info.experiment_id)
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"


def test_one_child_run_per_job_and_shape(sweep):
    _, _, runs = sweep
    parent = next(r for r in runs if r.data.tags.get("swizzlebench.kind") == "sweep")
    children = [r for r in runs if r.data.tags.get("swizzlebench.kind") == "job"]
    assert len(children) == 9
    assert all(r.data.tags["mlflow.parentRunId"] == parent.info.run_id for r in children)
    names = sorted(r.data.tags["mlflow.runName"] for r in children)
    assert "xcd·tiny-t2·w8·igemm" in names and "seed_xcd·tiny-t1·w8·igemm" in names   # label first
    assert len(set(names)) == 9 and max(map(len, names)) <= 25, names
    assert {r.data.tags["job"] for r in children} >= {"igemm/xcd/tiny-t2/w8"}       # the job line's name


def test_valid_jobs_finished_rejected_jobs_failed_with_reason(sweep):
    _, _, runs = sweep
    for r in runs:
        if r.data.tags.get("swizzlebench.kind") != "job":
            continue
        tags, params, metrics = r.data.tags, r.data.params, r.data.metrics
        if params["swizzle"] == "seed_xcd":   # 2-pid grids: seed formula 1 is no permutation
            assert r.info.status == "FAILED"
            assert tags["status_reason"].startswith("swizzle seed_xcd: not a permutation of 2 pids")
            assert "max_rel_err" not in metrics
        else:
            assert r.info.status == "FINISHED", tags["status_reason"]
            assert metrics["max_rel_err"] < 5e-3
            assert tags["timing"].startswith("not measured")
            assert "time_ms_median" not in metrics
        for key in ("shape.N", "shape.C", "shape.H", "shape.W", "shape.F", "shape.R", "shape.S", "shape.stride",
                    "shape.padding", "shape.dtype", "kernel", "swizzle", "num_warps", "tile.BLOCK_M", "num_xcds"):
            assert key in params
        for key in ("git_commit", "device", "torch_version", "triton_version", "spec_hash", "status_reason"):
            assert tags.get(key), key


def test_artifacts_hold_config_and_kernel_source(sweep):
    _, client, runs = sweep
    run = next(r for r in runs if r.data.tags.get("mlflow.runName") == "xcd·tiny-t1·w8·igemm")
    files = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"config.yaml", "kernel_source.py"} <= files
    local = client.download_artifacts(run.info.run_id, "kernel_source.py")
    source = open(local).read()
    assert "def igemm_conv2d_kernel" in source and "def remap" in source and '"BLOCK_M": 16' in source


def test_progress_line_per_job(sweep):
    proc, _, _ = sweep
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("[job ")]
    assert len(lines) == 9
    assert any("igemm/seed_xcd/tiny-t1/w8" in ln and "FAILED" in ln for ln in lines)


def test_each_notice_is_printed_once_per_sweep(sweep):
    """A 3-job sweep: target=auto's resolution and tune=table giving way to the given tiles are
    printed once each (by the launching process, once every job's config has passed its
    checks), and so is profiler=auto's choice (by the first job)."""
    proc, _, _ = sweep
    output = proc.stdout + proc.stderr
    assert output.count("target=auto resolved to mi300x") == 1, output[-3000:]
    assert output.count("so the configured launch config runs (tune=none)") == 1, output[-3000:]
    assert output.count("profiler=auto: no GPU, using the simulated L2 (profiler=sim)") == 1, output[-3000:]


HELP_MAX_LINES = 40


def test_help_says_what_it_does_with_examples_in_under_40_lines(tmp_path):
    """``--help``: what it does, the five overrides and launch configs, every group's options,
    three examples (each one composes: ``--cfg job``), where results go, the docs; under 40
    lines.  ``--hydra-help`` keeps Hydra's."""
    proc = _harness(["--help"], cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert len(lines) < HELP_MAX_LINES, proc.stdout
    assert lines[0].startswith("swizzlebench: benchmark block swizzles")
    for override in ("kernel=", "swizzle=", "shape=", "target=", "profiler=", "launch.num_warps=", "kernel.tiles."):
        assert f"  {override}" in proc.stdout or f" {override}" in proc.stdout, override
    for line in ("kernel: direct, igemm, igemm_best, igemm_fast, igemm_ws, patch", "study: calibrate",
                 "target: auto, h100, h200, mi300x"):
        assert line in lines
    for where in ("./mlflow.db", "reports/<experiment>/<sweep run id>/index.html", "docs/running.md", "--hydra-help"):
        assert where in proc.stdout, where
    examples = [shlex.split(line)[3:] for line in lines if line.startswith("  python -m harness ")]
    assert len(examples) == 3 and "powered by Hydra" not in proc.stdout
    for example in examples:   # each composes as written (a multirun: its first job)
        first_job = [re.sub(r"^([\w.]+=[\w.]+),[\w.,]+$", r"\1", arg) for arg in example if arg != "-m"]
        shown = _harness([*first_job, "--cfg", "job"], cwd=tmp_path, timeout=120)
        assert shown.returncode == 0 and "kernel:" in shown.stdout, (example, shown.stderr[-2000:])
    hydra = _harness(["--hydra-help"], cwd=tmp_path, timeout=120)
    assert hydra.returncode == 0 and "== Flags ==" in hydra.stdout and "--hydra-help" in hydra.stdout


def test_unknown_option_lists_valid_ones(tmp_path):
    proc = _harness(["kernel=winograd"], cwd=tmp_path, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["error: kernel=winograd: no kernel option 'winograd'; "
                                        "valid: direct, igemm, igemm_best, igemm_fast, igemm_ws, patch"]


def test_custom_formulas_run_gated_and_a_non_permutation_fails_cleanly(tmp_path):
    """A user formula runs through the same gate; one that is no permutation of a shape's grid
    is a FAILED run with the counts, and the other jobs of the sweep still run.  (A formula
    outside the language refuses the command: tests/faults/test_formulas.py.)"""
    uri = f"sqlite:///{tmp_path}/store.db"
    formulas = tmp_path / "xcd.txt"
    formulas.write_text("# chunked XCD remap\nq = num_pids // num_xcds\nr = num_pids % num_xcds\n"
                        "x = pid % num_xcds\nnew_pid = min(x, r) * (q + 1) + max(x - r, 0) * q + pid // num_xcds\n")
    proc = _harness(["-m", "swizzle=custom", f"swizzle.file={formulas}", "shape=tiny", *SMALL_TILES,
                     f"tracking.uri={uri}", "experiment=custom", f"hydra.sweep.dir={tmp_path}/a"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    proc = _harness(["-m", "swizzle=custom", "swizzle.expr='(pid * 2) % num_pids','num_pids - 1 - pid'",
                     "shape=tiny", "shape.select=[t1]", *SMALL_TILES, f"tracking.uri={uri}", "experiment=custom",
                     f"hydra.sweep.dir={tmp_path}/b"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("custom").experiment_id],
                              "tags.`swizzlebench.kind` = 'job'", max_results=100)
    by_status = {}
    for r in runs:
        by_status.setdefault(r.info.status, []).append(r)
    assert len(by_status["FINISHED"]) == 4           # the file formula on t1..t3, the reversal on t1
    assert all(r.data.params["swizzle"].startswith("custom-") for r in by_status["FINISHED"])
    failed, = by_status["FAILED"]
    assert "not a permutation" in failed.data.tags["status_reason"]   # (pid*2) % 2 pids on t1: 0, 0


def test_every_job_is_compiled_for_the_target(sweep):
    """No GPU: target=auto is the MI300X, and every job that passed its gates was compiled for
    gfx942 first (harness/compile/build.py)."""
    _, _, runs = sweep
    finished = [r for r in runs if r.data.tags.get("swizzlebench.kind") == "job" and r.info.status == "FINISHED"]
    assert finished
    for r in finished:
        assert r.data.params["compile.arch"] == "gfx942"
        assert r.data.metrics["compile.registers"] > 0 and r.data.metrics["compile.programs_per_cu"] >= 1


# --------------------------------------------------------------------------------------
# What a newcomer reads after the CPU sweep: its job lines, its report in a browser, the
# MLflow UI the sweep's end points to (issue 40)
# --------------------------------------------------------------------------------------
def _sweep_dir(proc) -> Path:
    """The folder the sweep fixture ran in (its ``hydra.sweep.dir`` is ``<folder>/multirun``)."""
    (arg,) = [a for a in proc.args if a.startswith("hydra.sweep.dir=")]
    return Path(arg.split("=", 1)[1]).parent


def _page_text(dom: str) -> str:
    """The text of a dumped DOM, one line per table row, paragraph, list item or heading."""
    text = re.sub(r"<(style|script)[^>]*>.*?</\1>", "", dom, flags=re.S)
    text = re.sub(r"<img[^>]*>", "", text)
    text = re.sub(r"</(tr|p|li|h1|h2|h3|figcaption)>", "\n", text)
    text = re.sub(r"</t[dh]>", " | ", text)
    return html.unescape(re.sub(r"<[^>]+>", "", text))


def test_job_lines_name_their_baseline_and_stay_short(sweep):
    proc, _, _ = sweep
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("[job ")]
    finished = [ln for ln in lines if " FINISHED " in ln and "/identity/" not in ln]
    assert finished and all("| vs identity: L2 " in ln for ln in finished), finished
    assert all(len(ln) <= 200 for ln in lines), max(lines, key=len)
    assert all(" not timed " in ln and "(sim, not validated on mi300x)" in ln and "(exact:" not in ln
               for ln in finished), finished
    # the verdict words are explained once, in the sweep's header
    legend = [ln for ln in proc.stdout.splitlines() if "Job lines compare each swizzle with its baseline" in ln]
    assert len(legend) == 1 and "0.5 pts (compare.min_l2_delta)" in legend[0] and f"'{Kind.NO_DIFFERENCE.word}'" in legend[0]


@pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason=f"{CHROMIUM} not installed (apt-get install -y chromium)")
def test_cpu_report_claims_nothing_it_did_not_measure(sweep, tmp_path):
    """The CPU sweep's report, as headless Chromium renders it: no timing, paired-timing or
    CI claim; every simulated figure with its band or 'not validated'; the best swizzle per
    group ranked by the predicted L2 change, labelled a prediction."""
    proc, _, _ = sweep
    (page,) = (_sweep_dir(proc) / "reports" / "cli-test").glob("*/index.html")
    result = chromium(page, tmp_path / "profile", "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    text = _page_text(result.stdout)
    for claim in ("timed its baseline", "95 % CI", "± 0.00", "interleaved rounds", "Config measured on"):
        assert claim not in text, claim
    assert not re.search(r"\[([+-]\d+\.\d+), \1\]", text), "a zero-width interval"
    cells = text[text.index("All cells"):text.index("Failed or unfinished")].splitlines()
    simulated = [row for row in cells if "(sim," in row]
    assert len(simulated) == 6                                              # identity and xcd on t1..t3
    assert all("(sim, not validated on mi300x hardware)" in row for row in simulated)
    predictions = [row for row in cells if "(prediction, " in row]            # the decision rows
    assert len(predictions) == 3 and all("(prediction, not validated on mi300x hardware)" in row for row in predictions)
    best = text[text.index("Best swizzle per group"):text.index("Kernel vs vendor")].splitlines()
    assert "Swizzles ranked by predicted ΔL2 vs baseline (prediction: not timed)" in "\n".join(best[:3])
    groups = [row for row in best[2:] if row.startswith("igemm")]
    assert len(groups) == 3
    assert all(" | prediction, ΔL2 points vs identity (not validated on mi300x hardware): xcd " in row for row in groups)
    assert "(the simulated L2: its hit rates are predictions, not measurements)" in text   # the facts' Profiler
    heatmap = "L2 hit-rate delta vs baseline (percentage points): simulated on mi300x, not validated on hardware"
    assert f'alt="{heatmap}"' in result.stdout                              # the figure's title
    assert "Cache control" not in text                                     # ncu's setting, not the simulator's
    assert "Simulated target | mi300x" in text and "Simulator validation | not validated on mi300x hardware" in text
    assert_cells_fit(page, tmp_path)                                        # the decision table reads at 1,600 px


@pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason=f"{CHROMIUM} not installed (apt-get install -y chromium)")
def test_the_sweep_ends_with_the_mlflow_ui_command_and_its_view_opens_on_the_verdicts(sweep, tmp_path):
    """The end of the sweep prints ``mlflow ui --backend-store-uri <store>`` and the address of
    the view with the verdict columns; that very command (on a free port) serves the view, and
    headless Chromium sees the verdict columns and the sweep's runs there."""
    proc, _, runs = sweep
    (hint,) = [ln for ln in proc.stdout.splitlines() if "MLflow UI: run `mlflow ui --backend-store-uri " in ln]
    store, address = re.search(r"`mlflow ui --backend-store-uri (\S+)`, then open (\S+) \(the verdict columns\)",
                               hint).groups()
    assert f"tracking.uri={store}" in proc.args                              # the store in use
    sweep_id = next(r.info.run_id for r in runs if r.data.tags.get("swizzlebench.kind") == "sweep")
    assert address.startswith("http://127.0.0.1:5000/#/experiments/") and f"viewStateShareKey=sweep-{sweep_id}" in address
    with running_mlflow_server(store, tmp_path / "ui", command="ui") as base:
        result = chromium(address.replace("http://127.0.0.1:5000", base), tmp_path / "profile",
                          "--virtual-time-budget=20000", "--window-size=2400,1000", "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    # the view's columns that a CPU sweep has values for (no speedup: nothing was timed)
    shown = set(FIRST_VIEW_COLUMNS) - {"tags.`display.speedup`"}
    assert {"tags.`display.verdict`", "tags.`display.l2`"} == shown <= set(_column_ids(result.stdout)), \
        _column_ids(result.stdout)
    text = _page_text(result.stdout)
    jobs = sorted(r.info.run_name for r in runs if r.data.tags.get("swizzlebench.kind") == "job")
    assert all(name in text for name in jobs), text[:3000]                   # the job runs, not folded
    assert "sweep swizzle[3] igemm tiny" not in text                         # nor the sweep's run above them
    for shown_value in ("L2 same tile order", "+0.0 pts (same tile order)", "baseline", "FAILED (permutation)"):
        assert shown_value in text, shown_value
    assert "not timed" not in text                                           # no column that says only that
    widths = dict(re.findall(r'col-id="([^"]+)"[^>]*?style="[^"]*?width: (\d+)px', result.stdout))
    assert {column: int(widths.get(column, 0)) for column in FIRST_VIEW_WIDTHS if column in shown | {NAME_COLUMN}} \
        == {column: width for column, width in FIRST_VIEW_WIDTHS.items() if column in shown | {NAME_COLUMN}}, widths
    assert max(map(len, jobs)) <= 25                                         # names that fit 250 px


#: The command of the sweep fixture as the docs show it (their CPU job-line examples are its lines).
DOCS_SWEEP = "python -m harness -m kernel=igemm swizzle=identity,seed_xcd,xcd shape=tiny " + " ".join(SMALL_TILES)


def test_docs_job_line_examples_come_from_real_runs(sweep):
    """Every job line the docs show is one a real run printed: a CPU one is a line of this
    module's sweep (the docs name its command), a GPU one a line of a log under
    benchmarks/results; a format change without new examples fails here."""
    proc, _, _ = sweep
    printed = {ln for ln in proc.stdout.splitlines() if ln.startswith("[job ")}
    root = Path(__file__).resolve().parents[1]
    logs = "\n".join(p.read_text(errors="replace") for p in (root / "benchmarks" / "results").rglob("*.log"))
    shown, from_sweep = [], []
    for page in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        text = page.read_text()
        for line in (ln for ln in text.splitlines() if ln.startswith("[job ")):
            shown.append(line)
            if line in printed:
                from_sweep.append(line)
                assert DOCS_SWEEP in text, f"{page.name} shows a line of the CLI sweep without its command"
            else:
                assert line in logs, f"{page.name}: not a line of a real run:\n{line}\nthe sweep's:\n" + "\n".join(sorted(printed))
    assert from_sweep and len(shown) > len(from_sweep)


def test_the_mlflow_ui_hint_names_the_command_for_a_store_on_disk_and_the_address_of_a_server():
    from harness.storage.tracking import mlflow_ui_hint, mlflow_ui_url

    on_disk = mlflow_ui_hint("sqlite:////data/mlflow.db", "3")
    assert on_disk == ("MLflow UI: run `mlflow ui --backend-store-uri sqlite:////data/mlflow.db`, then open "
                       f"{mlflow_ui_url('http://127.0.0.1:5000', '3')} (the verdict columns)")
    served = mlflow_ui_hint("http://tracking-host:5000", "3")
    assert served == f"MLflow UI (verdict columns): {mlflow_ui_url('http://tracking-host:5000', '3')}"
    assert "mlflow ui" not in served


def test_no_live_progress_line_off_a_terminal(sweep):
    """The sweep's live line (harness.run.live) is drawn only on a terminal: a run whose
    output goes to files, a pipe or CI prints the job lines alone."""
    proc, _, _ = sweep
    assert not [ln for ln in (proc.stdout + proc.stderr).splitlines() if " shapes [" in ln or ln.startswith("jobs ")]
    assert len([ln for ln in proc.stdout.splitlines() if ln.startswith("[job ")]) == 9


def test_cpu_job_runs_carry_their_l2_verdict_rounded_for_display(tmp_path):
    """In the store (mlflow.search_runs, as a notebook reads it), a CPU job run has the
    columns the first view shows: the deciding verdict (the L2 one: nothing was timed),
    the predicted L2 change to one decimal with its verdict, no speedup; its name is short,
    its swizzle first.  colmajor reads the 16 x 4 tile grid in another order than identity:
    the simulator predicts a change, on a target it was not validated on."""
    uri = f"sqlite:///{tmp_path}/store.db"
    shape = "shape.shapes=[{name:a,N:1,C:16,H:16,W:16,F:64,R:1,S:1,stride:1,padding:0}]"
    proc = _harness(["-m", "kernel=igemm", "swizzle=colmajor", "shape=tiny", shape, *SMALL_TILES,
                     f"tracking.uri={uri}", "experiment=display", f"hydra.sweep.dir={tmp_path}/multirun"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    before = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    try:
        runs = mlflow.search_runs(experiment_names=["display"], filter_string="tags.`swizzlebench.kind` = 'job'")
    finally:
        mlflow.set_tracking_uri(before)
    (run,) = runs.to_dict("records")
    assert run["tags.mlflow.runName"] == "colmajor·tiny-a·w8·igemm" and run["tags.job"] == "igemm/colmajor/tiny-a/w8"
    delta = run["metrics.l2_delta_pts"]
    assert run["tags.display.l2"] == f"{delta:+.1f} pts (predicted, not validated)"
    assert run["tags.display.verdict"] == "L2 predicted, not validated"
    assert run["tags.l2_verdict"].startswith("predicted, not validated") and run["tags.verdict"].startswith("not timed")
    assert "tags.display.speedup" not in runs.columns
