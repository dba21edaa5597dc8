"""Tests run on the CPU under the Triton interpreter; GPU tests (``tests/test_gpu.py``,
marked ``gpu``) run compiled kernels and are skipped where there is no GPU.  On a GPU
node run ``python -m pytest -o addopts="" tests/test_gpu.py`` (no xdist there): the other tests
assume the interpreter."""
import os
import subprocess
import sys
from pathlib import Path

# Python's own bytecode cache (``__pycache__``, git-ignored) for the test run and every process
# it starts, even where the environment turns it off (``PYTHONDONTWRITEBYTECODE=1``, as on this
# project's CI machines): otherwise each of the ~150 processes the suite starts compiles the
# harness's modules from source again, and each test worker re-runs pytest's assertion rewrite
# of every test module (about 8 CPU-s per worker).  Set before the first test module is imported.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

import pytest  # noqa: E402

from harness.hardware.device import GPU, select_execution_mode  # noqa: E402

# Must run before anything imports triton: turns the interpreter on when there is no GPU.
MODE = select_execution_mode()

#: Modules whose tests go to the workers one by one: each test is long and independent, and
#: the module's fixture (if any: a compile client) is cheap beside them.  Being one-test units,
#: they are handed out last (xdist orders units by size), so they even out the workers' ends.
PER_TEST = ("tests/compile/test_build.py", "tests/kernels/test_igemm_fast.py", "tests/run/test_steps.py")
#: Work units (a module, or a test of :data:`PER_TEST`, by the start of its id) of some 15 s or
#: more on 2 cores, longest first, then the one-test module of 8 s that xdist would hand out
#: last: handed out before all others, wherever xdist would put them (it orders modules by
#: their number of tests), so that none starts while the other worker is finishing.  A stale
#: entry costs only its place.  ``tests/kernels/test_amd_space_compiles.py`` stays later: it
#: compiles a sample of two of the candidate spaces, by then in Triton's cache.
FIRST = ("tests/compile/test_build.py::test_igemm_fast_gfx942_candidate_space", "tests/test_byo.py",
         "tests/hardware/test_scaleout.py", "tests/profilers/test_profiler_pipeline.py",
         "tests/compile/test_build.py::test_design_card_sweep", "tests/faults/test_crash_isolation.py",
         "tests/profilers/test_sim_cli.py", "tests/storage/test_concurrency.py", "tests/faults/test_kill_and_resume.py",
         "tests/profilers/test_ncu_report_file.py", "tests/test_gpu_collection.py")


@pytest.fixture(scope="session")
def compiler(tmp_path_factory):
    """A compile client (harness/compile/client.py) with a report cache of its own, one per
    pytest process: its helper process (the interpreter's compiles run in one) starts once,
    not once per module, and the compile tests share its reports, which are keyed on what
    is compiled."""
    from harness.compile.client import CompileClient

    client = CompileClient(tmp_path_factory.mktemp("compile-cache"))
    yield client
    client.close()


@pytest.fixture(scope="session")
def postgres():
    """A throwaway PostgreSQL cluster (tests/services/postgres.py) for the ``cluster`` tests,
    one per pytest process, stopped at its end."""
    from tests.services.postgres import running_postgres

    with running_postgres() as cluster:
        yield cluster


@pytest.fixture(scope="module")
def postgres_mlflow_server(postgres, tmp_path_factory):
    """Base URL of an ``mlflow server`` over a new database of :func:`postgres`, one per test module."""
    from tests.services.postgres import mlflow_server_on_postgres

    with mlflow_server_on_postgres(postgres, tmp_path_factory.mktemp("mlflow-pg")) as base:
        yield base


def pytest_collection_modifyitems(config, items):
    if MODE == GPU:
        return
    skip = pytest.mark.skip(reason="needs a GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under ``-n``: each test module is one work unit, sent whole to one worker, so that a
    module's fixture (most are real CLI sweeps) runs once, not once in every worker that got
    one of its tests; the modules of :data:`PER_TEST` are spread test by test, the units of
    :data:`FIRST` first.  The fault suite's seeded store is a session fixture: each worker that
    runs fault cases seeds its own (one small sweep), and its end-of-session check covers the
    stores that worker used.  The first unit waits for ``tests.numba_warmup``."""
    from xdist.scheduler import LoadScopeScheduling

    # numba's cache of the simulator filled while the workers collect (tests/numba_warmup.py)
    warmup = subprocess.Popen([sys.executable, "-m", "tests.numba_warmup"], cwd=Path(__file__).parents[1],
                              env={**os.environ, "TRITON_INTERPRET": "1"}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)

    class ModuleScheduling(LoadScopeScheduling):
        first_moved = False

        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return nodeid if path in PER_TEST else path

        def schedule(self) -> None:
            if warmup.returncode is None:   # the first call, once the workers have collected
                try:
                    _, err = warmup.communicate(timeout=300)
                except subprocess.TimeoutExpired:
                    warmup.kill()
                    _, err = warmup.communicate()
                    err = f"no end in 300 s, killed\n{err}"
                if warmup.returncode:   # the tests then compile what they need, as without it
                    print(f"tests.numba_warmup failed (exit {warmup.returncode}):\n{err[-2000:]}", file=sys.stderr)
            super().schedule()

        def _assign_work_unit(self, node) -> None:
            if not self.first_moved:   # the queue is complete at the first assignment
                self.first_moved = True
                ranked = [(rank, scope) for scope in self.workqueue
                          for rank, prefix in enumerate(FIRST) if scope.startswith(prefix)]
                for _, scope in sorted(ranked, reverse=True):
                    self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

    return ModuleScheduling(config, log)
