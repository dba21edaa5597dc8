"""``python -m harness ARGS`` for tests, each run a fork of one warm process.

A CLI process spends about 3 s of CPU importing torch, triton, MLflow, Hydra, numba and
seaborn before its first job; the suite runs some 150 of them.  :func:`run_cli` hands each run
to a server process (one per pytest worker, started on first use) that has imported those
libraries once, under the interpreter (``TRITON_INTERPRET=1``), and started numba's compiler
(:func:`_start_numba`), and forks a child per run.  The child takes the run's working
directory, environment, argv and ``sys.path[0]`` (the working directory, as ``python -m``
sets it), writes its stdout and stderr to files, runs the ``harness`` package as ``__main__``
(what ``python -m harness`` runs), and exits with its status after the interpreter's exit
handlers.  :func:`run_script` runs a script file the same way (``python benchmarks/x.py``:
the script's folder first on its ``sys.path``); :func:`run_clis_together` forks several runs at
once (concurrent sweeps); :func:`start_cli` forks one in a session of its own and returns at
once, for a test that signals its process group mid-run.  The server imports only third-party
modules, none of the project's, so every run executes the checkout's code afresh.

A run's ``PYTHONPATH`` comes after its working directory on its ``sys.path``, as in a real
process, and a ``sitecustomize`` module found there is imported first, as Python's start-up
does; ``tempfile`` takes its folder from the run's ``TMPDIR``, numba its settings from the run's
``NUMBA_*`` variables.  A run whose ``TRITON_INTERPRET`` differs from the server's (read when triton is
imported), or whose ``PYTHONPATH`` holds a preloaded library, starts a real process instead, as
do tests that measure a process (they call ``subprocess`` themselves).

    python -m tests.cli_fork    # the server: one JSON list of runs per line on stdin
"""
from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The third-party modules a CLI run imports (the costly ones), preloaded by the server.
PRELOAD = ("torch", "torch.nn.functional", "numpy", "pandas", "triton", "triton.language", "hydra",
           "hydra.core.hydra_config", "hydra._internal.core_plugins.basic_sweeper",
           "hydra._internal.core_plugins.basic_launcher", "omegaconf", "mlflow", "mlflow.tracking",
           "mlflow.store.tracking.sqlalchemy_store", "mlflow.store.db.utils", "sqlalchemy", "alembic",
           "numba", "matplotlib", "matplotlib.figure", "seaborn", "jinja2", "yaml")


def _server_env() -> dict[str, str]:
    return {**os.environ, "TRITON_INTERPRET": "1", "MLFLOW_DISABLE_TELEMETRY": "true"}


@dataclass(frozen=True)
class _Call:
    """One run: its command line (``python -m MODULE ARGS`` or ``python SCRIPT ARGS``), working
    directory, environment and standard input; with ``tty`` (a terminal's path, such as a
    pseudo-terminal's other end) its standard streams are that terminal instead."""

    cmd: list[str]
    cwd: str | os.PathLike
    env: dict[str, str]
    stdin: str
    tty: str | None = None
    log: str | None = None        # one file for its stdout and stderr (start_cli)
    err_log: str | None = None    # its stderr's own file, where not log (start_cli)


class _Server:
    """The client side: the server process and its request pipe."""

    def __init__(self) -> None:
        self.env = _server_env()
        self.lock = threading.Lock()   # one run at a time on the pipe; a concurrent one starts a process
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.cli_fork"], cwd=ROOT, env=self.env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)

    def fits(self, env: dict[str, str]) -> bool:
        """Whether a run with ``env`` may be a fork of this server (see the module docstring)."""
        tops = {name.split(".")[0] for name in PRELOAD}
        shadows = any((Path(entry) / top).exists() or (Path(entry) / f"{top}.py").exists()
                      for entry in _entries(env.get("PYTHONPATH")) for top in tops)
        return self.proc.poll() is None and env.get("TRITON_INTERPRET") == self.env["TRITON_INTERPRET"] and not shadows

    def run(self, calls: list[_Call], timeout: float | None, text: bool) -> list[subprocess.CompletedProcess]:
        """Fork one child per call, all at once; their results in order (all killed at ``timeout``)."""
        with tempfile.TemporaryDirectory(prefix="cli-fork-") as tmp:
            requests = self.start(calls, Path(tmp))
            return self.finish(calls, requests, timeout, text)

    def start(self, calls: list[_Call], tmp: Path, session: bool = False) -> list[dict]:
        """Fork one child per call (with ``session``: each the leader of a session of its own);
        their requests, each with its child's ``pid``."""
        requests = []
        for i, call in enumerate(calls):
            out, err = (Path(call.tty or own or call.log or tmp / f"{name}{i}")
                        for name, own in (("stdout", None), ("stderr", call.err_log)))
            given = Path(call.tty or tmp / f"stdin{i}")
            if not call.tty:
                given.write_text(call.stdin)
            request = ({"module": call.cmd[2], "argv": call.cmd[3:]} if call.cmd[1] == "-m"  # python -m MODULE ARGS
                       else {"script": call.cmd[1], "argv": call.cmd[2:]})                     # python SCRIPT ARGS
            request.update(cwd=str(Path(call.cwd).resolve()), env=call.env, stdin=str(given), stdout=str(out),
                           stderr=str(err), session=session)
            requests.append(request)
        self.proc.stdin.write((json.dumps(requests) + "\n").encode())
        for request, pid in zip(requests, self._answer()["pids"]):
            request["pid"] = pid
        return requests

    def ended(self, timeout: float | None) -> bool:
        """Whether the children of the last ``start`` have all ended (waits up to ``timeout``)."""
        return bool(select.select([self.proc.stdout], [], [], timeout)[0])

    def finish(self, calls: list[_Call], requests: list[dict], timeout: float | None,
               text: bool) -> list[subprocess.CompletedProcess]:
        """Wait for the children of the last ``start`` (all killed at ``timeout``); their results in order."""
        ready = self.ended(timeout)
        if not ready:
            for request in requests:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(request["pid"], signal.SIGKILL)
        codes = self._answer()["codes"]
        done = [subprocess.CompletedProcess(call.cmd, code, *(_read(Path(request[stream]), text) if not call.tty
                                                              else "" for stream in ("stdout", "stderr")))
                for call, code, request in zip(calls, codes, requests)]
        if not ready:
            raise subprocess.TimeoutExpired(calls[0].cmd, timeout, done[0].stdout, done[0].stderr)
        return done

    def _answer(self) -> dict:
        """The server's next line, read byte by byte (nothing of a later line is buffered here,
        so ``select`` on the pipe tells whether the run has ended)."""
        line = b""
        while not line.endswith(b"\n"):
            byte = os.read(self.proc.stdout.fileno(), 1)
            if not byte:
                raise RuntimeError(f"the CLI fork server died (exit code {self.proc.wait()})")
            line += byte
        return json.loads(line)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


def _read(path: Path, text: bool) -> str | bytes:
    data = path.read_bytes() if path.exists() else b""
    return data.decode("utf-8", errors="replace") if text else data


def _entries(pythonpath: str | None) -> list[str]:
    """A ``PYTHONPATH``'s entries, as Python puts them on ``sys.path``."""
    return [os.path.abspath(p) for p in (pythonpath or "").split(os.pathsep) if p]


_SERVER: list[_Server] = []


def run_cli(args: list[str], cwd: str | os.PathLike, env: dict[str, str], timeout: float | None = None,
            module: str = "harness", text: bool = True, input: str = "",
            tty: str | None = None) -> subprocess.CompletedProcess:
    """``subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=env, input=input,
    capture_output=True, text=text, timeout=timeout)``, run as a fork of the warm server.  With
    ``tty`` (a terminal's path), the run's stdin, stdout and stderr are that terminal: the caller
    reads its output there (the result's stdout and stderr are empty)."""
    return _run([_Call([sys.executable, "-m", module, *args], cwd, env, input, tty)], timeout, text)[0]


def run_clis_together(argss: list[list[str]], cwd: str | os.PathLike, env: dict[str, str],
                      timeout: float | None = None, module: str = "harness") -> list[subprocess.CompletedProcess]:
    """``python -m module ARGS`` for each ``ARGS`` of ``argss``, all started at once (concurrent
    processes, each a fork of the warm server) and waited for; their results in order, as text."""
    return _run([_Call([sys.executable, "-m", module, *args], cwd, env, "") for args in argss], timeout, True)


class StartedCli:
    """A run of :func:`start_cli` as a fork of the warm server, used as its ``subprocess.Popen``
    would be: ``pid`` (the leader of a session of its own), ``poll()``, ``wait(timeout)``,
    ``returncode``.  The server serves no other run until this one is waited for."""

    def __init__(self, server: _Server, call: _Call, tmp: tempfile.TemporaryDirectory) -> None:
        self._server, self._call, self._tmp = server, call, tmp
        self._request, = server.start([call], Path(tmp.name), session=True)
        self.pid: int = self._request["pid"]
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and self._server.ended(0):
            self.wait()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            try:
                self.returncode = self._server.finish([self._call], [self._request], timeout, True)[0].returncode
            finally:
                self._tmp.cleanup()
                self._server.lock.release()
        return self.returncode


def start_cli(args: list[str], cwd: str | os.PathLike, env: dict[str, str], log: str | os.PathLike,
              module: str = "harness", err_log: str | os.PathLike | None = None) -> StartedCli | subprocess.Popen:
    """``subprocess.Popen([sys.executable, "-m", module, *args], cwd=cwd, env=env, stdout=<log>,
    stderr=subprocess.STDOUT, start_new_session=True)`` (with ``err_log``: ``stderr=<err_log>``)
    started as a fork of the warm server (a real process where :func:`run_cli` would start
    one): for tests that signal a run's process group mid-run; wait for it (``wait``) before
    the next run.  Its files are there, empty, when it returns."""
    call = _Call([sys.executable, "-m", module, *args], cwd, env, "", log=str(log),
                 err_log=None if err_log is None else str(err_log))
    for path in {log, err_log or log}:
        Path(path).write_bytes(b"")
    server = _server()
    if not (server.fits(env) and server.lock.acquire(blocking=False)):
        with open(log, "w") as out, open(err_log or os.devnull, "w") as err:
            return subprocess.Popen(call.cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT if err_log is None else err, start_new_session=True)
    try:
        return StartedCli(server, call, tempfile.TemporaryDirectory(prefix="cli-fork-"))
    except BaseException:
        server.lock.release()
        raise

def run_script(script: str | os.PathLike, args: list[str], cwd: str | os.PathLike = ".",
               env: dict[str, str] | None = None, timeout: float | None = None, text: bool = True,
               input: str = "") -> subprocess.CompletedProcess:
    """``subprocess.run([sys.executable, script, *args], ...)`` as :func:`run_cli` runs a module
    (``env``: this process's by default): the script's folder first on its ``sys.path``."""
    call = _Call([sys.executable, str(Path(script).resolve()), *args], cwd, dict(os.environ) if env is None else env,
                 input)
    return _run([call], timeout, text)[0]


def _server() -> _Server:
    """This process's server, started on first use."""
    if not _SERVER:
        _SERVER.append(_Server())
        atexit.register(_SERVER[0].close)
    return _SERVER[0]


def _run(calls: list[_Call], timeout: float | None, text: bool) -> list[subprocess.CompletedProcess]:
    server = _server()
    if not (all(server.fits(call.env) for call in calls) and server.lock.acquire(blocking=False)):
        return _processes(calls, timeout, text)
    try:
        return server.run(calls, timeout, text)
    finally:
        server.lock.release()


def _processes(calls: list[_Call], timeout: float | None, text: bool) -> list[subprocess.CompletedProcess]:
    """The calls as real processes, all started at once."""
    procs = [_popen(call, text) for call in calls]
    done = []
    for call, proc in zip(calls, procs):
        try:
            out, err = proc.communicate(None if call.tty else call.stdin if text else call.stdin.encode(),
                                        timeout=timeout)
        except subprocess.TimeoutExpired:
            for other in procs:
                other.kill()
                other.communicate()
            raise
        done.append(subprocess.CompletedProcess(call.cmd, proc.returncode, out or "", err or ""))
    return done


def _popen(call: _Call, text: bool) -> subprocess.Popen:
    if call.tty:
        with open(call.tty, "r+b", buffering=0) as terminal:
            return subprocess.Popen(call.cmd, cwd=call.cwd, env=call.env, stdin=terminal, stdout=terminal,
                                    stderr=terminal)
    return subprocess.Popen(call.cmd, cwd=call.cwd, env=call.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=text)


# ---------------------------------------------------------------------------------------------
# The server.

def _child(request: dict, base_path: list[str]) -> None:
    """In the forked child: become ``python -m MODULE ARGV`` (or ``python SCRIPT ARGV``) run in
    ``cwd``, its ``sys.path`` the working directory (the script's folder), the run's
    ``PYTHONPATH`` and ``base_path``; never returns."""
    code = 1
    try:
        if request.get("session"):
            os.setsid()
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        opened: dict[tuple[str, int], int] = {}   # a file named for stdout and stderr both is opened once
        for fd, path, flags in ((0, request["stdin"], os.O_RDONLY), (1, request["stdout"], os.O_WRONLY | os.O_CREAT),
                                (2, request["stderr"], os.O_WRONLY | os.O_CREAT)):
            if (path, flags) not in opened:
                opened[path, flags] = os.open(path, flags)
            os.dup2(opened[path, flags], fd)
        import io
        import random
        import runpy

        random.seed()
        # the encodings and error handlers the server's own streams got from the same environment
        sys.stdin, sys.stdout, sys.stderr = (
            io.TextIOWrapper(io.FileIO(fd, mode, closefd=False), encoding=like.encoding, errors=like.errors,
                             write_through=mode == "w")
            for fd, mode, like in ((0, "r", sys.__stdin__), (1, "w", sys.__stdout__), (2, "w", sys.__stderr__)))
        script = request.get("script")
        sys.path[:] = [os.path.dirname(script) if script else os.getcwd(), *_entries(request["env"].get("PYTHONPATH")),
                       *base_path]
        sys.argv = [script or "-m", *request["argv"]]
        tempfile.tempdir = None   # as in a new process: from this run's TMPDIR
        import numba

        numba.config.reload_config()   # its NUMBA_* settings from this run's environment
        _sitecustomize()
        code = 0
        try:
            if script:
                runpy.run_path(script, run_name="__main__")
            else:
                runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if exc.code is not None and not isinstance(exc.code, int):
                print(exc.code, file=sys.stderr)
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
        threading._shutdown()    # as at an interpreter's exit: wait for its non-daemon threads
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _sitecustomize() -> None:
    """Import the ``sitecustomize`` module this run's ``sys.path`` finds (one on its
    ``PYTHONPATH``, say), as Python's start-up does, unless it is the one the server imported."""
    import importlib
    from importlib.machinery import PathFinder

    found = PathFinder.find_spec("sitecustomize", sys.path)
    loaded = sys.modules.get("sitecustomize")
    if found is None or (loaded is not None and getattr(loaded, "__file__", None) == found.origin):
        return
    sys.modules.pop("sitecustomize", None)
    importlib.import_module("sitecustomize")


def _start_numba() -> None:
    """numba's compiler started (LLVM and its target machine, about 0.4 s of CPU), as a run's
    first jitted call would start it, by compiling a function of no project's (not cached):
    a run that simulates then only loads the simulator's functions from numba's disk cache."""
    import numba
    import numpy as np

    numba.njit(lambda values: values.sum())(np.arange(3))


def serve() -> None:
    import importlib

    own = set(_entries(os.environ.get("PYTHONPATH")))
    base_path = [p for p in sys.path[1:] if os.path.abspath(p) not in own]   # after cwd and PYTHONPATH
    for name in PRELOAD:
        importlib.import_module(name)
    _start_numba()
    for line in sys.stdin:   # a list of runs, started together
        pids = []
        for request in json.loads(line):
            pid = os.fork()
            if pid == 0:
                _child(request, base_path)
            pids.append(pid)
        sys.stdout.write(json.dumps({"pids": pids}) + "\n")
        sys.stdout.flush()
        codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
        sys.stdout.write(json.dumps({"codes": codes}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve()
