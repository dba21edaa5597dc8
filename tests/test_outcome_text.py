"""Outcomes are data: no module outside the mapping module (:mod:`harness.storage.run_fields`)
parses a tag's or a reason's text, and no module outside the defining one
(:mod:`harness.job.verdict`) spells a verdict word.  An AST scan of ``harness/``."""
import ast
import re
from pathlib import Path

from harness.job.verdict import NO_GPU, SAME_ORDER_L2, SAME_ORDER_SIM, SAME_ORDER_TIME, Kind

ROOT = Path(__file__).resolve().parents[1]
DEFINING, MAPPING = ROOT / "harness/job/verdict.py", ROOT / "harness/storage/run_fields.py"
#: Names of values that hold a tag's or a reason's text (a verdict, the roofline's bound, the
#: simulator's validation).
TEXT_LIKE = re.compile(r"verdict|tag|reason|timing|bound|validation", re.I)
#: The words a string literal outside the defining module may not be or open with.  Single
#: words also name other things (the ``baseline`` arm, ``higher`` is better): only phrases.
PHRASES = tuple(k.word for k in Kind if " " in k.word) + (SAME_ORDER_SIM, SAME_ORDER_TIME, SAME_ORDER_L2, NO_GPU)
WORDS = (Kind.FASTER.word, Kind.SLOWER.word)


def _sources() -> list[Path]:
    return [p for p in sorted((ROOT / "harness").rglob("*.py")) if p not in (DEFINING, MAPPING)]


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _tag_value(node: ast.AST) -> bool:
    """``tags["verdict"]``, ``tags.get("l2_verdict")``, ``table["verdict_tag"]``, ``runs["tags.timing"]``."""
    if isinstance(node, ast.Subscript):
        holder, key = node.value, node.slice
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
        holder, key = node.func.value, node.args[0]
    else:
        return False
    if not (isinstance(key, ast.Constant) and isinstance(key.value, str) and TEXT_LIKE.search(key.value)):
        return False
    return "tag" in ast.unparse(holder).lower() or "tag" in key.value


def _offences(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    docs, where = _docstrings(tree), path.relative_to(ROOT)
    out = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("startswith", "endswith")
                and TEXT_LIKE.search(ast.unparse(node.func.value))):
            out.append(f"{where}:{node.lineno}: {ast.unparse(node)[:80]}")
        elif (isinstance(node, ast.Compare) and any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops)
                and any(_tag_value(n) for n in (node.left, *node.comparators))):
            out.append(f"{where}:{node.lineno}: {ast.unparse(node)[:80]}")
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
                and (node.value.strip() in WORDS or node.value.lower().startswith(PHRASES))):
            out.append(f"{where}:{node.lineno}: literal {node.value[:60]!r}")
    return out


def test_no_module_compares_tag_or_reason_text_or_spells_a_verdict_word():
    offences = [o for p in _sources() for o in _offences(p)]
    assert not offences, ("parse through harness.storage.run_fields, spell the words through "
                          "harness.job.verdict:\n" + "\n".join(offences))


def test_the_scan_sees_what_it_forbids(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('def f(tags, timing, r):\n    """Says faster."""\n'
                   '    a = timing.startswith("not measured")\n    b = tags.get("verdict") == "x"\n'
                   '    c = r.tags["l2_verdict"] in ("y",)\n'
                   f'    return "{Kind.NO_DIFFERENCE.word} (CI", "{Kind.SLOWER.word}"\n')
    bad_rel = bad.relative_to(tmp_path)
    import tests.test_outcome_text as me
    root, me.ROOT = me.ROOT, tmp_path
    try:
        found = _offences(bad)
    finally:
        me.ROOT = root
    assert [o.split(":")[1] for o in found] == ["3", "4", "5", "6", "6"], (bad_rel, found)
