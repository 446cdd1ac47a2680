"""The assert-format test harness: runs the test code in a process of its own, never the program's.

An assert test is two processes cloned for the job handler (runner.py), both unprivileged with the
same limits: the *program* (pyrun.py: runs the program as ``__main__``, then serves calls) and the
*harness* (here: runs the test code). They share no memory; the harness is forked first, is made
non-dumpable (so the program, running as the same uid, can neither open its ``/proc/<pid>/mem`` or
``fd/`` nor trace it: ``ptrace`` is also denied by seccomp) and only then is the program forked.
Two pipes join them: requests on fd 4 (harness -> program), replies on fd 5 (program -> harness),
one plain-data line each (plaindata.py). So:

- every name the test code uses but never binds, other than a builtin, is looked up in the
  program once, before the test code runs: a function becomes a proxy that sends plain-data
  arguments and reads a plain-data result (or the name of the exception raised: a builtin
  exception class of that name is raised here, anything else ``RuntimeError``); a plain value is
  copied; anything else stays undefined (``NameError`` when used). The entry point (HumanEval's
  ``candidate``) is always looked up;
- builtins, the test's own helpers and imports, its loop iterables, predicates and expected values
  live here only: the program can change none of them, nor read them;
- the end-of-tests record (``{"ev": "asserts_done", "token": ...}`` on this process's control pipe,
  fd 3, with a random token of the run only this process knows) is written after the test code
  returned: no hook the program can call ends the tests.

Limits: arguments are copies (a test that checks that the candidate mutated its argument fails);
only plain data crosses (a test passing a function or an object to the candidate fails); a helper
that the data set defines in its prompt rather than in its test code (HumanEval's ``poly``,
``encode_cyclic``) is the program's, since the test looks it up there (a data set that wants it
trusted puts it in its test code). Standard library only.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import json
import os
import sys
import traceback

import plaindata

TYPE_CHECKING = False  # typing's own flag without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

CTL_FD, REQ_FD, REP_FD = 3, 4, 5


def free_names(tree: ast.AST) -> list[str]:
    """Names the code loads but never binds (anywhere), builtins excluded."""
    loads: set[str] = set()
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loads if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
    return sorted(n for n in loads - bound if not hasattr(builtins, n))


class Peer:
    """The program's end of the two pipes, read with a byte cap per reply."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.buf = bytearray()

    def ask(self, request: object) -> object:
        data = plaindata.dumps(request)
        view = memoryview(data)
        while view:
            view = view[os.write(REQ_FD, view) :]
        return self._reply()

    def _reply(self) -> object:
        while True:
            end = self.buf.find(b"\n")
            if end >= 0:
                line = bytes(self.buf[:end])
                del self.buf[: end + 1]
                try:
                    return plaindata.loads(line)
                except (ValueError, TypeError, OverflowError) as exc:
                    raise RuntimeError(f"the program sent a reply that is not plain data: {exc}") from None
            if len(self.buf) > self.cap:
                os.write(CTL_FD, b'{"ev": "output_limit"}\n')
                raise RuntimeError("the program's reply exceeds the output limit")
            chunk = os.read(REP_FD, 1 << 16)
            if not chunk:
                raise RuntimeError("the program ended before the tests did")
            self.buf += chunk


def _raise(kind: object, message: object) -> None:
    cls = getattr(builtins, kind, None) if isinstance(kind, str) else None
    text = str(message)[:500]
    if isinstance(cls, type) and issubclass(cls, Exception):
        raise cls(text)
    raise RuntimeError(f"{kind}: {text}")


def _unwrap(reply: object) -> Any:
    if type(reply) is tuple and len(reply) == 2 and reply[0] == "ok":
        return reply[1]
    if type(reply) is tuple and len(reply) == 3 and reply[0] == "err":
        _raise(reply[1], reply[2])
    raise RuntimeError("the program sent a malformed reply")


def _proxy(peer: Peer, name: str) -> Any:
    def remote(*args: object, **kwargs: object) -> Any:
        return _unwrap(peer.ask(("call", name, args, kwargs)))

    remote.__name__ = remote.__qualname__ = name
    return remote


def _names(peer: Peer, wanted: list[str]) -> dict[str, Any]:
    found = _unwrap(peer.ask(("resolve", wanted)))
    out: dict[str, Any] = {}
    if type(found) is not list:
        raise RuntimeError("the program sent a malformed name table")
    for item in found:
        if type(item) is tuple and len(item) == 2 and item[0] in wanted and item[1] == "f":
            out[item[0]] = _proxy(peer, item[0])
        elif type(item) is tuple and len(item) == 3 and item[0] in wanted and item[1] == "v":
            out[item[0]] = item[2]
    return out


def prepare(source: str, entry_point: str | None) -> tuple[Any, list[str], str | None]:
    """In the job handler, before the harness is cloned (the code object goes to it in its payload;
    the program's process never gets it): the compiled test code (``check(<entry_point>)`` appended when set), the
    names to look up in the program, and why the code does not compile (None when it does)."""
    try:
        tree = ast.parse(source, "tests.py")
        if entry_point:  # HumanEval style: check(<entry_point>) after the test code
            tree.body.append(
                ast.Expr(ast.Call(ast.Name("check", ast.Load()), [ast.Name(entry_point, ast.Load())], []))
            )
            ast.fix_missing_locations(tree)
        wanted = free_names(tree)
        if entry_point and entry_point not in wanted:  # an entry point named like a builtin is the program's
            wanted.append(entry_point)
        return compile(tree, "tests.py", "exec", dont_inherit=True), wanted, None
    except (SyntaxError, ValueError, TypeError, OverflowError, MemoryError, RecursionError) as exc:
        return None, [], f"{type(exc).__name__}: {exc}"[:500]


def run_harness(compiled: Any, wanted: list[str], error: str | None, token: str, cap: int) -> None:
    """Never returns: exits 0 after writing the end-of-tests record, 1 on any failure."""
    out = os.fdopen(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1)
    sys.stdout = sys.stderr = out
    code = 1
    try:
        if compiled is None:
            raise SyntaxError(f"the test code does not compile: {error}")
        namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
        namespace.update(_names(Peer(cap), wanted) if wanted else {})
        exec(compiled, namespace)
        os.write(CTL_FD, (json.dumps({"ev": "asserts_done", "token": token}) + "\n").encode())
        code = 0
    except BaseException as exc:  # noqa: BLE001 - any failure of the tests is the program's
        with contextlib.suppress(BaseException):
            os.write(CTL_FD, (json.dumps({"ev": "exc", "type": type(exc).__name__}) + "\n").encode())
            tb = exc.__traceback__
            traceback.print_exception(type(exc), exc, tb.tb_next if tb is not None else None, file=out)
    with contextlib.suppress(BaseException):
        out.flush()
    os._exit(code)
