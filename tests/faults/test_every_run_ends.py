"""Every run ends (issue 42, item 1): a ``swizzle.fn`` module that ends its process at import
(``sys.exit(3)``, ``os._exit(3)``) ends as a FAILED run with a one-line reason; text that
cannot be encoded (a non-UTF-8 byte of the command line, a lone surrogate in a YAML formula)
is a formula error, refused in one line before anything is logged (issue 55, item 3), and a
spool holding such text is synced escaped; no run of the store is left RUNNING."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess

import pytest

from harness.errors import USER_ERROR_EXIT
from tests.cli_fork import run_cli
from tests.faults import FAST, cli_env, job_lines, reason, runs_of, spool_sync

MODULES = {"exits": "import sys\nsys.exit(3)\n", "hard_exits": "import os\nos._exit(3)\n"}
#: case -> (extra arguments, what the FAILED reason must say)
CASES = {
    "sys_exit_at_import": (["swizzle=custom", "swizzle.fn=exits:remap"], "SystemExit: 3"),
    "os_exit_at_import": (["swizzle=custom", "swizzle.fn=hard_exits:remap"],
                          "ended its process with exit status 3"),
}
#: case -> (extra arguments, what the refusal's one line must say): a formula is a config error
REFUSED = {
    "non_utf8_expr": ([b"swizzle=custom", b'swizzle.expr="pid + \xe9"'], "character '\\udce9' is not allowed"),
    "surrogate_yaml": (["--config-dir={conf}", "swizzle=surrogate"], "character '\\udce9' is not allowed"),
}


def _store_path(uri: str) -> str:
    return uri.removeprefix("sqlite:///")


def _run(seeded_store, tmp_path, extra: list, experiment: str) -> subprocess.CompletedProcess:
    """The multirun with ``extra`` arguments (str or bytes) from ``tmp_path``, which holds the
    modules of :data:`MODULES` and the config dir of the YAML case; output decoded escaped."""
    (tmp_path / "swizzle").mkdir()
    (tmp_path / "swizzle" / "surrogate.yaml").write_text('name: custom\nexpr: "pid + \\udce9"\ngroup_size: 8\n')
    for module, source in MODULES.items():
        (tmp_path / f"{module}.py").write_text(source)
    args = [a.replace("{conf}", str(tmp_path)) if isinstance(a, str) else a for a in extra]
    options = [a for a in args if isinstance(a, str) and a.startswith("--")]
    args = [a for a in args if a not in options]
    common = ["-m", *options, "shape=tiny", "shape.select=[t1]", *FAST, f"tracking.uri={seeded_store.uri}",
              f"experiment={experiment}", f"hydra.sweep.dir={tmp_path}/sweep"]
    argv = [os.fsdecode(a) for a in common + args]   # as Python decodes its command line's bytes
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))   # the modules, then the checkout's
    proc = run_cli(argv, tmp_path, {**cli_env(), "PYTHONPATH": path}, timeout=240, text=False)
    stdout, stderr = (s.decode("utf-8", "backslashreplace") for s in (proc.stdout, proc.stderr))
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


@pytest.mark.parametrize("case", list(CASES))
def test_run_ends_failed_with_one_line_reason(seeded_store, tmp_path, case):
    extra, words = CASES[case]
    experiment = f"ends-{case}"
    proc = _run(seeded_store, tmp_path, extra, experiment)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    run, = runs_of(seeded_store.uri, experiment)
    assert run.info.status == "FAILED"
    assert words in reason(run), reason(run)
    line, = job_lines(proc)
    assert "FAILED" in line
    with sqlite3.connect(_store_path(seeded_store.uri)) as db:
        assert db.execute("select count(*) from runs where status='RUNNING'").fetchone() == (0,)
        unexplained = db.execute("select count(*) from runs r where r.status='FAILED' and not exists "
                                 "(select 1 from tags t where t.run_uuid=r.run_uuid and t.key='status_reason')")
        assert unexplained.fetchone() == (0,)


@pytest.mark.parametrize("case", list(REFUSED))
def test_text_that_cannot_be_encoded_is_refused_in_one_line_escaped(seeded_store, tmp_path, case):
    """A formula with a non-UTF-8 byte (command line) or a lone surrogate (YAML): refused
    before anything is logged, exit status 2, one line with the character escaped."""
    extra, words = REFUSED[case]
    experiment = f"ends-{case}"
    proc = _run(seeded_store, tmp_path, extra, experiment)
    assert proc.returncode == USER_ERROR_EXIT, proc.stderr[-3000:]
    assert proc.stdout == "" and len(proc.stderr.splitlines()) == 1, proc.stderr[-3000:]
    assert words in proc.stderr, proc.stderr
    assert runs_of(seeded_store.uri, experiment, kind=None) == []


def _record(name: str, spec_hash: str, uri: str, **extra) -> dict:
    return {"record_id": f"spool-{spec_hash}", "kind": "job", "tracking_uri": uri, "experiment": "ends-sync",
            "run_name": name, "status": "FINISHED", "start_time_ms": 1_790_000_000_000,
            "end_time_ms": 1_790_000_001_000, "params": {"swizzle.expr": name}, "metrics": {"max_rel_err": 1e-4},
            "tags": {"spec_hash": spec_hash, "status_reason": f"verified {name}", "swizzlebench.kind": "job"}, **extra}


def test_sync_logs_every_record_or_says_which_and_why(seeded_store, tmp_path_factory):
    """A spool with a lone surrogate (JSON escape), a raw non-UTF-8 byte, a record the store
    refuses (an invalid param name) and a file that is not JSON: sync logs the first two, text
    escaped, and names the other two with their reason, one line each; the store works, so it
    never says to wait for it."""
    spool = tmp_path_factory.mktemp("ends-sync-spool")
    uri = seeded_store.uri
    (spool / "job-1-spool-surrogate.json").write_text(json.dumps(_record("igemm/custom/pid + \udce9", "s1", uri)))
    raw = json.dumps(_record("igemm/custom/pid + RAW", "s2", uri)).encode().replace(b"RAW", b"\xe9")
    (spool / "job-2-spool-raw.json").write_bytes(raw)
    refused = _record("igemm/custom/refused", "s3", uri)
    refused["params"] = {"bad name!": "1"}
    (spool / "job-3-spool-refused.json").write_text(json.dumps(refused))
    (spool / "job-4-spool-broken.json").write_text("{not json")
    proc = spool_sync(["--spool", str(spool)], cwd=spool)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert sum(ln.startswith("  LOGGED ") for ln in lines) == 2, proc.stdout
    failed = [ln for ln in lines if ln.startswith("  FAILED ")]
    assert len(failed) == 2, proc.stdout
    assert any("job-3-spool-refused.json" in ln and "the store refused this record" in ln for ln in failed)
    assert any("job-4-spool-broken.json" in ln and "unreadable record" in ln for ln in failed)
    assert "4 record(s): 2 logged" in lines[-1] and "2 because of the record itself" in lines[-1]
    assert "reachable" not in proc.stdout
    names = sorted(r.info.run_name for r in runs_of(uri, "ends-sync"))
    assert names == ["igemm/custom/pid + \\udce9", "igemm/custom/pid + \\udce9"]


def test_the_end_of_suite_check_finds_unended_runs(tmp_path_factory):
    """The session's check (conftest.unended_runs) names a RUNNING run and a FAILED run without reason."""
    from mlflow.tracking import MlflowClient

    from harness.storage.new_store import seed_new_store
    from tests.faults.conftest import unended_runs

    db = tmp_path_factory.mktemp("unended") / "store.db"
    seed_new_store(f"sqlite:///{db}")   # as the harness starts a new store
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    exp = client.create_experiment("unended")
    client.create_run(exp, run_name="left-running")
    client.set_terminated(client.create_run(exp, run_name="no-reason").info.run_id, "FAILED")
    done = client.create_run(exp, run_name="explained", tags={"status_reason": "gate failed"}).info.run_id
    client.set_terminated(done, "FAILED")
    assert sorted(line.split(": ", 1)[1] for line in unended_runs(db)) == ["left-running RUNNING",
                                                                            "no-reason FAILED without a reason"]
