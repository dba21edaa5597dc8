"""The house's shape: no import cycle among swizzlebench's modules (counting imports inside
functions too: a lazy import still couples two modules), none between the folders
(packages) of ``harness/``, and no module over ~400 lines unless its docstring says why
(a paragraph starting ``Length:``)."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "kernels", "swizzles", "hydra_plugins")
MAX_LINES = 420


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports, resolved to the longest existing module name."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base]) if base else ".".join(up)
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    # a package's __init__ re-exporting its modules is not a cycle with them: drop
    # "package -> its own submodule" edges
    graph = {m: {t for t in deps if not t.startswith(m + ".")} for m, deps in graph.items()}
    assert _cycles(graph) == []


def _folder(name: str) -> str:
    """The unit a module belongs to for the folder check: ``harness.<folder>`` for a module
    inside a package of harness/, the module itself for one at harness/'s top level (app,
    schema, ...), the top-level package for anything else (kernels, swizzles, ...)."""
    parts = name.split(".")
    if parts[0] != "harness" or len(parts) == 1:
        return parts[0]
    return ".".join(parts[:2])


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph collapsed to folders (:func:`_folder`), without self-edges."""
    out: dict[str, set[str]] = {}
    for name, deps in graph.items():
        unit = _folder(name)
        out.setdefault(unit, set()).update(_folder(d) for d in deps if _folder(d) != unit)
    for deps in list(out.values()):
        for dep in deps:
            out.setdefault(dep, set())
    return out


def test_no_import_cycles_between_folders():
    """No folder of harness/ imports a folder (or top-level module) that imports it back:
    the folders read as the job's path (job -> compile / tune / measure -> run)."""
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert _cycles(folder_graph(graph)) == []


def test_the_folder_check_finds_a_cycle():
    graph = {"harness.job.spec": {"harness.measure.timing"}, "harness.measure.timing": set(),
             "harness.measure.paired": {"harness.job.result"}, "harness.job.result": set(),
             "harness.app": {"harness.job.spec"}}
    assert _cycles(folder_graph(graph)) == [["harness.job", "harness.measure"]]
    del graph["harness.measure.paired"]
    assert _cycles(folder_graph(graph)) == []


def test_the_check_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]


@pytest.mark.parametrize("name", sorted(_modules()))
def test_long_modules_say_why(name):
    path = _modules()[name]
    text = path.read_text()
    lines = text.count("\n")
    if lines <= MAX_LINES:
        return
    doc = ast.get_docstring(ast.parse(text)) or ""
    assert "\nLength:" in "\n" + doc, f"{path.relative_to(ROOT)} has {lines} lines and no 'Length:' paragraph"
