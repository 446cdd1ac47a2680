"""``assert`` tests judged outside the program's process where the test's form allows it.

Before a job is sent, its test code is rewritten here (``prepare``). Every ``assert`` whose test is
a comparison with a literal becomes a *report*: the expected literal stays on this side and the
sandbox only gets ``__mucode_report__(k, <actual expression>)``; the in-sandbox harness
(executor/pyrun.py) turns the actual value into plain data (exact builtin types; subclasses of
builtins through the base type's own methods; numpy values through ``tolist()``; anything else is
not comparable and fails) and writes it on the control pipe. ``judge`` compares here. Forms:

- ``assert E == L`` / ``L == E`` / ``E != L`` (``L`` anything ``ast.literal_eval`` accepts);
- ``assert E is L`` / ``is not`` with ``L`` one of ``True``, ``False``, ``None``;
- ``assert E`` (truthy) and ``assert not E`` (falsy).

So a program can neither read the expected value nor make a comparison lie (an object whose
``__eq__`` always returns True is not plain data). Any other assert (``abs(E - x) < 1e-6``,
``E == f(y)``, ``a and b``) runs in the program's process: the harness turns the operands of its
comparisons into plain data first (so always-equal objects fail there too), but a program that
rewrites the harness in its own memory can pass such asserts (documented limit).

Exit statuses never count: the test passes only if every literal assert that always runs (not
under ``if``/``for``/``while``/``try``/``with``) reported, every report matched, and the harness
wrote its end-of-tests record (carrying a random token of that run) after the test code finished.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

REPORT = "__mucode_report__"
CHECK = "__mucode_check__"
VALUE = "__mucode_value__"
_CONDITIONAL = (
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.Try,
    ast.With,
    ast.AsyncWith,
    ast.Match,
    ast.IfExp,
    ast.Lambda,
    ast.ClassDef,
)
_OPS = {ast.Eq: "eq", ast.NotEq: "ne", ast.Is: "is", ast.IsNot: "is_not"}


@dataclass
class AssertPlan:
    """What the sandbox runs (``source``) and what stays here (``expected``, ``required``)."""

    source: str
    expected: dict[int, tuple[str, Any]] = field(default_factory=dict)
    required: set[int] = field(default_factory=set)


def _literal(node: ast.expr) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _classify(test: ast.expr) -> tuple[str, Any, ast.expr] | None:
    """(op, expected literal, actual expression) for the forms judged outside, else None."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return "falsy", None, test.operand
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _OPS:
        op = _OPS[type(test.ops[0])]
        left, right = test.left, test.comparators[0]
        for actual, lit in ((left, right), (right, left)):
            ok, value = _literal(lit)
            if not ok or (op in ("is", "is_not") and type(value) not in (bool, type(None))):
                continue
            if _literal(actual)[0]:  # literal on both sides: nothing of the program's involved
                return None
            return op, value, actual
        return None
    if isinstance(test, (ast.Compare, ast.BoolOp, ast.BinOp, ast.Constant)):
        return None
    return "truthy", None, test


def _call(name: str, *args: ast.expr) -> ast.Call:
    return ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=list(args), keywords=[])


class _Rewriter(ast.NodeTransformer):
    def __init__(self, plan: AssertPlan) -> None:
        self.plan = plan
        self.count = 0
        self.conditional = 0

    def generic_visit(self, node: ast.AST) -> ast.AST:
        inside = isinstance(node, _CONDITIONAL)
        self.conditional += inside
        try:
            return super().generic_visit(node)
        finally:
            self.conditional -= inside

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        saved, self.conditional = self.conditional, 0  # a function body runs straight when called
        try:
            return super().generic_visit(node)
        finally:
            self.conditional = saved

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        k = self.count
        self.count += 1
        form = _classify(node.test)
        if form is not None:
            op, value, actual = form
            self.plan.expected[k] = (op, value)
            if not self.conditional:
                self.plan.required.add(k)
            call = _call(REPORT, ast.Constant(k), actual)
        else:
            call = _call(CHECK, ast.Constant(k), _plain_operands(node.test))
        return ast.copy_location(ast.Expr(call), node)


def _plain_operands(test: ast.expr) -> ast.expr:
    """Wrap the operands of comparisons (through ``and``/``or``/``not``) in the plain-data check."""
    if isinstance(test, ast.Compare):
        return ast.Compare(
            left=_call(VALUE, test.left),
            ops=test.ops,
            comparators=[_call(VALUE, c) for c in test.comparators],
        )
    if isinstance(test, ast.BoolOp):
        return ast.BoolOp(op=test.op, values=[_plain_operands(v) for v in test.values])
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return ast.UnaryOp(op=test.op, operand=_plain_operands(test.operand))
    return _call(VALUE, test)


def prepare(assert_code: str | None, entry_point: str | None) -> AssertPlan:
    """Rewrite the test code (``check(<entry_point>)`` appended when set). Code that does not parse
    is sent unchanged: the sandbox reports it as a compile error."""
    source = (assert_code or "") + "\n"
    if entry_point:
        source += f"\ncheck({entry_point})\n"
    try:
        tree = ast.parse(source, "tests.py")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return AssertPlan(source)
    plan = AssertPlan("")
    tree = _Rewriter(plan).visit(tree)
    ast.fix_missing_locations(tree)
    plan.source = ast.unparse(tree)
    return plan


class NotPlain(Exception):
    """A reported value that is not plain data (a custom object)."""


def decode(obj: Any, depth: int = 0) -> Any:
    """The harness's tagged JSON (executor/pyrun.py ``encode``) back to a Python value."""
    if depth > 200:
        raise ValueError("value nested too deeply")
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, list):
        return [decode(v, depth + 1) for v in obj]
    if isinstance(obj, dict) and len(obj) == 1:
        ((tag, v),) = obj.items()
        if tag == "i":
            return int(v, 16)
        if tag == "f":
            return float.fromhex(v)
        if tag == "c":
            return complex(float.fromhex(v[0]), float.fromhex(v[1]))
        if tag == "b":
            return bytes.fromhex(v)
        if tag == "t":
            return tuple(decode(x, depth + 1) for x in v)
        if tag == "s":
            return {decode(x, depth + 1) for x in v}
        if tag == "S":
            return frozenset(decode(x, depth + 1) for x in v)
        if tag == "d":
            return {decode(a, depth + 1): decode(b, depth + 1) for a, b in v}
        if tag == "x":
            raise NotPlain(str(v))
    raise ValueError(f"not an encoded value: {type(obj).__name__}")


def _holds(op: str, expected: Any, actual: Any) -> bool:
    if op == "eq":
        return bool(actual == expected)
    if op == "ne":
        return bool(actual != expected)
    if op == "is":
        return actual is expected
    if op == "is_not":
        return actual is not expected
    if op == "truthy":
        return bool(actual)
    return not actual  # falsy


def judge(plan: AssertPlan, reports: Any) -> str | None:
    """None when every report matches and every required assert reported; else why not (a
    message starting with ``missing:`` when only required reports are missing)."""
    if not isinstance(reports, list):
        return "no assertion reports"
    seen: set[int] = set()
    for item in reports:
        try:
            k, value = item
            k = int(k)
            op, expected = plan.expected[k]
            actual = decode(value)
        except NotPlain as exc:
            return f"assertion {k}: the value is not plain data ({exc})"
        except (KeyError, TypeError, ValueError, RecursionError, OverflowError):
            return "malformed assertion report"
        try:
            if not _holds(op, expected, actual):
                return f"assertion {k} failed (compared outside the program)"
        except (TypeError, ValueError, RecursionError):
            return f"assertion {k} failed (values not comparable)"
        seen.add(k)
    missing = sorted(plan.required - seen)
    if missing:
        return f"missing: assertion {missing[0]} never ran"
    return None
