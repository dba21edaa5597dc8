"""The fault suite's shared store, the no-earlier-result-lost check after every case, the
check that every run the suite logged has ended (at the session's end, in every SQLite store
the suite used: no run RUNNING, every FAILED run with its reason), and the closing count of
cases (see ``tests/faults/__init__.py``)."""
from __future__ import annotations

import sqlite3
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.hardware.device import GPU
from tests.conftest import MODE
from tests.faults import FAST, RunState, cli_env, harness, runs_of, snapshot

SEED_EXPERIMENT = "seed"
SUITE_DIR = "tests/faults/"


@dataclass
class SeededStore:
    """The SQLite store every case logs into, holding one finished sweep from before."""

    root: Path
    uri: str
    seed: dict[str, RunState]

    def check_seed_intact(self) -> None:
        now = snapshot(self.uri, SEED_EXPERIMENT)
        lost = sorted(self.seed[i].name for i in self.seed.keys() - now.keys())
        changed = sorted(self.seed[i].name for i in self.seed.keys() & now.keys() if now[i] != self.seed[i])
        added = sorted(now[i].name for i in now.keys() - self.seed.keys())
        assert not (lost or changed or added), (f"earlier results disturbed: lost {lost}, changed {changed}, "
                                                f"added {added}")


@pytest.fixture(scope="session")
def seeded_store(tmp_path_factory) -> SeededStore:
    """A store with one finished sweep (a baseline and a candidate swizzle on one tiny shape)
    logged before any fault: under the interpreter on a CPU, compiled on a GPU node (the GPU
    images' Triton 3.6 interpreter fails these kernels' verification with a numpy TypeError)."""
    root = tmp_path_factory.mktemp("faults")
    uri = f"sqlite:///{root}/store.db"
    env = {k: v for k, v in cli_env().items() if k != "TRITON_INTERPRET"} if MODE == GPU else cli_env()
    proc = harness(["-m", "swizzle=identity,xcd", "shape=tiny", "shape.select=[t1]", *FAST, f"tracking.uri={uri}",
                    f"experiment={SEED_EXPERIMENT}", f"hydra.sweep.dir={root}/seed-sweep"], cwd=root, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = runs_of(uri, SEED_EXPERIMENT)
    assert len(jobs) == 2 and all(r.info.status == "FINISHED" for r in jobs), \
        [(r.info.status, r.data.tags.get("status_reason")) for r in jobs]
    return SeededStore(root, uri, snapshot(uri, SEED_EXPERIMENT))


@pytest.fixture(autouse=True)
def no_earlier_result_lost(seeded_store):
    """After every case: the seeded sweep's runs are all there, unchanged."""
    yield
    seeded_store.check_seed_intact()


def unended_runs(db: Path) -> list[str]:
    """The runs of the SQLite store ``db`` that are RUNNING, or FAILED without a reason."""
    with open(db, "rb") as f:
        if f.read(16) != b"SQLite format 3\x00":
            return []
    with sqlite3.connect(db) as conn:
        if not conn.execute("select 1 from sqlite_master where name = 'runs'").fetchone():
            return []
        running = conn.execute("select name from runs where status = 'RUNNING'").fetchall()
        unexplained = conn.execute("select name from runs r where status = 'FAILED' and not exists (select 1 from "
                                   "tags t where t.run_uuid = r.run_uuid and t.key = 'status_reason')").fetchall()
    return [f"{db}: {name} RUNNING" for name, in running] + [f"{db}: {name} FAILED without a reason"
                                                             for name, in unexplained]


@pytest.fixture(scope="session")
def suite_folders(seeded_store):
    """The folders whose SQLite stores the suite used (the shared store's, each case's
    tmp_path); at the session's end none of their stores has a run left RUNNING or FAILED
    without its reason (issue 42's acceptance)."""
    folders: list[Path] = [seeded_store.root]
    yield folders
    stores = [db for folder in folders for db in folder.rglob("*.db") if db.is_file()]
    assert stores, "the fault suite used no SQLite store?"
    unended = [line for db in stores for line in unended_runs(db)]
    assert not unended, unended


@pytest.fixture(autouse=True)
def every_run_ends(request, suite_folders):
    """Registers each case's tmp_path with ``suite_folders``."""
    if "tmp_path" in request.fixturenames:
        suite_folders.append(request.getfixturevalue("tmp_path"))
    yield


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """How many fault cases ran and were handled (message and earlier results checked)."""
    outcome: dict[str, bool] = {}   # case -> passed, with no error in its setup or teardown checks
    for key in ("passed", "failed", "error"):
        for report in terminalreporter.stats.get(key, []):
            nodeid = getattr(report, "nodeid", "")
            if nodeid.startswith(SUITE_DIR):
                outcome[nodeid] = outcome.get(nodeid, True) and key == "passed"
    if not outcome:
        return
    by_file: dict[str, list[bool]] = defaultdict(list)
    for nodeid, ok in outcome.items():
        by_file[nodeid.split("::")[0].removeprefix(SUITE_DIR + "test_").removesuffix(".py")].append(ok)
    handled = sum(outcome.values())
    terminalreporter.write_sep("=", f"fault suite: {handled} of {len(outcome)} cases handled")
    for name, oks in sorted(by_file.items()):
        terminalreporter.write_line(f"  {name.replace('_', ' '):<28} {sum(oks)}/{len(oks)}")
