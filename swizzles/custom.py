"""User-written swizzle formulas: a tiny integer language, parsed and checked, never ``eval``'ed.

A formula is either one expression (the new pid)::

    (pid % num_xcds) * (num_pids // num_xcds) + pid // num_xcds

or a program of assignments, one per line, the last one assigning ``new_pid``::

    # seed 000's formula
    xcd = pid % num_xcds
    local = pid // num_xcds
    new_pid = (local + xcd * (num_pids // num_xcds)) % num_pids

The text goes through two checks, both whitelists: its *tokens* (names, decimal integers,
``+ - * // % ( ) , =``, comments) and its Python *syntax tree* (:mod:`ast`: assignments,
binary ``+ - * // %``, unary ``-``, ``min(a, b)``/``max(a, b)``, known names, int literals).
From the checked tree this module *generates* the source of a ``@triton.jit`` remap with
the standard swizzle signature (see :mod:`swizzles`), writes it to a content-addressed file
in a cache directory and imports it, because Triton's JIT reads a function's source with
``inspect.getsource``.  Only constructs this module emits can appear in that file: integer
arithmetic, ``tl.minimum`` and ``tl.maximum``.

Arithmetic is 32-bit, the same on the GPU and under the interpreter: the generated code
casts every input to an int32 tensor (Triton would otherwise evaluate ``NUM_XCDS``,
``GROUP_SIZE`` or an argument equal to 1 as Python integers at compile time), so results
wrap on overflow and ``//`` and ``%`` truncate toward zero, as in C.  Subexpressions of
literals alone are folded here with those semantics and must fit in 32 bits.  A formula is
only trusted after the permutation gate (:mod:`swizzles.permutation`) has evaluated this
very function over the job's grid.

Length: the whole formula language in one place: grammar, parser, checker and code
generation must agree on every node type, and reading them side by side is how a reviewer
convinces themself that nothing typed by a user is ever executed.
"""
from __future__ import annotations

import ast
import io
import keyword
import os
import re
import tokenize
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, NoReturn

from swizzles.generated import formula_cache_dir, load_generated  # noqa: F401 (formula_cache_dir: re-exported)

if TYPE_CHECKING:
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

#: Longest formula accepted, in characters.
MAX_CHARS = 4000
#: Largest integer literal (literals are non-negative; the arithmetic is 32-bit).
MAX_LITERAL = 2**31 - 1
#: Deepest nesting of parentheses.
MAX_PAREN_DEPTH = 32
#: Longest run of unary minus signs (``- - - x``).
MAX_UNARY_RUN = 8
#: Deepest nesting of one expression's syntax tree (operators, calls, operands).
MAX_EXPR_DEPTH = 64
#: The name the formula must assign last: the tile the program computes.
RESULT_NAME = "new_pid"

#: Input names of the language -> their int32 variables in the generated remap (see
#: _MODULE_TEMPLATE: ``num_pids`` is ``num_pid_m * num_pid_n``, ``num_xcds`` is ``NUM_XCDS``,
#: ``group_size`` is ``GROUP_SIZE``).
INPUTS: dict[str, str] = {
    "pid": "pid",
    "num_pids": "in_num_pids",
    "num_xcds": "in_num_xcds",
    "num_pid_m": "in_num_pid_m",
    "num_pid_n": "in_num_pid_n",
    "group_size": "in_group_size",
}
#: The only callable functions -> their Triton counterparts.
FUNCTIONS: dict[str, str] = {"min": "tl.minimum", "max": "tl.maximum"}

#: Shown with every error.
ALLOWED_FORMS = (
    "allowed forms: a single expression (the new pid), or one assignment `name = expression` per "
    f"line with the last line assigning {RESULT_NAME}; blank lines and # comments; in expressions: "
    f"non-negative decimal integer literals up to 2**31 - 1, the names {', '.join(INPUTS)} and "
    "names assigned on earlier lines, binary + - * // %, unary -, parentheses, "
    "min(a, b) and max(a, b)"
)

_BINARY_OPERATORS: dict[type[ast.operator], str] = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%",
}
# Python precedence of what the renderer emits; higher binds tighter.
_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "//": 2, "%": 2}
_UNARY_PRECEDENCE = 3
_ATOM_PRECEDENCE = 4

_ALLOWED_OPERATOR_TOKENS = {"+", "-", "*", "//", "%", "(", ")", ",", "="}
# After these tokens (or at the start of a statement) a + or - is a unary sign.
_OPERAND_EXPECTED_AFTER = {None, "(", ",", "=", "+", "-", "*", "//", "%"}
_OPERATOR_HINTS = {
    "/": "true division `/` is not allowed (use `//` for integer division)",
    "**": "powers `**` are not allowed",
    ".": "attribute access `.` is not allowed",
    "[": "subscripts and lists `[` are not allowed",
    "{": "sets and dicts `{` are not allowed",
    ":=": "assignment expressions `:=` are not allowed",
    ";": "`;` is not allowed (one assignment per line)",
    ":": "`:` is not allowed (no annotations, slices or lambdas)",
}
_NODE_DESCRIPTIONS: dict[type[ast.AST], str] = {
    ast.Attribute: "attribute access", ast.Subscript: "subscripts", ast.Lambda: "lambdas",
    ast.ListComp: "comprehensions", ast.SetComp: "comprehensions", ast.DictComp: "comprehensions",
    ast.GeneratorExp: "generator expressions", ast.Compare: "comparisons",
    ast.BoolOp: "boolean operators", ast.IfExp: "conditional expressions",
    ast.JoinedStr: "f-strings", ast.NamedExpr: "assignment expressions", ast.Starred: "starred arguments",
    ast.Tuple: "tuples", ast.List: "lists", ast.Set: "sets", ast.Dict: "dicts",
    ast.AugAssign: "augmented assignments", ast.AnnAssign: "annotated assignments",
}
_NAME_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
_INTEGER_PATTERN = re.compile(r"(0|[1-9][0-9]*)\Z")
# Every generated assignment line consists of these characters only (checked before writing).
_RENDERED_PATTERN = re.compile(r"[A-Za-z0-9_ +\-*/%(),.=]*\Z")
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


class FormulaError(ValueError):
    """A formula outside the language: the message gives the line and column (1-based) of the
    offending token, shows the line, and lists the allowed forms.  Raised without a position
    by :func:`load_formula_file` for a file that cannot be read."""

    def __init__(self, problem: str, line: int | None = None, column: int | None = None,
                 source_line: str | None = None) -> None:
        self.problem = problem
        self.line = line
        self.column = column
        self.source_line = source_line
        if line is None or column is None:   # a problem of the formula file, not of its text
            super().__init__(f"swizzle formula: {problem}")
            return
        parts = [f"swizzle formula: line {line}, column {column}: {problem}"]
        if source_line is not None:
            parts.append(_caret_excerpt(source_line, column))
        parts.append(ALLOWED_FORMS)
        super().__init__("\n".join(parts))

    def summary(self) -> str:
        """The error in one line: its first line, then the allowed forms for a formula's text
        (the caret excerpt is left out)."""
        first = str(self).splitlines()[0]
        return first if self.line is None or self.column is None else f"{first}; {ALLOWED_FORMS}"

    def __reduce__(self):
        # Picklable with its fields (jobs may run in a worker process).
        return type(self), (self.problem, self.line, self.column, self.source_line)


@dataclass(frozen=True)
class Assignment:
    """One checked line ``name = expr`` of a formula."""

    name: str
    expr: str                      # the expression, normalized (see Formula.text)
    line: int                      # its line in the formula as written
    tree: ast.expr = field(repr=False, compare=False)   # the checked syntax tree


@dataclass(frozen=True)
class Formula:
    """A checked formula.  ``text`` is its normalized program: one ``name = expr`` per line,
    single spaces around operators, minimal parentheses, no comments, ending with
    ``new_pid = ...``; a single-expression formula ``e`` becomes ``new_pid = e``."""

    text: str
    assignments: tuple[Assignment, ...]


# --------------------------------------------------------------------------- parsing


def parse_formula(text: str) -> Formula:
    """Check ``text`` against the language and return it as a :class:`Formula`.

    Raises :class:`FormulaError` at the first construct outside the language.
    """
    if not isinstance(text, str):
        raise TypeError(f"a swizzle formula is a str, not {type(text).__name__}")
    if len(text) > MAX_CHARS:
        line, column = _position_of_index(text, MAX_CHARS)
        raise _error_at(text, line, column,
                        f"the formula is {len(text)} characters long; the limit is {MAX_CHARS}")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:   # a lone surrogate: a non-UTF-8 byte of the command line, or a YAML escape
        line, column = _position_of_index(text, exc.start)
        raise _error_at(text.encode("utf-8", "backslashreplace").decode("utf-8"), line, column,
                        f"character {text[exc.start]!r} is not allowed: not valid Unicode text "
                        "(a byte that is not UTF-8, or a lone surrogate)") from None
    _check_tokens(text)
    try:
        with warnings.catch_warnings():   # e.g. "invalid decimal literal" for `7x`: an error below
            warnings.simplefilter("ignore", SyntaxWarning)
            module = ast.parse(text, mode="exec")
    except SyntaxError as exc:
        raise _error_at(text, exc.lineno or 1, exc.offset or 1, f"syntax error: {exc.msg}") from None
    except (RecursionError, MemoryError):
        raise _error_at(text, 1, 1, "the formula is nested too deeply") from None
    except ValueError as exc:   # e.g. a NUL byte or a lone surrogate inside a comment
        raise _error_at(text, 1, 1, f"unreadable text: {exc}") from None
    return _Checker(text).module(module)


def _check_tokens(text: str) -> None:
    """The lexical whitelist: reject, at its exact position, any token outside the language,
    and bound the nesting that Python's own parser would otherwise have to survive."""
    open_parens: list[tuple[int, int]] = []
    previous: str | None = None      # previous significant token of the statement
    unary_run = 0                    # consecutive unary signs so far
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type in _IGNORED_TOKENS or (token.type == tokenize.ERRORTOKEN
                                                 and token.string.isspace() and token.string.isascii()):
                continue
            if token.type == tokenize.NEWLINE:
                previous, unary_run = None, 0
                continue
            line, column = token.start[0], token.start[1] + 1
            problem = _token_problem(token)
            if problem is not None:
                raise _error_at(text, line, column, problem)
            if token.string == "(":
                open_parens.append((line, column))
                if len(open_parens) > MAX_PAREN_DEPTH:
                    raise _error_at(text, line, column, f"parentheses nested more than {MAX_PAREN_DEPTH} deep")
            elif token.string == ")":
                if not open_parens:
                    raise _error_at(text, line, column, "unmatched `)`")
                open_parens.pop()
            is_sign = token.string in ("+", "-") and previous in _OPERAND_EXPECTED_AFTER
            unary_run = unary_run + 1 if is_sign else 0
            if unary_run > MAX_UNARY_RUN:
                raise _error_at(text, line, column, f"more than {MAX_UNARY_RUN} unary signs in a row")
            previous = token.string if token.type == tokenize.OP else "operand"
    except tokenize.TokenError as exc:
        if open_parens:
            line, column = open_parens[-1]
            raise _error_at(text, line, column, "`(` is never closed") from None
        line, offset = exc.args[1] if len(exc.args) > 1 else (1, 0)
        raise _error_at(text, line, offset + 1, f"unexpected end of input ({exc.args[0]})") from None
    except SyntaxError as exc:   # e.g. inconsistent dedent
        raise _error_at(text, exc.lineno or 1, exc.offset or 1, f"syntax error: {exc.msg}") from None


_IGNORED_TOKENS = {tokenize.COMMENT, tokenize.NL, tokenize.DEDENT, tokenize.ENDMARKER}


def _token_problem(token: tokenize.TokenInfo) -> str | None:
    """Why ``token`` is outside the language, or None if it is one of its tokens."""
    if token.type == tokenize.NAME:
        if keyword.iskeyword(token.string):
            return f"keyword `{token.string}` is not allowed"
        if not _NAME_PATTERN.match(token.string):
            return (f"name {token.string!r} is not allowed: names are ASCII letters, digits and `_`, "
                    "starting with a letter")
        return None
    if token.type == tokenize.NUMBER:
        if not _INTEGER_PATTERN.match(token.string):
            return (f"number {token.string!r} is not allowed: only non-negative decimal integers "
                    "without leading zeros")
        return None
    if token.type == tokenize.OP:
        if token.string in _ALLOWED_OPERATOR_TOKENS:
            return None
        return _OPERATOR_HINTS.get(token.string, f"operator `{token.string}` is not allowed")
    if token.type == tokenize.INDENT:
        return "unexpected indentation: every line starts in column 1"
    if token.type == tokenize.STRING or token.string[:1] in ("'", '"'):
        return "string literals are not allowed"
    return f"character {token.string[:1]!r} is not allowed"


class _Checker:
    """The syntactic whitelist over the tree of a lexically clean formula.  Tracks the names
    assigned so far and the value of constant subexpressions (to reject a literal zero
    divisor and constants outside 32 bits)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.constants: dict[str, int | None] = {}   # assigned name -> constant value, or None

    def module(self, module: ast.Module) -> Formula:
        body = module.body
        if not body:
            raise _error_at(self.text, 1, 1, "the formula is empty")
        if len(body) == 1 and isinstance(body[0], ast.Expr):
            self.expression(body[0].value, depth=1)
            assignments = [self._assignment(RESULT_NAME, body[0].value, body[0].lineno)]
        else:
            assignments = [self.statement(statement) for statement in body]
            last = body[-1]
            if assignments[-1].name != RESULT_NAME:
                self.fail(last, f"the last line must assign {RESULT_NAME} "
                          f"(`{RESULT_NAME} = ...`), not {assignments[-1].name}")
        text = "\n".join(f"{a.name} = {a.expr}" for a in assignments) + "\n"
        return Formula(text=text, assignments=tuple(assignments))

    def statement(self, statement: ast.stmt) -> Assignment:
        if isinstance(statement, ast.Expr):
            self.fail(statement, "every line of a program must be an assignment `name = expression` "
                      "(a bare expression is allowed only as the whole formula)")
        if not isinstance(statement, ast.Assign):
            self.fail(statement, f"{_describe(statement)} are not allowed")
        if len(statement.targets) != 1:
            self.fail(statement.targets[1], "chained assignments `a = b = ...` are not allowed")
        target = statement.targets[0]
        if not isinstance(target, ast.Name):
            self.fail(target, f"only a single name can be assigned, not {_describe(target)}")
        if target.id in INPUTS:
            self.fail(target, f"`{target.id}` is an input and cannot be reassigned")
        if target.id in FUNCTIONS:
            self.fail(target, f"`{target.id}` is a function and cannot be reassigned")
        self.constants[target.id] = self.expression(statement.value, depth=1)
        return self._assignment(target.id, statement.value, statement.lineno)

    def expression(self, node: ast.expr, depth: int) -> int | None:
        """Check ``node``; return its value if it is a constant, else None."""
        if depth > MAX_EXPR_DEPTH:
            self.fail(node, f"expression nested more than {MAX_EXPR_DEPTH} levels deep; split it over "
                      "several lines with intermediate names")
        if isinstance(node, ast.Constant):
            if type(node.value) is not int:
                self.fail(node, f"{type(node.value).__name__} literals are not allowed")
            if node.value > MAX_LITERAL:
                self.fail(node, f"integer literal {node.value} is too large (the limit is 2**31 - 1)")
            return node.value
        if isinstance(node, ast.Name):
            return self._name(node)
        if isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, ast.USub):
                self.fail(node, "the only unary operator is `-`")
            operand = self.expression(node.operand, depth + 1)
            return None if operand is None else self._constant(node, -operand)
        if isinstance(node, ast.BinOp):
            return self._binary(node, depth)
        if isinstance(node, ast.Call):
            return self._call(node, depth)
        self.fail(node, f"{_describe(node)} are not allowed")

    def _name(self, node: ast.Name) -> int | None:
        if node.id in INPUTS:
            return None
        if node.id in self.constants:
            return self.constants[node.id]
        if node.id in FUNCTIONS:
            self.fail(node, f"`{node.id}` can only be called, as {node.id}(a, b)")
        self.fail(node, f"name `{node.id}` is not defined: use an input ({', '.join(INPUTS)}) "
                  "or a name assigned on an earlier line")

    def _binary(self, node: ast.BinOp, depth: int) -> int | None:
        symbol = _BINARY_OPERATORS.get(type(node.op))
        if symbol is None:
            self.fail(node, f"operator {type(node.op).__name__} is not allowed")
        left = self.expression(node.left, depth + 1)
        right = self.expression(node.right, depth + 1)
        if symbol in ("//", "%") and right == 0:
            self.fail(node.right, f"division by zero: the divisor of `{symbol}` is always 0")
        if left is None or right is None:
            return None
        return self._constant(node, _fold(symbol, left, right))

    def _call(self, node: ast.Call, depth: int) -> int | None:
        if not (isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS):
            called = node.func.id if isinstance(node.func, ast.Name) else _describe(node.func)
            self.fail(node, f"calling `{called}` is not allowed: only min(a, b) and max(a, b)")
        name = node.func.id
        if node.keywords:
            self.fail(node.keywords[0], f"keyword arguments are not allowed: {name}(a, b)")
        for argument in node.args:
            if isinstance(argument, ast.Starred):
                self.fail(argument, f"starred arguments are not allowed: {name}(a, b)")
        if len(node.args) != 2:
            self.fail(node, f"{name}() takes exactly two arguments, not {len(node.args)}")
        values = [self.expression(argument, depth + 1) for argument in node.args]
        if None in values:
            return None
        return _fold(name, *values)

    def _constant(self, node: ast.expr, value: int) -> int:
        if not _INT32_MIN <= value <= _INT32_MAX:
            self.fail(node, f"this constant expression is {value}, outside the 32-bit integer range")
        return value

    def _assignment(self, name: str, tree: ast.expr, line: int) -> Assignment:
        return Assignment(name=name, expr=_Renderer().render(tree), line=line, tree=tree)

    def fail(self, node: ast.AST, problem: str) -> NoReturn:
        """Raise a FormulaError at ``node`` (its position is exact: every token before it is ASCII)."""
        raise _error_at(self.text, node.lineno, node.col_offset + 1, problem)


def _fold(operation: str, left: int, right: int) -> int:
    """``left <operation> right`` in the generated code's int32 semantics (the caller checks the
    range): ``//`` and ``%`` truncate toward zero, as Triton's integer division on tensors."""
    if operation in ("//", "%"):
        quotient = abs(left) // abs(right)
        if (left < 0) != (right < 0):
            quotient = -quotient
        return quotient if operation == "//" else left - right * quotient
    operations = {"+": int.__add__, "-": int.__sub__, "*": int.__mul__, "min": min, "max": max}
    return operations[operation](left, right)


def _evaluate(node: ast.expr, constants: dict[str, int]) -> int | None:
    """The value of a checked expression made of literals and constant names only, else None."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.UnaryOp):
        operand = _evaluate(node.operand, constants)
        return None if operand is None else -operand
    if isinstance(node, ast.BinOp):
        operation, operands = _BINARY_OPERATORS[type(node.op)], (node.left, node.right)
    else:   # min/max call
        operation, operands = node.func.id, node.args
    values = [_evaluate(operand, constants) for operand in operands]
    return None if None in values else _fold(operation, *values)


def _describe(node: ast.AST) -> str:
    return _NODE_DESCRIPTIONS.get(type(node), f"{type(node).__name__} constructs")


def _error_at(text: str, line: int, column: int, problem: str) -> FormulaError:
    lines = text.split("\n")
    source_line = lines[line - 1] if 1 <= line <= len(lines) else None
    return FormulaError(problem, line, column, source_line)


def _position_of_index(text: str, index: int) -> tuple[int, int]:
    """1-based (line, column) of ``text[index]``."""
    before = text[:index]
    return before.count("\n") + 1, index - (before.rfind("\n") + 1) + 1


def _caret_excerpt(source_line: str, column: int, width: int = 100) -> str:
    """The line (a window of it when long) with a caret under ``column``."""
    start = max(0, min(column - 1 - width // 2, len(source_line) - width))
    excerpt = source_line[start:start + width]
    prefix = "..." if start > 0 else ""
    suffix = "..." if start + width < len(source_line) else ""
    return f"    {prefix}{excerpt}{suffix}\n    {' ' * (len(prefix) + column - 1 - start)}^"


# --------------------------------------------------------------------------- code generation


@dataclass(frozen=True)
class _Renderer:
    """Source text of checked expression trees, with minimal parentheses.

    ``names`` maps each name and ``functions`` each of min/max.  With ``constants`` (name ->
    value of the names bound to constants), every constant subexpression is emitted as its
    folded value (:func:`_fold`), so no arithmetic on compile-time constants is left to
    Triton.  Only the node types the checker admits are rendered.
    """

    names: Callable[[str], str] = str             # default: names as written
    functions: dict[str, str] = field(default_factory=lambda: {name: name for name in FUNCTIONS})
    constants: dict[str, int] | None = None

    def render(self, node: ast.expr) -> str:
        return self._render(node)[0]

    def _render(self, node: ast.expr) -> tuple[str, int]:
        value = None if self.constants is None else _evaluate(node, self.constants)
        if value is not None:
            return str(value), _ATOM_PRECEDENCE if value >= 0 else _UNARY_PRECEDENCE
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return str(node.value), _ATOM_PRECEDENCE
        if isinstance(node, ast.Name):
            return self.names(node.id), _ATOM_PRECEDENCE
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS:
            arguments = ", ".join(self.render(argument) for argument in node.args)
            return f"{self.functions[node.func.id]}({arguments})", _ATOM_PRECEDENCE
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            operand, precedence = self._render(node.operand)
            return f"-{_parenthesize(operand, precedence < _UNARY_PRECEDENCE)}", _UNARY_PRECEDENCE
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY_OPERATORS:
            symbol = _BINARY_OPERATORS[type(node.op)]
            precedence = _PRECEDENCE[symbol]
            left, left_precedence = self._render(node.left)
            right, right_precedence = self._render(node.right)
            # Left-associative: a right operand of equal precedence keeps its parentheses.
            return (f"{_parenthesize(left, left_precedence < precedence)} {symbol} "
                    f"{_parenthesize(right, right_precedence <= precedence)}", precedence)
        raise AssertionError(f"unchecked node {type(node).__name__} reached the code generator")


def _parenthesize(text: str, needed: bool) -> str:
    return f"({text})" if needed else text


def _triton_name(name: str) -> str:
    """Inputs map to the remap's int32 input variables; the formula's own names get a ``var_``
    prefix so they can never shadow a parameter, an input variable, ``tl`` or ``triton``."""
    return INPUTS.get(name, f"var_{name}")


_MODULE_TEMPLATE = '''\
"""Swizzle formula compiled by swizzles.custom; generated, do not edit."""
import triton
import triton.language as tl


@triton.jit
def remap(pid, num_pid_m, num_pid_n, NUM_XCDS: tl.constexpr, GROUP_SIZE: tl.constexpr):
    """User formula (swizzles.custom):

{formula}    """
    # The inputs as int32 tensors, so that all arithmetic is 32-bit, including on values
    # Triton treats as compile-time constants (NUM_XCDS, GROUP_SIZE, an argument equal to 1).
    in_num_pid_m = tl.cast(num_pid_m, tl.int32)
    in_num_pid_n = tl.cast(num_pid_n, tl.int32)
    in_num_pids = in_num_pid_m * in_num_pid_n
    in_num_xcds = tl.cast(NUM_XCDS, tl.int32)
    in_group_size = tl.cast(GROUP_SIZE, tl.int32)
{body}
    return var_{result}
'''


def generate_source(formula: Formula) -> str:
    """The Python source of the module defining the formula's ``@triton.jit`` ``remap``."""
    constants: dict[str, int] = {}
    renderer = _Renderer(names=_triton_name, functions=FUNCTIONS, constants=constants)
    body = []
    for assignment in formula.assignments:
        body.append(f"    {_triton_name(assignment.name)} = {renderer.render(assignment.tree)}")
        value = _evaluate(assignment.tree, constants)
        if value is None:
            constants.pop(assignment.name, None)
        else:
            constants[assignment.name] = value
    # Belt and braces: what goes into the file besides the template is whitelisted characters.
    for text in [*body, *formula.text.splitlines()]:
        if not _RENDERED_PATTERN.match(text):
            raise AssertionError(f"generated text outside the whitelist: {text!r}")
    formula_lines = "".join(f"        {line}\n" for line in formula.text.splitlines())
    return _MODULE_TEMPLATE.format(formula=formula_lines, body="\n".join(body), result=RESULT_NAME)


# --------------------------------------------------------------------------- division by zero


class _ZeroDivisor(Exception):
    """Raised inside :func:`zero_divisor` at the first division by zero."""


def zero_divisor(text: str, num_pid_m: int, num_pid_n: int, num_xcds: int, group_size: int) -> str | None:
    """Where formula ``text`` divides by zero over the grid (every pid at once, in the
    generated code's int32 semantics), as ``pid P: the divisor `d` of `//` is 0``; None when no
    divisor is ever 0.  A division by zero is undefined on a GPU and silently 0 under the
    interpreter, so the permutation gate refuses it on every device."""
    import numpy as np

    formula = parse_formula(text)
    pids = np.arange(num_pid_m * num_pid_n, dtype=np.int64)
    values: dict[str, object] = {"pid": pids, "num_pids": num_pid_m * num_pid_n, "num_xcds": num_xcds,
                                 "num_pid_m": num_pid_m, "num_pid_n": num_pid_n, "group_size": group_size}

    def wrap(x):   # int32 wrap-around, as the generated code's tensors
        return (np.asarray(x, dtype=np.int64) + 2**31) % 2**32 - 2**31

    def value(node: ast.expr):
        if isinstance(node, ast.Constant):
            return np.int64(node.value)
        if isinstance(node, ast.Name):
            return values[node.id]
        if isinstance(node, ast.UnaryOp):
            return wrap(-value(node.operand))
        if isinstance(node, ast.Call):
            pick = np.minimum if node.func.id == "min" else np.maximum
            return pick(value(node.args[0]), value(node.args[1]))
        symbol = _BINARY_OPERATORS[type(node.op)]
        left, right = value(node.left), value(node.right)
        if symbol in ("//", "%"):
            zero = np.broadcast_to(right == 0, pids.shape)
            if zero.any():
                raise _ZeroDivisor(f"pid {int(np.argmax(zero))}: the divisor `{_Renderer().render(node.right)}` "
                                   f"of `{symbol}` is 0")
            quotient = np.abs(left) // np.abs(right) * np.where((left < 0) != (right < 0), -1, 1)
            return wrap(quotient if symbol == "//" else left - right * quotient)
        return wrap({"+": np.add, "-": np.subtract, "*": np.multiply}[symbol](left, right))

    try:
        for assignment in formula.assignments:
            values[assignment.name] = value(assignment.tree)
    except _ZeroDivisor as exc:
        return str(exc)
    return None


# --------------------------------------------------------------------------- compile and load


def compile_formula(text: str) -> JITFunction | InterpretedFunction:
    """Check ``text`` and return its remap as a ``@triton.jit`` function with the standard
    swizzle signature (an ``InterpretedFunction`` under ``TRITON_INTERPRET=1``, like every
    built-in swizzle).  The same generated source gives the same function object.

    Raises :class:`FormulaError` for a formula outside the language and ``OSError`` when the
    cache directory (:func:`formula_cache_dir`) cannot be written.
    """
    return load_generated(generate_source(parse_formula(text)))


def load_formula_file(path: str | os.PathLike) -> str:
    """The text of a formula file (``swizzle.file=...``), with a clear :class:`FormulaError`
    when it is missing, not a file, unreadable, not UTF-8 or too long."""
    file = Path(path).expanduser()
    try:
        if not file.is_file():
            reason = "is not a file" if file.exists() else "does not exist"
            raise FormulaError(f"formula file {str(file)!r} {reason}")
        limit = 4 * MAX_CHARS   # bytes: MAX_CHARS characters of up to 4 UTF-8 bytes each
        with file.open("rb") as stream:   # at most limit + 1 bytes: st_size is 0 for /proc files
            data = stream.read(limit + 1)
        if len(data) > limit:
            raise FormulaError(f"formula file {str(file)!r} is too large (the limit is {MAX_CHARS} "
                               "characters)")
        return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")   # as text mode reads it
    except UnicodeDecodeError as exc:
        raise FormulaError(f"formula file {str(file)!r} is not UTF-8 text: {exc.reason} at byte "
                           f"{exc.start}") from None
    except OSError as exc:
        raise FormulaError(f"formula file {str(file)!r} cannot be read: "
                           f"{exc.strerror or exc}") from None


# --------------------------------------------------------------------------- parameters


def bind_parameters(text: str, values: dict[str, int]) -> str:
    """The formula ``text`` with integer parameters bound: one ``name = value`` line per
    parameter, prepended (a single-expression formula becomes ``new_pid = expression``).
    This is how the formula language serves as a parametric family: ``(pid % k) * ...``
    with ``k`` bound to 4, 8, ...  The result is checked like any formula when compiled;
    line numbers in its errors count the bound lines.  Raises :class:`FormulaError` for a
    parameter name that is not a plain name, is an input or a function, or a value that is
    not an integer literal of the language."""
    lines = []
    for name, value in values.items():
        if not _NAME_PATTERN.match(name) or keyword.iskeyword(name) or name in INPUTS or name in FUNCTIONS \
                or name == RESULT_NAME:
            raise FormulaError(f"formula parameter {name!r} is invalid: a parameter is a plain name "
                               f"(letters, digits, `_`), not an input ({', '.join(INPUTS)}), min, max or "
                               f"{RESULT_NAME}")
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_LITERAL:
            raise FormulaError(f"formula parameter {name}={value!r} is invalid: an integer from 0 to {MAX_LITERAL}")
        lines.append(f"{name} = {value}")
    body = text.strip("\n")
    if not _is_program(body):
        body = f"{RESULT_NAME} = {body}"
    return "\n".join([*lines, body]) + "\n"


def _is_program(text: str) -> bool:
    """Whether ``text`` is written as assignments (has an ``=`` outside comments); the
    language has no other use of ``=``."""
    return any("=" in line.split("#", 1)[0] for line in text.splitlines())
