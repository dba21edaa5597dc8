"""User swizzle formulas (swizzles.custom): the language, its rejections, the generated jit
remap (same tables as the built-in swizzles), the cache, and that nothing is ever eval'ed."""
from __future__ import annotations

import ast
import builtins
import hashlib
import inspect
import itertools
import json
import os
import pickle
import random
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from swizzles import get_swizzle
from swizzles.custom import (ALLOWED_FORMS, MAX_CHARS, FormulaError, compile_formula, formula_cache_dir,
                             generate_source, load_formula_file, parse_formula, zero_divisor)
from swizzles.permutation import check_permutation, remap_table

GRIDS = [(1, 1), (1, 7), (3, 7), (5, 5), (4, 2), (8, 8), (13, 11), (125, 8), (9, 1), (64, 1)]
LAUNCH = [(8, 4), (1, 8)]   # (num_xcds, group_size): MI300X-like, NVIDIA-like

XCD = ("min(pid % num_xcds, num_pids % num_xcds) * (num_pids // num_xcds + 1)"
       " + max(pid % num_xcds - num_pids % num_xcds, 0) * (num_pids // num_xcds) + pid // num_xcds")
GROUPED = """\
# Triton tutorial GROUP_SIZE_M ordering
num_pid_in_group = group_size * num_pid_n
group_id = pid // num_pid_in_group
first_pid_m = group_id * group_size
group_size_m = min(num_pid_m - first_pid_m, group_size)   # the last group may be short
pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
pid_n = (pid % num_pid_in_group) // group_size_m
new_pid = pid_m * num_pid_n + pid_n
"""
XCD_GROUPED = f"chunked = {XCD}\n" + GROUPED.replace("pid %", "chunked %").replace("pid //", "chunked //")
SEED_XCD = """\
xcd = pid % num_xcds
local = pid // num_xcds
new_pid = (local + xcd * (num_pids // num_xcds)) % num_pids
"""
SEED_ATTEMPT1 = """\
xcd = (pid // num_xcds) % num_xcds
local = pid % num_xcds
new_pid = xcd * (num_pids // num_xcds) + local
"""
SEED_ATTEMPT2 = """\
a = (pid // (num_pids // num_xcds)) % num_xcds
b = (pid % (num_pids // num_xcds)) // num_xcds
new_pid = a * (num_pids // num_xcds) + b
"""
SEED_PATCH = "(pid % num_pid_n) * (pid // num_pid_n)"

#: formula in the language -> the built-in swizzle it must reproduce
AS_BUILTIN = {
    "pid": "identity",
    XCD: "xcd",
    GROUPED: "grouped",
    XCD_GROUPED: "xcd_grouped",
    SEED_XCD: "seed_xcd",
    SEED_ATTEMPT1: "seed_attempt1",
    SEED_ATTEMPT2: "seed_attempt2",
    SEED_PATCH: "seed_patch",
}


@pytest.fixture(autouse=True, scope="module")
def formula_cache(tmp_path_factory):
    """Generated modules go to a temporary cache directory, shared by this module's tests."""
    cache = tmp_path_factory.mktemp("swizzlebench-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SWIZZLEBENCH_CACHE", str(cache))
        yield cache


def _table(formula_or_fn, grid, num_xcds=8, group_size=4) -> np.ndarray:
    fn = compile_formula(formula_or_fn) if isinstance(formula_or_fn, str) else formula_or_fn
    return remap_table(fn, *grid, num_xcds=num_xcds, group_size=group_size)


# --------------------------------------------------------------------------- valid formulas


@pytest.mark.parametrize("launch", LAUNCH, ids=lambda l: f"x{l[0]}g{l[1]}")
@pytest.mark.parametrize("formula", list(AS_BUILTIN), ids=list(AS_BUILTIN.values()))
def test_formulas_reproduce_the_builtin_swizzles(formula, launch):
    num_xcds, group_size = launch
    builtin = get_swizzle(AS_BUILTIN[formula])
    for grid in GRIDS:
        if AS_BUILTIN[formula] == "seed_attempt2" and grid[0] * grid[1] < num_xcds:
            continue   # divides by zero there: compared in test_runtime_division_by_zero_...
        expected = _table(builtin, grid, num_xcds, group_size)
        assert _table(formula, grid, num_xcds, group_size).tolist() == expected.tolist(), grid


def test_builtin_equivalents_pass_and_fail_the_gate_like_the_builtins():
    valid = ["pid", XCD, GROUPED, XCD_GROUPED]
    for formula in valid:
        for grid in GRIDS:
            assert check_permutation(_table(formula, grid)).ok, (formula, grid)
    # 1000 pids: seed_xcd is a permutation; 1001 pids: it is not.
    assert check_permutation(_table(SEED_XCD, (125, 8))).ok
    verdict = check_permutation(_table(SEED_XCD, (1001, 1)))
    assert not verdict.ok and verdict.never_run > 0 and verdict.run_twice > 0


@pytest.mark.parametrize("formula", ["pid * 2", "pid % 3", "0", "num_pids - pid", "min(pid, 5)",
                                     SEED_ATTEMPT1, SEED_ATTEMPT2, SEED_PATCH])
def test_non_permutations_are_rejected_by_the_gate(formula):
    verdict = check_permutation(_table(formula, (13, 11)))
    assert not verdict.ok
    assert verdict.reason.startswith("not a permutation of 143 pids:")


def test_min_max_and_unary_minus():
    assert _table("min(pid, 3)", (1, 6)).tolist() == [0, 1, 2, 3, 3, 3]
    assert _table("max(pid, 3)", (1, 6)).tolist() == [3, 3, 3, 3, 4, 5]
    assert _table("-pid + num_pids - 1", (1, 5)).tolist() == [4, 3, 2, 1, 0]
    assert _table("max(min(num_xcds, group_size), -1) + pid * 0", (1, 2), 8, 4).tolist() == [4, 4]
    assert check_permutation(_table("num_pids - 1 - pid", (13, 11))).ok


def test_multi_line_program_with_comments_blank_lines_and_reuse():
    program = """
# reverse the grid, in steps

last = num_pids - 1      # the last tile
new_pid = last - pid
new_pid = new_pid + 0    # a name may be reassigned
"""
    formula = parse_formula(program)
    assert [a.name for a in formula.assignments] == ["last", "new_pid", "new_pid"]
    assert [a.line for a in formula.assignments] == [4, 5, 6]
    assert formula.text == "last = num_pids - 1\nnew_pid = last - pid\nnew_pid = new_pid + 0\n"
    assert _table(program, (3, 4)).tolist() == list(range(11, -1, -1))


def test_single_expression_means_new_pid():
    formula = parse_formula("pid  # identity")
    assert formula.text == "new_pid = pid\n"
    assert [(a.name, a.expr) for a in formula.assignments] == [("new_pid", "pid")]
    assert _table("pid", (13, 11)).tolist() == list(range(143))


def test_arithmetic_is_int32_with_c_division_on_gpu_and_interpreter_alike():
    # // and % truncate toward zero, also for constants folded at parse time ...
    assert _table("(pid - 7) // 2", (1, 4)).tolist() == [-3, -3, -2, -2]
    assert _table("(0 - 7) // 2 + pid * 0", (1, 2)).tolist() == [-3, -3]
    assert _table("-pid % 3", (1, 4)).tolist() == [0, -1, -2, 0]
    # ... and for NUM_XCDS / GROUP_SIZE, which Triton would otherwise fold as Python ints.
    assert _table("(num_xcds - 9) // 2 + pid * 0", (1, 2), 8, 4).tolist() == [0, 0]
    # Overflow wraps instead of failing, whatever the operands.
    wrapped = _table("num_xcds * 2147483647 * 2147483647 * 2147483647 + pid", (1, 3), 8, 4)
    assert wrapped.tolist() == [-8, -7, -6]
    assert check_permutation(_table("pid * 2147483647 * 2147483647", (1, 4))).ok


def test_normalized_text_keeps_the_tree_and_is_a_fixed_point():
    samples = ["((pid))", "pid - (1 - pid)", "(pid - 1) - pid", "pid // (2 * 3)", "(pid // 2) * 3",
               "-(pid + 1)", "(-pid) * 2", "-(-pid)", "- -pid", "min((pid), max(1, (2 + 3)))",
               "pid % (num_xcds % 3)", "(pid * 2) * 3", "pid * (2 * 3)", XCD]
    for sample in samples:
        text = parse_formula(sample).text
        normalized = text.removeprefix("new_pid = ").rstrip("\n")
        assert ast.dump(ast.parse(normalized)) == ast.dump(ast.parse(sample)), sample
        assert parse_formula(text).text == text


# --------------------------------------------------------------------------- random formulas


def _random_expression(rng: random.Random, depth: int) -> str:
    """A fully parenthesized random expression of the language."""
    if depth == 0 or rng.random() < 0.25:
        return rng.choice(["pid", "num_pids", "num_xcds", "num_pid_m", "num_pid_n", "group_size",
                           str(rng.randrange(0, 10)), str(rng.randrange(1, 2**31))])
    kind = rng.choice(["+", "-", "*", "//", "%", "neg", "min", "max"])
    a, b = _random_expression(rng, depth - 1), _random_expression(rng, depth - 1)
    if kind == "neg":
        return f"(-{a})"
    if kind in ("min", "max"):
        return f"{kind}({a}, {b})"
    return f"({a} {kind} {b})"


def _int32_oracle(node: ast.expr, env: dict[str, int]) -> int | None:
    """Independent reference: C-style int32 semantics (wrap, truncating division); None for
    a division by zero."""
    def wrap(value: int) -> int:
        return (value + 2**31) % 2**32 - 2**31

    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.UnaryOp):
        value = _int32_oracle(node.operand, env)
        return None if value is None else wrap(-value)
    if isinstance(node, ast.Call):
        values = [_int32_oracle(arg, env) for arg in node.args]
        return None if None in values else (min if node.func.id == "min" else max)(values)
    left, right = _int32_oracle(node.left, env), _int32_oracle(node.right, env)
    if left is None or right is None:
        return None
    if isinstance(node.op, (ast.FloorDiv, ast.Mod)):
        if right == 0:
            return None
        quotient = abs(left) // abs(right)
        quotient = quotient if (left < 0) == (right < 0) else -quotient
        return wrap(quotient) if isinstance(node.op, ast.FloorDiv) else wrap(left - right * quotient)
    return wrap({ast.Add: left + right, ast.Sub: left - right, ast.Mult: left * right}[type(node.op)])


def test_random_formulas_match_an_int32_oracle():
    rng = random.Random(20240611)
    grid, num_xcds, group_size = (3, 5), 8, 4
    checked = 0
    while checked < 25:
        expression = _random_expression(rng, depth=4)
        try:
            formula = parse_formula(expression)
        except FormulaError as error:
            assert "division by zero" in error.problem or "32-bit" in error.problem, error
            continue
        tree = ast.parse(formula.text).body[0].value
        env = {"num_pids": 15, "num_xcds": num_xcds, "num_pid_m": 3, "num_pid_n": 5, "group_size": group_size}
        expected = [_int32_oracle(tree, {**env, "pid": pid}) for pid in range(15)]
        if None in expected:
            continue   # a runtime division by zero: undefined on a GPU
        assert _table(expression, grid, num_xcds, group_size).tolist() == expected, expression
        checked += 1


def test_fuzzed_text_gives_a_formula_or_a_formula_error_and_nothing_else():
    rng = random.Random(7)
    pieces = ["pid", "num_pids", "x", "new_pid", "min", "max", "(", ")", ",", "=", "+", "-", "*", "//",
              "%", "/", "**", ".", "[", "]", "'", '"', "#", "\n", " ", "\t", "\\", "0", "7", "1.5", "if",
              "lambda", ":", ";", "é", "\x00", "\ud800", "__class__", "0x1", "2147483648", "{", "@", "~", "<", ":="]
    accepted = 0
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 14)))
        try:
            formula = parse_formula(text)
        except FormulaError as error:
            assert error.line is not None and error.column is not None
            continue
        accepted += 1
        assert parse_formula(formula.text).text == formula.text
        generate_source(formula)
    assert accepted > 0


# --------------------------------------------------------------------------- rejections


HOSTILE = [
    # (text, line, column, words the problem must contain)
    ("__import__('os').system('x')", 1, 1, "name '__import__' is not allowed"),
    ("pid.__class__", 1, 4, "attribute access"),
    ("(lambda: 1)()", 1, 2, "keyword `lambda`"),
    ("pid ** 99999999", 1, 5, "powers"),
    ("[x for x in range(9)]", 1, 1, "lists"),
    ("open('f')", 1, 6, "string literals"),
    ("open(pid)", 1, 1, "calling `open` is not allowed"),
    ("pid / 2", 1, 5, "use `//`"),
    ("pid // 0", 1, 8, "division by zero"),
    ("pid % (3 - 3)", 1, 8, "division by zero"),
    ("x = 0\nnew_pid = pid // x", 2, 18, "division by zero"),
    ("pid if pid else 0", 1, 5, "keyword `if`"),
    ('"a"', 1, 1, "string literals"),
    ("f'{pid}'", 1, 1, "string literals"),
    ("1.5", 1, 1, "number '1.5'"),
    ("0x10", 1, 1, "decimal"),
    ("2147483648", 1, 1, "too large"),
    ("65536 * 65536 + pid", 1, 1, "32-bit"),
    ("(" * 500 + "pid" + ")" * 500, 1, 33, "parentheses nested"),
    ("-" * 20 + "pid", 1, 9, "unary signs"),
    ("+".join(["pid"] * 100), 1, 1, "nested more than 64"),
    ("pid + " * 2000 + "pid", 1, MAX_CHARS + 1, "characters long"),
    ("foo", 1, 1, "name `foo` is not defined"),
    ("a = b\nb = pid\nnew_pid = a", 1, 5, "name `b` is not defined"),
    ("a = pid\nb = a", 2, 1, "the last line must assign new_pid"),
    ("new_pid = pid\nx = 1", 2, 1, "the last line must assign new_pid"),
    ("", 1, 1, "empty"),
    ("\n  \n# only a comment\n", 1, 1, "empty"),
    ("pid = 3\nnew_pid = pid", 1, 1, "`pid` is an input"),
    ("num_xcds = 3\nnew_pid = pid", 1, 1, "`num_xcds` is an input"),
    ("min = 3\nnew_pid = pid", 1, 1, "`min` is a function"),
    ("max", 1, 1, "`max` can only be called"),
    ("min(pid)", 1, 1, "exactly two arguments"),
    ("max(pid, 1, 2)", 1, 1, "exactly two arguments"),
    ("min(pid, b=2)", 1, 10, "keyword arguments"),
    ("min(*pid)", 1, 5, "starred"),
    ("(new_pid := pid)", 1, 10, "assignment expressions"),
    ("pid[0]", 1, 4, "subscripts"),
    ("pid < 3", 1, 5, "operator `<`"),
    ("pid & 3", 1, 5, "operator `&`"),
    ("pid << 3", 1, 5, "operator `<<`"),
    ("~pid", 1, 1, "operator `~`"),
    ("+pid", 1, 1, "the only unary operator is `-`"),
    ("not pid", 1, 1, "keyword `not`"),
    ("pid and 1", 1, 5, "keyword `and`"),
    ("x = 1; new_pid = x", 1, 6, "one assignment per line"),
    ("a = b = pid", 1, 5, "chained assignments"),
    ("a, b = pid, pid\nnew_pid = a", 1, 1, "single name"),
    ("new_pid: int = pid", 1, 8, "`:`"),
    ("new_pid += 1", 1, 9, "operator `+=`"),
    ("pid\nnew_pid = pid", 1, 1, "must be an assignment"),
    ("import os\nnew_pid = pid", 1, 1, "keyword `import`"),
    ("new_pid = pid\n  x = 1", 2, 1, "indentation"),
    ("(pid", 1, 1, "never closed"),
    ("pid)", 1, 4, "unmatched"),
    ("pid\x00", 1, 4, "character"),
    ("pid\u00a0+ 1", 1, 4, "character"),
    ("new_pid = pid $ 1", 1, 15, "character '$'"),
    ("_x = pid\nnew_pid = _x", 1, 1, "name '_x' is not allowed"),
    ("né = pid\nnew_pid = né", 1, 1, "is not allowed"),
    ("pid @ pid", 1, 5, "operator `@`"),
    ("{pid}", 1, 1, "sets and dicts"),
    ("True", 1, 1, "keyword `True`"),
]


@pytest.mark.parametrize("text, line, column, problem", HOSTILE, ids=[repr(h[0][:24]) for h in HOSTILE])
def test_hostile_and_invalid_inputs_are_rejected_with_position_and_allowed_forms(text, line, column, problem):
    with pytest.raises(FormulaError) as caught:
        parse_formula(text)
    error = caught.value
    assert isinstance(error, ValueError)
    assert problem in error.problem
    assert (error.line, error.column) == (line, column)
    message = str(error)
    assert f"line {line}, column {column}: " in message
    assert ALLOWED_FORMS in message
    with pytest.raises(FormulaError):
        compile_formula(text)


def test_error_message_shows_the_line_with_a_caret():
    with pytest.raises(FormulaError) as caught:
        parse_formula("a = pid\nnew_pid = a.__class__")
    assert str(caught.value).splitlines()[:3] == [
        "swizzle formula: line 2, column 12: attribute access `.` is not allowed",
        "    new_pid = a.__class__",
        "               ^",
    ]


def test_formula_error_survives_pickling():
    with pytest.raises(FormulaError) as caught:
        parse_formula("pid / 2")
    copy = pickle.loads(pickle.dumps(caught.value))
    assert str(copy) == str(caught.value) and (copy.line, copy.column) == (1, 5)


def test_runtime_division_by_zero_does_not_crash_and_the_gate_rejects_it():
    for formula, grid in [("pid // (pid - pid)", (3, 4)), ("pid % (num_xcds - 8)", (3, 4)),
                          ("pid // (num_pid_m - 1)", (1, 6)), (SEED_ATTEMPT2, (1, 4))]:
        verdict = check_permutation(_table(formula, grid, num_xcds=8, group_size=4))
        assert not verdict.ok, formula


def test_names_of_the_generated_code_can_be_used_freely():
    # tl, triton and the parameter names of the generated remap must not be shadowed.
    program = ("tl = pid\ntriton = tl + 0\nNUM_XCDS = triton\nin_num_pids = NUM_XCDS\n"
               "var_x = in_num_pids\nx = var_x\nnew_pid = min(x, max(tl, 0))")
    assert _table(program, (13, 11)).tolist() == list(range(143))


# --------------------------------------------------------------------------- compiled code, cache


def test_generated_source_is_the_whitelisted_translation():
    source = generate_source(parse_formula(SEED_XCD.replace("local + xcd", "max(local, 0) + xcd")))
    body = source.split('"""\n', 2)[-1]
    assert "    var_xcd = pid % in_num_xcds\n" in body
    assert ("    var_new_pid = (tl.maximum(var_local, 0) + var_xcd * (in_num_pids // in_num_xcds))"
            " % in_num_pids\n") in body
    assert "    in_num_pids = in_num_pid_m * in_num_pid_n\n" in body
    assert "    in_num_xcds = tl.cast(NUM_XCDS, tl.int32)\n" in body
    assert "    in_group_size = tl.cast(GROUP_SIZE, tl.int32)\n" in body
    assert body.rstrip().endswith("return var_new_pid")
    # Constant subexpressions are folded (C semantics), never left to Triton's constexpr math.
    folded = generate_source(parse_formula("a = 0 - 7\nnew_pid = pid + a // 2 + min(3, 9) * a"))
    assert "    var_new_pid = pid + -3 + -21\n" in folded


def test_compiled_function_is_a_jit_remap_from_a_content_addressed_cache_file(formula_cache):
    fn = compile_formula(SEED_XCD)
    source = generate_source(parse_formula(SEED_XCD))
    path = formula_cache_dir() / f"{hashlib.sha256(source.encode()).hexdigest()}.py"
    assert formula_cache_dir() == formula_cache / "formulas"
    assert path.read_text() == source
    assert inspect.getsource(fn.fn).startswith("@triton.jit\ndef remap(pid, num_pid_m, num_pid_n, "
                                               "NUM_XCDS: tl.constexpr, GROUP_SIZE: tl.constexpr):")
    assert list(inspect.signature(fn.fn).parameters) == ["pid", "num_pid_m", "num_pid_n", "NUM_XCDS",
                                                         "GROUP_SIZE"]
    assert "xcd = pid % num_xcds" in inspect.getsource(fn.fn)   # the artifact shows the formula
    # Same program written differently: same file, same function object.
    respelled = "xcd=pid%num_xcds\n\nlocal = (pid // num_xcds)  # c\nnew_pid=(local+xcd*(num_pids//num_xcds))%num_pids"
    assert compile_formula(respelled) is fn
    assert not list(formula_cache_dir().glob(".tmp-*"))


def test_a_tampered_cache_file_is_rewritten_before_import(formula_cache):
    text = "num_pids - 1 - pid + 0 * 12345"
    source = generate_source(parse_formula(text))
    path = formula_cache_dir() / f"{hashlib.sha256(source.encode()).hexdigest()}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("raise SystemExit('tampered')\n")
    fn = compile_formula(text)
    assert path.read_text() == source
    assert _table(fn, (1, 4)).tolist() == [3, 2, 1, 0]


_GPU_COMPILE_SCRIPT = """
import json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.runtime.jit import JITFunction
from swizzles import permutation
from swizzles.custom import compile_formula

signature = {"out_ptr": "*i32", "num_pid_m": "i32", "num_pid_n": "i32", "SWIZZLE": "constexpr",
             "NUM_XCDS": "constexpr", "GROUP_SIZE": "constexpr", "BLOCK": "constexpr"}
for formula in json.loads(sys.argv[1]):
    remap = compile_formula(formula)
    assert isinstance(remap, JITFunction), type(remap)
    for target in [GPUTarget("cuda", 90, 32), GPUTarget("hip", "gfx942", 64)]:
        for one in [{}, {"num_pid_m": 1}]:   # Triton specializes an argument equal to 1
            source = ASTSource(fn=permutation._remap_table_kernel,
                               signature={**signature, **{name: "constexpr" for name in one}},
                               constexprs={"SWIZZLE": remap, "NUM_XCDS": 8, "GROUP_SIZE": 4,
                                           "BLOCK": 1024, **one})
            assert "tt.store" in triton.compile(source, target=target).asm["ttir"]
print("compiled", len(json.loads(sys.argv[1])))
"""


def test_generated_remap_compiles_for_gpu_targets(tmp_path, formula_cache):
    """The GPU path, without a GPU: in a process without TRITON_INTERPRET, Triton compiles the
    permutation kernel calling the generated remap ahead of time for an H100 (sm_90) and an
    MI300X (gfx942)."""
    deep = "pid" + " + 1" * 60   # near the nesting limit
    formulas = [XCD, GROUPED, SEED_ATTEMPT2, deep, "5", "a = 0 - 7\nnew_pid = a // 2 + min(3, pid)"]
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    env.update(SWIZZLEBENCH_CACHE=str(formula_cache), TRITON_CACHE_DIR=str(tmp_path / "triton"),
               TRITON_DEFAULT_FP_FUSION="1")
    done = subprocess.run([sys.executable, "-c", _GPU_COMPILE_SCRIPT, json.dumps(formulas)], env=env,
                          cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == f"compiled {len(formulas)}"
    assert _table(deep, (1, 3)).tolist() == [60, 61, 62]


def test_compiling_never_evaluates_the_formula_text(monkeypatch, formula_cache):
    """eval is never called; exec and compile only run on the generated file (the importlib
    import) or to build a syntax tree (ast.parse)."""
    real_exec, real_compile = builtins.exec, builtins.compile
    cache = str(formula_cache)
    calls: list[str] = []

    def no_eval(*args, **kwargs):
        raise AssertionError(f"eval called with {args!r}")

    def guarded_exec(code, *args, **kwargs):
        if isinstance(code, types.CodeType) and code.co_filename.startswith(cache):
            calls.append("exec generated")
            return real_exec(code, *args, **kwargs)
        raise AssertionError(f"exec called with {code!r}")

    def guarded_compile(source, filename, mode, flags=0, *args, **kwargs):
        if flags & ast.PyCF_ONLY_AST:
            calls.append("parse")
        elif str(filename).startswith(cache):
            calls.append("compile generated")
        else:
            raise AssertionError(f"compile called on {filename!r}")
        return real_compile(source, filename, mode, flags, *args, **kwargs)

    monkeypatch.setattr(builtins, "eval", no_eval)
    monkeypatch.setattr(builtins, "exec", guarded_exec)
    monkeypatch.setattr(builtins, "compile", guarded_compile)
    text = "unique = 424242 * 0\nnew_pid = pid + unique"   # not compiled before: really imported
    fn = compile_formula(text)
    with pytest.raises(FormulaError):
        compile_formula("__import__('os').system('echo pwned')")
    with pytest.raises(FormulaError):
        compile_formula("pid + eval(pid)")
    monkeypatch.undo()
    assert "parse" in calls and "compile generated" in calls and "exec generated" in calls
    assert _table(fn, (2, 3)).tolist() == list(range(6))


# --------------------------------------------------------------------------- formula files


def test_load_formula_file(tmp_path):
    path = tmp_path / "seed.formula"
    path.write_text(SEED_XCD)
    assert load_formula_file(path) == SEED_XCD
    assert load_formula_file(str(path)) == SEED_XCD
    assert compile_formula(load_formula_file(path)) is compile_formula(SEED_XCD)


@pytest.mark.parametrize("case, words", [("missing", "does not exist"), ("directory", "is not a file"),
                                         ("binary", "not UTF-8"), ("huge", "too large")])
def test_unreadable_formula_files_give_a_clear_error(tmp_path, case, words):
    path = tmp_path / "f.formula"
    if case == "directory":
        path.mkdir()
    elif case == "binary":
        path.write_bytes(b"pid \xff\xfe")
    elif case == "huge":
        path.write_text("pid\n" * 10_000)
    with pytest.raises(FormulaError) as caught:
        load_formula_file(path)
    assert words in str(caught.value) and str(path) in str(caught.value)


@pytest.mark.parametrize("formula", list(AS_BUILTIN))
def test_zero_divisor_finds_no_zero_where_the_formula_never_divides_by_zero(formula):
    """The built-ins' formulas divide by zero only where ``num_pids // num_xcds`` is 0."""
    for grid, (num_xcds, group_size) in itertools.product(GRIDS, LAUNCH):
        found = zero_divisor(formula, *grid, num_xcds, group_size)
        divides_by_blocks_per_xcd = "(pid // (num_pids // num_xcds))" in formula
        if divides_by_blocks_per_xcd and grid[0] * grid[1] < num_xcds:
            assert found == "pid 0: the divisor `num_pids // num_xcds` of `//` is 0", (grid, num_xcds)
        else:
            assert found is None, (formula, grid, num_xcds, found)
