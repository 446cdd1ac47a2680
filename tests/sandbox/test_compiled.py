"""C++ and Java in both sandboxes: compile once per job, run per test, and every hostile program of
the Python suite (test_isolation.py) again in each language.

The hostile part is one attack tool per language (programs.py), compiled once per backend: one job
whose tests are the attacks, judged with ``stop_on_first_failure=False`` (each test is a fresh run
of the compiled program, cleaned up after as any run). The tests below read that job's outcomes.
Before it runs, the tool's own ``probe`` shows it is unprivileged, without capabilities, with
no-new-privileges, in a pid namespace of its own; each hostile branch refuses to run otherwise.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from mucode.sandbox.executor.languages import java_names
from programs import CPP_SUM, CPP_TOOL, HOST_PIDNS, JAVA_SUM, JAVA_TOOL
from sandbox_helpers import Handle, every_slot_correct, slot_processes

from mucode.protocol import Status
from mucode.sandbox import CodeJob, JobResult, TestSpec

TOOLS = {"cpp": CPP_TOOL, "java": JAVA_TOOL}
SUMS = {"cpp": CPP_SUM, "java": JAVA_SUM}
LANGS = pytest.mark.parametrize("lang", ["cpp", "java"])
# (stdin, verdict, stdout) per attack; None: any stdout. Java's thread bomb ends in its
# OutOfMemoryError ("unable to create native thread"): memory_limit.
ATTACKS: dict[str, tuple[str, Status, str | None]] = {
    "fork": ("fork", Status.time_limit, None),
    "memory": ("memory", Status.memory_limit, None),
    "spin": ("spin", Status.time_limit, None),
    "sleep": ("sleep", Status.time_limit, None),
    "output": ("output", Status.output_limit, None),
    "disk": ("disk", Status.runtime_error, None),
    "files": ("files", Status.correct, "confined"),
    "exec": ("exec", Status.correct, "noexec"),
    "network": ("network {port}", Status.correct, "blocked"),
    "signals": ("signals", Status.correct, "denied"),
    "daemon": ("daemon", Status.correct, "daemonized"),
    "sum": ("sum 20 22", Status.correct, "42"),
}
JAVA_ONLY = {"threads": ("threads", Status.memory_limit, None)}
_SUITES: dict[tuple[str, str], tuple[JobResult, list[str], float]] = {}


@pytest.fixture(scope="module")
def listener() -> Iterator[socket.socket]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    yield server
    server.close()


def all_uids(sb: Handle) -> list[int]:
    return [*sb.slot_uids, *sb.backend.build_uids]  # type: ignore[attr-defined]


def confined(sb: Handle, lang: str) -> None:
    """The tool's probe, compiled and run as any job: unprivileged, no capabilities, no-new-privs,
    not in the host's pid namespace (fails the test, never fires the attacks, otherwise)."""
    probe = sb.judge(CodeJob(TOOLS[lang], TestSpec("stdio", ["probe"], [""]), language=lang, time_limit_s=5))
    out = probe.tests[0].stdout.split()
    if len(out) != 4 or out[0] == "0" or int(out[1], 16) != 0 or out[2] != "1" or out[3] == HOST_PIDNS:
        pytest.fail(f"{lang} tool not confined ({probe.tests[0]}); refusing to run the attacks")
    assert int(out[0]) in sb.slot_uids


def suite(sb: Handle, lang: str, port: int) -> tuple[JobResult, list[str], float]:
    """The attack job of ``lang`` on ``sb``: run once per module, shared by the tests below."""
    key = (sb.kind, lang)
    if key not in _SUITES:
        confined(sb, lang)
        attacks = {**ATTACKS, **(JAVA_ONLY if lang == "java" else {})}
        names = list(attacks)
        inputs = [attacks[n][0].format(port=port) + "\n" for n in names]
        outputs = [attacks[n][2] or "" for n in names]
        start = time.monotonic()
        job = CodeJob(
            TOOLS[lang],
            TestSpec("stdio", inputs, outputs),
            language=lang,
            time_limit_s=2.0,
            memory_limit_mb=256,
            stop_on_first_failure=False,
        )
        _SUITES[key] = (sb.judge(job), names, time.monotonic() - start)
    return _SUITES[key]


def outcome(sb: Handle, lang: str, name: str, listener: socket.socket):  # noqa: ANN201
    result, names, _ = suite(sb, lang, listener.getsockname()[1])
    assert len(result.tests) == len(names), result
    return result.tests[names.index(name)]


@LANGS
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack(sb: Handle, lang: str, name: str, listener: socket.socket) -> None:
    test = outcome(sb, lang, name, listener)
    _, verdict, stdout = ATTACKS[name]
    # Java's fork bomb: once the shell's processes fill the slot's process limit, the JVM may fail
    # to start a thread of its own (an OutOfMemoryError: memory_limit) before its wall limit.
    allowed = {verdict, Status.memory_limit} if (lang, name) == ("java", "fork") else {verdict}
    assert test.verdict in allowed, (name, test)
    if stdout is not None:
        assert test.stdout.strip() == stdout, (name, test.stdout, test.stderr)
    if name == "memory":
        assert test.limit_hit == "memory"
    if name == "sleep":
        assert test.limit_hit == "wall_time"
    if name == "output":
        assert test.truncated and test.limit_hit == "output"


def test_java_thread_bomb(sb: Handle, listener: socket.socket) -> None:
    test = outcome(sb, "java", "threads", listener)
    assert test.verdict in (Status.memory_limit, Status.time_limit), test
    assert "OutOfMemoryError" in test.stderr or test.verdict is Status.time_limit, test.stderr[-500:]


@LANGS
def test_after_the_attacks_nothing_is_left_and_every_slot_works(
    sb: Handle, lang: str, listener: socket.socket
) -> None:
    result, _, _ = suite(sb, lang, listener.getsockname()[1])
    accepted = True
    try:
        listener.accept()[0].close()
    except BlockingIOError:
        accepted = False
    assert not accepted, "a sandboxed program reached a port on the host's loopback"
    deadline = time.monotonic() + 5
    while slot_processes(all_uids(sb)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not slot_processes(all_uids(sb)), "processes survived their run"
    assert sb.health()["ok"]
    every_slot_correct(sb)


@LANGS
def test_correct_wrong_and_compile_error(sb: Handle, lang: str) -> None:
    inputs, outputs = ["1 2\n", "-5 5\n", "1000000000000 1\n"], ["3", "0", "1000000000001"]
    ok = sb.judge(CodeJob(SUMS[lang], TestSpec("stdio", inputs, outputs), language=lang))
    assert ok.verdict is Status.correct, ok
    assert ok.tests[0].compile is not None and ok.tests[1].compile is None  # compiled once, for test 0
    wrong = sb.judge(CodeJob(SUMS[lang], TestSpec("stdio", inputs, ["3", "1", "x"]), language=lang))
    assert wrong.verdict is Status.wrong_answer and len(wrong.tests) == 2
    broken = SUMS[lang].replace("a + b", "a + ")
    bad = sb.judge(CodeJob(broken, TestSpec("stdio", inputs, outputs), language=lang))
    assert bad.verdict is Status.compile_error and len(bad.tests) == 1, bad
    assert "error" in bad.tests[0].stderr, bad.tests[0].stderr


def test_java_class_names() -> None:
    assert java_names(JAVA_SUM) == ("Solution.java", "Solution")
    assert java_names(
        "import java.util.*;\nclass A {}\nclass B { public static void main(String[] a) {} }"
    ) == (
        "Main.java",
        "B",
    )
    assert java_names("// public class Fake\nclass Main { public static void main(String[] a) {} }") == (
        "Main.java",
        "Main",
    )
    assert java_names("interface I {}") == ("Main.java", "Main")


def test_slot_uids_cannot_write_the_build_dir_and_other_slots_cannot_read_it(sb: Handle) -> None:
    """A Python run (slot uid) next to the build dirs: it cannot write its own, nor read another's."""
    prog = (
        "import os, glob\n"
        "res = []\n"
        "for d in sorted(glob.glob('/build/*')):\n"
        "    try:\n"
        "        open(os.path.join(d, 'x'), 'w'); res.append('wrote')\n"
        "    except OSError:\n"
        "        res.append('ro' if os.access(d, os.R_OK) else 'hidden')\n"
        "print(res.count('wrote'), res.count('ro'), len(res))\n"
    )
    r = sb.judge(CodeJob(prog, TestSpec("stdio", [""], [""])))
    wrote, readable, total = map(int, r.tests[0].stdout.split())
    assert total >= 1 and wrote == 0 and readable == 1, r.tests[0].stdout  # its own dir only, read-only
