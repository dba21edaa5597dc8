"""Config text is data, and a swizzle is its formula, not its label.

A swizzle YAML under ``--config-dir`` with a byte that is not UTF-8 is refused in one line
naming the file and line, exit 2, nothing logged (also when it is one of the swept values);
a formula given by interpolation (``swizzle.expr='${oc.env:F}'``) under ``-m`` runs with its
sweep's run and report, its override kept as typed.  Two formulas under one label are two
cells of the report (``label#<hash>``), none dropped as superseded, and their MLflow runs are
named apart alike; a label of one formula keeps its runs' names; a label that is a built-in's
name is refused."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import pytest

from harness.errors import USER_ERROR_EXIT
from tests.faults import FAST, cli_env, harness, job_lines, runs_of

ONE_SHAPE = [*FAST, "shape=tiny", "shape.select=[t1]"]


def _sweep(seeded_store, experiment: str, *args: str, cwd: Path | None = None, **env: str):
    return harness([*args, *ONE_SHAPE, f"tracking.uri={seeded_store.uri}", f"experiment={experiment}",
                    f"hydra.sweep.dir={seeded_store.root}/{experiment}"], cwd=cwd or seeded_store.root,
                   env=cli_env(**env))


def _swizzle_yaml(folder: Path, name: str, body: bytes) -> None:
    (folder / "swizzle").mkdir(parents=True, exist_ok=True)
    (folder / "swizzle" / f"{name}.yaml").write_bytes(b"name: custom\nnum_xcds: 8\ngroup_size: 8\n" + body)


def _report_table(proc, cwd: Path) -> tuple[pd.DataFrame, str]:
    """The sweep's table.csv and report page (its path printed relative to ``cwd``)."""
    report, = [line.split("Sweep report: ")[1].strip() for line in proc.stdout.splitlines() if "Sweep report: " in line]
    page = cwd / report
    return pd.read_csv(page.parent / "table.csv", dtype=str, keep_default_na=False), page.read_text()


@pytest.mark.parametrize("swizzle", ["latin1", "good,latin1"], ids=["one-job", "swept"])
def test_a_yaml_that_is_not_utf8_is_refused_in_one_line(seeded_store, tmp_path, swizzle):
    _swizzle_yaml(tmp_path / "conf", "good", b"expr: pid\nlabel: good\n")
    _swizzle_yaml(tmp_path / "conf", "latin1", b"expr: pid\nlabel: caf\xe9\n")
    experiment = f"latin1-{swizzle.count(',')}"
    proc = _sweep(seeded_store, experiment, "--config-dir", str(tmp_path / "conf"), "-m", f"swizzle={swizzle}",
                  cwd=tmp_path)
    assert proc.returncode == USER_ERROR_EXIT, proc.stderr[-3000:]
    line, = proc.stderr.splitlines()
    path = (tmp_path / "conf" / "swizzle" / "latin1.yaml").resolve()
    assert line == f"error: {path}, line 5: not UTF-8 text (byte 0xe9: invalid continuation byte); save the file as UTF-8"
    assert runs_of(seeded_store.uri, experiment, kind=None) == []


def test_an_interpolated_formula_keeps_its_sweep_run_and_report(seeded_store):
    proc = _sweep(seeded_store, "env-formula", "-m", "swizzle=custom", "swizzle.expr=${oc.env:F}",
                  F="num_pids - 1 - pid")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "raised" not in proc.stderr, proc.stderr[-3000:]   # Hydra's warning for a failing callback
    assert [line.split()[5] for line in job_lines(proc)] == ["FINISHED"]
    sweep, = runs_of(seeded_store.uri, "env-formula", kind="sweep")
    assert sweep.info.status == "FINISHED"
    assert "swizzle.expr=${oc.env:F}" in sweep.data.params["sweep.overrides"].split()
    job, = runs_of(seeded_store.uri, "env-formula")
    assert job.data.params["swizzle.formula"].strip() == "new_pid = num_pids - 1 - pid"
    table, _ = _report_table(proc, seeded_store.root)
    assert list(table["run_id"]) == [job.info.run_id]


def test_two_formulas_under_one_label_are_two_cells(seeded_store, tmp_path):
    _swizzle_yaml(tmp_path / "conf", "mine_a", b"expr: pid\nlabel: mine\n")
    _swizzle_yaml(tmp_path / "conf", "mine_b", b"expr: num_pids - 1 - pid\nlabel: mine\n")
    proc = _sweep(seeded_store, "one-label", "--config-dir", str(tmp_path / "conf"), "-m", "swizzle=mine_a,mine_b",
                  cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = runs_of(seeded_store.uri, "one-label")
    assert len(runs) == 2 and all(r.info.status == "FINISHED" for r in runs)
    expected = {r.info.run_id: "mine#" + hashlib.sha256(r.data.params["swizzle.formula"].encode()).hexdigest()[:8]
                for r in runs}
    table, page = _report_table(proc, tmp_path)
    assert dict(zip(table["run_id"], table["swizzle"])) == expected
    assert len(set(expected.values())) == 2
    assert "superseded" not in page
    # MLflow's names tell them apart the same way, and the later job's line says so
    assert {r.info.run_id: (r.data.tags["job"], r.info.run_name) for r in runs} == {
        run_id: (f"igemm/{label}/tiny-t1/w8", f"{label}·tiny-t1·w8·igemm") for run_id, label in expected.items()}
    later = max(runs, key=lambda r: r.info.start_time)
    assert f"igemm/{expected[later.info.run_id]}/tiny-t1/w8" in job_lines(proc)[-1]


def test_a_label_of_one_formula_keeps_its_run_name(seeded_store, tmp_path):
    """Two sweeps of one formula under one label: its runs keep the bare label."""
    _swizzle_yaml(tmp_path / "conf", "mine", b"expr: pid\nlabel: mine\n")
    for _ in range(2):
        proc = _sweep(seeded_store, "one-formula", "--config-dir", str(tmp_path / "conf"), "-m", "swizzle=mine",
                      "resume=false", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
    runs = runs_of(seeded_store.uri, "one-formula")
    assert [(r.data.tags["job"], r.info.run_name) for r in runs] == [("igemm/mine/tiny-t1/w8",
                                                                      "mine·tiny-t1·w8·igemm")] * 2


def test_a_label_naming_a_built_in_is_refused(seeded_store):
    proc = _sweep(seeded_store, "label-xcd", "-m", "swizzle=custom", "swizzle.expr=pid", "swizzle.label=xcd")
    assert proc.returncode == USER_ERROR_EXIT, proc.stderr[-3000:]
    line, = proc.stderr.splitlines()
    assert line.startswith("error: swizzle.label='xcd' names a built-in swizzle (built-ins: "), line
    assert runs_of(seeded_store.uri, "label-xcd", kind=None) == []
