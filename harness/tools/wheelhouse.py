"""Prepare a wheelhouse for an offline GPU node, and install swizzlebench from it.

The GPU nodes run a CUDA image (CPython 3.12, x86_64) that already has torch,
triton and the scientific stack, but not hydra-core / omegaconf / antlr4 /
mlflow and mlflow's own dependencies, and they cannot reach the internet.  So:

On a machine with internet (any Python >= 3.10, any OS with pip):

    python -m harness.tools.wheelhouse build --python-version 3.12 \\
        --platform manylinux_2_28_x86_64 --dest wheelhouse

On the GPU node (with the node's interpreter, from the repository root):

    /opt/torch/.venv/bin/python3 -m harness.tools.wheelhouse install --wheelhouse wheelhouse
    # or, when site-packages is read-only:
    /opt/torch/.venv/bin/python3 -m harness.tools.wheelhouse install --wheelhouse wheelhouse \\
        --target .pydeps        # then: export PYTHONPATH=$PWD/.pydeps

How ``build`` works:

1. read the runtime dependencies from ``pyproject.toml`` ([project.dependencies]);
2. build the sdist-only dependencies (:data:`SDIST_ONLY`, e.g. antlr4-python3-runtime)
   into wheels -- they are pure Python, so the wheel fits any platform -- and
   build swizzlebench's own wheel from a clean copy of the project;
3. ``pip download --only-binary=:all: --python-version ... --platform ...`` the
   dependencies with full resolution for the *target* interpreter, with the
   locally built wheels on ``--find-links`` (pip would refuse the sdists);
4. keep only what is reachable from swizzlebench's requirements without passing
   through an excluded package (the heavy :data:`ALWAYS_EXCLUDE` ones and the
   ones the GPU image already has, :data:`GPU_IMAGE_PRESENT`): a package needed
   only by, say, matplotlib is on the image together with matplotlib;
5. check one file per package and that every wheel's tags fit the target, copy
   them to ``--dest``, and write ``MANIFEST.txt`` (name, version, size; plus the
   requirements the wheelhouse expects the node to satisfy already, which
   ``install`` checks before touching anything).

What plain pip does, and what this module adds (measured 2026-11-23 with pip 23.2.1 on
the CPU machine, against its local indexes; no internet there):

* ``pip download --only-binary=:all: --platform manylinux_2_28_x86_64 --python-version 3.12
  -d DIR "hydra-core>=1.3,<1.4"`` fails (ResolutionImpossible, 2.5 s): omegaconf needs
  antlr4-python3-runtime 4.9.*, published only as an sdist, and ``--platform`` requires
  ``--only-binary``.  After ``pip wheel --no-deps antlr4-python3-runtime==4.9.3 -w built``
  (pure Python, 1 wheel) the same download with ``--find-links built`` succeeds (5 wheels).
  So pip lacks step 2: building the sdist-only dependencies for another platform.
* pip has no way to leave out what the node already has: ``pip download`` of the
  dependencies resolves torch and triton too (gigabytes, with nvidia-*), and
  ``--constraint`` can pin but not exclude.  Steps 4 and ``--exclude-present-file`` are
  what pip lacks here (the wheelhouse is 36 MB, 51 wheels, instead of several GB).
* ``pip install --no-index --find-links wheelhouse swizzlebench`` needs nothing more on a
  node with a writable site-packages (the node's torch satisfies ``torch>=2.6``).  With
  ``--target`` (read-only site-packages) pip ignores what is installed and fails to resolve
  torch from the wheelhouse (measured: ResolutionImpossible, 0.8 s), so every wheel is
  installed ``--no-deps``, as benchmarks/gpu_setup.sh does, and nothing checks that the
  node has the rest: ``install``'s pre-flight check (MANIFEST's "expects on the node") and
  its import test are what pip lacks there.
* The full dependency set (mlflow 3 for cp312 or cp311) could not be resolved from this
  machine's local indexes (ResolutionImpossible after 32 s / 15 s): incomplete mirrors, not
  pip; the build itself needs an index with the whole tree (PyPI).

This module must stay importable on the bare GPU image: standard library plus
``packaging`` (falling back on pip's vendored copy) only.

Length: the offline-install tool for a GPU node with no internet: what pip does not do
(source-only dependencies built as wheels, packages the GPU image already has left out,
checking a --target install against the node) is the bulk of it; see above.
"""
from __future__ import annotations

import argparse
import email.parser
import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

try:
    from packaging.markers import Marker
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.specifiers import SpecifierSet
    from packaging.tags import Tag, compatible_tags, cpython_tags, sys_tags
    from packaging.utils import canonicalize_name, parse_wheel_filename
    from packaging.version import InvalidVersion, Version
except ImportError:  # pragma: no cover - bare interpreter that only has pip
    from pip._vendor.packaging.markers import Marker  # type: ignore[no-redef]
    from pip._vendor.packaging.requirements import InvalidRequirement, Requirement  # type: ignore[no-redef]
    from pip._vendor.packaging.specifiers import SpecifierSet  # type: ignore[no-redef]
    from pip._vendor.packaging.tags import Tag, compatible_tags, cpython_tags, sys_tags  # type: ignore[no-redef]
    from pip._vendor.packaging.utils import canonicalize_name, parse_wheel_filename  # type: ignore[no-redef]
    from pip._vendor.packaging.version import InvalidVersion, Version  # type: ignore[no-redef]

PROJECT_ROOT = Path(__file__).resolve().parents[1]
PROJECT_NAME = "swizzlebench"
MANIFEST_NAME = "MANIFEST.txt"

#: Never put into the wheelhouse (gigabytes, CUDA-specific; the GPU image has them).
#: fnmatch patterns over canonical names. ``--keep NAME`` overrides.
ALWAYS_EXCLUDE: tuple[str, ...] = (
    "torch", "torchvision", "torchaudio", "triton", "pytorch-triton", "nvidia-*",
)

#: Packages the GPU image (torch 2.11 / triton 3.6, CPython 3.12) already has, so
#: the wheelhouse leaves them out by default: the scientific stack swizzlebench
#: names, torch's own dependencies (present wherever torch is), and the common
#: base packages.  Their dependencies need no listing: anything reachable only
#: through an excluded package is left out too.  Replace this list with the real
#: one via ``--exclude-present-file`` (``pip list --format=freeze`` of the image;
#: its versions then also pin the resolution) or ``--exclude a,b,c``; add to it with
#: ``--also-exclude a,b``; force one package back in with ``--keep NAME``.  Listing a package that the image lacks
#: makes ``install`` fail its pre-flight check, with the name, so err on the short side.
GPU_IMAGE_PRESENT: tuple[str, ...] = (
    # named by swizzlebench / the brief
    "numpy", "pandas", "seaborn", "matplotlib", "scipy", "pillow", "pyyaml", "requests",
    # torch's own requirements
    "filelock", "fsspec", "jinja2", "markupsafe", "networkx", "sympy", "mpmath",
    "typing-extensions", "setuptools",
    # matplotlib's / pandas' / requests' requirements
    "contourpy", "cycler", "fonttools", "kiwisolver", "pyparsing", "packaging",
    "python-dateutil", "pytz", "tzdata", "six",
    "certifi", "charset-normalizer", "idna", "urllib3",
    # tooling
    "pip", "wheel",
    # also on the lent H100/H200 image (device tool's KINDS.md, read 2026-11-17): leaving
    # them out keeps the wheelhouse near 35 MB instead of 164 MB (pyarrow, llvmlite)
    "pyarrow", "numba", "llvmlite", "scikit-learn", "joblib", "threadpoolctl", "protobuf",
    "attrs", "click", "cloudpickle", "aiohttp", "aiohappyeyeballs", "aiosignal", "frozenlist",
    "multidict", "propcache", "yarl", "anyio", "h11", "werkzeug", "zipp", "narwhals",
    "annotated-doc", "psutil", "rich", "pygments", "tqdm", "regex",
)

#: Dependencies published only as an sdist: built here with ``pip wheel --no-deps``.
#: Must be pure Python (checked), so the wheel serves any target platform.  Others
#: that turn up are detected from pip's error and built the same way.
SDIST_ONLY: dict[str, str] = {"antlr4-python3-runtime": "4.9.3"}

#: Imported after ``install`` to prove the wheelhouse works.
VERIFY_IMPORTS: tuple[str, ...] = ("hydra", "omegaconf", "mlflow", "swizzlebench_conf")

#: Not copied when building swizzlebench's own wheel from a clean copy of the tree.
_COPY_IGNORE = {
    ".git", ".venv", "venv", "build", "dist", "__pycache__", ".pytest_cache", ".whl",
    "wheelhouse", "mlruns", "mlflow.db", "outputs", "multirun", "shared", ".ci",
}

_LEGACY_MANYLINUX = {"manylinux2014": (2, 17), "manylinux2010": (2, 12), "manylinux1": (2, 5)}
_LEGACY_ALIAS = {v: k for k, v in _LEGACY_MANYLINUX.items()}


class WheelhouseError(RuntimeError):
    """A problem the user must fix; printed without a traceback."""


def log(msg: str) -> None:
    print(f"[wheelhouse] {msg}", flush=True)


def run_command(cmd: Sequence[str], **kwargs) -> subprocess.CompletedProcess:
    """The one place that runs subprocesses (tests replace it)."""
    return subprocess.run(list(cmd), **kwargs)


def _run_checked(cmd: Sequence[str], what: str, verbose: bool = False, **kwargs) -> subprocess.CompletedProcess:
    log(f"{what}: {' '.join(cmd)}")
    proc = run_command(cmd, capture_output=True, text=True, **kwargs)
    output = (proc.stdout or "") + (proc.stderr or "")
    if verbose and output:
        print(output, end="" if output.endswith("\n") else "\n")
    if proc.returncode != 0:
        raise WheelhouseError(f"{what} failed (exit {proc.returncode}):\n{_tail(output)}")
    return proc


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


# --------------------------------------------------------------------------- inputs

def read_dependencies(pyproject: Path) -> list[str]:
    """``[project.dependencies]`` of a pyproject.toml, validated as PEP 508 requirements."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        data = tomllib.loads(Path(pyproject).read_text())
    except FileNotFoundError:
        raise WheelhouseError(f"{pyproject} not found") from None
    deps = data.get("project", {}).get("dependencies", [])
    for dep in deps:
        try:
            Requirement(dep)
        except InvalidRequirement as exc:
            raise WheelhouseError(f"{pyproject}: bad dependency {dep!r}: {exc}") from None
    return list(deps)


def read_project_name(pyproject: Path) -> str:
    try:
        import tomllib
    except ModuleNotFoundError:
        import tomli as tomllib  # type: ignore[no-redef]
    return canonicalize_name(tomllib.loads(Path(pyproject).read_text())["project"]["name"])


_FREEZE_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*(?:(===?)\s*(\S+)|@\s*\S+|\s+(\S+))?\s*$")


def parse_present_file(path: Path) -> dict[str, str | None]:
    """Names (and versions where known) from ``pip freeze`` / ``pip list`` output or a plain name list.

    Accepts ``name==1.2``, ``name @ file:///...``, ``-e ...#egg=name``, ``pip list``'s
    two-column table, bare names; ``#`` comments and blank lines are ignored.
    """
    present: dict[str, str | None] = {}
    for raw in Path(path).read_text().splitlines():
        line = raw.split("#", 1)[0].strip() if not raw.lstrip().startswith("-e") else raw.strip()
        if not line or set(line) <= set("- "):
            continue
        if line.startswith("-e"):
            m = re.search(r"#egg=([A-Za-z0-9._-]+)", line)
            if m:
                present[canonicalize_name(m.group(1))] = None
            continue
        m = _FREEZE_LINE.match(line)
        if not m:
            raise WheelhouseError(f"{path}: cannot read line {raw!r}")
        name = m.group(1)
        if name.lower() == "package" and m.group(5) and m.group(5).lower() == "version":
            continue  # pip list header
        version = m.group(4) or m.group(5)
        present[canonicalize_name(name)] = version
    return present


@dataclass(frozen=True)
class Exclusions:
    """Which packages stay out of the wheelhouse (fnmatch patterns over canonical names)."""

    patterns: tuple[str, ...]
    keep: frozenset[str] = frozenset()

    def excludes(self, name: str) -> bool:
        n = canonicalize_name(name)
        if n in self.keep:
            return False
        return any(fnmatch.fnmatchcase(n, p) for p in self.patterns)

    def heavy(self, name: str) -> bool:
        """Excluded because of :data:`ALWAYS_EXCLUDE` (never even resolved)."""
        n = canonicalize_name(name)
        return n not in self.keep and any(fnmatch.fnmatchcase(n, p) for p in ALWAYS_EXCLUDE)


def make_exclusions(present: Iterable[str] | None = None, keep: Iterable[str] = ()) -> Exclusions:
    """:data:`ALWAYS_EXCLUDE` plus ``present`` (default :data:`GPU_IMAGE_PRESENT`), minus ``keep``."""
    names = GPU_IMAGE_PRESENT if present is None else tuple(present)
    patterns = tuple(dict.fromkeys(_canon_pattern(p) for p in (*ALWAYS_EXCLUDE, *names) if p.strip()))
    return Exclusions(patterns, frozenset(canonicalize_name(k) for k in keep if k.strip()))


def _canon_pattern(p: str) -> str:
    return "*".join(canonicalize_name(part) if part else "" for part in p.strip().split("*"))


def split_csv(values: Iterable[str] | None) -> list[str]:
    return [v.strip() for item in (values or ()) for v in item.split(",") if v.strip()]


# --------------------------------------------------------------------------- target

def expand_platforms(platforms: Iterable[str]) -> list[str]:
    """Add the older manylinux tags a newer one implies (pip matches platform tags exactly).

    ``manylinux_2_28_x86_64`` -> ``manylinux_2_28_x86_64, ..._2_27_..., ..., manylinux2014_x86_64,
    ..., manylinux1_x86_64``.  Other platform tags are passed through unchanged.
    """
    out: list[str] = []
    for p in platforms:
        m = re.fullmatch(r"manylinux_(\d+)_(\d+)_(\w+)", p)
        legacy = re.fullmatch(r"(manylinux2014|manylinux2010|manylinux1)_(\w+)", p)
        if m:
            major, minor, arch = int(m.group(1)), int(m.group(2)), m.group(3)
        elif legacy:
            (major, minor), arch = _LEGACY_MANYLINUX[legacy.group(1)], legacy.group(2)
        else:
            out.append(p)
            continue
        for y in range(minor, 4, -1):  # glibc 2.5 is manylinux1, the oldest
            out.append(f"manylinux_{major}_{y}_{arch}")
            if (major, y) in _LEGACY_ALIAS:
                out.append(f"{_LEGACY_ALIAS[(major, y)]}_{arch}")
    return list(dict.fromkeys(out))


def parse_python_version(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d)\.?(\d+)", text.strip())
    if not m:
        raise WheelhouseError(f"--python-version must look like 3.12, not {text!r}")
    return int(m.group(1)), int(m.group(2))


def target_tags(python_version: tuple[int, int], platforms: Sequence[str], implementation: str = "cp") -> set[Tag]:
    """Every wheel tag an interpreter of that version/platform accepts."""
    if implementation != "cp":
        raise WheelhouseError("only CPython ('cp') targets are supported")
    interp = f"cp{python_version[0]}{python_version[1]}"
    tags = set(cpython_tags(python_version, platforms=platforms))
    tags |= set(compatible_tags(python_version, interp, platforms))
    return tags


def marker_environment(python_version: tuple[int, int], platforms: Sequence[str]) -> dict[str, str]:
    """PEP 508 marker variables of the target (best effort; unknown parts left empty)."""
    first = platforms[0] if platforms else ""
    machine = next((a for a in ("x86_64", "aarch64", "ppc64le", "s390x", "i686", "armv7l") if first.endswith(a)), "")
    linux = "linux" in first
    win = first.startswith("win")
    mac = first.startswith("macosx")
    return {
        "implementation_name": "cpython",
        "implementation_version": f"{python_version[0]}.{python_version[1]}.0",
        "os_name": "nt" if win else "posix",
        "platform_machine": machine or ("AMD64" if first == "win_amd64" else ""),
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_system": "Linux" if linux else "Windows" if win else "Darwin" if mac else "",
        "platform_version": "",
        "python_full_version": f"{python_version[0]}.{python_version[1]}.0",
        "python_version": f"{python_version[0]}.{python_version[1]}",
        "sys_platform": "linux" if linux else "win32" if win else "darwin" if mac else "",
    }


# --------------------------------------------------------------------------- commands

def pip_wheel_cmd(python: str, spec: str, out_dir: Path) -> list[str]:
    return [python, "-m", "pip", "wheel", "--no-deps", spec, "-w", str(out_dir)]


def pip_download_cmd(python: str, requirements: Sequence[str], dest: Path, *, python_version: str,
                     platforms: Sequence[str], implementation: str = "cp",
                     find_links: Sequence[Path] = (), constraints: Path | None = None) -> list[str]:
    cmd = [python, "-m", "pip", "download", "--only-binary=:all:",
           "--python-version", python_version, "--implementation", implementation]
    for p in platforms:
        cmd += ["--platform", p]
    for fl in find_links:
        cmd += ["--find-links", str(fl)]
    if constraints is not None:
        cmd += ["--constraint", str(constraints)]
    cmd += ["-d", str(dest), *requirements]
    return cmd


def pip_install_cmd(python: str, wheelhouse: Path, project: str = PROJECT_NAME,
                    target: Path | None = None, wheels: Sequence[Path] = ()) -> list[str]:
    """Offline install: the project with dependency checks, or every wheel ``--no-deps`` into ``target``."""
    if target is None:
        return [python, "-m", "pip", "install", "--no-index", "--find-links", str(wheelhouse), project]
    return [python, "-m", "pip", "install", "--no-index", "--no-deps", "--upgrade",
            "--target", str(target), *map(str, wheels)]


# --------------------------------------------------------------------------- wheel bookkeeping

@dataclass
class WheelInfo:
    path: Path
    name: str  # canonical
    version: str
    requires: list[str] = field(default_factory=list)

    @property
    def size(self) -> int:
        return self.path.stat().st_size


def read_wheel(path: Path) -> WheelInfo:
    """Name, version and Requires-Dist of a wheel (from its METADATA)."""
    path = Path(path)
    name, version, _, _ = parse_wheel_filename(path.name)
    with zipfile.ZipFile(path) as zf:
        metas = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
        if not metas:
            raise WheelhouseError(f"{path.name}: no .dist-info/METADATA")
        msg = email.parser.HeaderParser().parsestr(zf.read(metas[0]).decode("utf-8", "replace"))
    return WheelInfo(path, canonicalize_name(name), str(version), list(msg.get_all("Requires-Dist") or []))


def find_duplicates(paths: Iterable[Path]) -> dict[str, list[str]]:
    """Package name -> file names, for every package with more than one wheel."""
    by_name: dict[str, list[str]] = {}
    for p in paths:
        name = canonicalize_name(parse_wheel_filename(Path(p).name)[0])
        by_name.setdefault(name, []).append(Path(p).name)
    return {n: sorted(fs) for n, fs in sorted(by_name.items()) if len(fs) > 1}


def incompatible_wheels(paths: Iterable[Path], tags: set[Tag]) -> list[str]:
    """File names of wheels none of whose tags is in ``tags``."""
    return sorted(Path(p).name for p in paths if not (parse_wheel_filename(Path(p).name)[3] & tags))


def _marker_ok(marker: Marker | None, env: dict[str, str], extras: Iterable[str]) -> bool:
    if marker is None:
        return True
    try:
        return any(marker.evaluate({**env, "extra": e}) for e in ("", *extras))
    except Exception:  # unknown variable or odd marker: keep the edge (over-inclusion is harmless)
        return True


def _parse_req(text: str) -> Requirement:
    """A Requires-Dist entry; a malformed one (old metadata) becomes an unconditional edge to its name."""
    try:
        return Requirement(text)
    except InvalidRequirement:
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", text)
        if not m:
            raise WheelhouseError(f"cannot read requirement {text!r}") from None
        return Requirement(m.group(1))


def merge_specifiers(specs: Iterable[str]) -> SpecifierSet:
    """AND of specifier strings with redundant bounds dropped: ``>=1,>=2,<4,<3`` -> ``>=2,<3``."""
    best: dict[str, tuple[Version, object]] = {}
    rest: list[str] = []
    for sp in SpecifierSet(",".join(s for s in specs if s)):
        if sp.operator not in (">=", ">", "<=", "<"):
            rest.append(str(sp))
            continue
        try:
            v = Version(sp.version)
        except InvalidVersion:
            rest.append(str(sp))
            continue
        side = "lower" if sp.operator in (">=", ">") else "upper"
        strict = sp.operator in (">", "<")
        cur = best.get(side)
        if cur is None:
            best[side] = (v, sp)
            continue
        cv, csp = cur
        tighter = (v > cv) if side == "lower" else (v < cv)
        if tighter or (v == cv and strict):
            best[side] = (v, sp)
    return SpecifierSet(",".join([*rest, *(str(sp) for _, sp in best.values())]))


@dataclass
class Selection:
    needed: set[str]  # canonical names to put into the wheelhouse
    assumed: dict[str, SpecifierSet]  # excluded but required: must already be on the node
    unresolved: set[str]  # required, not excluded, but pip downloaded nothing for it


def select_needed(wheels: dict[str, WheelInfo], roots: Sequence[str], exclusions: Exclusions,
                  env: dict[str, str]) -> Selection:
    """Walk the requirement graph from ``roots``, stopping at excluded packages."""
    active: dict[str, set[str]] = {}
    assumed: dict[str, list[str]] = {}
    unresolved: set[str] = set()
    stack: list[tuple[Requirement, frozenset[str]]] = [(_parse_req(r), frozenset()) for r in roots]
    while stack:
        req, ctx = stack.pop()
        if not _marker_ok(req.marker, env, ctx):
            continue
        name = canonicalize_name(req.name)
        if exclusions.excludes(name):
            assumed.setdefault(name, []).append(str(req.specifier))
            continue
        extras = set(req.extras)
        if name in active and extras <= active[name]:
            continue
        active.setdefault(name, set()).update(extras)
        info = wheels.get(name)
        if info is None:
            unresolved.add(name)
            continue
        stack.extend((_parse_req(r), frozenset(active[name])) for r in info.requires)
    specs = {n: merge_specifiers(ss) for n, ss in sorted(assumed.items())}
    return Selection(set(active) - unresolved, specs, unresolved)


# --------------------------------------------------------------------------- manifest

def write_manifest(dest: Path, wheels: Sequence[WheelInfo], *, python_version: str = "",
                   platforms: Sequence[str] = (), assumed: dict[str, SpecifierSet] | None = None) -> int:
    """Write ``dest/MANIFEST.txt``; returns the total size in bytes."""
    total = sum(w.size for w in wheels)
    lines = [
        f"# {PROJECT_NAME} wheelhouse, written by `python -m harness.tools.wheelhouse build`",
        f"# python-version: {python_version}",
        f"# platforms: {' '.join(platforms)}",
    ]
    for name, spec in sorted((assumed or {}).items()):
        lines.append(f"# requires-present: {name}{spec}")
    lines.append("# name version size_bytes file")
    for w in sorted(wheels, key=lambda w: w.name):
        lines.append(f"{w.name} {w.version} {w.size} {w.path.name}")
    lines.append(f"# total: {len(wheels)} wheels, {total} bytes ({total / 1e6:.1f} MB)")
    (Path(dest) / MANIFEST_NAME).write_text("\n".join(lines) + "\n")
    return total


@dataclass
class Manifest:
    python_version: str = ""
    platforms: list[str] = field(default_factory=list)
    requires_present: list[str] = field(default_factory=list)
    files: dict[str, int] = field(default_factory=dict)  # file name -> size


def read_manifest(path: Path) -> Manifest:
    man = Manifest()
    for line in Path(path).read_text().splitlines():
        if line.startswith("# python-version:"):
            man.python_version = line.split(":", 1)[1].strip()
        elif line.startswith("# platforms:"):
            man.platforms = line.split(":", 1)[1].split()
        elif line.startswith("# requires-present:"):
            man.requires_present.append(line.split(":", 1)[1].strip())
        elif line.strip() and not line.startswith("#"):
            _name, _version, size, fname = line.split()
            man.files[fname] = int(size)
    return man


# --------------------------------------------------------------------------- build

def _copy_project(src: Path, dst: Path, skip: Iterable[Path] = ()) -> None:
    skip = {p.resolve() for p in skip}

    def ignore(directory: str, names: list[str]) -> set[str]:
        out = {n for n in names if n in _COPY_IGNORE or n.endswith(".egg-info")}
        out |= {n for n in names if (Path(directory) / n).resolve() in skip}
        return out

    shutil.copytree(src, dst, ignore=ignore)
    # Record the commit in the package: the node has no .git to ask (harness.storage.provenance).
    from harness.storage.provenance import BUILD_COMMIT_FILE, git_commit

    commit = git_commit()
    if commit != "unknown" and (dst / "harness").is_dir():
        (dst / "harness" / BUILD_COMMIT_FILE).write_text(commit + "\n")


def _build_pure_wheel(python: str, spec: str, out_dir: Path, verbose: bool) -> Path:
    before = set(out_dir.glob("*.whl"))
    _run_checked(pip_wheel_cmd(python, spec, out_dir), f"build wheel for {spec}", verbose)
    new = sorted(set(out_dir.glob("*.whl")) - before)
    if not new:  # pip reuses a same-named file silently
        name = canonicalize_name(Requirement(spec).name)
        new = [p for p in out_dir.glob("*.whl") if canonicalize_name(parse_wheel_filename(p.name)[0]) == name]
    for whl in new:
        if any(t.platform != "any" for t in parse_wheel_filename(whl.name)[3]):
            raise WheelhouseError(
                f"{whl.name}: {spec} has no wheel for the target and its sdist builds a "
                f"platform-specific wheel here; build it on a machine like the GPU node instead")
    return new[0]


_NO_MATCH = re.compile(r"(?:satisfies the requirement|No matching distribution found for)\s+([^\s(]+)")


def build_wheelhouse(*, python_version: str, platforms: Sequence[str], dest: Path,
                     exclusions: Exclusions, project_dir: Path = PROJECT_ROOT,
                     pins: dict[str, str] | None = None, implementation: str = "cp",
                     python: str = sys.executable, verbose: bool = False, max_sdist_retries: int = 5) -> int:
    """Build the wheelhouse in ``dest``; returns its total size in bytes."""
    pyver = parse_python_version(python_version)
    python_version = f"{pyver[0]}.{pyver[1]}"
    platforms = expand_platforms(platforms)
    tags = target_tags(pyver, platforms, implementation)
    env = marker_environment(pyver, platforms)
    project_dir = Path(project_dir).resolve()
    dest = Path(dest).resolve()
    deps = read_dependencies(project_dir / "pyproject.toml")
    project = read_project_name(project_dir / "pyproject.toml")
    roots = [d for d in deps if not exclusions.heavy(Requirement(d).name)]
    log(f"target: cp{pyver[0]}{pyver[1]}, {platforms[0]} (+{len(platforms) - 1} older tags)")
    log(f"dependencies from pyproject: {', '.join(deps)}")
    log(f"resolving: {', '.join(roots)}")

    with tempfile.TemporaryDirectory(prefix="swz-wheelhouse-") as tmp:
        tmp_path = Path(tmp)
        built, downloaded = tmp_path / "built", tmp_path / "downloaded"
        built.mkdir()
        downloaded.mkdir()

        for name, version in SDIST_ONLY.items():
            if not exclusions.excludes(name):
                _build_pure_wheel(python, f"{name}=={version}", built, verbose)
        src = tmp_path / "src"
        _copy_project(project_dir, src, skip=[dest])
        _run_checked(pip_wheel_cmd(python, str(src), built), f"build {project} wheel", verbose)

        constraints = None
        if pins:
            constraints = tmp_path / "constraints.txt"
            constraints.write_text("".join(f"{n}=={v}\n" for n, v in sorted(pins.items())))
            log(f"pinning {len(pins)} excluded packages to the versions present on the node")

        tried: set[str] = set()
        while True:
            cmd = pip_download_cmd(python, roots, downloaded, python_version=python_version,
                                   platforms=platforms, implementation=implementation,
                                   find_links=[built], constraints=constraints)
            try:
                _run_checked(cmd, "download", verbose)
                break
            except WheelhouseError as exc:
                m = _NO_MATCH.search(str(exc))
                spec = m.group(1) if m else None
                if not spec or canonicalize_name(Requirement(spec).name) in tried or len(tried) >= max_sdist_retries:
                    raise
                tried.add(canonicalize_name(Requirement(spec).name))
                log(f"no wheel for {spec} on the target: building one from its sdist")
                try:
                    _build_pure_wheel(python, spec, built, verbose)
                except WheelhouseError as build_exc:
                    raise WheelhouseError(f"{exc}\n\nand building {spec} from source failed too:\n{build_exc}") from None

        dups = find_duplicates(downloaded.glob("*.whl"))
        if dups:
            raise WheelhouseError(f"pip downloaded more than one wheel per package: {dups}")
        infos: dict[str, WheelInfo] = {}
        for whl in sorted(downloaded.glob("*.whl")):  # what pip resolved wins ...
            info = read_wheel(whl)
            infos[info.name] = info
        own = None
        for whl in sorted(built.glob("*.whl")):  # ... over what was built here
            info = read_wheel(whl)
            if info.name == project:
                own = info
            else:
                infos.setdefault(info.name, info)
        if own is None:
            raise WheelhouseError(f"the {project} wheel was not built")

        sel = select_needed(infos, deps, exclusions, env)
        if sel.unresolved:
            log(f"WARNING: required but not downloaded (marker mismatch?): {', '.join(sorted(sel.unresolved))}")
        keep = [own, *(infos[n] for n in sorted(sel.needed))]
        dropped = sorted(set(infos) - sel.needed)
        log(f"left out ({len(dropped)}, on the node already or needed only by what is): {', '.join(dropped)}")

        dups = find_duplicates(w.path for w in keep)
        if dups:
            raise WheelhouseError(f"more than one wheel per package: {dups}")
        bad = incompatible_wheels((w.path for w in keep), tags)
        if bad:
            raise WheelhouseError(f"wheels that do not fit cp{pyver[0]}{pyver[1]} {platforms[0]}: {bad}")

        dest.mkdir(parents=True, exist_ok=True)
        for old in [*dest.glob("*.whl"), dest / MANIFEST_NAME]:
            if old.exists():
                old.unlink()
        final = []
        for w in keep:
            shutil.copy2(w.path, dest / w.path.name)
            final.append(WheelInfo(dest / w.path.name, w.name, w.version, w.requires))

    dups = find_duplicates(dest.glob("*.whl"))
    if dups:  # cannot happen after the cleanup above, unless something writes concurrently
        raise WheelhouseError(f"more than one wheel per package in {dest}: {dups}")
    total = write_manifest(dest, final, python_version=python_version, platforms=platforms, assumed=sel.assumed)
    for w in sorted(final, key=lambda w: w.name):
        print(f"  {w.path.name:<75} {w.size / 1e6:8.2f} MB")
    log(f"expects on the node: {', '.join(f'{n}{s}' for n, s in sel.assumed.items())}")
    log(f"{dest}: {len(final)} wheels, total {total / 1e6:.1f} MB ({total / 2**20:.1f} MiB); see {MANIFEST_NAME}")
    return total


# --------------------------------------------------------------------------- install

def interpreter_tag() -> str:
    return f"cp{sys.version_info[0]}{sys.version_info[1]}"


def check_present(requirements: Iterable[str]) -> list[str]:
    """Problems with the packages the wheelhouse expects this interpreter to have already."""
    from importlib import metadata

    problems = []
    for text in requirements:
        req = Requirement(text)
        try:
            have = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            problems.append(f"{req.name} is not installed (wheelhouse needs {req})")
            continue
        try:
            ok = req.specifier.contains(Version(have), prereleases=True)
        except InvalidVersion:
            ok = True
        if not ok:
            problems.append(f"{req.name} {have} is installed, wheelhouse needs {req}")
    return problems


def _has_pip(python: str) -> bool:
    try:
        return run_command([python, "-m", "pip", "--version"], capture_output=True, text=True).returncode == 0
    except OSError:
        return False


def unpack_wheel(whl: Path, target: Path) -> None:
    """Minimal ``--target`` install without pip: unzip, with ``*.data/{purelib,platlib,scripts}`` mapped."""
    target = Path(target).resolve()
    name = canonicalize_name(parse_wheel_filename(Path(whl).name)[0])
    for old in target.glob("*.dist-info"):
        if canonicalize_name(old.name[: -len(".dist-info")].rsplit("-", 1)[0]) == name:
            shutil.rmtree(old)
    with zipfile.ZipFile(whl) as zf:
        for info in zf.infolist():
            parts = info.filename.split("/")
            if parts[0].endswith(".data") and len(parts) > 2:
                if parts[1] in ("purelib", "platlib"):
                    rel = "/".join(parts[2:])
                elif parts[1] == "scripts":
                    rel = "bin/" + "/".join(parts[2:])
                else:
                    continue
            else:
                rel = info.filename
            out = (target / rel).resolve()
            if target not in out.parents and out != target:
                raise WheelhouseError(f"{Path(whl).name}: unsafe path {info.filename!r}")
            if info.is_dir():
                out.mkdir(parents=True, exist_ok=True)
                continue
            out.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst)
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                os.chmod(out, mode)


def install_wheelhouse(wheelhouse: Path, target: Path | None = None, *, check: bool = True,
                       verify: bool = True, python: str = sys.executable) -> int:
    wheelhouse = Path(wheelhouse).resolve()
    if not wheelhouse.is_dir():
        raise WheelhouseError(
            f"wheelhouse {wheelhouse} not found: build it on a machine with internet "
            f"(python -m harness.tools.wheelhouse build --python-version 3.12 --platform manylinux_2_28_x86_64 "
            f"--dest {wheelhouse.name}) and copy it here")
    wheels = sorted(wheelhouse.glob("*.whl"))
    if not wheels:
        raise WheelhouseError(f"wheelhouse {wheelhouse} contains no .whl files")
    man_path = wheelhouse / MANIFEST_NAME
    man = read_manifest(man_path) if man_path.exists() else None
    if man is None:
        log(f"WARNING: no {MANIFEST_NAME}; skipping the completeness and pre-flight checks")
    else:
        missing = sorted(set(man.files) - {w.name for w in wheels})
        truncated = sorted(f for f, size in man.files.items()
                           if (wheelhouse / f).exists() and (wheelhouse / f).stat().st_size != size)
        if missing or truncated:
            raise WheelhouseError(f"incomplete wheelhouse copy: missing {missing}, wrong size {truncated}")

    here = set(sys_tags())
    bad = incompatible_wheels(wheels, here)
    if bad:
        built_for = f"Python {man.python_version} ({' '.join(man.platforms[:1])})" if man else "another interpreter"
        raise WheelhouseError(
            f"wheelhouse was built for {built_for} but this is {interpreter_tag()} "
            f"({sys.executable}); {len(bad)} wheels do not fit, e.g. {bad[:3]}. Run this with the "
            f"node's python (e.g. /opt/torch/.venv/bin/python3 -m harness.tools.wheelhouse install) or rebuild "
            f"with --python-version {sys.version_info[0]}.{sys.version_info[1]}")
    dups = find_duplicates(wheels)
    if dups:
        raise WheelhouseError(f"more than one wheel per package in {wheelhouse}: {dups}")

    if check and man is not None:
        problems = check_present(man.requires_present)
        if problems:
            raise WheelhouseError("this interpreter lacks what the wheelhouse leaves out:\n  "
                                  + "\n  ".join(problems)
                                  + "\nrebuild with --keep NAME (or --exclude-present-file from this node's "
                                  "`pip list --format=freeze`), or pass --no-check to install anyway")

    have_pip = _has_pip(python)
    uv = shutil.which("uv")
    if have_pip:
        cmd = pip_install_cmd(python, wheelhouse, target=target, wheels=wheels)
    elif uv:
        cmd = [uv, "pip", "install", "--python", python, "--no-index"]
        cmd += (["--no-deps", "--target", str(target), *map(str, wheels)] if target is not None
                else ["--find-links", str(wheelhouse), PROJECT_NAME])
    elif target is not None:
        cmd = None
    else:
        raise WheelhouseError(f"{python} has no pip (and no uv on PATH): use --target DIR")

    if cmd is None:
        log(f"no pip: unpacking {len(wheels)} wheels into {target}")
        Path(target).mkdir(parents=True, exist_ok=True)
        for whl in wheels:
            unpack_wheel(whl, Path(target))
    else:
        log(f"install: {' '.join(cmd if len(cmd) < 20 else [*cmd[:12], '...'])}")
        proc = run_command(cmd)
        if proc.returncode != 0:
            raise WheelhouseError(f"install failed (exit {proc.returncode})")

    env = dict(os.environ)
    if target is not None:
        target = Path(target).resolve()
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(target), env.get("PYTHONPATH", "")) if p)
    if verify:
        code = "import importlib.metadata as m; " + "; ".join(f"import {mod}" for mod in VERIFY_IMPORTS)
        code += f"; print('{PROJECT_NAME}', m.version('{PROJECT_NAME}'), 'imports OK')"
        with tempfile.TemporaryDirectory() as cwd:  # not the repo root: import the installed copy
            proc = run_command([python, "-c", code], env=env, cwd=cwd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise WheelhouseError(f"installed, but the import check failed:\n{_tail(proc.stdout + proc.stderr)}")
        print(proc.stdout.strip())
        if have_pip:
            proc = run_command([python, "-m", "pip", "check"], env=env, capture_output=True, text=True)
            ours = {canonicalize_name(parse_wheel_filename(w.name)[0]) for w in wheels}
            broken = [ln for ln in (proc.stdout or "").splitlines()
                      if ln.split() and canonicalize_name(ln.split()[0]) in ours]
            if broken:
                raise WheelhouseError("installed, but requirements are broken:\n  " + "\n  ".join(broken))
    if target is not None:
        print(f"export PYTHONPATH={target}${{PYTHONPATH:+:$PYTHONPATH}}")
    log("done")
    return 0


# --------------------------------------------------------------------------- CLI

def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m harness.tools.wheelhouse", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)

    b = sub.add_parser("build", help="download/build wheels for an offline node (needs internet)")
    b.add_argument("--python-version", required=True, help="target Python, e.g. 3.12")
    b.add_argument("--platform", action="append", required=True,
                   help="target platform tag, e.g. manylinux_2_28_x86_64 (older manylinux tags are implied)")
    b.add_argument("--implementation", default="cp")
    b.add_argument("--dest", type=Path, default=Path("wheelhouse"), help="output folder (default: wheelhouse)")
    g = b.add_mutually_exclusive_group()
    g.add_argument("--exclude-present-file", type=Path, metavar="FILE",
                   help="`pip list --format=freeze` of the node: exclude these (instead of the default "
                        "list) and pin the resolution to their versions")
    g.add_argument("--exclude", action="append", metavar="A,B,...",
                   help="exclude these (fnmatch patterns allowed) instead of the default list; "
                        "torch/triton/nvidia-* are always excluded")
    b.add_argument("--also-exclude", action="append", metavar="A,B,...",
                   help="exclude these too, on top of the default list / --exclude / --exclude-present-file")
    b.add_argument("--keep", action="append", metavar="NAME", help="put NAME in even though excluded")
    b.add_argument("--project", type=Path, default=PROJECT_ROOT, help="project folder (default: this checkout)")
    b.add_argument("-v", "--verbose", action="store_true", help="show pip's output")

    i = sub.add_parser("install", help="install swizzlebench from a wheelhouse, offline")
    i.add_argument("--wheelhouse", type=Path, default=Path("wheelhouse"))
    i.add_argument("--target", type=Path, default=None,
                   help="install every wheel --no-deps into DIR (read-only site-packages); "
                        "then export PYTHONPATH=DIR")
    i.add_argument("--no-check", action="store_true", help="skip the pre-flight check of what the node must have")
    i.add_argument("--no-verify", action="store_true", help="skip the import check and pip check afterwards")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "build":
            pins = None
            present: Iterable[str] | None = None
            if args.exclude_present_file:
                found = parse_present_file(args.exclude_present_file)
                present = list(found)
                pins = {n: v for n, v in found.items() if v}
            elif args.exclude:
                present = split_csv(args.exclude)
            if args.also_exclude:
                present = [*(GPU_IMAGE_PRESENT if present is None else present), *split_csv(args.also_exclude)]
            exclusions = make_exclusions(present, split_csv(args.keep))
            if pins:
                pins = {n: v for n, v in pins.items() if exclusions.excludes(n) and not exclusions.heavy(n)}
            build_wheelhouse(python_version=args.python_version, platforms=split_csv(args.platform),
                             dest=args.dest, exclusions=exclusions, project_dir=args.project, pins=pins,
                             implementation=args.implementation, verbose=args.verbose)
            return 0
        return install_wheelhouse(args.wheelhouse, args.target, check=not args.no_check, verify=not args.no_verify)
    except WheelhouseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
