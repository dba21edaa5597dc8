"""harness.tools.wheelhouse: the offline-install wheelhouse, tested without the network.

Every pip call goes through ``harness.tools.wheelhouse.run_command``.  The build and install
tests replace it with a fake pip that answers like pip 23.2 (a ``--report`` JSON, wheel files
written); the pre-flight check runs the real pip (``--no-index``, nothing installed).  The one
test that talks to an index is skipped unless SWIZZLEBENCH_NETWORK_TESTS=1.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

from harness.tools import wheelhouse as wh

REAL_RUN = wh.run_command


# --------------------------------------------------------------------------- helpers

def make_wheel(directory: Path, name: str, version: str, tag: str = "py3-none-any") -> Path:
    """A small but valid wheel file."""
    dist = f"{name.replace('-', '_')}-{version}"
    path = Path(directory) / f"{dist}-{tag}.whl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{dist}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        zf.writestr(f"{dist}.dist-info/WHEEL", f"Wheel-Version: 1.0\nTag: {tag}\n")
        zf.writestr(f"{dist}.dist-info/RECORD", "")
    return path


def ok(cmd, stdout="", stderr="", code=0):
    return subprocess.CompletedProcess(cmd, code, stdout=stdout, stderr=stderr)


def _arg(cmd, flag):
    return Path(cmd[cmd.index(flag) + 1])


def report(*items, python_version="3.11"):
    """A pip ``--report`` with (name, version, requires_dist) items, resolved on ``python_version``."""
    env = {**default_environment(), "python_version": python_version}
    return {"version": "1", "environment": env, "install": [
        {"metadata": {"name": n, "version": v, "requires_dist": list(r)}} for n, v, r in items]}


# Package index of the fake pip: name -> (version, requires, tag).
FAKE_INDEX = {
    "hydra-core": ("1.3.2", ["omegaconf<2.4,>=2.2", "antlr4-python3-runtime==4.9.*", "packaging"], "py3-none-any"),
    "omegaconf": ("2.3.0", ["antlr4-python3-runtime==4.9.*", "PyYAML>=5.1.0",
                            'dataclasses; python_version == "3.6"'], "py3-none-any"),
    "mlflow": ("3.1.0", ["mlflow-skinny==3.1.0", "pandas<3", "numpy<3", "sqlalchemy<21,>=4",
                         'waitress<4; platform_system == "Windows"', 'gunicorn<24; platform_system != "Windows"'],
               "py3-none-any"),
    "mlflow-skinny": ("3.1.0", ["packaging<26", "pyyaml<7,>=5.1", "typing-extensions<5,>=4"], "py3-none-any"),
    "gunicorn": ("23.0.0", ["packaging"], "py3-none-any"),
    "pandas": ("2.2.3", ["numpy>=1.26", "python-dateutil>=2.8.2", "tzdata>=2022.7"],
               "cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64"),
    "numpy": ("2.2.0", [], "cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64"),
    "sqlalchemy": ("20.0.0", [], "cp312-cp312-manylinux_2_28_x86_64"),
    "python-dateutil": ("2.9.0", ["six>=1.5"], "py2.py3-none-any"),
    "six": ("1.17.0", [], "py2.py3-none-any"),
    "tzdata": ("2025.1", [], "py2.py3-none-any"),
    "pyyaml": ("6.0.2", [], "cp312-cp312-manylinux_2_17_x86_64"),
    "packaging": ("24.2", [], "py3-none-any"),
    "typing-extensions": ("4.12.2", [], "py3-none-any"),
    "seaborn": ("0.13.2", ["numpy", "pandas", "matplotlib"], "py3-none-any"),
    "matplotlib": ("3.10.0", ["numpy", "pyparsing"], "cp312-cp312-manylinux_2_17_x86_64"),
    "pyparsing": ("3.2.0", [], "py3-none-any"),
    "antlr4-python3-runtime": None,  # sdist only: must come from --find-links
    "hydra-joblib-launcher": ("1.2.0", ["hydra-core>=1.1.0.dev7", "joblib>=0.14.0"], "py3-none-any"),
    "joblib": ("1.4.2", [], "py3-none-any"),
}


class FakePip:
    """Stands in for ``run_command``: records commands, answers like pip would (real pip for --isolated)."""

    def __init__(self, built_tag="py3-none-any"):
        self.calls: list[list[str]] = []
        self.built_tag = built_tag

    def __call__(self, cmd, **kwargs):
        cmd = list(cmd)
        self.calls.append(cmd)
        if cmd[3:4] == ["--isolated"]:  # the pre-flight check: real pip, --no-index
            return REAL_RUN(cmd, **kwargs)
        if cmd[3:4] == ["wheel"]:
            spec, out = cmd[5], _arg(cmd, "-w")
            if Path(spec).is_dir():  # the project itself
                name, _ = wh.read_pyproject(Path(spec) / "pyproject.toml")
                make_wheel(out, name, "0.1.0")
            else:
                req = Requirement(spec)
                make_wheel(out, req.name, str(next(iter(req.specifier)).version), tag=self.built_tag)
            return ok(cmd)
        if cmd[3:5] == ["install", "--dry-run"]:
            reqs = cmd[cmd.index("--target") + 2:]
            resolved = self._resolve(reqs, self._local(cmd))
            if resolved is None:
                return ok(cmd, stderr="ERROR: ResolutionImpossible: for help visit https://pip.pypa.io\n", code=1)
            _arg(cmd, "--report").write_text(json.dumps(report(*resolved)))
            return ok(cmd, stdout="Would install ...\n")
        if cmd[3:4] == ["download"]:
            dest, local = _arg(cmd, "-d"), self._local(cmd)
            for spec in cmd[cmd.index("-d") + 2:]:
                name = canonicalize_name(Requirement(spec).name)
                if name in local:
                    (dest / local[name].name).write_bytes(local[name].read_bytes())
                else:
                    make_wheel(dest, name, FAKE_INDEX[name][0], FAKE_INDEX[name][2])
            return ok(cmd)
        return ok(cmd)

    @staticmethod
    def _local(cmd):
        links = [Path(cmd[i + 1]) for i, a in enumerate(cmd) if a == "--find-links"]
        return {canonicalize_name(parse_wheel_filename(p.name)[0]): p for d in links for p in d.glob("*.whl")}

    def _resolve(self, reqs, local):
        """Like pip: markers for the running interpreter, everything reachable (no exclusion)."""
        seen, out, todo = set(), [], list(reqs)
        while todo:
            req = Requirement(todo.pop())
            name = canonicalize_name(req.name)
            if (req.marker and not req.marker.evaluate({"extra": ""})) or name in seen:
                continue
            seen.add(name)
            if name in local:
                out.append((name, str(parse_wheel_filename(local[name].name)[1]), []))
            elif FAKE_INDEX.get(name) is None:
                return None
            else:
                version, requires, _ = FAKE_INDEX[name]
                out.append((name, version, requires))
                todo.extend(requires)
        return out


@pytest.fixture
def project(tmp_path):
    proj = tmp_path / "proj"
    (proj / "pkg").mkdir(parents=True)
    (proj / "pkg" / "__init__.py").write_text("")
    (proj / ".venv").mkdir()  # must not be copied
    (proj / "pyproject.toml").write_text(textwrap.dedent("""\
        [project]
        name = "swizzlebench"
        version = "0.1.0"
        dependencies = ["torch>=2.6", "triton>=3.3", "hydra-core>=1.3,<1.4", "mlflow>=3,<4",
                        "pandas>=2", "seaborn>=0.13", "numpy>=1.26"]
        [project.optional-dependencies]
        cluster = ["hydra-joblib-launcher>=1.2,<1.3"]
        dev = ["pytest>=8"]
        """))
    return proj


# --------------------------------------------------------------------------- pure parts

def test_reads_the_real_pyproject():
    name, deps = wh.read_pyproject(wh.PROJECT_ROOT / "pyproject.toml")
    assert name == "swizzlebench"
    assert {"torch", "triton", "hydra-core", "mlflow"} <= {Requirement(d).name for d in deps}


def test_read_pyproject_adds_extras_and_names_an_unknown_one(project):
    _, deps = wh.read_pyproject(project / "pyproject.toml", ["cluster"])
    assert deps[-1] == "hydra-joblib-launcher>=1.2,<1.3" and "pytest>=8" not in deps
    with pytest.raises(wh.WheelhouseError, match="no extra gpu .it has: cluster, dev"):
        wh.read_pyproject(project / "pyproject.toml", ["gpu"])
    _, real = wh.read_pyproject(wh.PROJECT_ROOT / "pyproject.toml", wh.DEFAULT_EXTRAS)
    assert {"hydra-joblib-launcher", "hydra-submitit-launcher"} <= {Requirement(d).name for d in real}


def test_read_pyproject_rejects_bad_requirement(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname="x"\ndependencies=["ok>=1", "not valid !!"]\n')
    with pytest.raises(wh.WheelhouseError, match="bad dependency"):
        wh.read_pyproject(tmp_path / "pyproject.toml")
    with pytest.raises(wh.WheelhouseError, match="not found"):
        wh.read_pyproject(tmp_path / "missing.toml")


def test_default_exclusions():
    ex = wh.make_exclusions()
    for name in ["torch", "triton", "nvidia-cudnn-cu12", "nvidia_nccl_cu12", "numpy", "Pandas", "PyYAML",
                 "typing_extensions", "seaborn", "matplotlib", "scipy", "requests", "jinja2"]:
        assert ex.excludes(name), name
    for name in ["mlflow", "mlflow-skinny", "hydra-core", "omegaconf", "antlr4-python3-runtime", "sqlalchemy"]:
        assert not ex.excludes(name), name
    assert all(ex.excludes(n, wh.ALWAYS_EXCLUDE) for n in ["torch", "nvidia-cublas-cu12"])
    assert not ex.excludes("numpy", wh.ALWAYS_EXCLUDE)


def test_keep_forces_a_package_in_and_a_list_replaces_the_default():
    ex = wh.make_exclusions(keep=["NumPy", "torch"])
    assert not ex.excludes("numpy") and not ex.excludes("torch") and not ex.excludes("torch", wh.ALWAYS_EXCLUDE)
    assert ex.excludes("pandas") and ex.excludes("triton")
    ex = wh.make_exclusions(["pandas", "Scikit_Learn", "opentelemetry-*"])
    assert ex.excludes("pandas") and ex.excludes("scikit-learn") and ex.excludes("opentelemetry-sdk")
    assert not ex.excludes("numpy")  # default list replaced ...
    assert ex.excludes("torch") and ex.excludes("nvidia-cusparse-cu12")  # ... heavy ones stay
    assert wh.split_csv(["a, b", "c,,", ""]) == ["a", "b", "c"]


def test_present_names(tmp_path):
    f = tmp_path / "present.txt"
    f.write_text("# pip list --format=freeze of the GPU image\nnumpy==2.1.2\ntorch==2.11.0+cu128\n"
                 "PyYAML==6.0.2   # trailing comment\n\nPillow===11.0.0\nmy_pkg @ file:///x.whl\nbare-name\n")
    assert wh.present_names(f) == ["numpy", "torch", "pyyaml", "pillow", "my-pkg", "bare-name"]


def test_expand_platforms_adds_older_manylinux_tags():
    plats = wh.expand_platforms(["manylinux_2_28_x86_64"])
    assert plats[0] == "manylinux_2_28_x86_64"
    for p in ["manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
              "manylinux2010_x86_64", "manylinux1_x86_64", "manylinux_2_5_x86_64"]:
        assert p in plats
    assert "manylinux_2_29_x86_64" not in plats and "linux_x86_64" not in plats
    assert len(plats) == len(set(plats)) == 27
    assert "manylinux_2_17_aarch64" in wh.expand_platforms(["manylinux2014_aarch64"])
    assert wh.expand_platforms(["win_amd64"]) == ["win_amd64"]


def test_select_needed_stops_at_excluded_packages_and_follows_markers_and_extras():
    rep = report(
        ("mlflow", "3.1", ["pandas<4", "sqlalchemy>=4", 'waitress; platform_system == "Windows"',
                           'gunicorn; platform_system != "Windows"', "foo[bar]"]),
        ("sqlalchemy", "2", []), ("gunicorn", "23", ["packaging"]),
        ("pandas", "2.2", ["python-dateutil", "tzdata"]), ("python-dateutil", "2.9", []), ("tzdata", "1", []),
        ("hydra-core", "1.3", ["omegaconf", "antlr4-python3-runtime==4.9.*"]),
        ("omegaconf", "2.3", ["PyYAML>=5.1", 'dataclasses; python_version == "3.6"',
                              'backport; python_version < "3.12"', 'newer; python_version >= "3.12"']),
        ("antlr4-python3-runtime", "4.9.3", []), ("backport", "1", []),
        ("foo", "1", ['baz; extra == "bar"', 'qux; extra == "other"']), ("baz", "1", []), ("qux", "1", []),
    )
    sel = wh.select_needed(rep, ["torch>=2.6", "mlflow>=3", "hydra-core", "pandas>=2"],
                           wh.make_exclusions(), "3.12")
    assert sel.needed == {"mlflow": "3.1", "sqlalchemy": "2", "gunicorn": "23", "hydra-core": "1.3",
                          "omegaconf": "2.3", "antlr4-python3-runtime": "4.9.3", "foo": "1", "baz": "1"}
    assert set(sel.assumed) == {"torch", "pandas", "packaging", "pyyaml"}  # not dateutil: only pandas needs it
    assert sel.assumed["pandas"].contains("2.5") and not sel.assumed["pandas"].contains("4.0")
    assert sel.unresolved == {"newer"}  # true for the target (3.12), but pip resolved on 3.11


def test_manifest_round_trip(tmp_path):
    a = make_wheel(tmp_path, "hydra-core", "1.3.2")
    b = make_wheel(tmp_path, "sqlalchemy", "20.0.0", tag="cp312-cp312-manylinux_2_28_x86_64")
    total = wh.write_manifest(tmp_path, [b, a], python_version="3.12", platforms=["manylinux_2_28_x86_64"],
                              assumed={"torch": wh.SpecifierSet(">=2.6"), "numpy": wh.SpecifierSet("<3,>=1.26")})
    assert total == a.stat().st_size + b.stat().st_size
    text = (tmp_path / wh.MANIFEST_NAME).read_text()
    body = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert body == [f"hydra-core 1.3.2 {a.stat().st_size} {a.name}", f"sqlalchemy 20.0.0 {b.stat().st_size} {b.name}"]
    assert f"{total / 1e6:.1f} MB" in text
    man = wh.read_manifest(tmp_path / wh.MANIFEST_NAME)
    assert man["python-version"] == ["3.12"] and man["platforms"] == ["manylinux_2_28_x86_64"]
    assert man["requires-present"] == ["numpy<3,>=1.26", "torch>=2.6"]


def test_project_copy_leaves_out_venv_build_and_dest(tmp_path):
    src = tmp_path / "src"
    for d in ["pkg", ".venv/lib", "build/lib", "x.egg-info", ".git", "house", "pkg/__pycache__"]:
        (src / d).mkdir(parents=True)
    (src / "pkg" / "__init__.py").write_text("")
    (src / "pyproject.toml").write_text("")
    wh._copy_project(src, tmp_path / "copy", skip=[src / "house"])
    copied = {p.relative_to(tmp_path / "copy").as_posix() for p in (tmp_path / "copy").rglob("*")}
    assert copied == {"pkg", "pkg/__init__.py", "pyproject.toml"}


def test_target_args():
    args = wh.target_args("3.12", ["manylinux_2_28_x86_64", "manylinux2014_x86_64"], Path("b"), Path("c.txt"))
    assert "--only-binary=:all:" in args and _arg(args, "--python-version") == Path("3.12")
    assert [args[i + 1] for i, a in enumerate(args) if a == "--platform"] == ["manylinux_2_28_x86_64",
                                                                              "manylinux2014_x86_64"]
    assert _arg(args, "--find-links") == Path("b") and _arg(args, "--constraint") == Path("c.txt")
    assert "--constraint" not in wh.target_args("3.12", ["x"], Path("b"), None)


# --------------------------------------------------------------------------- build (pip faked)

def test_build_with_fake_pip(project, tmp_path, monkeypatch):
    fake = FakePip()
    monkeypatch.setattr(wh, "run_command", fake)
    dest = tmp_path / "house"
    make_wheel(dest, "mlflow", "2.0.0")  # stale: from an older build
    (dest / "notes.txt").write_text("mine")  # not a wheel: left alone

    total = wh.build_wheelhouse(python_version="3.12", platforms=["manylinux_2_28_x86_64"], dest=dest,
                                exclusions=wh.make_exclusions(), project_dir=project)

    names = {parse_wheel_filename(p.name)[0] for p in dest.glob("*.whl")}
    assert names == {"swizzlebench", "hydra-core", "omegaconf", "antlr4-python3-runtime", "mlflow",
                     "mlflow-skinny", "gunicorn", "sqlalchemy", "hydra-joblib-launcher"}   # the cluster extra too
    assert not any(p.name.startswith("mlflow-2.0.0") for p in dest.glob("*.whl"))
    assert (dest / "notes.txt").exists()
    assert total == sum(p.stat().st_size for p in dest.glob("*.whl"))
    present = {Requirement(r).name for r in wh.read_manifest(dest / wh.MANIFEST_NAME)["requires-present"]}
    assert {"torch", "triton", "pandas", "numpy", "seaborn", "pyyaml", "packaging", "typing-extensions"} <= present

    wheel_calls = [c for c in fake.calls if c[3] == "wheel"]
    assert wheel_calls[0][5] == "antlr4-python3-runtime==4.9.3"
    (resolve,) = [c for c in fake.calls if c[3:5] == ["install", "--dry-run"]]
    assert not any(a.startswith(("torch", "triton")) for a in resolve)  # heavy ones never resolved
    assert _arg(resolve, "--find-links") == Path(wheel_calls[0][-1]) and "--constraint" not in resolve
    (download,) = [c for c in fake.calls if c[3] == "download"]
    assert "--no-deps" in download and "mlflow==3.1.0" in download and not any("pandas" in a for a in download)


def test_build_pins_with_the_present_file_and_keep(project, tmp_path, monkeypatch):
    fake = FakePip()
    monkeypatch.setattr(wh, "run_command", fake)
    present = tmp_path / "present.txt"
    present.write_text("numpy==2.2.0\npandas==2.2.3\nseaborn==0.13.2\nmatplotlib==3.10.0\npyparsing==3.2.0\n"
                       "packaging==24.2\ntyping-extensions==4.12.2\npython-dateutil==2.9.0\npyyaml==6.0.2\n")
    assert wh.main(["build", "--python-version", "3.12", "--platform", "manylinux_2_28_x86_64", "--project",
                    str(project), "--exclude-present-file", str(present), "--keep", "pyyaml",
                    "--dest", str(tmp_path / "h")]) == 0
    (resolve,) = [c for c in fake.calls if c[3:5] == ["install", "--dry-run"]]
    assert _arg(resolve, "--constraint") == present
    names = {parse_wheel_filename(p.name)[0] for p in (tmp_path / "h").glob("*.whl")}
    assert "pyyaml" in names and "numpy" not in names
    assert "tzdata" not in names  # only pandas needs it, and pandas is in the present file


def test_build_needs_the_sdist_only_wheel(project, tmp_path, monkeypatch):
    monkeypatch.setattr(wh, "run_command", FakePip())
    rc = wh.main(["build", "--python-version", "3.12", "--platform", "manylinux_2_28_x86_64", "--project",
                  str(project), "--also-exclude", "antlr4-python3-runtime", "--dest", str(tmp_path / "h")])
    assert rc == 2  # not built because excluded: pip cannot resolve omegaconf (as measured)


def test_build_rejects_platform_specific_wheel_from_sdist(project, tmp_path, monkeypatch):
    monkeypatch.setattr(wh, "run_command", FakePip(built_tag="cp311-cp311-linux_x86_64"))
    with pytest.raises(wh.WheelhouseError, match="platform-specific"):
        wh.build_wheelhouse(python_version="3.12", platforms=["manylinux_2_28_x86_64"], dest=tmp_path / "h",
                            exclusions=wh.make_exclusions(), project_dir=project)


def test_cli_build_arguments(monkeypatch, tmp_path):
    seen = {}
    monkeypatch.setattr(wh, "build_wheelhouse", lambda **kw: seen.update(kw) or 0)
    present = tmp_path / "present.txt"
    present.write_text("numpy==2.1.2\ntorch==2.11.0+cu128\nsqlalchemy==19.0.0\n")
    rc = wh.main(["build", "--python-version", "3.12", "--platform", "manylinux_2_28_x86_64",
                  "--exclude-present-file", str(present), "--keep", "sqlalchemy", "--sdist", "old==1.0",
                  "--dest", str(tmp_path / "w")])
    assert rc == 0 and seen["dest"] == tmp_path / "w" and seen["platforms"] == ["manylinux_2_28_x86_64"]
    ex = seen["exclusions"]
    assert ex.excludes("numpy") and ex.excludes("torch") and not ex.excludes("pandas") and not ex.excludes("sqlalchemy")
    assert seen["constraints"] == present and seen["sdists"] == [*wh.SDIST_ONLY, "old==1.0"]
    assert seen["extras"] == wh.DEFAULT_EXTRAS == ("cluster",)
    wh.main(["build", "--python-version", "3.12", "--platform", "manylinux_2_28_x86_64",
             "--also-exclude", "sqlalchemy,numba", "--keep", "numpy"])
    ex = seen["exclusions"]
    assert ex.excludes("sqlalchemy") and ex.excludes("pandas") and not ex.excludes("numpy")
    wh.main(["build", "--python-version", "3.12", "--platform", "manylinux_2_28_x86_64", "--extra", "none"])
    assert seen["extras"] == []
    assert seen["constraints"] is None


# --------------------------------------------------------------------------- install

def _house(tmp_path, requires_present=("pytest>=1",)):
    house = tmp_path / "house"
    wheels = [make_wheel(house, "swizzlebench", "0.1.0"), make_wheel(house, "omegaconf", "2.3.0")]
    wh.write_manifest(house, wheels, python_version="3.12", platforms=["manylinux_2_28_x86_64"],
                      assumed={Requirement(r).name: Requirement(r).specifier for r in requires_present})
    return house


def test_install_errors_are_clear(tmp_path, monkeypatch):
    monkeypatch.setattr(wh, "run_command", FakePip())
    with pytest.raises(wh.WheelhouseError, match="not found"):
        wh.install_wheelhouse(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(wh.WheelhouseError, match="no .whl"):
        wh.install_wheelhouse(tmp_path / "empty")
    assert wh.main(["install", "--wheelhouse", str(tmp_path / "absent")]) == 2


def test_preflight_asks_the_real_pip_for_what_the_node_must_have(tmp_path, monkeypatch):
    fake = FakePip()
    monkeypatch.setattr(wh, "run_command", fake)
    house = _house(tmp_path, requires_present=("pytest>=1", "surely-not-installed-xyz>=1"))
    with pytest.raises(wh.WheelhouseError, match="(?s)leaves out:.*surely-not-installed-xyz>=1"):
        wh.install_wheelhouse(house)
    assert not any(c[3:4] == ["install"] for c in fake.calls)  # nothing installed
    assert wh.install_wheelhouse(house, check=False) == 0
    house2 = _house(tmp_path / "2", requires_present=("pytest<1",))
    with pytest.raises(wh.WheelhouseError, match="pytest<1"):
        wh.install_wheelhouse(house2)


def test_install_commands(tmp_path, monkeypatch, capsys):
    fake = FakePip()
    monkeypatch.setattr(wh, "run_command", fake)
    house = _house(tmp_path)
    assert wh.install_wheelhouse(house) == 0
    install = next(c for c in fake.calls if c[3:4] == ["install"])
    assert install[1:] == ["-m", "pip", "install", "--no-index", "--find-links", str(house.resolve()), "swizzlebench"]
    assert any(c[1] == "-c" and "import mlflow" in c[2] for c in fake.calls)  # import check ran

    fake.calls.clear()
    assert wh.install_wheelhouse(house, tmp_path / "deps") == 0
    install = next(c for c in fake.calls if c[3:4] == ["install"])
    assert "--no-deps" in install and _arg(install, "--target") == (tmp_path / "deps").resolve()
    assert sorted(install[-2:]) == sorted(str(p) for p in house.resolve().glob("*.whl"))
    assert f"export PYTHONPATH={(tmp_path / 'deps').resolve()}" in capsys.readouterr().out


def test_module_imports_only_stdlib_and_packaging():
    code = "import sys, harness.tools.wheelhouse; print(sorted(m for m in ('mlflow','hydra','torch','numpy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=wh.PROJECT_ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr


# --------------------------------------------------------------------------- network (opt-in)

@pytest.mark.skipif(os.environ.get("SWIZZLEBENCH_NETWORK_TESTS") != "1",
                    reason="talks to the package index (pip download/--dry-run --report); "
                           "set SWIZZLEBENCH_NETWORK_TESTS=1")
def test_real_build_for_hydra_only(tmp_path):
    proj = tmp_path / "proj"
    (proj / "tinypkg").mkdir(parents=True)
    (proj / "tinypkg" / "__init__.py").write_text("")
    (proj / "pyproject.toml").write_text(textwrap.dedent("""\
        [build-system]
        requires = ["setuptools>=68"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "tinypkg"
        version = "0.0.1"
        dependencies = ["torch>=2.6", "hydra-core>=1.3,<1.4"]
        """))
    dest = tmp_path / "house"
    total = wh.build_wheelhouse(python_version="3.12", platforms=["manylinux_2_28_x86_64"], dest=dest,
                                exclusions=wh.make_exclusions(), project_dir=proj)
    names = {parse_wheel_filename(p.name)[0] for p in dest.glob("*.whl")}
    assert names == {"tinypkg", "hydra-core", "omegaconf", "antlr4-python3-runtime"}
    assert 0 < total < 5e6
    present = {Requirement(r).name for r in wh.read_manifest(dest / wh.MANIFEST_NAME)["requires-present"]}
    assert present == {"torch", "pyyaml", "packaging"}
