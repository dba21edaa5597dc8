"""harness.tools.wheelhouse: the offline-install wheelhouse, tested without the network.

Every pip call goes through ``harness.tools.wheelhouse.run_command``, which these tests replace
with a fake that writes tiny but real wheel files.  The one test that talks to an index
is skipped unless SWIZZLEBENCH_NETWORK_TESTS=1.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from packaging.tags import sys_tags
from packaging.utils import parse_wheel_filename

from harness.tools import wheelhouse as wh

CP312 = wh.target_tags((3, 12), wh.expand_platforms(["manylinux_2_28_x86_64"]))
ENV312 = wh.marker_environment((3, 12), ["manylinux_2_28_x86_64"])


# --------------------------------------------------------------------------- helpers

def make_wheel(directory: Path, name: str, version: str, requires=(), tag: str = "py3-none-any",
               files: dict[str, str] | None = None) -> Path:
    """A small but valid wheel file."""
    dist = f"{name.replace('-', '_')}-{version}"
    path = Path(directory) / f"{dist}-{tag}.whl"
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Requires-Dist: {r}" for r in requires]
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{dist}.dist-info/METADATA", "\n".join(meta) + "\n")
        zf.writestr(f"{dist}.dist-info/WHEEL", f"Wheel-Version: 1.0\nTag: {tag}\n")
        for rel, text in (files or {}).items():
            zf.writestr(rel, text)
        zf.writestr(f"{dist}.dist-info/RECORD", "")
    return path


def info(name, version="1.0", requires=()):
    return wh.WheelInfo(Path(f"/nowhere/{name}-{version}-py3-none-any.whl"), name, version, list(requires))


def ok(cmd, stdout="", stderr=""):
    return subprocess.CompletedProcess(cmd, 0, stdout=stdout, stderr=stderr)


def _arg(cmd, flag):
    return Path(cmd[cmd.index(flag) + 1])


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
}


class FakePip:
    """Stands in for ``run_command``: records commands, writes wheels like pip would."""

    def __init__(self, download_failures=(), built_tag="py3-none-any"):
        self.calls: list[list[str]] = []
        self.download_failures = list(download_failures)
        self.built_tag = built_tag

    def __call__(self, cmd, **kwargs):
        cmd = list(cmd)
        self.calls.append(cmd)
        if cmd[1:4] == ["-m", "pip", "wheel"]:
            spec, out = cmd[5], _arg(cmd, "-w")
            if Path(spec).is_dir():  # the project itself
                name = wh.read_project_name(Path(spec) / "pyproject.toml")
                make_wheel(out, name, "0.1.0", wh.read_dependencies(Path(spec) / "pyproject.toml"))
            else:
                from packaging.requirements import Requirement

                req = Requirement(spec)
                version = str(next(iter(req.specifier)).version).replace("*", "0") if req.specifier else "1.0"
                make_wheel(out, req.name, version, tag=self.built_tag)
            return ok(cmd)
        if cmd[1:4] == ["-m", "pip", "download"]:
            if self.download_failures:
                missing = self.download_failures.pop(0)
                return subprocess.CompletedProcess(
                    cmd, 1, stdout="", stderr=f"ERROR: Could not find a version that satisfies the requirement "
                                              f"{missing} (from versions: none)\nERROR: No matching distribution "
                                              f"found for {missing}\n")
            dest = _arg(cmd, "-d")
            links = [Path(cmd[i + 1]) for i, a in enumerate(cmd) if a == "--find-links"]
            reqs = cmd[cmd.index(dest.as_posix()) + 1:]
            self._resolve(reqs, dest, links)
            return ok(cmd)
        return ok(cmd)

    def _resolve(self, reqs, dest, links):
        from packaging.requirements import Requirement
        from packaging.utils import canonicalize_name

        local = {}
        for d in links:
            for p in d.glob("*.whl"):
                local[canonicalize_name(parse_wheel_filename(p.name)[0])] = p
        seen, todo = set(), list(reqs)
        while todo:
            req = Requirement(todo.pop())
            if req.marker and not req.marker.evaluate({**ENV312, "extra": ""}):
                continue
            name = canonicalize_name(req.name)
            if name in seen:
                continue
            seen.add(name)
            if name in local:
                (dest / local[name].name).write_bytes(local[name].read_bytes())
                continue
            version, requires, tag = FAKE_INDEX[name]
            make_wheel(dest, name, version, requires, tag)
            todo.extend(requires)


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
        """))
    return proj


# --------------------------------------------------------------------------- pure parts

def test_reads_dependencies_of_the_real_pyproject():
    deps = wh.read_dependencies(wh.PROJECT_ROOT / "pyproject.toml")
    names = {d.split(">")[0].split("<")[0].split("=")[0] for d in deps}
    assert {"torch", "triton", "hydra-core", "mlflow"} <= names


def test_read_dependencies_rejects_bad_requirement(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname="x"\ndependencies=["ok>=1", "not valid !!"]\n')
    with pytest.raises(wh.WheelhouseError, match="bad dependency"):
        wh.read_dependencies(tmp_path / "pyproject.toml")
    with pytest.raises(wh.WheelhouseError, match="not found"):
        wh.read_dependencies(tmp_path / "missing.toml")


def test_default_exclusions():
    ex = wh.make_exclusions()
    for name in ["torch", "triton", "nvidia-cudnn-cu12", "nvidia_nccl_cu12", "numpy", "Pandas", "PyYAML",
                 "typing_extensions", "seaborn", "matplotlib", "scipy", "requests", "jinja2"]:
        assert ex.excludes(name), name
    for name in ["mlflow", "mlflow-skinny", "hydra-core", "omegaconf", "antlr4-python3-runtime", "sqlalchemy"]:
        assert not ex.excludes(name), name
    assert ex.heavy("torch") and ex.heavy("nvidia-cublas-cu12") and not ex.heavy("numpy")


def test_keep_forces_a_package_in_and_exclude_replaces_the_default_list():
    ex = wh.make_exclusions(keep=["NumPy", "torch"])
    assert not ex.excludes("numpy") and not ex.excludes("torch") and not ex.heavy("torch")
    assert ex.excludes("pandas") and ex.excludes("triton")
    ex = wh.make_exclusions(["pandas", "Scikit_Learn", "opentelemetry-*"])
    assert ex.excludes("pandas") and ex.excludes("scikit-learn") and ex.excludes("opentelemetry-sdk")
    assert not ex.excludes("numpy")  # default list replaced ...
    assert ex.excludes("torch") and ex.excludes("nvidia-cusparse-cu12")  # ... heavy ones stay
    assert wh.split_csv(["a, b", "c,,", ""]) == ["a", "b", "c"]


def test_parse_present_file(tmp_path):
    f = tmp_path / "present.txt"
    f.write_text(textwrap.dedent("""\
        # pip list --format=freeze of the GPU image
        numpy==2.1.2
        torch==2.11.0+cu128
        PyYAML==6.0.2   # trailing comment
        my_local_pkg @ file:///build/my_local_pkg-1.0-py3-none-any.whl
        -e git+https://example.invalid/repo.git@abc#egg=edit_me
        Pillow===11.0.0
        bare-name
        """))
    assert wh.parse_present_file(f) == {
        "numpy": "2.1.2", "torch": "2.11.0+cu128", "pyyaml": "6.0.2", "my-local-pkg": None,
        "edit-me": None, "pillow": "11.0.0", "bare-name": None,
    }
    f.write_text("Package    Version\n---------- -------\nnumpy      2.1.2\nscipy      1.14.1\n")
    assert wh.parse_present_file(f) == {"numpy": "2.1.2", "scipy": "1.14.1"}


def test_expand_platforms_adds_older_manylinux_tags():
    plats = wh.expand_platforms(["manylinux_2_28_x86_64"])
    assert plats[0] == "manylinux_2_28_x86_64"
    for p in ["manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
              "manylinux2010_x86_64", "manylinux1_x86_64", "manylinux_2_5_x86_64"]:
        assert p in plats
    assert "manylinux_2_29_x86_64" not in plats and "linux_x86_64" not in plats
    assert len(plats) == len(set(plats))
    assert "manylinux_2_17_aarch64" in wh.expand_platforms(["manylinux2014_aarch64"])
    assert wh.expand_platforms(["win_amd64"]) == ["win_amd64"]
    assert wh.parse_python_version("3.12") == (3, 12) == wh.parse_python_version("312")
    with pytest.raises(wh.WheelhouseError):
        wh.parse_python_version("three")


def test_wheel_tag_compatibility_for_cp312_manylinux_2_28():
    good = ["a-1-py3-none-any.whl", "b-1-py2.py3-none-any.whl",
            "c-1-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
            "d-1-cp311-abi3-manylinux_2_28_x86_64.whl", "e-1-cp312-cp312-manylinux1_x86_64.whl"]
    bad = ["f-1-cp311-cp311-manylinux_2_17_x86_64.whl", "g-1-cp312-cp312-manylinux_2_34_x86_64.whl",
           "h-1-cp312-cp312-win_amd64.whl", "i-1-cp312-cp312-musllinux_1_2_x86_64.whl",
           "j-1-cp312-cp312-manylinux_2_28_aarch64.whl", "k-1-cp312-cp312-linux_x86_64.whl"]
    assert wh.incompatible_wheels(map(Path, good + bad), CP312) == sorted(bad)


def test_marker_environment_of_the_target():
    assert ENV312["python_version"] == "3.12" and ENV312["sys_platform"] == "linux"
    assert ENV312["platform_machine"] == "x86_64" and ENV312["platform_system"] == "Linux"


def test_find_duplicates_detects_two_versions_and_two_builds():
    files = [Path(p) for p in ["PyYAML-6.0.1-cp312-cp312-manylinux_2_17_x86_64.whl",
                               "pyyaml-6.0.2-cp312-cp312-manylinux_2_17_x86_64.whl",
                               "mlflow-3.1.0-py3-none-any.whl",
                               "numpy-2.2.0-cp312-cp312-manylinux_2_17_x86_64.whl",
                               "numpy-2.2.0-cp312-cp312-manylinux_2_28_x86_64.whl"]]
    dups = wh.find_duplicates(files)
    assert set(dups) == {"pyyaml", "numpy"}
    assert wh.find_duplicates(files[1:4]) == {}


def test_select_needed_stops_at_excluded_packages_and_follows_markers_and_extras():
    wheels = {i.name: i for i in [
        info("mlflow", requires=["pandas<4", "sqlalchemy>=4", 'waitress; platform_system == "Windows"',
                                 'gunicorn; platform_system != "Windows"', "foo[bar]"]),
        info("sqlalchemy"), info("gunicorn", requires=["packaging"]), info("waitress"),
        info("pandas", requires=["python-dateutil", "tzdata"]), info("python-dateutil"), info("tzdata"),
        info("hydra-core", requires=["omegaconf", "antlr4-python3-runtime==4.9.*"]),
        info("omegaconf", requires=["PyYAML>=5.1", 'dataclasses; python_version == "3.6"']),
        info("antlr4-python3-runtime", "4.9.3"),
        info("foo", requires=['baz; extra == "bar"', 'qux; extra == "other"', "missing-one"]),
        info("baz"), info("qux"),
    ]}
    sel = wh.select_needed(wheels, ["torch>=2.6", "mlflow>=3", "hydra-core", "pandas>=2"],
                           wh.make_exclusions(), ENV312)
    assert sel.needed == {"mlflow", "sqlalchemy", "gunicorn", "hydra-core", "omegaconf", "antlr4-python3-runtime",
                          "foo", "baz"}
    assert set(sel.assumed) == {"torch", "pandas", "packaging", "pyyaml"}  # not dateutil: only pandas needs it
    assert str(sel.assumed["pandas"]) in ("<4,>=2", ">=2,<4")
    assert sel.unresolved == {"missing-one"}


def test_merge_specifiers_drops_redundant_bounds():
    merged = wh.merge_specifiers(["<5,>=4.0.0", ">=4.10.0", ">=4.16.0", ""])
    assert {str(s) for s in merged} == {"<5", ">=4.16.0"}
    assert {str(s) for s in wh.merge_specifiers([">=2", ">2", "!=3.0"])} == {">2", "!=3.0"}
    assert str(wh.merge_specifiers([""])) == ""


def test_read_wheel_and_manifest_round_trip(tmp_path):
    a = make_wheel(tmp_path, "hydra-core", "1.3.2", ["omegaconf<2.4", 'x; extra == "y"'])
    b = make_wheel(tmp_path, "sqlalchemy", "20.0.0", tag="cp312-cp312-manylinux_2_28_x86_64")
    ia, ib = wh.read_wheel(a), wh.read_wheel(b)
    assert (ia.name, ia.version, ia.requires) == ("hydra-core", "1.3.2", ["omegaconf<2.4", 'x; extra == "y"'])
    total = wh.write_manifest(tmp_path, [ib, ia], python_version="3.12", platforms=["manylinux_2_28_x86_64"],
                              assumed={"torch": wh.merge_specifiers([">=2.6"])})
    assert total == a.stat().st_size + b.stat().st_size
    text = (tmp_path / wh.MANIFEST_NAME).read_text()
    body = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert body == [f"hydra-core 1.3.2 {a.stat().st_size} {a.name}", f"sqlalchemy 20.0.0 {b.stat().st_size} {b.name}"]
    assert f"{total / 1e6:.1f} MB" in text
    man = wh.read_manifest(tmp_path / wh.MANIFEST_NAME)
    assert man.python_version == "3.12" and man.platforms == ["manylinux_2_28_x86_64"]
    assert man.requires_present == ["torch>=2.6"]
    assert man.files == {a.name: a.stat().st_size, b.name: b.stat().st_size}


def test_project_copy_leaves_out_venv_build_and_dest(tmp_path):
    src = tmp_path / "src"
    for d in ["pkg", ".venv/lib", "build/lib", "x.egg-info", ".git", "house", "pkg/__pycache__"]:
        (src / d).mkdir(parents=True)
    (src / "pkg" / "__init__.py").write_text("")
    (src / "pyproject.toml").write_text("")
    wh._copy_project(src, tmp_path / "copy", skip=[src / "house"])
    copied = {p.relative_to(tmp_path / "copy").as_posix() for p in (tmp_path / "copy").rglob("*")}
    assert copied == {"pkg", "pkg/__init__.py", "pyproject.toml"}


def test_command_lines(tmp_path):
    cmd = wh.pip_download_cmd("py", ["mlflow>=3,<4", "hydra-core"], tmp_path / "d", python_version="3.12",
                              platforms=["manylinux_2_28_x86_64", "manylinux2014_x86_64"],
                              find_links=[tmp_path / "b"], constraints=tmp_path / "c.txt")
    assert cmd[:4] == ["py", "-m", "pip", "download"]
    assert "--only-binary=:all:" in cmd and cmd[-2:] == ["mlflow>=3,<4", "hydra-core"]
    assert cmd[cmd.index("--python-version") + 1] == "3.12" and cmd[cmd.index("--implementation") + 1] == "cp"
    assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "--platform"] == ["manylinux_2_28_x86_64",
                                                                            "manylinux2014_x86_64"]
    assert _arg(cmd, "--find-links") == tmp_path / "b" and _arg(cmd, "-d") == tmp_path / "d"
    assert _arg(cmd, "--constraint") == tmp_path / "c.txt"
    assert wh.pip_wheel_cmd("py", "antlr4-python3-runtime==4.9.3", tmp_path) == [
        "py", "-m", "pip", "wheel", "--no-deps", "antlr4-python3-runtime==4.9.3", "-w", str(tmp_path)]
    assert wh.pip_install_cmd("py", tmp_path) == [
        "py", "-m", "pip", "install", "--no-index", "--find-links", str(tmp_path), "swizzlebench"]
    tcmd = wh.pip_install_cmd("py", tmp_path, target=tmp_path / "t", wheels=[tmp_path / "a.whl"])
    assert {"--no-index", "--no-deps", "--upgrade"} <= set(tcmd)
    assert _arg(tcmd, "--target") == tmp_path / "t" and tcmd[-1] == str(tmp_path / "a.whl")


# --------------------------------------------------------------------------- build (pip faked)

def test_build_with_fake_pip(project, tmp_path, monkeypatch, capsys):
    fake = FakePip()
    monkeypatch.setattr(wh, "run_command", fake)
    dest = tmp_path / "house"
    dest.mkdir()
    make_wheel(dest, "mlflow", "2.0.0")  # stale: from an older build
    (dest / "notes.txt").write_text("mine")  # not a wheel: left alone

    total = wh.build_wheelhouse(python_version="3.12", platforms=["manylinux_2_28_x86_64"], dest=dest,
                                exclusions=wh.make_exclusions(), project_dir=project)

    names = {parse_wheel_filename(p.name)[0] for p in dest.glob("*.whl")}
    assert names == {"swizzlebench", "hydra-core", "omegaconf", "antlr4-python3-runtime", "mlflow",
                     "mlflow-skinny", "gunicorn", "sqlalchemy"}
    assert wh.find_duplicates(dest.glob("*.whl")) == {}
    assert (dest / "notes.txt").exists()
    man = wh.read_manifest(dest / wh.MANIFEST_NAME)
    assert set(man.files) == {p.name for p in dest.glob("*.whl")}
    assert total == sum(p.stat().st_size for p in dest.glob("*.whl"))
    present = {r.split("<")[0].split(">")[0].split("=")[0] for r in man.requires_present}
    assert {"torch", "triton", "pandas", "numpy", "seaborn", "pyyaml", "packaging", "typing-extensions"} <= present
    out = capsys.readouterr().out
    assert "total" in out and "MB" in out

    wheel_calls = [c for c in fake.calls if c[3] == "wheel"]
    assert wheel_calls[0][5] == "antlr4-python3-runtime==4.9.3"
    (download,) = [c for c in fake.calls if c[3] == "download"]
    assert not any(a.startswith(("torch", "triton")) for a in download)  # heavy ones never resolved
    assert _arg(download, "--find-links") == Path(wheel_calls[0][-1])
    assert "--constraint" not in download


def test_build_pins_present_versions_and_keep(project, tmp_path, monkeypatch):
    fake = FakePip()
    monkeypatch.setattr(wh, "run_command", fake)
    pins_seen = {}
    real = wh.pip_download_cmd

    def spy(*a, **kw):
        if kw.get("constraints"):
            pins_seen["text"] = Path(kw["constraints"]).read_text()
        return real(*a, **kw)

    monkeypatch.setattr(wh, "pip_download_cmd", spy)
    ex = wh.make_exclusions(keep=["pyyaml"])
    wh.build_wheelhouse(python_version="3.12", platforms=["manylinux_2_28_x86_64"], dest=tmp_path / "h",
                        exclusions=ex, project_dir=project, pins={"numpy": "2.2.0", "pandas": "2.2.3"})
    assert pins_seen["text"] == "numpy==2.2.0\npandas==2.2.3\n"
    names = {parse_wheel_filename(p.name)[0] for p in (tmp_path / "h").glob("*.whl")}
    assert "pyyaml" in names and "numpy" not in names


def test_build_builds_unknown_sdist_only_dependency_and_retries(project, tmp_path, monkeypatch):
    FAKE_INDEX_EXTRA = {"hydra-core": ("1.3.2", ["omegaconf", "antlr4-python3-runtime==4.9.*", "oldpure==1.0"],
                                       "py3-none-any")}
    monkeypatch.setitem(FAKE_INDEX, "hydra-core", FAKE_INDEX_EXTRA["hydra-core"])
    fake = FakePip(download_failures=["oldpure==1.0"])
    monkeypatch.setattr(wh, "run_command", fake)
    wh.build_wheelhouse(python_version="3.12", platforms=["manylinux_2_28_x86_64"], dest=tmp_path / "h",
                        exclusions=wh.make_exclusions(), project_dir=project)
    assert [c[5] for c in fake.calls if c[3] == "wheel"][-1] == "oldpure==1.0"
    assert len([c for c in fake.calls if c[3] == "download"]) == 2
    assert any(p.name.startswith("oldpure-1.0-") for p in (tmp_path / "h").glob("*.whl"))


def test_build_rejects_platform_specific_wheel_from_sdist(project, tmp_path, monkeypatch):
    monkeypatch.setattr(wh, "run_command", FakePip(built_tag="cp311-cp311-linux_x86_64"))
    with pytest.raises(wh.WheelhouseError, match="platform-specific"):
        wh.build_wheelhouse(python_version="3.12", platforms=["manylinux_2_28_x86_64"], dest=tmp_path / "h",
                            exclusions=wh.make_exclusions(), project_dir=project)


def test_build_reports_pip_failure(project, tmp_path, monkeypatch):
    # pip cannot find it, building it from source "works", pip still cannot: give up with pip's error
    fake = FakePip(download_failures=["hydra-core>=1.3,<1.4"] * 2)
    monkeypatch.setattr(wh, "run_command", fake)
    with pytest.raises(wh.WheelhouseError, match="download failed"):
        wh.build_wheelhouse(python_version="3.12", platforms=["manylinux_2_28_x86_64"], dest=tmp_path / "h",
                            exclusions=wh.make_exclusions(), project_dir=project)


def test_cli_build_arguments(monkeypatch, tmp_path):
    seen = {}
    monkeypatch.setattr(wh, "build_wheelhouse", lambda **kw: seen.update(kw) or 0)
    present = tmp_path / "present.txt"
    present.write_text("numpy==2.1.2\ntorch==2.11.0+cu128\nscipy==1.14.1\nsqlalchemy==19.0.0\n")
    rc = wh.main(["build", "--python-version", "3.12", "--platform", "manylinux_2_28_x86_64",
                  "--exclude-present-file", str(present), "--keep", "sqlalchemy", "--dest", str(tmp_path / "w")])
    assert rc == 0 and seen["dest"] == tmp_path / "w" and seen["platforms"] == ["manylinux_2_28_x86_64"]
    ex = seen["exclusions"]
    assert ex.excludes("numpy") and ex.excludes("torch") and not ex.excludes("pandas") and not ex.excludes("sqlalchemy")
    assert seen["pins"] == {"numpy": "2.1.2", "scipy": "1.14.1"}  # not the heavy torch, not the kept sqlalchemy
    wh.main(["build", "--python-version", "3.12", "--platform", "manylinux_2_28_x86_64", "--exclude", "a,b"])
    assert seen["exclusions"].excludes("a") and not seen["exclusions"].excludes("numpy") and seen["pins"] is None
    wh.main(["build", "--python-version", "3.12", "--platform", "manylinux_2_28_x86_64",
             "--also-exclude", "sqlalchemy,numba", "--keep", "numpy"])
    ex = seen["exclusions"]
    assert ex.excludes("sqlalchemy") and ex.excludes("numba") and ex.excludes("pandas") and not ex.excludes("numpy")
    with pytest.raises(SystemExit):
        wh.main(["build", "--python-version", "3.12", "--platform", "x", "--exclude", "a",
                 "--exclude-present-file", str(present)])


# --------------------------------------------------------------------------- install (pip faked)

def _house(tmp_path, tag="py3-none-any", requires_present=None):
    house = tmp_path / "house"
    house.mkdir()
    infos = [wh.read_wheel(make_wheel(house, "swizzlebench", "0.1.0", tag=tag)),
             wh.read_wheel(make_wheel(house, "omegaconf", "2.3.0"))]
    present = requires_present or {"pytest": ">=1"}
    wh.write_manifest(house, infos, python_version="3.12", platforms=["manylinux_2_28_x86_64"],
                      assumed={n: wh.merge_specifiers([s]) for n, s in present.items()})
    return house


def test_install_errors_are_clear(tmp_path, monkeypatch):
    monkeypatch.setattr(wh, "run_command", FakePip())
    with pytest.raises(wh.WheelhouseError, match="not found"):
        wh.install_wheelhouse(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(wh.WheelhouseError, match="no .whl"):
        wh.install_wheelhouse(tmp_path / "empty")
    assert wh.main(["install", "--wheelhouse", str(tmp_path / "absent")]) == 2


def test_install_refuses_wheels_for_another_python(tmp_path, monkeypatch):
    monkeypatch.setattr(wh, "run_command", FakePip())
    other = "cp39-cp39-win32" if sys.version_info[:2] != (3, 9) else "cp310-cp310-win32"
    house = _house(tmp_path, tag=other)
    with pytest.raises(wh.WheelhouseError, match=r"built for Python 3\.12.*" + wh.interpreter_tag()):
        wh.install_wheelhouse(house)


def test_install_detects_incomplete_copy_and_missing_base_packages(tmp_path, monkeypatch):
    monkeypatch.setattr(wh, "run_command", FakePip())
    house = _house(tmp_path, requires_present={"pytest": ">=1", "surely-not-installed-xyz": ">=1"})
    with pytest.raises(wh.WheelhouseError, match="surely-not-installed-xyz is not installed"):
        wh.install_wheelhouse(house)
    next(house.glob("omegaconf-*.whl")).unlink()
    with pytest.raises(wh.WheelhouseError, match="incomplete wheelhouse copy"):
        wh.install_wheelhouse(house)


def test_check_present():
    assert wh.check_present(["pytest>=1"]) == []
    assert "is installed, wheelhouse needs" in wh.check_present(["pytest<1"])[0]
    assert "not installed" in wh.check_present(["surely-not-installed-xyz"])[0]


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


def test_install_reports_broken_requirements(tmp_path, monkeypatch):
    class Broken(FakePip):
        def __call__(self, cmd, **kw):
            if cmd[1:] == ["-m", "pip", "check"]:
                return ok(cmd, stdout="omegaconf 2.3.0 has requirement PyYAML>=5.1.0, but you have pyyaml 3.0.\n"
                                      "someoneelse 1.0 requires thing, which is not installed.\n")
            return super().__call__(cmd, **kw)

    monkeypatch.setattr(wh, "run_command", Broken())
    with pytest.raises(wh.WheelhouseError, match="omegaconf 2.3.0 has requirement") as exc:
        wh.install_wheelhouse(_house(tmp_path))
    assert "someoneelse" not in str(exc.value)  # the image's own problems are not ours


def test_unpack_wheel_without_pip(tmp_path):
    whl = make_wheel(tmp_path, "demo", "1.0", files={
        "demo/__init__.py": "X = 1\n", "demo-1.0.data/purelib/demo_extra.py": "Y = 2\n",
        "demo-1.0.data/scripts/demo-cli": "#!python\n", "demo-1.0.data/headers/demo.h": "",
    })
    target = tmp_path / "t"
    (target / "demo-0.9.dist-info").mkdir(parents=True)  # older version's metadata goes away
    wh.unpack_wheel(whl, target)
    assert (target / "demo" / "__init__.py").read_text() == "X = 1\n"
    assert (target / "demo_extra.py").exists() and (target / "bin" / "demo-cli").exists()
    assert not (target / "demo.h").exists() and not (target / "demo-0.9.dist-info").exists()
    assert (target / "demo-1.0.dist-info" / "METADATA").exists()
    evil = make_wheel(tmp_path, "evil", "1.0", files={"../escape.py": ""})
    with pytest.raises(wh.WheelhouseError, match="unsafe path"):
        wh.unpack_wheel(evil, target)


def test_module_imports_only_stdlib_and_packaging():
    code = "import sys, harness.tools.wheelhouse; print(sorted(m for m in ('mlflow','hydra','torch','numpy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=wh.PROJECT_ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr


# --------------------------------------------------------------------------- network (opt-in)

@pytest.mark.skipif(os.environ.get("SWIZZLEBENCH_NETWORK_TESTS") != "1",
                    reason="talks to the package index; set SWIZZLEBENCH_NETWORK_TESTS=1")
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
    assert {"tinypkg", "hydra-core", "omegaconf", "antlr4-python3-runtime"} <= names
    assert not names & {"torch", "pyyaml", "packaging"}
    assert wh.incompatible_wheels(dest.glob("*.whl"), CP312) == []
    assert 0 < total < 5e6
    if sys.version_info[:2] == (3, 12):
        assert wh.incompatible_wheels(dest.glob("*.whl"), set(sys_tags())) == []
