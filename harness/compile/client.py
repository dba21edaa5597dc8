"""How a job reaches the compile stage (:mod:`harness.compile.build`): a disk cache of
compile reports, keyed on what the compiled launch depends on, and, under the Triton
interpreter (the CPU path), one helper process that compiles.

Under ``TRITON_INTERPRET=1`` every jit kernel is an interpreted function, which
``triton.compile`` cannot take; :class:`CompileClient` then starts
:mod:`harness.compile.worker` without that variable, once per process, and talks
to it in JSON lines.  On a GPU (no interpreter) the compile runs in the job's own process.
Triton caches the binaries itself (``~/.triton/cache``); this cache holds the reports, so a
job whose config was compiled before costs a file read.
"""
from __future__ import annotations

import atexit
import dataclasses
import hashlib
import inspect
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.cache_home import cache_root
from harness.compile.build import CompileFailed, CompileReport, compile_spec


@dataclass(frozen=True)
class CompileOptions:
    """The compile stage's settings (config group ``compile`` and the target)."""

    arch: str | None = None          # the target's arch, e.g. "gfx942"; None: no compile stage
    only: bool = False               # compile.only: compile the sweep for the target, run nothing
    cache_dir: str | None = None     # report cache (default_cache_dir())
    target: str = ""                 # the target's name, e.g. "mi300x" (for messages)
    compute_units: int = 0           # the target's CUs / SMs (tune mode's candidate space)


#: Bump when a report's fields or their meaning change: old cache entries are then ignored.
REPORT_VERSION = 3


def default_cache_dir() -> Path:
    """``compile`` under :func:`harness.cache_home.cache_root`."""
    return cache_root() / "compile"


def cache_key(spec, arch: str) -> str:
    """SHA-256 of what the compiled launch depends on: the spec's kernel, swizzle, config,
    shape and layout (not its seed, profiler, baseline or names), the target arch, the
    Triton version, and the source of the ``kernels`` and ``swizzles`` packages."""
    import triton

    fields = {k: v for k, v in spec.to_dict().items()
              if k not in ("seed", "profiler", "baseline", "baseline_formula", "target", "shape_preset", "tune")}
    fields["shape"] = {k: v for k, v in fields["shape"].items() if k != "name"}
    blob = json.dumps({"spec": fields, "arch": arch, "triton": triton.__version__, "v": REPORT_VERSION,
                       "source": _source_hash()}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _source_hash() -> str:
    """SHA-256 of every module of the ``kernels`` and ``swizzles`` packages (what is compiled)."""
    import kernels
    import swizzles

    digest = hashlib.sha256()
    for pkg in (kernels, swizzles):
        for path in sorted(Path(inspect.getfile(pkg)).parent.glob("*.py")):
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


class CompileClient:
    """Compiles specs for a target: from the report cache, in this process, or (under the
    Triton interpreter) in one helper process kept for the life of this one."""

    def __init__(self, cache_dir: str | os.PathLike | None = None):
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self._worker: subprocess.Popen | None = None
        self._stderr = None

    def compile(self, spec, arch: str) -> CompileReport:
        """The report of ``spec`` compiled for ``arch``; raises CompileFailed.  User kernels
        (``spec.kernel_target``) are compiled afresh every time: their source is not hashed."""
        key = cache_key(spec, arch) if spec.kernel_target is None else None
        path = self.cache_dir / f"{key}.json" if key else None
        if path is not None:
            try:
                entry = json.loads(path.read_text())
            except (OSError, ValueError):
                entry = None
            if entry is not None:
                if "error" in entry:
                    raise CompileFailed(entry["error"])
                return dataclasses.replace(CompileReport.from_dict(entry), seconds=0.0, cached=True)
        try:
            report = self._compile_here(spec, arch) if not _interpreting() else self._compile_in_worker(spec, arch)
        except CompileFailed as exc:
            self._store(path, {"error": str(exc)})
            raise
        self._store(path, report.to_dict())
        return report

    def _store(self, path: Path | None, entry: dict) -> None:
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(entry))
        os.replace(tmp, path)    # atomic: concurrent jobs never read half a file

    @staticmethod
    def _compile_here(spec, arch: str) -> CompileReport:
        return compile_spec(spec, arch)

    def _compile_in_worker(self, spec, arch: str) -> CompileReport:
        if self._worker is None or self._worker.poll() is not None:
            self._start_worker()
        request = json.dumps({"spec": spec.to_dict(), "arch": arch})
        try:
            self._worker.stdin.write(request + "\n")
            self._worker.stdin.flush()
            line = self._worker.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        except BaseException:   # interrupted (harness.run.interrupt): its answer is not wanted
            self._worker.kill()
            self._worker.wait()
            self._worker = None
            raise
        if not line:
            code = self._worker.wait()
            self._worker = None
            raise CompileFailed(f"the compile worker process died (exit code {code}): {self._worker_stderr()}")
        reply = json.loads(line)
        if "error" in reply:
            raise CompileFailed(reply["error"])
        return CompileReport.from_dict(reply["report"])

    def _start_worker(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p] + [env.get("PYTHONPATH", "")])
        self._stderr = tempfile.TemporaryFile(mode="w+")
        self._worker = subprocess.Popen([sys.executable, "-m", "harness.compile.worker"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                        text=True, env=env)

    def _worker_stderr(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        lines = [line for line in self._stderr.read().splitlines() if line.strip()]
        return " | ".join(lines[-5:])[-800:]

    def close(self) -> None:
        if self._worker is not None and self._worker.poll() is None:
            self._worker.stdin.close()
            try:
                self._worker.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._worker.kill()
        self._worker = None


_CLIENTS: dict[str, CompileClient] = {}


def client(cache_dir: str | None = None) -> CompileClient:
    """This process's client for ``cache_dir``: one helper process at most, closed at exit."""
    key = str(cache_dir)
    if key not in _CLIENTS:
        if not _CLIENTS:
            atexit.register(lambda: [c.close() for c in _CLIENTS.values()])
        _CLIENTS[key] = CompileClient(cache_dir)
    return _CLIENTS[key]


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"
