"""The kernel and the swizzle a JobSpec names: a built-in by name, a formula, or the
user's own code by import path ("bring your own").

A user kernel is a :class:`kernels.base.ConvKernel` subclass named by ``_target_`` in a
``kernel`` config of the user's own ``--config-dir``; a user swizzle is a ``@triton.jit``
remap named by ``swizzle.fn``.  An import path is ``package.module:name`` (or
``package.module.name``), resolved with :func:`hydra.utils.get_object` from the launch
directory, PYTHONPATH or an installed package.  Importing it runs the user's module: that
is the user's own code, by the user's choice (unlike a formula, which is never run as
Python).  Jobs carry the path, not the object, so that an isolated worker process, which
inherits the launching process's ``sys.path``, rebuilds the same object.
"""
from __future__ import annotations

import functools
import logging
import os
from typing import TYPE_CHECKING

from kernels import get_kernel
from kernels.base import ConvKernel
from swizzles import resolve_swizzle

if TYPE_CHECKING:
    from harness.job.spec import JobSpec

#: What a user swizzle must look like, for error messages.
REMAP_SIGNATURE = "remap(pid, num_pid_m, num_pid_n, NUM_XCDS: tl.constexpr, GROUP_SIZE: tl.constexpr) -> new_pid"
_WHERE = "importable from the launch directory, PYTHONPATH or an installed package"


def spec_kernel(spec: "JobSpec") -> ConvKernel:
    """The job's kernel family: the user's class (``spec.kernel_target``) or a built-in."""
    if spec.kernel_target is not None:
        return load_kernel(spec.kernel_target, spec.kernel)
    return get_kernel(spec.kernel)


def spec_remap(spec: "JobSpec"):
    """The job's jit remap: the user's function (``spec.swizzle_fn``), a compiled formula or a
    built-in (:func:`swizzles.resolve_swizzle`)."""
    if spec.swizzle_fn is not None:
        return load_remap(spec.swizzle_fn)
    return resolve_swizzle(spec.swizzle, spec.swizzle_formula)


def locate(path: str, what: str, expected: str) -> object:
    """The object at import path ``path`` (``pkg.mod:name`` or ``pkg.mod.name``), or a one-line
    ``ValueError`` naming ``what`` (the config key), the path, why and what is ``expected``."""
    if not isinstance(path, str) or not path.strip() or path.count(":") > 1:
        raise ValueError(f"{what}={path!r} is not an import path; expected {expected}, {_WHERE}")
    from hydra.utils import get_object   # here: workers of built-in jobs need not import hydra

    module, _, attributes = path.strip().partition(":")
    hydra_log = logging.getLogger("hydra.utils")
    quiet, hydra_log.disabled = hydra_log.disabled, True   # it would log the error raised below
    try:
        _import_ends_process(module)
        obj = get_object(module)
        for name in attributes.split(".") if attributes else ():
            obj = getattr(obj, name)
    except (Exception, SystemExit) as exc:   # ImportError, AttributeError, or whatever the user's module raised
        cause = exc.__cause__ or exc
        reason = " ".join(f"{type(cause).__name__}: {cause}".split())
        raise ValueError(f"{what}={path!r} could not be imported ({reason}); expected {expected}, {_WHERE}") from None
    finally:
        hydra_log.disabled = quiet
    return obj


#: Environment variable: a JSON object ``{module: where its top-level package was found}`` of
#: the modules this process (or the one that started it) probed without the probe's process
#: ending; the processes it starts (an isolated job worker, a profiler's worker) inherit it and
#: do not probe a module found at the same place again.
PROBED_ENV = "SWIZZLEBENCH_PROBED_MODULES"


#: How long, in s, a probe may import a module before it counts as a hang (TimeoutExpired).
PROBE_TIMEOUT_S = 600


@functools.lru_cache(maxsize=None)
def _import_ends_process(module: str) -> None:
    """Import ``module`` first in a child process (same ``sys.path``): a module that ends its
    process at import (``os._exit``, a crash) would end the job's process with its run still
    RUNNING.  Raises ImportError saying so; an exception or ``sys.exit`` is left to the import
    in this process, which reports it.  Skipped where ``PROBED_ENV`` says that an ancestor
    process probed the module found at the same place, and for a module this process has
    imported already (importing it again runs none of its code)."""
    import json
    import sys

    if module in sys.modules:
        return
    where = _found_at(module)
    try:
        probed = dict(json.loads(os.environ.get(PROBED_ENV) or "{}"))
    except (ValueError, TypeError):   # not this process's writing: probe afresh
        probed = {}
    if where is not None and probed.get(module) == where:
        return
    status = _probe(module)
    if status != 0:
        raise ImportError(f"importing {module} ended its process with exit status {status} "
                          "(os._exit or a crash at import)")
    if where is not None:
        os.environ[PROBED_ENV] = json.dumps({**probed, module: where})


def _probe(module: str) -> int:
    """The exit status of a child process that imports ``module`` (0 when the import
    returns or raises): a fork of this process where it runs no other thread and has not
    started CUDA (a forked child cannot use a CUDA context its parent made, so a module that
    uses the GPU at import would fail there and not in the job), else a fresh interpreter."""
    import sys
    import threading

    torch = sys.modules.get("torch")
    cuda_started = torch is not None and torch.cuda.is_initialized()
    forkable = hasattr(os, "fork") and threading.active_count() == 1 and not cuda_started
    return _probe_forked(module) if forkable else _probe_fresh(module)


def _probe_fresh(module: str) -> int:
    """:func:`_probe` in a new interpreter with this process's ``sys.path``: it imports all
    that the module imports (about a second of CPU when that is torch)."""
    import subprocess
    import sys

    probe = "import importlib, sys\ntry:\n    importlib.import_module(sys.argv[1])\nexcept BaseException:\n    pass"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p or os.getcwd() for p in sys.path)}
    return subprocess.run([sys.executable, "-c", probe, module], env=env, capture_output=True,
                          timeout=PROBE_TIMEOUT_S).returncode


def _probe_forked(module: str) -> int:
    """:func:`_probe` in a fork of this (single-threaded) process: what it has imported
    already (torch, triton) is not imported again.  The child's output goes to /dev/null and it
    leaves by ``os._exit`` (none of this process's exit handlers or buffered output); torch,
    if imported, runs it on one thread (OpenMP's thread pool does not survive a fork)."""
    import importlib
    import signal
    import subprocess
    import sys
    import time

    pid = os.fork()
    if pid == 0:
        try:
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            sys.stdout = sys.stderr = open(os.devnull, "w")
            if "torch" in sys.modules:
                sys.modules["torch"].set_num_threads(1)
            importlib.import_module(module)
        except BaseException:
            pass
        finally:
            os._exit(0)
    deadline = time.monotonic() + PROBE_TIMEOUT_S
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise subprocess.TimeoutExpired(f"import {module}", PROBE_TIMEOUT_S)
        time.sleep(0.01)


def _found_at(module: str) -> str | None:
    """The real path of the file or folder of ``module``'s top-level package on ``sys.path``,
    found without running any of its code; None where the path finder does not find it
    (a package installed through an import hook, say)."""
    import sys
    from importlib.machinery import PathFinder

    spec = PathFinder.find_spec(module.partition(".")[0], sys.path)
    if spec is None:
        return None
    places = [spec.origin] if spec.has_location and spec.origin else list(spec.submodule_search_locations or ())
    return os.pathsep.join(os.path.realpath(place) for place in places) or None


@functools.lru_cache(maxsize=None)
def load_kernel(path: str, name: str) -> ConvKernel:
    """An instance of the user's kernel class at ``path`` (constructed with no arguments),
    called ``name`` (the config's ``kernel.name``: run names and messages use it)."""
    expected = "a subclass of kernels.base.ConvKernel, e.g. 'mypkg.kernels:MyConv'"
    cls = locate(path, "kernel._target_", expected)
    if not (isinstance(cls, type) and issubclass(cls, ConvKernel)):
        got = f"class {cls.__name__}" if isinstance(cls, type) else f"of type {type(cls).__name__}"
        raise ValueError(f"kernel._target_={path!r} is {got}, not a ConvKernel subclass; expected {expected}")
    missing = sorted(getattr(cls, "__abstractmethods__", ()))
    absent = [a for a in ("jit_kernel", "tile_names") if not hasattr(cls, a)]
    if missing or absent:
        raise ValueError(f"kernel._target_={path!r}: class {cls.__name__} lacks "
                         f"{', '.join(missing + absent)}; a ConvKernel must define tile_names, jit_kernel, "
                         "tile_grid, to_layout and launch (kernels/base.py)")
    kernel = cls()
    kernel.name = name
    return kernel


@functools.lru_cache(maxsize=None)
def load_remap(path: str):
    """The user's ``@triton.jit`` remap at ``path``, checked to be a jit function with the
    swizzle signature (5 parameters).  Whether it is a permutation is the job's gate."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    expected = f"a @triton.jit function {REMAP_SIGNATURE}, e.g. 'mypkg.remaps:hilbert'"
    fn = locate(path, "swizzle.fn", expected)
    if not isinstance(fn, (JITFunction, InterpretedFunction)):
        raise ValueError(f"swizzle.fn={path!r} is of type {type(fn).__name__}, not a @triton.jit function; "
                         f"expected {expected}")
    if len(fn.arg_names) != 5:
        raise ValueError(f"swizzle.fn={path!r} takes {len(fn.arg_names)} parameters ({', '.join(fn.arg_names)}); "
                         f"expected {expected}")
    return fn
