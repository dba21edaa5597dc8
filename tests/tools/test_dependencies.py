"""Every third-party module the project's code imports is declared in pyproject.toml, as a
dependency or in an extra, with a version bound: nothing arrives only through another
package's requirements (scipy, sqlalchemy, requests through mlflow)."""
from __future__ import annotations

import ast
import importlib.metadata
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from harness.tools.wheelhouse import PROJECT_ROOT

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

#: The folders installed as the project's packages (pyproject's [tool.setuptools] packages).
CODE = ("harness", "kernels", "swizzles", "hydra_plugins", "conf")
#: Top-level names of the project itself.
OWN = {"harness", "kernels", "swizzles", "hydra_plugins", "conf", "swizzlebench_conf"}
#: Imported but not a dependency: pip, whose vendored ``packaging`` the wheelhouse falls back
#: to on a bare interpreter (harness/tools/wheelhouse.py).
NOT_DEPENDENCIES = {"pip"}


def imported_modules(paths: list[Path]) -> dict[str, set[str]]:
    """Top-level names of the absolute imports in ``paths`` that are neither the standard
    library nor the project: name -> the files importing it."""
    found: dict[str, set[str]] = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in OWN:
                    found.setdefault(top, set()).add(str(path))
    return found


def declared(pyproject: Path) -> dict[str, Requirement]:
    """Every requirement of ``[project]`` dependencies and optional-dependencies, by canonical name."""
    project = tomllib.loads(pyproject.read_text())["project"]
    texts = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra)]
    return {canonicalize_name(r.name): r for r in map(Requirement, texts)}


def undeclared(imports: dict[str, set[str]], requirements: dict[str, Requirement]) -> dict[str, str]:
    """Imported modules whose distribution is not declared: module -> its distribution(s)."""
    distributions = importlib.metadata.packages_distributions()
    missing = {}
    for module in sorted(set(imports) - NOT_DEPENDENCIES):
        dists = {canonicalize_name(d) for d in distributions.get(module, [module])}
        if not dists & set(requirements):
            missing[module] = ", ".join(sorted(dists))
    return missing


def _code_files() -> list[Path]:
    return sorted(p for folder in CODE for p in (PROJECT_ROOT / folder).rglob("*.py"))


def test_every_imported_library_is_declared():
    missing = undeclared(imported_modules(_code_files()), declared(PROJECT_ROOT / "pyproject.toml"))
    assert missing == {}, f"imported but not declared in pyproject.toml: {missing}"


def test_every_library_the_tests_import_is_declared():
    """The tests' imports too (the dev extra): the benchmark scripts they import by path are the project's."""
    scripts = {p.stem for p in (PROJECT_ROOT / "benchmarks").rglob("*.py")}
    found = imported_modules(sorted((PROJECT_ROOT / "tests").rglob("*.py")))
    missing = undeclared({m: f for m, f in found.items() if m not in scripts | {"tests"}},
                         declared(PROJECT_ROOT / "pyproject.toml"))
    assert missing == {}, f"imported by tests but not declared in pyproject.toml: {missing}"


def test_the_check_catches_an_undeclared_import(tmp_path):
    """Control: a module importing scipy and tabulate, against a pyproject declaring only scipy."""
    module = tmp_path / "m.py"
    module.write_text("import scipy.stats\nfrom tabulate import tabulate\nimport json\nfrom harness import app\n")
    (tmp_path / "pyproject.toml").write_text('[project]\ndependencies = ["scipy>=1"]\n'
                                             '[project.optional-dependencies]\ndev = []\n')
    found = imported_modules([module])
    assert set(found) == {"scipy", "tabulate"}
    assert undeclared(found, declared(tmp_path / "pyproject.toml")) == {"tabulate": "tabulate"}


@pytest.mark.parametrize("name", sorted(declared(PROJECT_ROOT / "pyproject.toml")))
def test_every_requirement_has_a_lower_bound(name):
    requirement = declared(PROJECT_ROOT / "pyproject.toml")[name]
    assert any(spec.operator in (">=", "==", "~=") for spec in requirement.specifier), requirement


def test_triton_is_bounded_to_tested_versions_and_tomli_only_where_needed():
    requirements = declared(PROJECT_ROOT / "pyproject.toml")
    triton = requirements["triton"].specifier
    assert "3.6.0" in triton and "3.9.0" in triton and "3.10.0" not in triton
    assert requirements["tomli"].marker.evaluate({"python_version": "3.10"})
    assert not requirements["tomli"].marker.evaluate({"python_version": "3.11"})
