"""The programs that run one LiveCodeBench sample in mucode's sandbox the way LiveCodeBench's grader does.

LiveCodeBench's `lcb_runner/evaluation/testing_util.py` (`run_test`) does not run a program as a
plain script; what it does decides verdicts, so the sandbox program re-creates it (standard library
only) around the sample's code, which it holds as a string:

stdin problems (`stdio_driver`):
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

functional problems (`call_driver`): the header and the code run as module `tmp_sol`; the callee is
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

Not reproduced: LiveCodeBench's `reliability_guard` (it sets `os.kill`, `os.getcwd`, `quit`, … to
None; mucode isolates the program instead), and its sharing of one process by all tests of a
functional problem (here each test is a fresh process, so state a program keeps between calls does
not carry over). A syntax error is a runtime error here (LiveCodeBench: a failure as well).
"""

from __future__ import annotations

__all__ = ["call_driver", "stdio_driver", "CALL_ENTRY"]

CALL_ENTRY = "_mucode_lcb_call"
"""The function the verifier's `call` format calls in `call_driver` programs."""

_COMMON = r"""
import ast, io, os, signal, sys, types

if hasattr(sys, "set_int_max_str_digits"):  # Python >= 3.11 (and 3.10.7+ / 3.9.14+ backports)
    sys.set_int_max_str_digits(50000)


class TimeoutException(Exception):
    pass


def _on_alarm(signum, frame):
    raise TimeoutException


def _arm():
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, _LIMIT_S)


def _disarm():
    signal.setitimer(signal.ITIMER_REAL, 0)


def _time_limit():
    _disarm()
    signal.signal(signal.SIGXCPU, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGXCPU)
    os._exit(124)
"""

_STDIO = r"""

def _unwrap_main_guard(code):
    try:
        tree = ast.parse(code)
        last = tree.body[-1]
        if isinstance(last, ast.If) and ast.unparse(last.test).strip() == "__name__ == '__main__'":
            code = ast.unparse(tree.body[:-1]) + "\n" + ast.unparse(last.body)
    except Exception:
        pass
    return code


def _as_function(code):
    try:
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
        return _HEADER + "\n" + ast.unparse(imports) + "\n" + ast.unparse(fn)
    except Exception:
        return code


def _main():
    import builtins

    data = sys.stdin.read()
    real_stdout = sys.stdout
    captured = io.StringIO()
    # LiveCodeBench's console: what is written outside its capture (to a stdout bound before it: `from
    # sys import stdout`, the header's `from sys import *`, `sys.__stdout__`; or after it: threads
    # still running, atexit handlers) is not compared there; it is dropped here
    console = io.StringIO()
    sys.stdout = sys.__stdout__ = console
    try:
        _arm()
        module = types.ModuleType("tmp_sol", "")
        exec(_as_function(_unwrap_main_guard(_CODE)), module.__dict__)
        _disarm()
        method = module.wrapped_function
        saved = sys.stdin, builtins.open
        _arm()
        sys.stdout = captured
        sys.stdin = io.StringIO(data)
        builtins.open = lambda *args, **kwargs: io.StringIO(data)
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
        sys.stdout = sys.__stdout__ = console
    real_stdout.write(captured.getvalue())
    real_stdout.flush()


_main()
"""

_CALL = r"""

def _comparable(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _comparable(v) for k, v in value.items()}
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
        return _comparable(value.item())
    return {"__mucode_unequal__": type(value).__name__}


try:
    _arm()
    _module = types.ModuleType("tmp_sol", "")
    exec(_HEADER + "\n\n" + _CODE, _module.__dict__)
    _target = _module.Solution() if "class Solution" in _CODE else _module
except TimeoutException:
    _time_limit()
finally:
    _disarm()
_method = getattr(_target, _FN_NAME, None)


def _mucode_lcb_call(*args):
    if _method is None:
        raise AttributeError("the program defines no " + _FN_NAME)
    _arm()
    try:
        out = _method(*args)
    except TimeoutException:
        _time_limit()
    finally:
        _disarm()
    if isinstance(out, tuple):
        out = list(out)
    return _comparable(out)
"""


def _prelude(code: str, header: str, time_limit_s: float) -> str:
    return f"_CODE = {code!r}\n_HEADER = {header!r}\n_LIMIT_S = {float(time_limit_s)!r}\n"


def stdio_driver(code: str, header: str, time_limit_s: float) -> str:
    """The sandbox program that runs `code` on one stdin the way LiveCodeBench's `grade_stdio` does."""
    return _prelude(code, header, time_limit_s) + _COMMON + _STDIO


def call_driver(code: str, header: str, fn_name: str, time_limit_s: float) -> str:
    """The sandbox program whose `CALL_ENTRY` calls `fn_name` of `code` as LiveCodeBench's
    `grade_call_based` does."""
    return _prelude(code, header, time_limit_s) + f"_FN_NAME = {fn_name!r}\n" + _COMMON + _CALL
