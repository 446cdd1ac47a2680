"""Verdicts a program cannot forge, on both backends (and the docker one is a 3-slot container).

Assert-format tests run in a harness process of their own (executor/harness.py): each forgery
below passed when the test code ran in the program's process. Then: records on the control pipe
that once killed the job handler; kernel memory no limit counts (extended attributes, memfd,
inodes); the executor's processes out of the OOM killer's reach; a hostile slot next to a correct
one. Each test first checks confinement and ends with a correct program on every slot.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest
from sandbox_helpers import (
    GUARD,
    Handle,
    assert_confined,
    assert_nothing_left,
    every_slot,
    every_slot_correct,
    stdio_job,
)

from mucode.protocol import INFRA_STATUSES, Status
from mucode.sandbox import CodeJob, TestSpec

RIGHT = "def double(x):\n    return 2 * x\n"
# (program, test code): each program knows nothing of the task (it returns nonsense) and used to pass
FORGERIES = {
    "shadowed builtin": (
        "import builtins\nbuiltins.abs = lambda x: 0\ndef double(x):\n    return 0\n",
        "def check(candidate):\n    assert abs(candidate(1.5) - 3.0) < 1e-9\n",
    ),
    "patched module function the test uses": (
        "import math\nmath.isclose = lambda *a, **k: True\ndef double(x):\n    return 0\n",
        "import math\ndef check(candidate):\n    assert math.isclose(candidate(1.5), 3.0)\n",
    ),
    "emptied loop iterable": (
        "import builtins\nbuiltins.range = lambda *a: []\ndef double(x):\n    return -1\n",
        "def check(candidate):\n    for x in range(5):\n        assert candidate(x) == 2 * x\n",
    ),
    "read the caller's frame": (
        "import sys\ndef double(x):\n    return sys._getframe(1).f_locals['want']\n",
        "def check(candidate):\n    for x, want in [(1, 2), (3, 6)]:\n        got = candidate(x)\n"
        "        assert got == want\n",
    ),
    "called the harness's end hook": (
        "import gc, os\nfor o in gc.get_objects():\n"
        "    if callable(o) and getattr(o, '__name__', '') == 'done':\n        o()\n        os._exit(0)\n"
        "def double(x):\n    return -1\n",
        "def check(candidate):\n    for x in [1, 2]:\n        assert candidate(x) == 2 * x\n",
    ),
    "shadowed the test's helper import": (
        "import sys, types\nfake = types.ModuleType('fractions')\nfake.Fraction = lambda *a: 0\n"
        "sys.modules['fractions'] = fake\ndef double(x):\n    return 0\n",
        "from fractions import Fraction\ndef check(candidate):\n    assert Fraction(candidate(1)) == Fraction(2)\n",
    ),
    "forged harness records on every fd": (
        "import os\nfor fd in range(3, 64):\n    try:\n"
        '        os.write(fd, b\'{"ev": "asserts_done", "token": ""}\\n\')\n    except OSError:\n        pass\n'
        "def double(x):\n    os._exit(0)\n",
        "def check(candidate):\n    assert candidate(1) == 2\n",
    ),
}
# The program (same uid as the harness) looks for another process of its uid whose memory or
# control pipe it can open through /proc: the harness is non-dumpable, so it finds none.
PROC_PROBE = (
    "import os\ndef opened():\n    me, found = os.getpid(), []\n    uid = os.getuid()\n"
    "    for p in os.listdir('/proc'):\n        if not p.isdigit() or int(p) == me:\n            continue\n"
    "        try:\n            if os.stat('/proc/' + p).st_uid != uid and 'Uid:\\t%d' % uid not in "
    "open('/proc/%s/status' % p).read():\n                continue\n        except OSError:\n            continue\n"
    "        for what, mode in (('mem', 'rb'), ('fd/3', 'wb'), ('environ', 'rb')):\n            try:\n"
    "                open('/proc/%s/%s' % (p, what), mode).close()\n                found.append(what)\n"
    "            except OSError:\n                pass\n    return found\n"
)


def _assert_job(program: str, tests: str, entry: str | None = "double") -> CodeJob:
    return CodeJob(program, TestSpec("assert", assert_code=tests, entry_point=entry))


def test_assert_format_forgeries_fail(sb: Handle) -> None:
    assert_confined(sb)
    for name, (program, tests) in FORGERIES.items():
        assert sb.judge(_assert_job(RIGHT, tests)).verdict is Status.correct, name
        r = sb.judge(_assert_job(GUARD + program, tests))
        assert r.verdict in (Status.wrong_answer, Status.runtime_error), (name, r)
        for right in every_slot(sb, _assert_job(RIGHT, tests)):  # the same slot, and every other
            assert right.verdict is Status.correct, (name, right)
    every_slot_correct(sb)
    assert_nothing_left(sb)


POLY = "def poly(xs, x):\n    return sum(c * x**i for i, c in enumerate(xs))\n"
# HumanEval/32's shape: the test calls the data set's helper `poly` on the candidate's answer. A
# program that redefines `poly` to return 0 passes when the helper is looked up in the program; as
# test code (the code spec's setup_code, put before the asserts) the harness has its own.
POLY_FORGERY = "def poly(xs, x):\n    return 0.0\ndef find_zero(xs):\n    return 42.0\n"
POLY_TEST = "def check(candidate):\n    assert abs(poly([-1.0, 1.0], candidate([-1.0, 1.0]))) < 1e-6\n"


def test_a_data_set_helper_given_as_test_code_is_the_harness_s(sb: Handle) -> None:
    assert_confined(sb)
    honest = "def find_zero(xs):\n    return 1.0\n"
    forged = sb.judge(_assert_job(GUARD + POLY_FORGERY, POLY + "\n" + POLY_TEST, entry="find_zero"))
    assert forged.verdict in (Status.wrong_answer, Status.runtime_error), forged
    honest_run = sb.judge(_assert_job(POLY + honest, POLY + "\n" + POLY_TEST, entry="find_zero"))
    assert honest_run.verdict is Status.correct, honest_run
    every_slot_correct(sb)


def test_the_program_cannot_open_the_harness_through_proc(sb: Handle) -> None:
    assert_confined(sb)
    r = sb.judge(_assert_job(GUARD + PROC_PROBE, "assert opened() == []\n", None))
    assert r.verdict is Status.correct, r


def test_plain_data_semantics_survive_the_pipe(sb: Handle) -> None:
    program = (
        "def f(x):\n    return {'t': (1, 2.5), 's': {1, 2}, 'b': b'x', 'c': 1j, 'n': None}\n"
        "def g(n):\n    return (i * i for i in range(n))\n"
        "def h(x):\n    raise ValueError('bad')\nK = 7\n"
    )
    tests = (
        "assert f(0) == {'t': (1, 2.5), 's': {1, 2}, 'b': b'x', 'c': 1j, 'n': None}\n"
        "assert type(f(0)['t']) is tuple\nassert list(g(4)) == [0, 1, 4, 9]\nassert K == 7\n"
        "try:\n    h(1)\n    raise AssertionError('no exception')\nexcept ValueError:\n    pass\n"
    )
    assert sb.judge(_assert_job(program, tests, None)).verdict is Status.correct
    not_plain = "class C:\n    pass\ndef f(x):\n    return C()\n"
    assert sb.judge(_assert_job(not_plain, "assert f(0) is not None\n", None)).verdict is Status.wrong_answer


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def test_deep_control_records_are_the_programs_failure(sb: Handle) -> None:
    """Deep reports once made the job handler die re-encoding them (an infrastructure status)."""
    assert_confined(sb)
    for depth in (*range(960, 1001), 100_000):  # today 985 killed the handler; the window moves with frames
        write = (
            f'import os\nos.write(3, b\'{{"ev": "assert", "k": 0, "v": \' + {_nested(depth)!r} + b\'}}\\n\')\n'
            f'os.write(3, b\'{{"ev": "exc", "type": \' + {_nested(depth)!r} + b\'}}\\n\')\n'
        )
        r = sb.judge(_assert_job(GUARD + write + RIGHT, "def check(c):\n    assert c(1) == 2\n"))
        assert r.verdict.value not in INFRA_STATUSES, (depth, r)
        r = sb.judge(stdio_job(GUARD + write + "print(1)", [""], ["1"]))
        assert r.verdict.value not in INFRA_STATUSES, (depth, r)
    deep = "def f(x):\n    v = []\n    for _ in range(100000):\n        v = [v]\n    return v\n"
    r = sb.judge(CodeJob(deep, TestSpec("call", ["1"], ["[]"], fn_name="f")))
    assert r.verdict.value not in INFRA_STATUSES, r
    r = sb.judge(_assert_job(deep, "assert f(1) == []\n", None))
    assert r.verdict is Status.wrong_answer, r
    every_slot_correct(sb)
    assert_nothing_left(sb)


KERNEL_MEMORY = (
    GUARD
    + """
import errno, os
open("f", "w").close()
def err(fn):
    try:
        fn()
        return 0
    except OSError as e:
        return e.errno
xattr = err(lambda: os.setxattr("f", "user.x", b"1" * 1000))
memfd = err(lambda: os.memfd_create("x"))
n, full = 0, 0
try:
    for n in range(40000):
        os.mkdir("d%d" % n)
except OSError as e:
    full = e.errno
print(xattr, memfd, full, n < 33000)
"""
)


def test_kernel_memory_no_limit_counts_is_refused(sb: Handle) -> None:
    assert_confined(sb)
    for r in every_slot(sb, stdio_job(KERNEL_MEMORY, [""], ["1 1 28 True"], time_limit_s=10)):
        assert r.verdict is Status.correct, (r.tests[0].stdout, r.tests[0].stderr[-500:])
    every_slot_correct(sb)
    assert_nothing_left(sb)


def _may_lower_oom_score() -> bool:
    """CAP_SYS_RESOURCE (bit 24) in this process's effective set: the local jail inherits it."""
    with open("/proc/self/status") as f:
        caps = next(line.split()[1] for line in f if line.startswith("CapEff"))
    return bool(int(caps, 16) >> 24 & 1)


def test_the_executor_is_out_of_the_oom_killers_reach(sb: Handle) -> None:
    """-1000 (docker sets it for the container; the local jail sets it itself where it holds
    CAP_SYS_RESOURCE, else it stays at the owner's 0, below the test processes' 1000)."""
    if sb.kind == "docker":  # what the pool asked the daemon for (None: the daemon may not lower it)
        want = -1000 if sb.backend.oom_score_adj == -1000 else 0  # type: ignore[attr-defined]
    else:
        want = -1000 if _may_lower_oom_score() else 0
    for ep in list(sb.backend.pool.endpoints.values()):  # type: ignore[attr-defined]
        info = sb.call(ep.ping())
        assert info.get("oom_score_adj") == want, info


MEMORY_HOG = (
    GUARD
    + """
import os, time
stopped = None
fds = []
try:
    while len(fds) < 200:
        fd = os.memfd_create("x")
        for _ in range(30):
            os.write(fd, b"\\0" * (1 << 20))
        fds.append(fd)
except OSError as e:
    stopped = e.errno
try:
    open("f", "w").close()
    for i in range(100000):
        os.setxattr("f", "user.a%d" % i, b"x" * 60000)
except OSError as e:
    stopped = (stopped, e.errno)
print(stopped)
time.sleep(3)
"""
)
NEIGHBOUR = "import time\nblock = bytearray(300 << 20)\ntime.sleep(2)\nprint(len(block) >> 20)\n"


def test_a_hostile_slot_does_not_harm_its_neighbour(sb: Handle) -> None:
    """Memory charged to no process (memfd pages, tmpfs xattrs) once filled a multi-slot
    container's memory cgroup, and the OOM killer took the correct program next door."""
    assert_confined(sb)
    slots = int(sb.health()["pool_size"])
    assert slots >= 2
    jobs = [stdio_job(MEMORY_HOG, [""], ["x"], time_limit_s=5, memory_limit_mb=1024)]
    jobs += [stdio_job(NEIGHBOUR, [""], ["300"], time_limit_s=5, memory_limit_mb=1024)] * (slots - 1)
    hostile, *neighbours = sb.judge_many(jobs)
    assert hostile.verdict.value not in INFRA_STATUSES, hostile
    for r in neighbours:
        assert r.verdict is Status.correct, r
    every_slot_correct(sb)
    assert_nothing_left(sb)


CGROUP_FILL = GUARD + "blocks = []\nwhile True:\n    blocks.append(bytearray(64 << 20))\n"


def test_a_full_memory_cgroup_is_the_programs_memory_limit(sb: Handle) -> None:
    """The address-space limit is above the memory cgroup's (local: the slot's, 2 GiB; docker: the
    container's, 1 GiB x 3 slots): the kernel's OOM kill is the program's ``memory_limit``, not a
    ``runtime_error`` (docker used to report one: it could not see the container's OOM kills)."""
    assert_confined(sb)
    r = sb.judge(stdio_job(CGROUP_FILL, [""], [""], time_limit_s=10, memory_limit_mb=8192))
    assert r.verdict is Status.memory_limit, r
    every_slot_correct(sb)
    assert_nothing_left(sb)


# Anonymous memory to 92% of the cgroup in two processes (the program's own peak is about half of it,
# so the cgroup's usage decides), then files read past the limit with their cached pages dropped
# first (so they are charged here: the kernel reclaims them, no OOM kill), then a spin.
THRASH = (
    GUARD
    + """import os, time
r, w = os.pipe()
if os.fork() == 0:
    held = [bytearray(16 << 20) for _ in range(int({cap_mb} * 0.36) // 16)]
    os.write(w, b"x")
    time.sleep(1000)
os.read(r, 1)
blocks = [bytearray(16 << 20) for _ in range(int({cap_mb} * 0.56) // 16)]
read = 0
for root, _, names in os.walk("/usr/lib"):
    for name in names:
        path = os.path.join(root, name)
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            if os.fstat(fd).st_size < (1 << 20):
                continue
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            while chunk := os.read(fd, 1 << 20):
                read += len(chunk)
        finally:
            os.close(fd)
        if read > (600 << 20):
            break
    if read > (600 << 20):
        break
while True:
    pass
"""
)


@pytest.mark.parametrize(
    "kind", [pytest.param("local", id="local"), pytest.param("docker", id="docker", marks=pytest.mark.docker)]
)
def test_a_run_that_times_out_at_its_memory_cgroups_limit_is_memory_limit(kind: str) -> None:
    """Where the kernel reclaims the cgroup's file pages rather than OOM-kill (on a fresh machine it
    reclaimed the interpreter's own, and the program refaulted them until its CPU time ran out), a
    run that hit the limit, holding half of it in its main process, is ``memory_limit``, not
    ``time_limit`` (the cgroup's non-file usage decides, sampled while it runs). A backend of
    its own, one slot with a 2 GiB memory cgroup (room for the executor beside the program): what
    earlier jobs left in a shared cgroup (page cache, the test-set cache) does not decide how far
    the program gets."""
    with _one_slot_of_2_gib(kind, uid_base=61400 if kind == "local" else 11400) as h:
        r = h.judge(stdio_job(THRASH.format(cap_mb=2048), [""], [""], time_limit_s=8, memory_limit_mb=8192))
        assert r.verdict is Status.memory_limit, r


@contextlib.contextmanager
def _one_slot_of_2_gib(kind: str, uid_base: int) -> Iterator[Handle]:
    """A backend of one slot with a 2 GiB memory cgroup, checked confined before the test's programs
    run and left correct and clean after them."""
    if kind == "local" and os.geteuid() != 0:
        pytest.skip("the local sandbox backend needs root (CI runs as root)")
    image = os.environ.get("MUCODE_SANDBOX_IMAGE", "mucode-sandbox:latest")
    options = (
        {"slots": 1, "uid_base": uid_base, "slot_memory_mb": 2048}
        if kind == "local"
        else {
            "containers": 1,
            "slots_per_container": 1,
            "memory_mb": 2048,
            "uid_base": uid_base,
            "image": image,
        }
    )
    h = Handle(kind, health_interval_s=1.0, **options)
    try:
        assert_confined(h)
        yield h
        every_slot_correct(h)
        assert_nothing_left(h)
    finally:
        h.close()


# 70% of the cgroup held, then the files of /usr over 64 KB (up to 1 GB; 838 MB in the image) read over and over
# (REREAD) or a spin (SPIN): the files do not fit beside what is held, so the kernel reclaims each
# before it is read again.
HOLD_THEN = GUARD + "import os\nheld = [bytearray(16 << 20) for _ in range(int({cap_mb} * 0.7) // 16)]\n"
REREAD = (
    HOLD_THEN
    + """paths, total = [], 0
for root, _, names in os.walk("/usr"):
    for name in names:
        path = os.path.join(root, name)
        if not os.path.islink(path) and os.path.isfile(path) and os.path.getsize(path) > (64 << 10):
            paths.append(path)
            total += os.path.getsize(path)
    if total > (1000 << 20):
        break
while True:
    for path in paths:
        try:
            with open(path, "rb") as f:
                while f.read(1 << 20):
                    pass
        except OSError:
            pass
"""
)
SPIN = HOLD_THEN + "while True:\n    pass\n"


@pytest.mark.parametrize(
    "kind", [pytest.param("local", id="local"), pytest.param("docker", id="docker", marks=pytest.mark.docker)]
)
def test_a_run_that_thrashes_its_memory_cgroup_is_stopped_as_memory_limit(kind: str) -> None:
    """The program holds 70% of its cgroup (its own peak and the cgroup's non-file usage stay under
    90%) and reads files that do not fit beside it, over and over: the kernel reclaims and refaults
    them until the CPU time runs out, thrashing as it did with the interpreter's own code on a fresh
    machine. It is stopped as soon as the refaults are seen (not left to read the disk, slowing its
    neighbours, until its time runs out), as ``memory_limit``; holding as much and spinning is
    ``time_limit``."""
    with _one_slot_of_2_gib(kind, uid_base=61600 if kind == "local" else 11600) as h:
        r = h.judge(stdio_job(REREAD.format(cap_mb=2048), [""], [""], time_limit_s=8, memory_limit_mb=8192))
        assert r.verdict is Status.memory_limit, r
        assert r.tests[0].peak_memory_mb < 0.9 * 2048, r
        assert r.tests[0].cpu_s < 8 and r.tests[0].wall_s < 2 * 8, r  # stopped once seen, not at a limit
        r = h.judge(stdio_job(SPIN.format(cap_mb=2048), [""], [""], time_limit_s=4, memory_limit_mb=8192))
        assert r.verdict is Status.time_limit, r
