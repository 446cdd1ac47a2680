"""Shape rules the code review asks for, checked so they stay true: no function in ``mucode/`` is
longer than 80 lines unless its docstring says why ("long because ..."), and no module past 600."""

from __future__ import annotations

import ast
from pathlib import Path

import mucode

PACKAGE = Path(mucode.__file__).parent
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 600


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def test_no_function_is_longer_than_80_lines_without_a_reason() -> None:
    too_long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for fn in _functions(ast.parse(path.read_text(), filename=str(path))):
            lines = (fn.end_lineno or fn.lineno) - fn.lineno + 1
            if lines > MAX_FUNCTION_LINES and "long because" not in (ast.get_docstring(fn) or ""):
                too_long.append(f"{path.relative_to(PACKAGE.parent)}:{fn.lineno} {fn.name} ({lines} lines)")
    assert not too_long, "split these, or say in the docstring why they are long:\n" + "\n".join(too_long)


def test_no_module_is_longer_than_600_lines() -> None:
    too_long = [
        f"{p.relative_to(PACKAGE.parent)} ({n} lines)"
        for p in sorted(PACKAGE.rglob("*.py"))
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    ]
    assert not too_long, "split these modules:\n" + "\n".join(too_long)


def test_the_rule_sees_a_long_function() -> None:
    """The checker itself: a 90-line function is found, and excused only by its docstring."""
    body = "\n".join(f"    x{i} = {i}" for i in range(90))
    plain = ast.parse(f"def f():\n{body}\n")
    excused = ast.parse(f'def f():\n    """long because: a table."""\n{body}\n')
    (fn,) = _functions(plain)
    assert (fn.end_lineno or 0) - fn.lineno + 1 > MAX_FUNCTION_LINES
    assert "long because" not in (ast.get_docstring(fn) or "")
    (fn2,) = _functions(excused)
    assert "long because" in (ast.get_docstring(fn2) or "")


def test_test_modules_have_unique_basenames() -> None:
    """The test folders have no ``__init__.py``, so pytest imports each test module by its basename:
    two files of one name in different folders stop the whole run at collection."""
    tests = Path(__file__).resolve().parent
    seen: dict[str, Path] = {}
    clashes = []
    for path in sorted(tests.rglob("*.py")):
        if path.name == "conftest.py" or "fixtures" in path.parts:
            continue
        if path.name in seen:
            clashes.append(f"{seen[path.name].relative_to(tests)} and {path.relative_to(tests)}")
        seen.setdefault(path.name, path)
    assert not clashes, "rename one of each pair: " + "; ".join(clashes)
