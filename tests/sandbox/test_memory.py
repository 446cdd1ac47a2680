"""What a program can find in its own memory: its own run, nothing else.

Test processes are clones of a zygote that never read a job (sandbox/zygote.py); each reads only its
own run. Each test here plants a secret where a program must not reach it (the assert test code of
its own job, another test's input, another job's program) and has the program search for it in
every readable page of its address space (read with ctypes, as /proc/self/maps lists them) and in
every object the garbage collector tracks. The secret is searched for as two halves held apart:
the program never builds the whole of it, so only a real copy matches. Both backends, through the real executor.
"""

from __future__ import annotations

import os

from sandbox_helpers import Handle, assert_confined, assert_still_works, stdio_job

from mucode.protocol import Status
from mucode.sandbox import CodeJob, TestSpec


def _secret() -> str:
    return "mucode-secret-" + os.urandom(8).hex()


def _search(secret: str) -> str:
    """Program text defining ``found()``: is ``secret`` anywhere in this process's memory?"""
    half = len(secret) // 2
    return f"""
import gc

HEAD, TAIL = {secret[:half].encode()!r}, {secret[half:].encode()!r}


def _in(data):
    i = data.find(HEAD)
    while i >= 0:
        if data[i + len(HEAD) : i + len(HEAD) + len(TAIL)] == TAIL:
            return True
        i = data.find(HEAD, i + 1)
    return False


def found():
    import ctypes

    with open("/proc/self/maps") as maps:
        regions = [line.split() for line in maps]
    for fields in regions:
        if "r" not in fields[1] or (len(fields) > 5 and fields[5].startswith("[vvar")):
            continue
        lo, hi = (int(x, 16) for x in fields[0].split("-"))
        try:
            if _in(ctypes.string_at(lo, hi - lo)):
                return True
        except (OSError, ValueError, OverflowError, MemoryError):
            continue
    for o in gc.get_objects():
        for value in (o.values() if isinstance(o, dict) else o if isinstance(o, (list, tuple)) else ()):
            if isinstance(value, str) and _in(value.encode("utf-8", "replace")):
                return True
    return False
"""


def test_a_program_does_not_hold_its_assert_test_code(sb: Handle) -> None:
    """The harness runs the test code in a process of its own; the program's process never gets it
    (it once held its whole job, the test code and its expected values among it)."""
    assert_confined(sb)
    secret = _secret()
    program = _search(secret) + "\ndef answer():\n    return 'absent' if not found() else 'FOUND'\n"
    tests = f"def check(candidate):\n    assert candidate() == 'absent'  # {secret}\n"
    r = sb.judge(CodeJob(program, TestSpec("assert", assert_code=tests, entry_point="answer")))
    assert r.verdict is Status.correct, (r.tests[0].stdout, r.tests[0].stderr)
    assert_still_works(sb)


def test_a_program_holds_only_its_own_tests_input(sb: Handle) -> None:
    """The first test's process does not hold the second test's input (nor any other)."""
    assert_confined(sb)
    secret = _secret()
    program = (
        _search(secret) + "\nline = input()\nprint('absent' if line != 'first' or not found() else 'FOUND')\n"
    )
    r = sb.judge(stdio_job(program, ["first\n", f"{secret}\n"], ["absent", "absent"]))
    assert r.verdict is Status.correct, [(t.stdout, t.stderr) for t in r.tests]


def test_a_program_holds_no_earlier_job(sb: Handle) -> None:
    """Jobs that ran before in every slot (a program and its inputs with the secret) leave nothing
    that a later program finds in its memory, though the same handler served them."""
    assert_confined(sb)
    secret = _secret()
    planted = f"print(input().strip())  # {secret}\n"
    slots = max(2, len(sb.slot_uids))
    earlier = sb.judge_many([stdio_job(planted, [f"{secret}\n"], [secret]) for _ in range(2 * slots)])
    assert all(r.verdict is Status.correct for r in earlier), earlier[0]
    program = _search(secret) + "\nprint('absent' if not found() else 'FOUND')\n"
    later = sb.judge_many([stdio_job(program, [""], ["absent"]) for _ in range(2 * slots)])
    assert all(r.verdict is Status.correct for r in later), [
        (t.stdout, t.stderr) for r in later for t in r.tests
    ]
