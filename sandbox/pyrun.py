"""Run a Python program inside an already-forked, already-unprivileged child (the fast path).

Called by runner._child after the limits and the uid switch, with the control pipe on fd 3 and
``ready`` already written. It behaves like ``python3 -I -S solution.py``: a fresh ``__main__``
module, ``sys.argv == ["solution.py"]``, fresh text streams on fds 0-2, ``SystemExit`` codes kept,
an uncaught exception printed with its traceback and exit code 1, non-daemon threads joined and
atexit handlers run before exit. Differences from a fresh interpreter (documented limits): the
executor's own modules stay importable/imported, and the interpreter's start-up state (hash seed,
recursion depth) is the executor's. Python's int-to-str digit limit is raised to 50,000 (as
LiveCodeBench's grader does), and the interpreter's site-packages dirs (Debian's python3-numpy,
-scipy, -sortedcontainers, -networkx in the image and on the host) are importable although the
executor runs with ``-S``.

Modes: ``stdio`` runs the program with the test input on stdin; ``call`` runs the program, then
calls ``fn_name`` (a top-level function, or a method of ``Solution()``) with one JSON argument per
input line, and writes the JSON of the return value on the control pipe (the program's prints go to
stderr); ``assert`` runs the program, then ``assert_code`` (compiled apart, as ``tests.py``, in the
program's module namespace; ``check(<entry_point>)`` appended when ``entry_point`` is set). The
test code arrives rewritten by mucode/sandbox/asserts.py: ``__mucode_report__(k, value)`` writes
the value as plain data (``encode``) for the caller to compare outside the sandbox,
``__mucode_value__(x)`` makes an operand plain data (anything else fails the assertion),
``__mucode_check__(k, v)`` asserts in here. After the test code finished without an exception,
the harness writes ``{"ev": "asserts_done", "token": <the run's token>}``: an exit status alone
never passes a test.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import json
import os
import sys
import traceback
import types

TYPE_CHECKING = False  # typing's own flag without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

CTL_FD = 3
INT_MAX_STR_DIGITS = 50_000
_SITE_DIRS: list[str] = []


def prepare() -> None:
    """Once, in the executor before any fork: find the site-packages dirs programs may import from
    (``-S`` leaves them off sys.path; ``site.getsitepackages()`` does not run site's main)."""
    import site

    _SITE_DIRS[:] = [d for d in site.getsitepackages() if os.path.isdir(d)]


def _ctl(event: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):
        os.write(CTL_FD, (json.dumps(event) + "\n").encode())


def _fresh_streams() -> None:
    stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8")
    stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8")
    stderr = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
        encoding="utf-8",
        errors="backslashreplace",
        line_buffering=True,
    )
    sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = stdin, stdout, stderr  # type: ignore[misc]


class NotPlain(Exception):
    pass


_MAX_DEPTH = 150


def plain(x: Any, depth: int = 0) -> object:
    """``x`` as exact builtin data. Subclasses of builtins go through the base type's own C
    methods (their overrides are ignored); numpy values through ``tolist()``; else NotPlain."""
    t = type(x)
    if x is None or t is bool or t is int or t is float or t is str or t is bytes or t is complex:
        return x
    if depth > _MAX_DEPTH:
        raise NotPlain("nested too deeply")
    d = depth + 1
    if t is list:
        return [plain(v, d) for v in x]
    if t is tuple:
        return tuple(plain(v, d) for v in x)
    if t is dict:
        return {plain(k, d): plain(v, d) for k, v in dict.items(x)}
    if t is set or t is frozenset:
        return t(plain(v, d) for v in x)
    for base, to_base in _BASES:
        if issubclass(t, base):
            return plain(to_base(x), d)
    if getattr(t, "__module__", "") == "numpy" and hasattr(x, "tolist"):
        return plain(x.tolist(), d)
    raise NotPlain(getattr(t, "__qualname__", "?"))


_BASES = (
    (int, int.__int__),
    (float, float.__float__),
    (str, str.__str__),
    (bytes, lambda b: bytes.__getitem__(b, slice(None))),
    (list, list.copy),
    (tuple, lambda v: tuple.__getitem__(v, slice(None))),
    (dict, dict.copy),
    (set, set.copy),
    (frozenset, frozenset.copy),
    (complex, lambda c: complex(complex.__getattribute__(c, "real"), complex.__getattribute__(c, "imag"))),
)


def encode(x: object) -> object:
    """Plain data (see ``plain``) as tagged JSON (decoded by mucode/sandbox/asserts.py)."""
    t = type(x)
    if x is None or t is bool or t is str:
        return x
    if t is int:
        return {"i": hex(x)}  # type: ignore[arg-type]
    if t is float:
        return {"f": x.hex()}  # type: ignore[attr-defined]
    if t is complex:
        return {"c": [x.real.hex(), x.imag.hex()]}  # type: ignore[attr-defined]
    if t is bytes:
        return {"b": x.hex()}  # type: ignore[attr-defined]
    if t is list:
        return [encode(v) for v in x]  # type: ignore[attr-defined]
    if t is tuple:
        return {"t": [encode(v) for v in x]}  # type: ignore[attr-defined]
    if t is set or t is frozenset:
        return {"s" if t is set else "S": [encode(v) for v in x]}  # type: ignore[attr-defined]
    if t is dict:
        return {"d": [[encode(k), encode(v)] for k, v in x.items()]}  # type: ignore[attr-defined]
    raise NotPlain(t.__qualname__)


def _harness(token: str) -> dict[str, Any]:
    """The names the rewritten test code calls (bound here, after the program's own code ran)."""
    write, dumps = os.write, json.dumps

    def report(k: int, value: object) -> None:
        try:
            data = encode(plain(value))
        except (NotPlain, RecursionError) as exc:
            data = {"x": str(exc)[:200]}
        write(CTL_FD, (dumps({"ev": "assert", "k": k, "v": data}) + "\n").encode("utf-8", "surrogatepass"))

    def value(x: object) -> object:
        try:
            return plain(x)
        except (NotPlain, RecursionError) as exc:
            raise AssertionError(f"not plain data: {exc}") from None

    def check(k: int, v: object) -> None:
        if not v:
            raise AssertionError(f"assertion {k} failed")

    def done() -> None:
        write(CTL_FD, (dumps({"ev": "asserts_done", "token": token}) + "\n").encode())

    return {"__mucode_report__": report, "__mucode_value__": value, "__mucode_check__": check, "done": done}


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    with contextlib.suppress(Exception):
        print(code, file=sys.stderr)
    return 1


def _resolve(module: types.ModuleType, fn_name: str) -> Any:
    fn = getattr(module, fn_name, None)
    if callable(fn):
        return fn
    cls = getattr(module, "Solution", None)
    if cls is not None and hasattr(cls, fn_name):
        return getattr(cls(), fn_name)
    raise NameError(f"no function {fn_name!r} and no Solution.{fn_name} in the program")


def _finish(code: int) -> None:
    try:
        threading = sys.modules.get("threading")
        if threading is not None:
            threading._shutdown()
        import atexit

        atexit._run_exitfuncs()
    except BaseException:
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            code = code or 120
    os._exit(code)


def run_python(job: dict[str, Any], test_input: str) -> None:
    """Never returns: ends the process with the program's exit code."""
    _fresh_streams()
    sys.path[:] = [p for p in sys.path if not p.endswith("sandbox")] + _SITE_DIRS
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(INT_MAX_STR_DIGITS)
    mode = job.get("mode", "stdio")
    harness = _harness(job.pop("token", "")) if mode == "assert" else {}
    try:
        code = compile(job["program"], "solution.py", "exec", dont_inherit=True)
        if mode == "assert":
            tests = (job.get("assert_code") or "") + "\n"
            if job.get("entry_point"):
                tests += f"\ncheck({job['entry_point']})\n"
            tests_code = compile(tests, "tests.py", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, OverflowError, MemoryError, RecursionError) as exc:
        traceback.print_exception(type(exc), exc, None)
        _ctl({"ev": "compile_error"})
        _finish(1)
        return
    module = types.ModuleType("__main__")
    module.__file__ = os.path.join(os.getcwd(), "solution.py")
    module.__builtins__ = builtins  # type: ignore[attr-defined]
    sys.modules["__main__"] = module
    sys.argv = ["solution.py"]
    exit_code = 0
    try:
        exec(code, module.__dict__)
        if mode == "assert":
            done = harness.pop("done")
            module.__dict__.update(harness)
            del harness
            exec(tests_code, module.__dict__)
            done()
        if mode == "call":
            args = [json.loads(line) for line in test_input.splitlines() if line.strip()]
            result = _resolve(module, job["fn_name"])(*args)
            _ctl({"ev": "result", "value": json.dumps(result)})
    except SystemExit as exc:
        exit_code = _exit_code(exc)
    except BaseException as exc:
        _ctl({"ev": "exc", "type": type(exc).__name__})
        try:  # without the executor's own frame, like a plain `python3 solution.py`
            tb = exc.__traceback__
            traceback.print_exception(type(exc), exc, tb.tb_next if tb is not None else None)
        except BaseException:
            pass
        exit_code = 1
    _finish(exit_code)
