"""Languages the executor can run, as a table: adding one is adding an entry.

Two kinds of runner:
- ``fork_python``: the program runs in a fork of the executor's own (already started) interpreter,
  after the child has dropped to the slot's uid and applied its limits. This is the fast path
  (~1 ms per test instead of ~8 ms for a fresh ``python3 -I -S``). The child gets a fresh
  ``__main__`` module, fresh ``sys.stdin/stdout/stderr`` on its pipes and a clean environment.
- ``exec``: the child ``execve``s ``run``. With a ``compile`` command, the job handler first runs
  it once per job (as the slot uid, same limits, CPU limit ``--compile-time-limit-s``) in the
  slot's ``build/`` dir, which survives between the job's tests; a failure is ``compile_error``.
  ``{src}``/``{build}`` are substituted. A C++ entry is ``Language("cpp", "main.cpp", "exec",
  compile=("g++", "-O2", "-o", "{build}/main", "{src}"), run=("{build}/main",))`` once the image
  has g++ (and, with docker, a scratch tmpfs mounted ``exec``).

Standard library only (runs inside the sandbox image).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Language:
    name: str
    source_name: str
    runner: str  # "fork_python" | "exec"
    compile: tuple[str, ...] | None = None
    run: tuple[str, ...] = ()
    modes: tuple[str, ...] = ("stdio",)


LANGUAGES: dict[str, Language] = {
    lang.name: lang
    for lang in (
        Language("python", "solution.py", "fork_python", modes=("stdio", "call", "assert")),
        # Same semantics, but a fresh interpreter per test (slower; used by the benchmark as the
        # exec-path figure and as the template for compiled languages).
        Language("python-exec", "solution.py", "exec", run=(sys.executable, "-I", "-S", "{src}")),
        # Compile once per job, run the build output per test: the path a C++ entry takes. Here
        # the "compiler" byte-compiles the program (a SyntaxError is a compile_error).
        Language(
            "python-pyc",
            "solution.py",
            "exec",
            compile=(
                sys.executable,
                "-I",
                "-S",
                "-c",
                "import py_compile, sys; py_compile.compile(sys.argv[1], sys.argv[2], doraise=True)",
                "{src}",
                "{build}/solution.pyc",
            ),
            run=(sys.executable, "-I", "-S", "{build}/solution.pyc"),
        ),
    )
}
