"""Checker programs: testlib-style special judges, run in the sandbox after the judged program.

A :class:`mucode.sandbox.types.CheckerProgram` judges the tests of a stdio job whose answers are not
unique. The flow of one job (``judge_with_checker``):

1. the program's tests run as usual (one executor request); a test that does not end ``ok``
   (runtime error, a limit) keeps that verdict; with ``stop_on_first_failure`` the run stops there.
   A wrong output cannot be seen before the checker runs, so every test up to the first failing
   *run* is run;
2. one **separate** executor request (another connection, any free slot, after the program's job
   ended and its slot was cleaned: no process of the program is left, its scratch dir is emptied)
   runs the checker once per test that ran ``ok``. The program's output reaches the checker only as
   data, inside the checker run's stdin: nothing the program produced is judged where the program
   can reach it. A compiled checker (C++) is compiled once per request, not per test; each checked
   test is one fork (Python: of the executor's warm interpreter) in the same slot, not a sandbox start;
3. each checker run's exit decides its test (testlib's codes):

   ====================================  =========================================================
   checker run                           test verdict
   ====================================  =========================================================
   exit 0                                ``correct``
   exit 1 (WA), exit 2 (PE)              ``wrong_answer``
   any other exit, a signal, a raised    ``wrong_answer`` (a *failed checker*; ``stderr`` of the
   exception, a time/memory/output       test starts ``[checker failed]``)
   limit of the checker
   does not compile (C++), or Python     ``sandbox_error`` for the job (the data set's checker is
   source that does not compile          broken; the program cannot cause it: no test input exists
                                         at that point)
   the executor fails (unreachable,      ``sandbox_error`` (infrastructure, as for the program)
   the checker's process set-up)
   ====================================  =========================================================

   A failed checker scores as a wrong answer, on purpose: the output is the program's, so an output
   that crashes, hangs or floods the checker must score no better than a wrong one. As an
   infrastructure status it would be re-sent and only then charged (``mucode.verifier.client``), and
   counted against the masked fraction: work and noise the policy could farm. The price: a
   *correct* output that breaks a buggy checker scores 0 too (fix the checker; the message says so).

The checker's view (identical to testlib's ``checker <input> <output> <answer>``): its cwd holds
``input.txt`` (the test's stdin), ``output.txt`` (the program's stdout) and ``answer.txt`` (the
expected output), and ``argv[1:4]`` names them. Wrappers, chosen by the language's source file
suffix in the executor's table (``sandbox/languages.py``): ``.py`` (Python: the checker runs as
``__main__`` in the executor's forked interpreter; a raised exception exits 3) and ``.cpp``/``.cc``
(C++: a constructor that runs before ``main`` writes the files and re-executes the binary with the
three paths, so the checker's ``main(argc, argv)`` is untouched; testlib's ``quitf`` works as is,
with ``testlib.h`` pasted into the source: the sandbox has no include path of its own). A language
the executor does not have (C++ until it lands there) is refused when the spec is validated.

Limits: the three texts travel in the checker run's stdin (UTF-8 byte lengths on a first line, then
the texts), and are written to the slot's scratch dir (a tmpfs of ``scratch_mb``, files up to the
executor's ``fsize_mb``): a test whose input + output + answer do not fit there fails the checker
(a wrong answer). Checker requests carry at most ``MAX_REQUEST_BYTES`` of texts each (more tests
make more requests). ``call`` and ``assert`` tests cannot have a checker program.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any

from mucode.protocol import SANDBOX_VERDICTS, Status
from mucode.sandbox.executor.languages import LANGUAGES
from mucode.sandbox.types import CheckerProgram, CodeJob, JobResult, TestOutcome

__all__ = [
    "FAILED_PREFIX",
    "MAX_REQUEST_BYTES",
    "bundle",
    "checker_request",
    "checker_verdict",
    "judge_with_checker",
    "validate_checker",
    "wrap",
]

ACCEPTED, WRONG_ANSWER, PRESENTATION_ERROR = 0, 1, 2
FAILED_EXIT = 3
"""What a wrapper exits with when the checker raised or its files could not be written (testlib's _fail)."""
FILES = ("input.txt", "output.txt", "answer.txt")
FAILED_PREFIX = "[checker failed]"
MAX_REQUEST_BYTES = 64 << 20
"""Texts (inputs + outputs + answers) per checker request; more tests make more requests."""

_VERDICTS = {v.value: v for v in SANDBOX_VERDICTS}

Frame = dict[str, Any]
Run = Callable[[Frame, Callable[[Frame], bool], float], Awaitable[tuple[list[Frame], str | None]]]
"""``PooledBackend._run``: (request, keep_going, time_limit_s) -> (test frames, infrastructure error)."""
ToOutcome = Callable[[Frame, Status], TestOutcome]


def bundle(test_input: str, output: str, answer: str) -> str:
    """A checker run's stdin: the UTF-8 byte lengths of the three texts on one line, then the texts."""
    parts = [t.encode("utf-8", "surrogatepass") for t in (test_input, output, answer)]
    return f"{len(parts[0])} {len(parts[1])} {len(parts[2])}\n" + test_input + output + answer


_PY_WRAPPER = """import os, sys
def _mucode_setup():
    data = bytearray()
    while True:
        chunk = os.read(0, 1 << 20)
        if not chunk:
            break
        data += chunk
    head, _, rest = bytes(data).partition(b"\\n")
    sizes = [int(x) for x in head.split()]
    if len(sizes) != 3 or sum(sizes) != len(rest):
        raise ValueError("malformed checker stdin")
    start = 0
    for name, size in zip(%(files)r, sizes):
        with open(name, "wb") as f:
            f.write(rest[start : start + size])
        start += size
    return compile(%(source)r, "checker.py", "exec", dont_inherit=True)
try:
    _mucode_code = _mucode_setup()
except BaseException as exc:
    print("checker set-up failed:", repr(exc)[:500], file=sys.stderr)
    sys.exit(%(failed)d)
sys.argv = ["checker.py", *%(files)r]
try:
    exec(_mucode_code, {"__name__": "__main__", "__file__": "checker.py", "__builtins__": __builtins__})
except SystemExit:
    raise
except BaseException as exc:
    import traceback
    traceback.print_exception(type(exc), exc, exc.__traceback__)
    sys.exit(%(failed)d)
"""

_CPP_PRELUDE = r"""// mucode checker wrapper: before main, write the three files from stdin and re-execute with them
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
static void mucode_checker_setup(int argc, char **argv, char **) __attribute__((constructor));
static void mucode_checker_setup(int argc, char **argv, char **) {
  if (getenv("MUCODE_CHECKER_FILES") != nullptr || argc < 1) return;
  static char buf[1 << 16];
  size_t cap = 1 << 20, len = 0, n;
  char *data = (char *)malloc(cap);
  while (data != nullptr && (n = fread(buf, 1, sizeof buf, stdin)) > 0) {
    if (len + n > cap) { cap = 2 * (len + n); data = (char *)realloc(data, cap); if (!data) break; }
    memcpy(data + len, buf, n); len += n;
  }
  unsigned long long sizes[3];
  char head[96];
  char *nl = data ? (char *)memchr(data, '\n', len < sizeof head ? len : sizeof head) : nullptr;
  if (nl != nullptr) { memcpy(head, data, nl - data); head[nl - data] = 0; }
  if (nl == nullptr || sscanf(head, "%llu %llu %llu", &sizes[0], &sizes[1], &sizes[2]) != 3 ||
      sizes[0] + sizes[1] + sizes[2] != (unsigned long long)(data + len - nl - 1)) {
    fputs("checker set-up failed: malformed checker stdin\n", stderr); _exit(3);
  }
  const char *names[3] = {"input.txt", "output.txt", "answer.txt"};
  const char *at = nl + 1;
  for (int i = 0; i < 3; ++i) {
    FILE *f = fopen(names[i], "wb");
    if (f == nullptr || fwrite(at, 1, sizes[i], f) != sizes[i] || fclose(f) != 0) {
      fputs("checker set-up failed: cannot write its files\n", stderr); _exit(3);
    }
    at += sizes[i];
  }
  free(data);
  setenv("MUCODE_CHECKER_FILES", "1", 1);
  char *args[] = {argv[0], (char *)names[0], (char *)names[1], (char *)names[2], nullptr};
  execv(argv[0], args);
  fputs("checker set-up failed: cannot re-execute\n", stderr); _exit(3);
}
#line 1 "checker.cpp"
"""


def _wrap_python(source: str) -> str:
    return _PY_WRAPPER % {"files": FILES, "source": source, "failed": FAILED_EXIT}


def _wrap_cpp(source: str) -> str:
    return _CPP_PRELUDE + source


WRAPPERS: dict[str, Callable[[str], str]] = {".py": _wrap_python, ".cpp": _wrap_cpp, ".cc": _wrap_cpp}
"""Checker wrappers by the source-file suffix of the checker's language in the executor's table."""


def _wrapper(language: str) -> Callable[[str], str]:
    lang = LANGUAGES.get(language)
    suffix = "." + lang.source_name.rpartition(".")[2] if lang is not None else ""
    if lang is None or suffix not in WRAPPERS or "stdio" not in lang.modes:
        usable = sorted(
            n for n, entry in LANGUAGES.items() if "." + entry.source_name.rpartition(".")[2] in WRAPPERS
        )
        raise ValueError(
            f"checker language {language!r} is not one this sandbox runs checkers in; use one of {usable}"
        )
    return WRAPPERS[suffix]


def wrap(checker: CheckerProgram) -> str:
    """The program the executor runs for ``checker`` (its source inside the language's wrapper)."""
    return _wrapper(checker.language)(checker.source)


@functools.lru_cache(maxsize=256)
def _python_compile_error(source: str) -> str | None:
    try:
        compile(source, "checker.py", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError) as exc:
        return f"{type(exc).__name__}: {exc}"[:500]
    return None


def validate_checker(checker: CheckerProgram) -> None:
    """Raises ValueError naming the fix when ``checker`` cannot run: a language without a wrapper or
    not in the executor's table, limits out of range, Python source that does not compile."""
    wrapper = _wrapper(checker.language)
    if not 0 < checker.time_limit_s <= 60 or not 16 <= checker.memory_limit_mb <= 8192:
        raise ValueError("a checker program needs 0 < time_limit_s <= 60 and 16 <= memory_limit_mb <= 8192")
    if wrapper is _wrap_python:
        why = _python_compile_error(checker.source)
        if why is not None:
            raise ValueError(f"the checker program does not compile: {why}")


def checker_request(checker: CheckerProgram, bundles: list[str]) -> Frame:
    """The executor request that runs ``checker`` once per bundle (one stdin each)."""
    return {
        "op": "run",
        "language": checker.language,
        "mode": "stdio",
        "program": wrap(checker),
        "inputs": bundles,
        "time_limit_s": checker.time_limit_s,
        "memory_limit_mb": checker.memory_limit_mb,
    }


def checker_verdict(frame: Frame) -> tuple[Status, str | None]:
    """A test's verdict from its checker run's frame, and a note for its stderr (module docstring).
    ``compile_error`` and ``sandbox_error`` come back as ``sandbox_error``: the job's, not the test's."""
    status, code = frame.get("status"), frame.get("exit_code")
    head = str(frame.get("stderr") or frame.get("message") or "")[:500].strip()
    if status == "ok":
        return Status.correct, None
    if status in ("compile_error", "sandbox_error"):
        return Status.sandbox_error, f"the checker program could not run ({status}): {head}"
    if status == "runtime_error" and code == WRONG_ANSWER:
        return Status.wrong_answer, f"[checker: wrong answer] {head}"
    if status == "runtime_error" and code == PRESENTATION_ERROR:
        return Status.wrong_answer, f"[checker: presentation error] {head}"
    why = f"exit {code}" if code is not None else f"signal {frame.get('signal')}"
    if status != "runtime_error":
        why = f"{status} ({frame.get('limit_hit')})"
    return Status.wrong_answer, f"{FAILED_PREFIX} {why}: {head}"


def _chunks(bundles: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    out: list[list[tuple[int, str]]] = [[]]
    size = 0
    for entry in bundles:
        if out[-1] and size + len(entry[1]) > MAX_REQUEST_BYTES:
            out.append([])
            size = 0
        out[-1].append(entry)
        size += len(entry[1])
    return out


async def _run_checker(
    checker: CheckerProgram, pending: list[tuple[int, str]], stop_early: bool, run: Run
) -> tuple[dict[int, Frame], str | None]:
    """Checker frames by test index (each chunk one executor request), or an infrastructure error."""
    judged: dict[int, Frame] = {}
    for chunk in _chunks(pending):
        request = checker_request(checker, [b for _, b in chunk])
        frames, error = await run(
            request, lambda f: f.get("status") == "ok" or not stop_early, checker.time_limit_s
        )
        if error is not None:
            return judged, f"the checker's sandbox run failed: {error}"
        for frame in frames:
            judged[chunk[int(frame["index"])][0]] = frame
        if stop_early and any(f.get("status") != "ok" for f in frames):
            break
    return judged, None


async def judge_with_checker(
    job: CodeJob, checker: CheckerProgram, request: Frame, run: Run, to_outcome: ToOutcome
) -> JobResult:
    """``job`` (``request``: its executor request) judged by ``checker`` (module docstring)."""
    start = time.monotonic()
    if job.tests.format != "stdio":
        raise ValueError(f"a checker program judges stdio tests only, not {job.tests.format!r}")
    try:
        validate_checker(checker)
    except ValueError as exc:
        return JobResult(Status.sandbox_error, [], time.monotonic() - start, error=str(exc))
    stop = job.stop_on_first_failure
    frames, error = await run(request, lambda f: f.get("status") == "ok" or not stop, job.time_limit_s)
    if error is not None:
        return JobResult(Status.sandbox_error, [], time.monotonic() - start, error=error)
    frames = sorted(frames, key=lambda f: int(f["index"]))
    if any(f.get("status") == "sandbox_error" for f in frames):
        first = next(f for f in frames if f.get("status") == "sandbox_error")
        ran = [to_outcome(f, _VERDICTS.get(str(f.get("status")), Status.sandbox_error)) for f in frames]
        return JobResult(Status.sandbox_error, ran, time.monotonic() - start, error=str(first.get("message")))
    t = job.tests
    pending = [
        (
            int(f["index"]),
            bundle(t.inputs[int(f["index"])], str(f.get("stdout", "")), t.outputs[int(f["index"])]),
        )
        for f in frames
        if f.get("status") == "ok"
    ]
    judged, error = await _run_checker(checker, pending, stop, run) if pending else ({}, None)
    if error is not None:
        return JobResult(Status.sandbox_error, [], time.monotonic() - start, error=error)
    outcomes: list[TestOutcome] = []
    for frame in frames:
        index = int(frame["index"])
        if frame.get("status") != "ok":
            outcomes.append(to_outcome(frame, _VERDICTS.get(str(frame.get("status")), Status.sandbox_error)))
            continue
        if index not in judged:
            break  # the checker stopped at an earlier rejection
        verdict, note = checker_verdict(judged[index])
        if verdict is Status.sandbox_error:
            return JobResult(Status.sandbox_error, outcomes, time.monotonic() - start, error=note)
        stderr = str(frame.get("stderr", "")) + (f"\n{note}" if note else "")
        outcomes.append(to_outcome({**frame, "stderr": stderr}, verdict))
        if verdict is not Status.correct and stop:
            break
    wall = time.monotonic() - start
    bad = [o for o in outcomes if o.verdict is not Status.correct]
    if not bad and len(outcomes) != len(t.inputs):
        return JobResult(
            Status.sandbox_error, outcomes, wall, error=f"ran {len(outcomes)} of {len(t.inputs)} tests"
        )
    return JobResult(bad[0].verdict if bad else Status.correct, outcomes, wall)
