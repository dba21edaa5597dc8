"""MLflow names are spelled in one place (issue 53): no module of harness/ (the only package
that records runs) outside harness/storage/ (field_names: the stages' names; run_fields: the typed
outcome's, and the mapping) calls mlflow's log/tag functions or spells a param, metric or
tag name where it writes or reads a result's ``params`` / ``metrics`` / ``tags``
(``x.tags["timing"]``, ``x.metrics.update({"speedup": ...})``, ``"bound" in x.tags``,
``x.params.get("sim.config")``, also through a name bound to one: ``m = x.metrics;
m["tflops"]``), nor a stored column (``"metrics.speedup"``).  A record's own ``as_params()``
(JobSpec's, a compile report's) names its fields where it builds them, in a dict of its own."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIELDS = {"params", "metrics", "tags"}
MLFLOW_WRITES = {"log_param", "log_params", "log_metric", "log_metrics", "set_tag", "set_tags"}
ACCESSORS = {"get", "pop", "setdefault", "update", "__contains__"}
COLUMNS = ("metrics.", "tags.", "params.")

def _literal(node: ast.AST) -> bool:
    """A name spelled in the code: a string constant, an f-string, or one added to a string."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    return isinstance(node, ast.BinOp) and (_literal(node.left) or _literal(node.right))


def _is_field(node: ast.AST, aliases: frozenset[str] = frozenset()) -> bool:
    """``x.params`` / ``x.metrics`` / ``x.tags``, or a name bound to one (``m = result.metrics``)."""
    return (isinstance(node, ast.Attribute) and node.attr in FIELDS) or (isinstance(node, ast.Name)
                                                                        and node.id in aliases)


def _aliases(tree: ast.AST) -> frozenset[str]:
    """The names a module binds to a result's params, metrics or tags."""
    return frozenset(target.id for node in ast.walk(tree) if isinstance(node, ast.Assign) and _is_field(node.value)
                     for target in node.targets if isinstance(target, ast.Name))


def _keys(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.Dict):
        return [k for k in node.keys if k is not None]
    if isinstance(node, ast.DictComp):
        return [node.key]
    return [node]


def spelled(tree: ast.AST) -> list[int]:
    """The lines that spell an MLflow name (the module docstring's rules)."""
    lines, aliases = [], _aliases(tree)
    for node in ast.walk(tree):
        hit = False
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            func = node.func
            if func.attr in MLFLOW_WRITES and isinstance(func.value, ast.Name) and func.value.id == "mlflow":
                hit = True
            elif func.attr in ACCESSORS and _is_field(func.value, aliases) and node.args:
                hit = any(_literal(k) for k in _keys(node.args[0]))
        elif isinstance(node, ast.Subscript):
            hit = _is_field(node.value, aliases) and _literal(node.slice)
        elif isinstance(node, ast.Compare):
            hit = (_literal(node.left) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)
                   and any(_is_field(c, aliases) for c in node.comparators))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            hit = node.value.startswith(COLUMNS) and len(node.value) > len("metrics.")
        if hit:
            lines.append(node.lineno)
    return sorted(set(lines))


def offenders(root: Path = ROOT) -> dict[str, list[int]]:
    """Module path (relative to ``root``) -> the lines that spell an MLflow name."""
    out = {}
    for path in sorted((root / "harness").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("harness/storage/"):
            continue
        found = spelled(ast.parse(path.read_text()))
        if found:
            out[rel] = found
    return out


def test_no_mlflow_name_outside_the_mapping():
    assert offenders() == {}, "spell these names in harness/storage/field_names.py (or run_fields.py)"


def test_the_check_finds_each_form(tmp_path):
    pkg = tmp_path / "harness" / "gates"
    pkg.mkdir(parents=True)
    forms = ['result.tags["gate.x"] = 1', 'result.metrics.update({"speedup": 1.0})', 'r.params.get("sim.config")',
             'ok = "bound" in result.tags', 'mlflow.set_tag("a", "b")', 'col = "metrics.speedup"',
             'result.tags[prefix + "tune"] = 1', 'result.params.update({f"tile.{k}": v for k, v in x})',
             'm = result.metrics', 'm["tflops"] = 1.0']
    clean = ['result.tags[Tag.TIMING] = 1', 'result.metrics.update({Metric.SPEEDUP: 1.0})', 'x = {"a": 1}["a"]',
             'result.tags.update(profiler.tags())']
    (pkg / "m.py").write_text("\n".join(forms + clean) + "\n")
    spelled_lines = [n for n, form in enumerate(forms, 1) if form != 'm = result.metrics']
    assert offenders(tmp_path) == {"harness/gates/m.py": spelled_lines}
