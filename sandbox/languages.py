"""Languages the executor can run, as a table: adding one is adding an entry.

Two kinds of runner:
- ``fork_python``: the program runs in a fork of the executor's own (already started) interpreter,
  after the child has dropped to the slot's uid and applied its limits. This is the fast path
  (~1 ms per test instead of ~8 ms for a fresh ``python3 -I -S``). The child gets a fresh
  ``__main__`` module, fresh ``sys.stdin/stdout/stderr`` on its pipes and a clean environment.
- ``exec``: the child ``execve``s ``run``. With a ``compile`` command, the job handler first runs
  it once per job in the slot's *build dir*, as the slot's *build uid* (``uid + BUILD_UID_OFFSET``,
  group the slot uid), under the compile limits (``--compile-time-limit-s``, ``--compile-memory-limit-mb``,
  or the request's lower ``compile_time_limit_s``/``compile_memory_limit_mb``); a failure is
  ``compile_error``. The tests then run as the slot uid in the scratch dir, which is ``noexec``:
  the build dir is the only place a program can execute a file from, and only the compiler
  (another uid) can write there (the slot uid reads and executes it through its group, mode 0750).
  Template fields: ``{src}`` (the source file in the build dir), ``{build}``, ``{main}`` (Java:
  the class to run), ``{mem}`` (the memory limit in MB: the compile limit while compiling).

The JVM: it reserves far more address space than it uses (heap, code cache, class space, thread
stacks, malloc arenas), so RLIMIT_AS at the memory limit stops it at start-up. A JVM language
(``as_slack_mb``) runs with ``-Xmx`` = the memory limit and RLIMIT_AS = the limit + ``as_slack_mb``
(2,048 MB), with the reservations made small (serial GC, one malloc arena, a 64 MiB code cache and
class space). Measured with JDK 17 and these flags: the address space at start is ``-Xmx`` + about
400 MB + 9 x ``-Xss`` (the JVM's own Java threads take that stack too), 1,226 MB at 256 MB and
``-Xss64m``, so the slack leaves room for about 16 more threads of 64 MB. Its ``OutOfMemoryError``
(``oom_text`` on stderr with a non-zero exit; C++: ``std::bad_alloc``) is ``memory_limit``. JVM
threads count against the slot's RLIMIT_NPROC like processes (14 at start; ``--nproc`` is 64).
Java's class is the source's public top-level class if it has one, else the class declaring the
first ``main``, else ``Main`` (``java_names``). Flags follow Codeforces: ``-DONLINE_JUDGE`` for
C++ and Java, Java's ``-Xss64m`` (every Java thread reserves that much address space).

Standard library only (runs inside the sandbox image).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

BUILD_UID_OFFSET = 2000
"""The build uid of the slot with uid ``u`` is ``u + BUILD_UID_OFFSET`` (backends give it the build tmpfs)."""


def main_names(source_name: str) -> Callable[[str], tuple[str, str]]:
    """Names for a language whose source file has a fixed name."""
    stem = source_name.rsplit(".", 1)[0]
    return lambda _program: (source_name, stem)


_JAVA_PUBLIC = re.compile(r"^public\s+(?:(?:final|abstract|strictfp)\s+)*class\s+([A-Za-z_$][\w$]*)", re.M)
_JAVA_CLASS = re.compile(r"\bclass\s+([A-Za-z_$][\w$]*)")
_JAVA_MAIN = re.compile(r"\bstatic\s+(?:final\s+)?void\s+main\s*\(")
_JAVA_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def java_names(program: str) -> tuple[str, str]:
    """(source file name, class to run): javac wants a public class in a file of its name."""
    text = _JAVA_COMMENT.sub(" ", program)
    public = _JAVA_PUBLIC.search(text)
    if public:
        return f"{public.group(1)}.java", public.group(1)
    main = _JAVA_MAIN.search(text)
    classes = [m for m in _JAVA_CLASS.finditer(text) if main is None or m.start() < main.start()]
    name = classes[-1].group(1) if classes else "Main"
    return "Main.java", name


@dataclass(frozen=True)
class Language:
    name: str
    source_name: str
    runner: str  # "fork_python" | "exec"
    compile: tuple[str, ...] | None = None
    run: tuple[str, ...] = ()
    modes: tuple[str, ...] = ("stdio",)
    names: Callable[[str], tuple[str, str]] | None = None
    """program -> (source file name, ``{main}``); None: ``source_name`` and its stem."""
    as_slack_mb: int | None = None
    """JVM: RLIMIT_AS = memory limit + this (None: RLIMIT_AS = the memory limit)."""
    oom_text: str | None = None
    """On stderr with a non-zero exit: the run hit its memory limit (the JVM's OutOfMemoryError)."""
    stack_is_memory: bool = False
    """RLIMIT_STACK = the memory limit (native code: deep recursion as on Codeforces)."""
    env: dict[str, str] = field(default_factory=dict)

    def source(self, program: str) -> tuple[str, str]:
        return (self.names or main_names(self.source_name))(program)


JAVA = "/usr/bin/java"
JAVAC = "/usr/bin/javac"
JVM_FLAGS = (
    "-XX:+UseSerialGC",
    "-XX:-UsePerfData",
    "-XX:CICompilerCount=2",
    "-XX:ReservedCodeCacheSize=64m",
    "-XX:CompressedClassSpaceSize=64m",
    "-XX:MaxMetaspaceSize=256m",
    "-Xshare:auto",
)
JVM_ENV = {"MALLOC_ARENA_MAX": "1"}

LANGUAGES: dict[str, Language] = {
    lang.name: lang
    for lang in (
        Language("python", "solution.py", "fork_python", modes=("stdio", "call", "assert")),
        # Same semantics, but a fresh interpreter per test (slower; used by the benchmark as the
        # exec-path figure).
        Language("python-exec", "solution.py", "exec", run=(sys.executable, "-I", "-S", "{src}")),
        # Compile once per job, run the build output per test: here the "compiler" byte-compiles
        # the program (a SyntaxError is a compile_error). A test of the compile path that needs no
        # compiler in the image.
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
        Language(
            "cpp",
            "main.cpp",
            "exec",
            compile=(
                "/usr/bin/g++",
                "-std=gnu++17",
                "-O2",
                "-pipe",
                "-DONLINE_JUDGE",
                "-o",
                "{build}/main",
                "{src}",
            ),
            run=("{build}/main",),
            oom_text="std::bad_alloc",
            stack_is_memory=True,
        ),
        Language(
            "java",
            "Main.java",
            "exec",
            compile=(
                JAVAC,
                *(f"-J{flag}" for flag in JVM_FLAGS),
                "-J-XX:TieredStopAtLevel=1",
                "-J-Xmx{mem}m",
                "-encoding",
                "UTF-8",
                "-nowarn",
                "-proc:none",  # no annotation processors: nothing of the request runs inside javac
                "-d",
                "{build}",
                "{src}",
            ),
            run=(
                JAVA,
                *JVM_FLAGS,
                "-Xmx{mem}m",
                "-Xss64m",
                "-DONLINE_JUDGE=true",
                "-cp",
                "{build}",
                "{main}",
            ),
            names=java_names,
            as_slack_mb=2048,
            oom_text="java.lang.OutOfMemoryError",
            env=JVM_ENV,
        ),
    )
}

ALIASES = {"c++": "cpp", "python3": "python"}
"""Other names requests may use for a language (SandboxFusion's ``python3``)."""
