"""An unreachable tracking server (``tracking.uri=http://127.0.0.1:<closed port>``): the
sweep runs on in seconds (no minutes of HTTP retries), every run is kept on local disk and
its job says where; ``python -m harness.storage.sync`` then logs them, with their sweep, into
the store, once: a second sync finds nothing, and a spec already FINISHED there is not
logged again."""
from __future__ import annotations

import re
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from tests.faults import FAST, harness, job_lines, runs_of, spool_sync

EXPERIMENT = "offline"
SPOOLED = re.compile(r"^\[spool\] run (\S+) \((FINISHED|FAILED)\) kept on local disk at (\S+\.json) "
                     r"\(tracking store (\S+) unavailable: (.+)\); the sweep goes on\. "
                     r"Log it later with: python -m harness\.storage\.sync --spool (\S+)$")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Story:
    """The offline sweep, its sync, a second sync, then the same sweep offline and synced again."""

    spool: Path
    offline: CompletedProcess
    offline_s: float
    spooled_paths: list[Path]
    sync: CompletedProcess
    sync_again: CompletedProcess
    rerun: CompletedProcess
    sync_rerun: CompletedProcess


@pytest.fixture(scope="module")
def story(seeded_store) -> Story:
    root, spool = seeded_store.root, seeded_store.root / "offline-spool"
    unreachable = f"http://127.0.0.1:{_closed_port()}"

    def offline_sweep(tag: str) -> CompletedProcess:
        return harness(["-m", "swizzle=identity,xcd", "shape=tiny", "shape.select=[t1,t2]", *FAST,
                        f"tracking.uri={unreachable}",
                        f"tracking.spool_dir={spool}", f"experiment={EXPERIMENT}",
                        f"hydra.sweep.dir={root}/offline-{tag}"], cwd=root)

    start = time.monotonic()
    offline = offline_sweep("a")
    offline_s = time.monotonic() - start
    spooled_paths = sorted(spool.glob("*.json"))
    sync = spool_sync(["--spool", str(spool), "--tracking-uri", seeded_store.uri], cwd=root)
    sync_again = spool_sync(["--spool", str(spool), "--tracking-uri", seeded_store.uri], cwd=root)
    rerun = offline_sweep("b")
    sync_rerun = spool_sync(["--spool", str(spool), "--tracking-uri", seeded_store.uri], cwd=root)
    return Story(spool, offline, offline_s, spooled_paths, sync, sync_again, rerun, sync_rerun)


def test_sweep_goes_on_and_each_job_says_where_its_results_are(story):
    proc = story.offline
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert story.offline_s < 90                                   # seconds of probing, not minutes of retries
    lines = [SPOOLED.match(ln) for ln in proc.stdout.splitlines() if ln.startswith("[spool] run ")]
    assert len(lines) == 4 and all(lines), proc.stdout[-3000:]
    for match in lines:
        assert Path(match.group(3)).parent == story.spool and "Connection refused" in match.group(5)
        assert Path(match.group(6)) == story.spool
    job_records = sorted(p for p in story.spooled_paths if p.name.startswith("job-"))
    assert sorted(Path(m.group(3)) for m in lines) == job_records
    assert len(story.spooled_paths) == 5                          # 4 jobs + the sweep
    assert [ln.split()[5] for ln in job_lines(proc)] == ["FINISHED"] * 4
    assert "the sweep's runs are kept on local disk under" in proc.stdout
    assert "Sweep report skipped" in proc.stdout


def test_sync_logs_every_run_under_its_sweep(story, seeded_store):
    assert story.sync.returncode == 0, story.sync.stdout + story.sync.stderr[-2000:]
    assert "5 record(s): 5 logged" in story.sync.stdout
    jobs = [r for r in runs_of(seeded_store.uri, EXPERIMENT) if r.data.tags.get("job", "").endswith("/w8")]
    sweeps = runs_of(seeded_store.uri, EXPERIMENT, kind="sweep")
    first = next(s for s in sweeps if "offline-a" in s.data.tags["sweep_dir"])
    assert first.info.status == "FINISHED"
    assert len(jobs) == 4
    for run in jobs:
        assert run.info.status == "FINISHED"
        assert run.data.tags["mlflow.parentRunId"] == first.info.run_id
        assert run.data.metrics["max_rel_err"] < 5e-3 and run.data.params["shape.N"]
        assert run.data.tags["spec_hash"] and run.data.tags["status_reason"].startswith("verified")


def test_second_sync_finds_nothing_and_a_rerun_is_not_duplicated(story, seeded_store):
    assert story.sync_again.returncode == 0 and "nothing to sync" in story.sync_again.stdout
    assert story.rerun.returncode == 0
    assert story.sync_rerun.returncode == 0, story.sync_rerun.stdout
    assert "5 record(s): 1 logged, 0 already in the store, 4 not duplicated" in story.sync_rerun.stdout
    jobs = runs_of(seeded_store.uri, EXPERIMENT)
    assert len(jobs) == 4                                         # still one run per spec
    assert not list(story.spool.glob("*.json"))
    assert len(list((story.spool / "synced").glob("*.json"))) == 10
