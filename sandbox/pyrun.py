"""Run a Python program inside an already-forked, already-unprivileged child (the fast path).

Called by runner._child after the limits and the uid switch, with the control pipe on fd 3 and
``ready`` already written. It behaves like ``python3 -I -S solution.py``: a fresh ``__main__``
module, ``sys.argv == ["solution.py"]``, fresh text streams on fds 0-2, ``SystemExit`` codes kept,
an uncaught exception printed with its traceback and exit code 1, non-daemon threads joined and
atexit handlers run before exit. Differences from a fresh interpreter (documented limits): the
executor's own modules stay importable/imported, and the interpreter's start-up state (hash seed,
recursion depth) is the executor's.

Modes: ``stdio`` runs the program with the test input on stdin; ``call`` runs the program, then
calls ``fn_name`` (a top-level function, or a method of ``Solution()``) with one JSON argument per
input line, and writes the JSON of the return value on the control pipe (the program's prints go to
stderr); ``assert`` runs the program followed by ``assert_code`` (then ``check(<entry_point>)`` when
``entry_point`` is set, HumanEval style) and passes iff it exits 0.
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

CTL_FD = 3


def _ctl(event: dict) -> None:
    with contextlib.suppress(OSError):
        os.write(CTL_FD, (json.dumps(event) + "\n").encode())


def _fresh_streams() -> None:
    stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8")
    stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8")
    stderr = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "w", closefd=False)), encoding="utf-8",
                              errors="backslashreplace", line_buffering=True)
    sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = stdin, stdout, stderr  # type: ignore[misc]


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    with contextlib.suppress(Exception):
        print(code, file=sys.stderr)
    return 1


def _resolve(module: types.ModuleType, fn_name: str):
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
            threading._shutdown()  # type: ignore[attr-defined]
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


def run_python(job: dict, test_input: str) -> None:
    """Never returns: ends the process with the program's exit code."""
    _fresh_streams()
    sys.path[:] = [p for p in sys.path if not p.endswith("sandbox")]
    mode = job.get("mode", "stdio")
    source = job["program"]
    if mode == "assert":
        source = source + "\n\n" + (job.get("assert_code") or "") + "\n"
        if job.get("entry_point"):
            source += f"\ncheck({job['entry_point']})\n"
    try:
        code = compile(source, "solution.py", "exec", dont_inherit=True)
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
