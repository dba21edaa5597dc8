"""MLflow names are spelled in one place (issue 53): no module of harness/ (the only package
that records runs) outside harness/storage/ (field_names: the stages' and the records' names;
run_fields: the typed outcome's, the job spec's params, and the mapping) calls mlflow's
log/tag functions or spells a param, metric or tag name where it writes or reads a result's
``params`` / ``metrics`` / ``tags`` (``x.tags["timing"]``, ``x.metrics.update({"speedup": ...})``,
``"bound" in x.tags``, ``x.params.get("sim.config")``, also through a name bound to one:
``m = x.metrics; m["tflops"]``), nor a stored column (``"metrics.speedup"``), nor where a
record builds its fields: a key of a dict, or of a subscript assignment, in a writer method
(``as_params`` / ``as_metrics`` / ``as_tags``, a profiler's ``tags()``) or in the value of a
variable or keyword argument named for them (``common_tags = {"git_commit": ...}``,
``start_sweep(params={"sweep.overrides": ...})``).  No module is exempt."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIELDS = {"params", "metrics", "tags"}
MLFLOW_WRITES = {"log_param", "log_params", "log_metric", "log_metrics", "set_tag", "set_tags"}
ACCESSORS = {"get", "pop", "setdefault", "update", "__contains__"}
COLUMNS = ("metrics.", "tags.", "params.")
#: A record's own MLflow fields: the methods that build them (``JobSpec``'s, a compile report's,
#: a profiler's ``tags()``), and the names of a variable or keyword argument that holds them
#: (``common_tags = {...}``, ``start_sweep(params={...})``).
WRITERS = {"as_params", "as_metrics", "as_tags", "tags"}
RECORDS = ("params", "metrics", "tags")

def _literal(node: ast.AST) -> bool:
    """A name spelled in the code: a string constant, an f-string, or one added to a string."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):   # f"tile.{k}" spells a name; f"{prefix}{Metric.TFLOPS}" does not
        return any(isinstance(v, ast.Constant) and v.value for v in node.values)
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


def _record(name: str | None) -> bool:
    """A variable or keyword named for a record's fields: ``tags``, ``common_tags``, ``params``."""
    return bool(name) and (name in RECORDS or name.endswith(tuple("_" + r for r in RECORDS)))


def _written(node: ast.AST) -> list[ast.AST]:
    """The keys a writer's body spells: of its dicts, and of its subscript assignments
    (``out["compile.sgprs"] = ...``)."""
    keys = []
    for inner in ast.walk(node):
        if isinstance(inner, (ast.Dict, ast.DictComp)):
            keys += _keys(inner)
        elif isinstance(inner, ast.Assign):
            keys += [t.slice for t in inner.targets if isinstance(t, ast.Subscript)]
    return keys


def _writers(tree: ast.AST) -> list[ast.AST]:
    """The parts of a module that build a record's MLflow fields (:data:`WRITERS`, :func:`_record`)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in WRITERS:
            out.append(node)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and _record(t.id) for t in node.targets):
            out.append(node.value)
        elif isinstance(node, ast.Call):
            out += [k.value for k in node.keywords if _record(k.arg)]
    return out


def spelled(tree: ast.AST) -> list[int]:
    """The lines that spell an MLflow name (the module docstring's rules)."""
    lines, aliases = [], _aliases(tree)
    lines += [key.lineno for writer in _writers(tree) for key in _written(writer) if _literal(key)]
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
    writers = ['def as_params(self): return {"compile.arch": self.arch}',
               'def as_metrics(self, p=""): return {f"{p}pct_of_peak": self.pct}',
               'def tags(self): return {"profiler": self.name}',
               'common_tags = {"git_commit": git_commit()}',
               'run_id = tracker.start_sweep(params={"sweep.overrides": text})',
               'def as_tags(self):\n    out = {}\n    out["tune.rule"] = self.rule\n    return out']
    clean = ['result.tags[Tag.TIMING] = 1', 'result.metrics.update({Metric.SPEEDUP: 1.0})', 'x = {"a": 1}["a"]',
             'result.tags.update(profiler.tags())', 'def as_params(self): return {Param.COMPILE_ARCH: self.arch}',
             'def as_metrics(self, p=""): return {f"{p}{Metric.PCT_OF_PEAK}": self.pct}',
             'common_tags = {Tag.GIT_COMMIT: git_commit()}', 'def summary(self): return {"arch": self.arch}',
             'settings = {"tune": 1}']
    (pkg / "m.py").write_text("\n".join(forms + writers + clean) + "\n")
    spelled_lines = [n for n, form in enumerate(forms, 1) if form != 'm = result.metrics']
    spelled_lines += [len(forms) + n for n in range(1, len(writers))] + [len(forms) + len(writers) + 2]
    assert offenders(tmp_path) == {"harness/gates/m.py": spelled_lines}
