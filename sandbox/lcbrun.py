"""How LiveCodeBench's grader runs one program, re-created for a test process (standard library only).

LiveCodeBench's `lcb_runner/evaluation/testing_util.py` (`run_test`) does not run a program as a
plain script; what it does decides verdicts, so this module re-creates it around the sample's code,
which it gets as a string:

stdin problems (`stdio`):
- a final `if __name__ == '__main__':` block is unwrapped; top-level imports stay at module level
  and every other top-level statement becomes the body of a function `wrapped_function`, after
  LiveCodeBench's import header; the module is named `tmp_sol` (so a `__main__` guard anywhere else
  does not run);
- the call runs with `sys.stdin` replaced by a `StringIO` of the input (no `.buffer`, `readline`
  keeps the newline) and `builtins.open` returning the input. LiveCodeBench does this with
  `unittest.mock` patches whose `read`/`readline`/`readlines` replacements land on the stdin object
  that `sys.stdin` pointed to before (their order of application), which the program does not see;
  they are left out here, and so is importing `unittest.mock` (~0.1 s per test);
- `SystemExit` ends the program normally whatever its code: `sys.exit(1)` after a correct answer
  is correct, as there; any other exception is a runtime error;
- stdout is captured in a `StringIO` (so `sys.stdout.buffer` does not exist either) only while the
  program's function runs, and written out at the end; what goes elsewhere (a stdout bound when the
  code loads: `from sys import stdout`, the header's `from sys import *`, `sys.__stdout__`; output of
  threads still running after the function returned, atexit handlers) reaches LiveCodeBench's
  console, not its comparison, and is dropped here; the verifier compares the captured text outside
  the sandbox with LiveCodeBench's line/decimal rule.

functional problems (`load_call`): the header and the code run as module `tmp_sol`; the callee is
`Solution().<func_name>` when the code contains the text `class Solution`, else the module-level
function; a top-level tuple result counts as a list. The verifier compares the returned value as JSON
outside the sandbox; values whose JSON would compare equal where Python's `==` does not (nested
tuples, sets, dicts with non-string keys, other objects) are returned as a marker that equals no
expected value, and numpy scalars as plain numbers, so the outside comparison is Python's `==`.

Both: Python's int-to-str limit raised to 50,000 digits (LiveCodeBench's grader sets it at import);
a wall-clock alarm of the time limit (LiveCodeBench's `signal.alarm`, a `TimeoutException` the
program could catch, as there) for loading the code and again for the call; when it fires the
program ends with SIGXCPU, which the sandbox reports as `time_limit`. The sandbox's own limits (CPU,
memory, …) stay in force.

The header, once per zygote (`prebuild`, from runner.zygote_setup): executing LiveCodeBench's
import header (18 star imports) costs a test process ~1.3 ms, mostly copying the pages of every
object it touches. So the zygote executes the header's leading imports once into a `tmp_sol` module,
and each clone (one test each) takes that module instead of a fresh one. What differs from executing
the header in the test process is undone there, before the code loads: names the header took from
`sys` (`stdin`, `stdout`, `argv`, … by `from sys import *`) are bound again to what `sys` holds at
that moment, and the header's statements after its imports (`sys.setrecursionlimit(50000)`) run
then. The code is compiled behind a placeholder of the header's lines (`pass` each), so line
numbers, `from __future__` placement and the module docstring are what they are behind the header.

mucode's LiveCodeBench items (mucode.eval.livecodebench.driver) call this module when the test
process has it with the same source (``SOURCE_SHA256``), and otherwise run this file's text
themselves. Not reproduced: LiveCodeBench's `reliability_guard` (it sets `os.kill`, `os.getcwd`,
`quit`, … to None; mucode isolates the program instead), and its sharing of one process by all tests
of a functional problem (here each test is a fresh process, so state a program keeps between calls
does not carry over). A syntax error is a runtime error here (LiveCodeBench: a failure as well).
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import io
import os
import signal
import sys
import types

TYPE_CHECKING = False  # typing's own flag without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

HEADER = (
    "from string import *\nfrom re import *\nfrom datetime import *\nfrom collections import *\n"
    "from heapq import *\nfrom bisect import *\nfrom copy import *\nfrom math import *\nfrom random import *\n"
    "from statistics import *\nfrom itertools import *\nfrom functools import *\nfrom operator import *\n"
    "from io import *\nfrom sys import *\nfrom json import *\nfrom builtins import *\nfrom typing import *\n"
    "import string\nimport re\nimport datetime\nimport collections\nimport heapq\nimport bisect\nimport copy\n"
    "import math\nimport random\nimport statistics\nimport itertools\nimport functools\nimport operator\n"
    "import io\nimport sys\nimport json\nsys.setrecursionlimit(50000)\n"
)
"""LiveCodeBench's `import_string`, run before every program."""

INT_MAX_STR_DIGITS = 50000

try:
    with open(__file__, "rb") as _f:
        SOURCE_SHA256 = hashlib.sha256(_f.read()).hexdigest()
except (NameError, OSError):  # run from its text (the fallback of mucode's items): no file
    SOURCE_SHA256 = ""

_PREBUILT: dict[str, tuple[types.ModuleType, list[tuple[str, str]], Any, frozenset[str]]] = {}
"""header -> (its `tmp_sol` module with the leading imports done, (name, attribute of `sys`) for each
name they took from `sys`, the code of the header's remaining statements, `sys`'s public names then);
taken once (`_take`)."""


class TimeoutException(Exception):
    pass


def _on_alarm(signum: int, frame: object) -> None:
    raise TimeoutException


def _arm(limit_s: float) -> None:
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, limit_s)


def _disarm() -> None:
    signal.setitimer(signal.ITIMER_REAL, 0)


def _time_limit() -> None:
    _disarm()
    signal.signal(signal.SIGXCPU, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGXCPU)
    os._exit(124)


def _digits() -> None:
    if hasattr(sys, "set_int_max_str_digits"):  # Python >= 3.11 (and 3.10.7+ / 3.9.14+ backports)
        sys.set_int_max_str_digits(INT_MAX_STR_DIGITS)


def prebuild(header: str = HEADER) -> None:
    """Once, in the zygote: execute ``header``'s leading import statements into a `tmp_sol` module
    (module docstring). Only the standard library's modules it names are imported; nothing of a job
    runs here."""
    tree = ast.parse(header)
    lead = 0
    while lead < len(tree.body) and isinstance(tree.body[lead], (ast.Import, ast.ImportFrom)):
        lead += 1
    module = types.ModuleType("tmp_sol", "")
    exec(compile(ast.Module(tree.body[:lead], []), "<header>", "exec"), module.__dict__)
    origin: dict[str, str] = {}  # name -> the attribute of sys it holds, for the names taken from sys
    imports: list[ast.Import | ast.ImportFrom] = tree.body[:lead]  # type: ignore[assignment]
    for stmt in imports:
        if isinstance(stmt, ast.ImportFrom) and stmt.names[0].name == "*":
            source = sys.modules[stmt.module or ""]
            names = getattr(source, "__all__", None) or [n for n in vars(source) if n[:1] != "_"]
            for name in names:
                origin.pop(name, None)
                if source is sys:
                    origin[name] = name
            continue
        for alias in stmt.names:
            bound = alias.asname or alias.name.partition(".")[0]
            origin.pop(bound, None)
            if isinstance(stmt, ast.ImportFrom) and stmt.module == "sys":
                origin[bound] = alias.name
    tail = compile(ast.Module(tree.body[lead:], []), "<header>", "exec")
    _PREBUILT[header] = (module, sorted(origin.items()), tail, _public(sys))


def _public(module: types.ModuleType) -> frozenset[str]:
    """The names ``from module import *`` binds when the module has no ``__all__`` (sys has none)."""
    return frozenset(n for n in vars(module) if n[:1] != "_")


def _take(header: str) -> types.ModuleType | None:
    """The prebuilt module of ``header`` (bound again to this process's `sys`, its remaining statements
    run), or None: none was built, it was taken already, or `sys` has other public names now than
    when it was built (its star import would bind others)."""
    built = _PREBUILT.pop(header, None)
    if built is None or built[3] != _public(sys):
        return None
    module, pairs, tail, _ = built
    for name, attr in pairs:
        module.__dict__[name] = getattr(sys, attr)
    exec(tail, module.__dict__)
    return module


def _placeholder(header: str) -> str:
    """``header`` with each of its lines replaced by ``pass`` (blank lines kept): the same line count."""
    return "\n".join("pass" if line.strip() else "" for line in header.split("\n"))


def _load(text: str, header: str, behind_header: bool) -> types.ModuleType:
    """Module `tmp_sol` with ``text`` executed in it; ``behind_header``: ``text`` is ``header`` followed
    by the code (the prebuilt module then stands for the header's execution)."""
    module = _take(header) if behind_header else None
    if module is None:
        module = types.ModuleType("tmp_sol", "")
    else:
        text = _placeholder(header) + text[len(header) :]
    exec(text, module.__dict__)
    return module


def _unwrap_main_guard(code: str) -> tuple[str, ast.Module | None]:
    """LiveCodeBench's code with a final `__main__` guard unwrapped, and its tree when that is the tree
    parsed here (the code unchanged: LiveCodeBench parses it again, the same tree); else None."""
    try:
        tree = ast.parse(code)
    except Exception:
        return code, None
    try:
        last = tree.body[-1]
        if isinstance(last, ast.If) and ast.unparse(last.test).strip() == "__name__ == '__main__'":
            return ast.unparse(tree.body[:-1]) + "\n" + ast.unparse(last.body), None  # type: ignore[arg-type]
    except Exception:
        pass
    return code, tree


def _as_function(code: str, header: str, tree: ast.Module | None = None) -> tuple[str, bool]:
    """LiveCodeBench's text for ``code`` (``tree``: its parse, when known), and whether it is ``header``
    followed by the code."""
    try:
        if tree is None:
            tree = ast.parse(code)
        imports = [s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))]
        others = [s for s in tree.body if not isinstance(s, (ast.Import, ast.ImportFrom))]
        fn = ast.FunctionDef(
            name="wrapped_function",
            args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
            body=others,
            decorator_list=[],
            lineno=-1,
        )
        return header + "\n" + ast.unparse(imports) + "\n" + ast.unparse(fn), True  # type: ignore[arg-type]
    except Exception:
        return code, False


def _text_file(data: str) -> io.StringIO:
    """``io.StringIO(data)``, made by writing ``data`` to an empty one: it then holds ``data`` itself until
    a line is read, where ``StringIO(data)`` copies it at 4 bytes a character (2.4 MB of fresh pages for
    a 600 KB input; `read()` then makes another copy). The same object to the program either way."""
    text = io.StringIO()
    text.write(data)
    text.seek(0)
    return text


def stdio(code: str, header: str, limit_s: float) -> None:
    """Run ``code`` on this process's stdin as LiveCodeBench's `grade_stdio` does; its captured
    output goes to stdout at the end."""
    _digits()
    data = sys.stdin.read()
    real_stdout = sys.stdout
    captured = io.StringIO()
    # LiveCodeBench's console: what is written outside its capture (to a stdout bound before it: `from
    # sys import stdout`, the header's `from sys import *`, `sys.__stdout__`; or after it: threads
    # still running, atexit handlers) is not compared there; it is dropped here
    console = io.StringIO()
    sys.stdout = sys.__stdout__ = console  # type: ignore[misc,assignment]
    try:
        _arm(limit_s)
        unwrapped, tree = _unwrap_main_guard(code)
        text, behind = _as_function(unwrapped, header, tree)
        module = _load(text, header, behind)
        _disarm()
        method = module.wrapped_function
        saved = sys.stdin, builtins.open
        _arm(limit_s)
        sys.stdout = captured
        sys.stdin = _text_file(data)
        builtins.open = lambda *args, **kwargs: _text_file(data)  # type: ignore[assignment]
        try:
            method()
        except SystemExit:
            pass
        finally:
            sys.stdin, builtins.open = saved
    except TimeoutException:
        _time_limit()
    finally:
        _disarm()
        sys.stdout = sys.__stdout__ = console  # type: ignore[misc,assignment]
    real_stdout.write(captured.getvalue())
    real_stdout.flush()


def _comparable(value: object) -> object:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _comparable(v) for k, v in value.items()}
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
        return _comparable(value.item())  # type: ignore[attr-defined]
    return {"__mucode_unequal__": type(value).__name__}


def load_call(code: str, header: str, fn_name: str, limit_s: float) -> Callable[..., object]:
    """Load ``code`` as LiveCodeBench's `grade_call_based` does; the function the sandbox's `call`
    format then calls with the test's arguments (it returns the comparable result)."""
    _digits()
    try:
        _arm(limit_s)
        module = _load(header + "\n\n" + code, header, True)
        target = module.Solution() if "class Solution" in code else module
    except TimeoutException:
        _time_limit()
    finally:
        _disarm()
    method = getattr(target, fn_name, None)

    def call(*args: object) -> object:
        if method is None:
            raise AttributeError("the program defines no " + fn_name)
        _arm(limit_s)
        try:
            out = method(*args)
        except TimeoutException:
            _time_limit()
        finally:
            _disarm()
        if isinstance(out, tuple):
            out = list(out)
        return _comparable(out)

    return call
