"""Prepare a wheelhouse for an offline GPU node, and install swizzlebench from it.

The GPU nodes run a CUDA image (CPython 3.12, x86_64) that has torch, triton and the
scientific stack but not hydra-core / omegaconf / antlr4 / mlflow, and no internet.
With internet (Python >= 3.10, pip >= 22.2), then on the node with its interpreter:

    python -m harness.tools.wheelhouse build --python-version 3.12 \\
        --platform manylinux_2_28_x86_64 --dest wheelhouse
    /opt/torch/.venv/bin/python3 -m harness.tools.wheelhouse install --wheelhouse wheelhouse \\
        [--target .pydeps]      # read-only site-packages; then export PYTHONPATH=$PWD/.pydeps

pip does the work; this module keeps what pip lacks (measured 2026-11-23, pip 23.2.1, CPython
3.11.7 on the CPU machine, whose pip reaches PyPI's files via its configured indexes):

* sdist-only dependencies.  Resolving hydra-core for ``--platform``/``--python-version``
  (which require ``--only-binary=:all:``) fails, ResolutionImpossible in 2.3 s: omegaconf
  needs antlr4-python3-runtime 4.9.*, an sdist only.  pip names no package there, so
  :data:`SDIST_ONLY` (and ``--sdist``) are built with ``pip wheel --no-deps`` (pure Python,
  checked) and put on ``--find-links``; then the same resolution takes 1.0 s (5 packages).
* older manylinux tags.  ``--platform manylinux_2_28_x86_64`` alone finds no numpy==1.26.4
  (manylinux_2_17 wheels only, 0.9 s); with ``--platform manylinux_2_17_x86_64`` added it
  does (1.2 s): pip expands only manylinux2014/2010, :func:`expand_platforms` the rest.
* leaving out what the node has.  ``pip install --dry-run --ignore-installed --report R.json
  --only-binary=:all: --platform`` (13 tags) ``--python-version 3.12 --target T --find-links
  BUILT`` of the 8 non-heavy dependencies resolves in 29 s to 96 packages with their
  Requires-Dist, but pip cannot exclude (``--constraint`` only pins).  So :data:`ALWAYS_EXCLUDE`
  is not passed to pip, and :func:`select_needed` walks the report, stopping at excluded
  packages (:data:`GPU_IMAGE_PRESENT`, ``--exclude-present-file``): what only matplotlib needs
  is on the image with it.  pip evaluates markers for the running interpreter (the report's
  ``environment`` says python_version 3.11), the walk for the target.  Then ``pip download
  --no-deps`` of the selected ``name==version`` set, and ``MANIFEST.txt`` with what the node
  must have.  The whole ``build`` for 3.12: 51 s, 50 wheels, 37.1 MB (for 3.11: 42 s).
* checking a ``--target`` install.  ``pip install --no-index --find-links wheelhouse
  swizzlebench`` is all it takes with a writable site-packages; with ``--target`` pip
  ignores the node's torch and cannot resolve (ResolutionImpossible, 0.8 s), so the wheels
  go in ``--no-deps`` (as the GPU node's setup script does).  Before that, ``install`` has pip
  check MANIFEST's "expects on the node" (``pip --isolated install --dry-run --no-index
  --no-deps REQS``: exit 0 when all are satisfied, else pip's error naming the first one,
  0.7 s); after it, an import test (``install --target`` of the 3.11 one: 23 s).  pip itself
  rejects a cp312 wheelhouse on 3.11 (1.5 s, nothing installed).

The wheelhouse carries the ``cluster`` extra (the joblib and submitit launchers) unless
``--extra`` says otherwise, and ``install`` imports every launcher it carries.

Importable on the bare GPU image: standard library plus ``packaging`` (or pip's copy).

Length: one tool, build and install, whose steps share the manifest and pip's options.
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

try:
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.specifiers import SpecifierSet
    from packaging.utils import canonicalize_name, parse_wheel_filename
except ImportError:  # pragma: no cover - bare interpreter that only has pip
    from pip._vendor.packaging.requirements import InvalidRequirement, Requirement  # type: ignore[no-redef]
    from pip._vendor.packaging.specifiers import SpecifierSet  # type: ignore[no-redef]
    from pip._vendor.packaging.utils import canonicalize_name, parse_wheel_filename  # type: ignore[no-redef]

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PROJECT_NAME = "swizzlebench"
MANIFEST_NAME = "MANIFEST.txt"

#: Never resolved nor put into the wheelhouse (gigabytes, CUDA-specific; the GPU image has
#: them).  fnmatch patterns over canonical names; ``--keep NAME`` overrides.
ALWAYS_EXCLUDE: tuple[str, ...] = ("torch", "torchvision", "torchaudio", "triton", "pytorch-triton", "nvidia-*")

#: What the GPU image (torch 2.11 / triton 3.6, CPython 3.12) already has: left out, with
#: what only they need.  ``--exclude-present-file`` (the node's ``pip list --format=freeze``;
#: its versions also pin the resolution) replaces the list, ``--also-exclude`` adds to it,
#: ``--keep`` takes a name back.  A name the image lacks fails ``install``'s pre-flight check.
GPU_IMAGE_PRESENT: tuple[str, ...] = (
    "numpy", "pandas", "seaborn", "matplotlib", "scipy", "pillow", "pyyaml", "requests", "pip", "wheel",
    # torch's requirements; matplotlib's, pandas', requests'
    "filelock", "fsspec", "jinja2", "markupsafe", "networkx", "sympy", "mpmath", "typing-extensions", "setuptools",
    "contourpy", "cycler", "fonttools", "kiwisolver", "pyparsing", "packaging", "python-dateutil", "pytz", "tzdata",
    "six", "certifi", "charset-normalizer", "idna", "urllib3",
    # also on the lent H100/H200 image (device tool's KINDS.md, read 2026-11-17): leaving
    # them out keeps the wheelhouse near 35 MB instead of 164 MB (pyarrow, llvmlite)
    "pyarrow", "numba", "llvmlite", "scikit-learn", "joblib", "threadpoolctl", "protobuf", "attrs", "click",
    "cloudpickle", "aiohttp", "aiohappyeyeballs", "aiosignal", "frozenlist", "multidict", "propcache", "yarl",
    "anyio", "h11", "werkzeug", "zipp", "narwhals", "annotated-doc", "psutil", "rich", "pygments", "tqdm", "regex",
)

#: Published only as an sdist: built with ``pip wheel --no-deps`` (``--sdist`` adds more).
SDIST_ONLY: tuple[str, ...] = ("antlr4-python3-runtime==4.9.3",)

#: Imported after ``install`` to prove the wheelhouse works ...
VERIFY_IMPORTS: tuple[str, ...] = ("hydra", "omegaconf", "mlflow", "swizzlebench_conf")
#: ... and, where the wheelhouse carries them, the launchers of the extras it was built with
#: (distribution -> module): every ``hydra_plugins`` package must survive the install.
VERIFY_PLUGINS = {"hydra-joblib-launcher": "hydra_plugins.hydra_joblib_launcher",
                  "hydra-submitit-launcher": "hydra_plugins.hydra_submitit_launcher"}
#: The extras a wheelhouse carries unless told otherwise: the scale-out launchers.
DEFAULT_EXTRAS: tuple[str, ...] = ("cluster",)

#: Not copied when building swizzlebench's own wheel from a clean copy of the tree.
_COPY_IGNORE = {".git", ".venv", "venv", "build", "dist", "__pycache__", ".pytest_cache", ".whl", "wheelhouse",
                "mlruns", "mlflow.db", "outputs", "multirun", "shared", ".ci"}


class WheelhouseError(RuntimeError):
    """A problem the user must fix; printed without a traceback."""


def log(msg: str) -> None:
    print(f"[wheelhouse] {msg}", flush=True)


def run_command(cmd: Sequence[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), **kwargs)  # the one place that runs subprocesses (tests replace it)


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def pip(python: str, *args: str, what: str, verbose: bool = True) -> subprocess.CompletedProcess:
    """Run ``python -m pip ARGS``; a failure raises with the tail of pip's output."""
    cmd = [python, "-m", "pip", *args]
    log(f"{what}: {' '.join(cmd if len(cmd) < 30 else [*cmd[:24], '...'])}")
    proc = run_command(cmd, capture_output=True, text=True)
    output = (proc.stdout or "") + (proc.stderr or "")
    if verbose and output:
        print(output, end="" if output.endswith("\n") else "\n")
    if proc.returncode != 0:
        raise WheelhouseError(f"{what} failed (exit {proc.returncode}):\n{_tail(output)}")
    return proc


def read_pyproject(pyproject: Path, extras: Sequence[str] = ()) -> tuple[str, list[str]]:
    """Canonical ``[project] name`` and ``dependencies`` with those of ``extras`` (checked as
    PEP 508) of a pyproject.toml."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        project = tomllib.loads(Path(pyproject).read_text()).get("project", {})
    except FileNotFoundError:
        raise WheelhouseError(f"{pyproject} not found") from None
    optional = project.get("optional-dependencies", {})
    unknown = [e for e in extras if e not in optional]
    if unknown:
        raise WheelhouseError(f"{pyproject}: no extra {', '.join(unknown)} (it has: {', '.join(optional)})")
    deps = list(dict.fromkeys([*project.get("dependencies", []), *(d for e in extras for d in optional[e])]))
    try:
        [Requirement(dep) for dep in deps]
    except InvalidRequirement as exc:
        raise WheelhouseError(f"{pyproject}: bad dependency: {exc}") from None
    return canonicalize_name(project.get("name", "")), deps


def present_names(path: Path) -> list[str]:
    """Canonical names in ``pip list --format=freeze`` output (``name==version`` lines; ``#`` comments).

    The file also goes to pip as ``--constraint``: the versions on the node pin the resolution.
    """
    lines = (ln.split("#", 1)[0].strip() for ln in Path(path).read_text().splitlines())
    return [canonicalize_name(re.split(r"[\s=<>!~;@\[]", ln, maxsplit=1)[0]) for ln in lines if ln]


@dataclass(frozen=True)
class Exclusions:
    """Which packages stay out of the wheelhouse (fnmatch patterns over canonical names)."""

    patterns: tuple[str, ...]
    keep: frozenset[str] = frozenset()

    def excludes(self, name: str, patterns: Iterable[str] | None = None) -> bool:
        """``patterns``: :data:`ALWAYS_EXCLUDE` for the heavy ones, never even resolved."""
        n = canonicalize_name(name)
        return n not in self.keep and any(fnmatch.fnmatchcase(n, p) for p in (patterns or self.patterns))


def make_exclusions(present: Iterable[str] | None = None, keep: Iterable[str] = ()) -> Exclusions:
    """:data:`ALWAYS_EXCLUDE` plus ``present`` (default :data:`GPU_IMAGE_PRESENT`), minus ``keep``."""
    patterns = ("*".join(canonicalize_name(part) if part else "" for part in p.strip().split("*"))
                for p in (*ALWAYS_EXCLUDE, *(GPU_IMAGE_PRESENT if present is None else present)) if p.strip())
    return Exclusions(tuple(dict.fromkeys(patterns)), frozenset(canonicalize_name(k) for k in keep if k.strip()))


def split_csv(values: Iterable[str] | None) -> list[str]:
    return [v.strip() for item in (values or ()) for v in item.split(",") if v.strip()]


def expand_platforms(platforms: Iterable[str]) -> list[str]:
    """Add the older manylinux tags a newer one implies (pip 23.2 matches ``manylinux_2_Y`` exactly).

    ``manylinux_2_28_x86_64`` -> ``..._2_28_..., ..._2_27_..., ..., manylinux_2_17_x86_64,
    manylinux2014_x86_64, ..., manylinux1_x86_64``; other platform tags pass unchanged.
    """
    legacy = {"manylinux2014": 17, "manylinux2010": 12, "manylinux1": 5}
    out: list[str] = []
    for p in platforms:
        m = re.fullmatch(r"(?:manylinux_2_(\d+)|(manylinux2014|manylinux2010|manylinux1))_(\w+)", p)
        if not m:
            out.append(p)
            continue
        for y in range(int(m.group(1)) if m.group(1) else legacy[m.group(2)], 4, -1):  # 2.5: manylinux1
            out.append(f"manylinux_2_{y}_{m.group(3)}")
            out += [f"{name}_{m.group(3)}" for name, minor in legacy.items() if minor == y]
    return list(dict.fromkeys(out))


def target_args(python_version: str, platforms: Sequence[str], find_links: Path, constraints: Path | None) -> list[str]:
    """pip's options that pick wheels for the target interpreter instead of the running one."""
    return ["--only-binary=:all:", "--python-version", python_version, "--implementation", "cp",
            "--find-links", str(find_links), *(["--constraint", str(constraints)] if constraints else []),
            *(a for p in platforms for a in ("--platform", p))]


# --------------------------------------------------------------------------- build

@dataclass
class Selection:
    needed: dict[str, str]  # canonical name -> version, to put into the wheelhouse
    assumed: dict[str, SpecifierSet]  # excluded but required: must already be on the node
    unresolved: set[str]  # required on the target, not excluded, but not in pip's report


def select_needed(report: dict, roots: Sequence[str], exclusions: Exclusions, python_version: str) -> Selection:
    """Walk pip's ``--report`` from ``roots`` (markers for the target Python, extras followed) up to exclusions."""
    env = {**report.get("environment", {}), "python_version": python_version,
           "python_full_version": f"{python_version}.0"}
    resolved = {canonicalize_name(item["metadata"]["name"]): item["metadata"] for item in report["install"]}
    active: dict[str, set[str]] = {}
    assumed: dict[str, list[str]] = {}
    stack = [(r, frozenset()) for r in roots]
    while stack:
        text, parent_extras = stack.pop()
        req = Requirement(text)
        if req.marker and not any(req.marker.evaluate({**env, "extra": e}) for e in ("", *parent_extras)):
            continue
        name = canonicalize_name(req.name)
        if exclusions.excludes(name):
            assumed.setdefault(name, []).append(str(req.specifier))
        elif name not in active or not set(req.extras) <= active[name]:
            active.setdefault(name, set()).update(req.extras)
            requires = resolved[name].get("requires_dist") or () if name in resolved else ()
            stack += [(r, frozenset(active[name])) for r in requires]
    return Selection({n: resolved[n]["version"] for n in sorted(active) if n in resolved},
                     {n: SpecifierSet(",".join(s for s in ss if s)) for n, ss in sorted(assumed.items())},
                     set(active) - set(resolved))


def write_manifest(dest: Path, wheels: Sequence[Path], *, python_version: str = "",
                   platforms: Sequence[str] = (), assumed: dict[str, SpecifierSet] | None = None) -> int:
    """Write ``dest/MANIFEST.txt`` (for ``install``, and a list for people); returns the total bytes."""
    lines = [f"# {PROJECT_NAME} wheelhouse, written by `python -m harness.tools.wheelhouse build`",
             f"# python-version: {python_version}", f"# platforms: {' '.join(platforms)}",
             *(f"# requires-present: {name}{spec}" for name, spec in sorted((assumed or {}).items())),
             "# name version size_bytes file"]
    for w in sorted(map(Path, wheels), key=lambda w: canonicalize_name(parse_wheel_filename(w.name)[0])):
        name, version, _, _ = parse_wheel_filename(w.name)
        lines.append(f"{name} {version} {w.stat().st_size} {w.name}")
    total = sum(Path(w).stat().st_size for w in wheels)
    lines.append(f"# total: {len(wheels)} wheels, {total} bytes ({total / 1e6:.1f} MB)")
    (Path(dest) / MANIFEST_NAME).write_text("\n".join(lines) + "\n")
    return total


def read_manifest(path: Path) -> dict[str, list[str]]:
    """The ``# key: value`` header lines, key -> values (the wheel lines are for people)."""
    header: dict[str, list[str]] = {}
    for key, sep, value in (ln.partition(":") for ln in Path(path).read_text().splitlines()):
        if key.startswith("# ") and sep:
            header.setdefault(key[2:], []).append(value.strip())
    return header


def _copy_project(src: Path, dst: Path, skip: Iterable[Path] = ()) -> None:
    skip = {p.resolve() for p in skip}
    shutil.copytree(src, dst, ignore=lambda d, names: {
        n for n in names if n in _COPY_IGNORE or n.endswith(".egg-info") or (Path(d) / n).resolve() in skip})
    # Record the commit in the package: the node has no .git to ask (harness.storage.provenance).
    from harness.storage.provenance import BUILD_COMMIT_FILE, git_commit

    commit = git_commit()
    if commit != "unknown" and (dst / "harness").is_dir():
        (dst / "harness" / BUILD_COMMIT_FILE).write_text(commit + "\n")


def _build_pure_wheel(python: str, spec: str, out_dir: Path, verbose: bool) -> None:
    pip(python, "wheel", "--no-deps", spec, "-w", str(out_dir), what=f"build wheel for {spec}", verbose=verbose)
    name = canonicalize_name(Requirement(spec).name)
    for whl in out_dir.glob("*.whl"):
        wname, _, _, tags = parse_wheel_filename(whl.name)
        if canonicalize_name(wname) == name and any(t.platform != "any" for t in tags):
            raise WheelhouseError(f"{whl.name}: {spec} has no wheel for the target and its sdist builds a "
                                  f"platform-specific wheel here; build it on a machine like the GPU node")


def build_wheelhouse(*, python_version: str, platforms: Sequence[str], dest: Path, exclusions: Exclusions,
                     project_dir: Path = PROJECT_ROOT, constraints: Path | None = None,
                     sdists: Sequence[str] = SDIST_ONLY, python: str = sys.executable, verbose: bool = False,
                     extras: Sequence[str] = DEFAULT_EXTRAS) -> int:
    """Build the wheelhouse in ``dest`` (steps in the module docstring), with the dependencies
    of ``extras`` too; returns its total bytes."""
    platforms = expand_platforms(platforms)
    project_dir, dest = Path(project_dir).resolve(), Path(dest).resolve()
    project, deps = read_pyproject(project_dir / "pyproject.toml", extras)
    roots = [d for d in deps if not exclusions.excludes(Requirement(d).name, ALWAYS_EXCLUDE)]
    log(f"target: CPython {python_version}, {platforms[0]} (+{len(platforms) - 1} older tags)")
    with tempfile.TemporaryDirectory(prefix="swz-wheelhouse-") as tmp:
        tmp_path = Path(tmp)
        built, own_dir, report = tmp_path / "built", tmp_path / "own", tmp_path / "report.json"
        built.mkdir()
        for spec in sdists:
            if not exclusions.excludes(Requirement(spec).name):
                _build_pure_wheel(python, spec, built, verbose)
        _copy_project(project_dir, tmp_path / "src", skip=[dest])
        pip(python, "wheel", "--no-deps", str(tmp_path / "src"), "-w", str(own_dir),
            what=f"build {project} wheel", verbose=verbose)
        args = target_args(python_version, platforms, built, constraints)
        pip(python, "install", "--dry-run", "--ignore-installed", "--report", str(report), *args,
            "--target", str(tmp_path / "scratch"), *roots, what="resolve", verbose=verbose)
        sel = select_needed(json.loads(report.read_text()), deps, exclusions, python_version)
        if sel.unresolved:  # pip evaluates markers for this interpreter
            log(f"WARNING: needed on the target but not resolved by pip: {', '.join(sorted(sel.unresolved))}")
        dest.mkdir(parents=True, exist_ok=True)
        for old in [*dest.glob("*.whl"), dest / MANIFEST_NAME]:
            old.unlink(missing_ok=True)
        pip(python, "download", "--no-deps", *args, "-d", str(dest), *(f"{n}=={v}" for n, v in sel.needed.items()),
            what="download", verbose=verbose)
        for own in own_dir.glob("*.whl"):
            shutil.copy2(own, dest / own.name)
    wheels = sorted(dest.glob("*.whl"))
    total = write_manifest(dest, wheels, python_version=python_version, platforms=platforms, assumed=sel.assumed)
    log(f"expects on the node: {', '.join(f'{n}{s}' for n, s in sel.assumed.items())}")
    log(f"{dest}: {len(wheels)} wheels, total {total / 1e6:.1f} MB; see {MANIFEST_NAME}")
    return total


# --------------------------------------------------------------------------- install

def preflight(wheelhouse: Path, python: str, check: bool) -> None:
    """What pip cannot know before a ``--no-deps`` install: that the node has what the wheelhouse leaves out."""
    man = read_manifest(wheelhouse / MANIFEST_NAME) if (wheelhouse / MANIFEST_NAME).exists() else {}
    if not man:
        log(f"WARNING: no {MANIFEST_NAME}; skipping the pre-flight check")
    elif check and man.get("requires-present"):
        try:  # --isolated: no configured find-links, --no-index: satisfied by what is installed or nothing
            pip(python, "--isolated", "install", "--dry-run", "--no-index", "--no-deps", *man["requires-present"],
                what="check what the node must have", verbose=False)
        except WheelhouseError as exc:
            errors = "\n  ".join(ln for ln in str(exc).splitlines() if ln.startswith("ERROR"))
            raise WheelhouseError(f"this interpreter lacks what the wheelhouse leaves out:\n  {errors}\nrebuild "
                                  "with --keep NAME (or --exclude-present-file from this node's `pip list "
                                  "--format=freeze`), or pass --no-check") from None


def install_wheelhouse(wheelhouse: Path, target: Path | None = None, *, check: bool = True,
                       verify: bool = True, python: str = sys.executable) -> int:
    wheelhouse = Path(wheelhouse).resolve()
    if not wheelhouse.is_dir():
        raise WheelhouseError(f"wheelhouse {wheelhouse} not found: build it with internet (python -m harness.tools."
                              f"wheelhouse build --python-version 3.12 --platform manylinux_2_28_x86_64) and copy it")
    wheels = sorted(wheelhouse.glob("*.whl"))
    if not wheels:
        raise WheelhouseError(f"wheelhouse {wheelhouse} contains no .whl files")
    preflight(wheelhouse, python, check)
    target = Path(target).resolve() if target is not None else None
    # the project with pip's dependency checks, or (read-only site-packages) every wheel --no-deps
    pip(python, "install", "--no-index", *(["--find-links", str(wheelhouse), PROJECT_NAME] if target is None else
                                           ["--no-deps", "--upgrade", "--target", str(target), *map(str, wheels)]),
        what="install")
    env = dict(os.environ)
    if target is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(target), env.get("PYTHONPATH", "")) if p)
    if verify:
        carried = {canonicalize_name(parse_wheel_filename(w.name)[0]) for w in wheels}
        modules = [*VERIFY_IMPORTS, *(mod for dist, mod in VERIFY_PLUGINS.items() if dist in carried)]
        code = "import importlib.metadata as m; " + "; ".join(f"import {mod}" for mod in modules)
        code += f"; print('{PROJECT_NAME}', m.version('{PROJECT_NAME}'), 'imports OK')"
        with tempfile.TemporaryDirectory() as cwd:  # not the repo root: import the installed copy
            proc = run_command([python, "-c", code], env=env, cwd=cwd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise WheelhouseError(f"installed, but the import check failed:\n{_tail(proc.stdout + proc.stderr)}")
        print(proc.stdout.strip())
    if target is not None:
        print(f"export PYTHONPATH={target}${{PYTHONPATH:+:$PYTHONPATH}}")
    return 0


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m harness.tools.wheelhouse", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="download/build wheels for an offline node (needs internet)")
    b.add_argument("--python-version", required=True, help="target Python, e.g. 3.12")
    b.add_argument("--platform", action="append", required=True, help="e.g. manylinux_2_28_x86_64 (and older)")
    b.add_argument("--dest", type=Path, default=Path("wheelhouse"), help="output folder (default: wheelhouse)")
    b.add_argument("--exclude-present-file", type=Path, metavar="FILE", help="`pip list --format=freeze` of "
                   "the node: exclude these (not the default list), pin the resolution to their versions")
    b.add_argument("--also-exclude", action="append", metavar="A,B,...", help="exclude these too (fnmatch patterns)")
    b.add_argument("--keep", action="append", metavar="NAME", help="put NAME in even though excluded")
    b.add_argument("--sdist", action="append", default=[], metavar="NAME==VERSION", help="build this sdist too")
    b.add_argument("--project", type=Path, default=PROJECT_ROOT, help="project folder (default: this checkout)")
    b.add_argument("--extra", action="append", metavar="NAME", help="carry this extra's dependencies (default: "
                   f"{', '.join(DEFAULT_EXTRAS)}; --extra none for none)")
    b.add_argument("-v", "--verbose", action="store_true", help="show pip's output")
    i = sub.add_parser("install", help="install swizzlebench from a wheelhouse, offline")
    i.add_argument("--wheelhouse", type=Path, default=Path("wheelhouse"))
    i.add_argument("--target", type=Path, help="install every wheel --no-deps into DIR; then PYTHONPATH=DIR")
    i.add_argument("--no-check", action="store_true", help="skip the pre-flight check of what the node must have")
    i.add_argument("--no-verify", action="store_true", help="skip the import check and pip check afterwards")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "install":
            return install_wheelhouse(args.wheelhouse, args.target, check=not args.no_check,
                                      verify=not args.no_verify)
        present_file = args.exclude_present_file
        present = present_names(present_file) if present_file else GPU_IMAGE_PRESENT
        exclusions = make_exclusions([*present, *split_csv(args.also_exclude)], split_csv(args.keep))
        build_wheelhouse(python_version=args.python_version, platforms=split_csv(args.platform), dest=args.dest,
                         exclusions=exclusions, project_dir=args.project, constraints=present_file,
                         sdists=[*SDIST_ONLY, *args.sdist], verbose=args.verbose,
                         extras=[e for e in split_csv(args.extra) if e != "none"] if args.extra else DEFAULT_EXTRAS)
        return 0
    except WheelhouseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
