"""``python -m harness ARGS`` for tests, each run a fork of one warm process.

A CLI process spends about 3 s of CPU importing torch, triton, MLflow, Hydra, numba and
seaborn before its first job; the suite runs some 150 of them.  :func:`run_cli` hands each run
to a server process (one per pytest worker, started on first use) that has imported those
libraries once, under the interpreter (``TRITON_INTERPRET=1``), and forks a child per run.  The
child takes the run's working directory, environment, argv and ``sys.path[0]`` (the working
directory, as ``python -m`` sets it), writes its stdout and stderr to files, runs the
``harness`` package as ``__main__`` (what ``python -m harness`` runs), and exits with its
status after the interpreter's exit handlers.  The server imports only third-party modules,
none of the project's, so every run executes the checkout's code afresh.

A run whose environment differs from the server's in what is read at import time
(``TRITON_INTERPRET``, ``PYTHONPATH``) starts a real process instead, as do tests that measure
a process or signal it (they call ``subprocess`` themselves).

    python -m tests.cli_fork    # the server: one JSON request per line on stdin
"""
from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Environment variables read when the preloaded modules are imported: a run that sets them
#: otherwise than the server gets a process of its own.
IMPORT_TIME_ENV = ("TRITON_INTERPRET", "PYTHONPATH")
#: The third-party modules a CLI run imports (the costly ones), preloaded by the server.
PRELOAD = ("torch", "torch.nn.functional", "numpy", "pandas", "triton", "triton.language", "hydra",
           "hydra.core.hydra_config", "hydra._internal.core_plugins.basic_sweeper",
           "hydra._internal.core_plugins.basic_launcher", "omegaconf", "mlflow", "mlflow.tracking",
           "mlflow.store.tracking.sqlalchemy_store", "mlflow.store.db.utils", "sqlalchemy", "alembic",
           "numba", "matplotlib", "matplotlib.figure", "seaborn", "jinja2", "yaml")


def _server_env() -> dict[str, str]:
    return {**os.environ, "TRITON_INTERPRET": "1", "MLFLOW_DISABLE_TELEMETRY": "true"}


class _Server:
    """The client side: the server process and its request pipe."""

    def __init__(self) -> None:
        self.env = _server_env()
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.cli_fork"], cwd=ROOT, env=self.env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def fits(self, env: dict[str, str]) -> bool:
        return self.proc.poll() is None and all(env.get(k) == self.env.get(k) for k in IMPORT_TIME_ENV)

    def run(self, cmd: list[str], cwd: Path, env: dict[str, str], timeout: float | None) -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory(prefix="cli-fork-") as tmp:
            out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
            request = {"argv": cmd[3:], "cwd": str(Path(cwd).resolve()), "env": env, "stdout": str(out),
                       "stderr": str(err)}
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            pid = json.loads(self.proc.stdout.readline())["pid"]
            ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
            if not ready:
                os.kill(pid, signal.SIGKILL)
            code = json.loads(self.proc.stdout.readline())["code"]
            stdout, stderr = _read(out), _read(err)
        if not ready:
            raise subprocess.TimeoutExpired(cmd, timeout, stdout, stderr)
        return subprocess.CompletedProcess(cmd, code, stdout, stderr)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace") if path.exists() else ""


_SERVER: list[_Server] = []


def run_cli(args: list[str], cwd: str | os.PathLike, env: dict[str, str], timeout: float | None = None
            ) -> subprocess.CompletedProcess:
    """``subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, env=env,
    capture_output=True, text=True, timeout=timeout)``, run as a fork of the warm server."""
    cmd = [sys.executable, "-m", "harness", *args]
    if not _SERVER:
        _SERVER.append(_Server())
        atexit.register(_SERVER[0].close)
    if not _SERVER[0].fits(env):
        return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    return _SERVER[0].run(cmd, Path(cwd), env, timeout)


# ---------------------------------------------------------------------------------------------
# The server.

def _child(request: dict) -> None:
    """In the forked child: become ``python -m harness ARGV`` run in ``cwd``; never returns."""
    code = 1
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, request["stdout"], os.O_WRONLY | os.O_CREAT),
                                (2, request["stderr"], os.O_WRONLY | os.O_CREAT)):
            os.dup2(os.open(path, flags), fd)
        import io
        import random
        import runpy

        random.seed()
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", write_through=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
                                      write_through=True)
        sys.path[0] = os.getcwd()
        sys.argv = ["-m", *request["argv"]]
        code = 0
        try:
            runpy.run_module("harness", run_name="__main__", alter_sys=True)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if exc.code is not None and not isinstance(exc.code, int):
                print(exc.code, file=sys.stderr)
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
        import threading

        threading._shutdown()    # as at an interpreter's exit: wait for its non-daemon threads
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def serve() -> None:
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)
        sys.stdout.write(json.dumps({"pid": pid}) + "\n")
        sys.stdout.flush()
        _, status = os.waitpid(pid, 0)
        sys.stdout.write(json.dumps({"code": os.waitstatus_to_exitcode(status)}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve()
