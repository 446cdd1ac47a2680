"""Status integrity and liveness under hostile programs, on both backends (issue classes 1-7, 9).

Each test first checks that programs run unprivileged in a pid namespace of their own
(``assert_confined``; hostile programs also carry GUARD), fires the hostile program, then runs a
correct program on *every* slot at once (as many jobs as the pool has slots, so each slot gets
one: ``every_slot_correct``) which must come back ``correct``, and checks that no process of any
slot uid is left.
"""

from __future__ import annotations

import errno

from sandbox_helpers import (
    GUARD,
    Handle,
    assert_confined,
    assert_nothing_left,
    every_slot,
    every_slot_correct,
    stdio_job,
)

from mucode.protocol import Status
from mucode.sandbox import CodeJob, TestSpec

ADD_TESTS = "assert add(1, 2) == 3\nassert add(2, 2) == 4\nassert add(-1, 1) == 0\n"
WRONG_ADD = "def add(a, b):\n    return a - b\n"
FORGERIES = {
    "sys.exit(0) at the top": WRONG_ADD + "import sys\nsys.exit(0)\n",
    "os._exit(0) at the top": WRONG_ADD + "import os\nos._exit(0)\n",
    "os._exit(0) from an atexit hook": WRONG_ADD
    + "import atexit, os\natexit.register(lambda: os._exit(0))\n",
    "os._exit(0) from the function": "def add(a, b):\n    import os\n    os._exit(0)\n",
    "patched excepthook and traceback printer": WRONG_ADD
    + (
        "import sys, traceback\nsys.excepthook = lambda *a: None\n"
        "traceback.print_exception = lambda *a, **k: None\n"
    ),
    "patched runner modules": WRONG_ADD
    + (
        "import sys\nfor m in list(sys.modules.values()):\n"
        "    for name in ('_finish', '_exit_code', 'run_python'):\n"
        "        if hasattr(m, name):\n"
        "            try:\n                setattr(m, name, lambda *a, **k: None)\n"
        "            except Exception:\n                pass\n"
    ),
    "always-equal object": (
        "class Any:\n    def __eq__(self, other):\n        return True\n    __hash__ = object.__hash__\n"
        "def add(a, b):\n    return Any()\n"
    ),
    "always-equal int subclass": (
        "class Eq(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
        "def add(a, b):\n    return Eq(0)\n"
    ),
    "AssertionError rebound": WRONG_ADD + "import builtins\nbuiltins.AssertionError = SystemExit\n",
    "forged harness records": WRONG_ADD
    + (
        "import os\nfor k in range(3):\n"
        '    os.write(3, (\'{"ev": "assert", "k": %d, "v": {"i": "0x3"}}\\n\' % k).encode())\n'
        'os.write(3, b\'{"ev": "asserts_done", "token": ""}\\n\')\nos._exit(0)\n'
    ),
}


def test_assert_tests_cannot_be_forged(sb: Handle) -> None:
    assert_confined(sb)
    right = sb.judge(CodeJob("def add(a, b):\n    return a + b\n", TestSpec("assert", assert_code=ADD_TESTS)))
    assert right.verdict is Status.correct, right
    for name, program in FORGERIES.items():
        r = sb.judge(CodeJob(GUARD + program, TestSpec("assert", assert_code=ADD_TESTS)))
        assert r.verdict in (Status.wrong_answer, Status.runtime_error), (name, r)
    # HumanEval style (check(candidate) with the entry point), with an always-equal return value
    check = "def check(candidate):\n    assert candidate([1, 2]) == [2, 4]\n    assert candidate([]) == []\n"
    fake = "class L(list):\n    def __eq__(self, o):\n        return True\ndef double(xs):\n    return L()\n"
    r = sb.judge(CodeJob(GUARD + fake, TestSpec("assert", assert_code=check, entry_point="double")))
    assert r.verdict is Status.wrong_answer, r
    good = "def double(xs):\n    return [2 * x for x in xs]\n"
    assert (
        sb.judge(CodeJob(good, TestSpec("assert", assert_code=check, entry_point="double"))).verdict
        is Status.correct
    )
    # a comparison that is not with a literal runs inside, on plain data only
    close = "assert abs(add(1, 2) - 3) < 1e-9\n"
    fake_num = (
        "class N:\n    def __sub__(self, o):\n        return self\n    def __abs__(self):\n        return self\n"
        "    def __lt__(self, o):\n        return True\ndef add(a, b):\n    return N()\n"
    )
    r = sb.judge(CodeJob(GUARD + fake_num, TestSpec("assert", assert_code=close)))
    assert r.verdict is Status.wrong_answer, r
    every_slot_correct(sb)
    assert_nothing_left(sb)


GARBAGE = {
    "deep nesting": b"[" * 200000 + b"\n",
    "unhashable ev": b'{"ev": ["ready"]}\n',
    "unhashable exception type": b'{"ev": "exc", "type": ["MemoryError"]}\n',
    "lone surrogate result": b'{"ev": "result", "value": "\\ud800"}\n',
    "huge number": b'{"ev": "exc", "type": ' + b"9" * 100000 + b"}\n",
    "invalid utf-8": b'{"ev": "\xff\xfe"}\n',
}


def test_control_channel_garbage_is_the_programs_own_failure(sb: Handle) -> None:
    assert_confined(sb)
    for name, data in GARBAGE.items():
        prog = GUARD + f"import os\nprint(int(input()) * 2)\nos.write(3, {data!r})\n"
        r = sb.judge(stdio_job(prog, ["21\n"], ["42"]))
        assert r.verdict in (Status.correct, Status.runtime_error), (name, r)
        call = GUARD + f"import os\ndef f(x):\n    os.write(3, {data!r})\n    os._exit(0)\n"
        r = sb.judge(CodeJob(call, TestSpec("call", ["1"], ["2"], fn_name="f")))
        assert r.verdict is Status.runtime_error, (name, r)
    every_slot_correct(sb)
    assert_nothing_left(sb)


SCRATCH_VANDAL = (
    GUARD
    + """
import os
os.makedirs("a/b/c")
open("a/b/c/secret", "w").write("left over")
os.chmod("a/b", 0)
fd = os.open(".", os.O_RDONLY)
for i in range(400):  # deeper than the fd limit (256) can follow
    os.mkdir("d", dir_fd=fd)
    nfd = os.open("d", os.O_RDONLY, dir_fd=fd)
    os.close(fd)
    fd = nfd
open("f", "w").write("x")
for i in range(20000):
    os.link("f", "l%d" % i)
os.chmod(".", 0)
print("done")
"""
)
LIST_SCRATCH = "import os\nprint(sorted(os.listdir('.')), oct(os.stat('.').st_mode & 0o777))\n"


def test_scratch_is_fresh_after_chmod_000_deep_trees_and_links(sb: Handle) -> None:
    assert_confined(sb)
    for r in every_slot(sb, stdio_job(SCRATCH_VANDAL, [""], ["done"])):
        assert r.verdict is Status.correct, r
    for r in every_slot(sb, stdio_job(LIST_SCRATCH, [""], ["[] 0o700"])):
        assert r.verdict is Status.correct, (r.tests[0].stdout, r.tests[0].stderr)
    every_slot_correct(sb)
    assert_nothing_left(sb)


STOPPER = (
    GUARD
    + """
import os, signal
for _ in range(3):
    if os.fork() == 0:
        break
while True:
    try:
        os.kill(-1, signal.SIGSTOP)
    except OSError:
        pass
"""
)


def test_sigstop_spinners_cannot_hang_a_slot(sb: Handle) -> None:
    assert_confined(sb)
    for r in every_slot(sb, stdio_job(STOPPER, [""], [""], time_limit_s=1.0)):
        assert r.verdict is Status.time_limit, r
    every_slot_correct(sb)
    assert_nothing_left(sb)
    assert sb.health()["ok"]


SHM_LEAK = (
    GUARD
    + """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
made = 0
for i in range(8):
    shmid = libc.shmget(0x6d75 + i, 4 << 20, 0o1666)  # IPC_CREAT | 0666
    if shmid >= 0:
        addr = libc.shmat(shmid, None, 0)
        if addr not in (None, ctypes.c_void_p(-1).value):
            ctypes.memset(addr, 1, 4 << 20)
        made += 1
print(made > 0)
"""
)
COUNT_IPC = (
    "n = 0\nfor kind in ('shm', 'sem', 'msg'):\n"
    "    n += len(open('/proc/sysvipc/' + kind).read().splitlines()) - 1\nprint(n)\n"
)


IPC_GETS = (
    GUARD
    + """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
codes = []
for call, args in (("shmget", (0x6d00, 4096, 0o1666)), ("semget", (0x6d01, 1, 0o1666)),
                   ("msgget", (0x6d02, 0o1666))):
    rc = getattr(libc, call)(*args)
    codes.append("made" if rc >= 0 else str(ctypes.get_errno()))
print(" ".join(codes))
"""
)


def test_sysv_ipc_objects_cannot_be_made(sb: Handle) -> None:
    """Slots of a docker container share one IPC namespace: a SysV object would be a channel between
    jobs running at once (and survive until the slot is cleaned), so creating one is refused (EPERM)."""
    assert_confined(sb)
    for r in every_slot(sb, stdio_job(IPC_GETS, [""], [f"{errno.EPERM} {errno.EPERM} {errno.EPERM}"])):
        assert r.verdict is Status.correct, (r.tests[0].stdout, r.tests[0].stderr)
    every_slot_correct(sb)


def test_sysv_ipc_does_not_survive_a_job(sb: Handle) -> None:
    assert_confined(sb)
    for r in every_slot(sb, stdio_job(SHM_LEAK, [""], ["False"])):  # refused (see above)
        assert r.verdict is Status.correct, r
    for r in every_slot(sb, stdio_job(COUNT_IPC, [""], ["0"])):
        assert r.verdict is Status.correct, (r.tests[0].stdout, r.tests[0].stderr)
    every_slot_correct(sb)
    assert_nothing_left(sb)


SHARED_MAPS = (
    GUARD
    + """
import gc, mmap
writable = 0
for obj in gc.get_objects():
    if isinstance(obj, mmap.mmap):
        try:
            obj[0:1] = b"\\xff"
            writable += 1
        except (ValueError, TypeError):
            pass
shared = [l for l in open("/proc/self/maps") if l.split()[1] == "rw-s"]  # writable shared mappings
print(writable, len(shared))
"""
)


def test_programs_cannot_write_the_executors_memory(sb: Handle) -> None:
    assert_confined(sb)
    for r in every_slot(sb, stdio_job(SHARED_MAPS, [""], ["0 0"])):
        assert r.verdict is Status.correct, (r.tests[0].stdout, r.tests[0].stderr)
    every_slot_correct(sb)
    assert sb.health()["ok"]


UNWAITED = (
    GUARD
    + """
import os, time
r, w = os.pipe()
for _ in range(2):
    if os.fork() == 0:
        start = time.process_time()
        while time.process_time() - start < 0.8:
            pass
        os.write(w, b"x")
        os._exit(0)
got = b""
while len(got) < 2:
    got += os.read(r, 2)
print(42)  # exits without waiting for its children
"""
)


def test_cpu_time_of_unwaited_children_counts(sb: Handle) -> None:
    assert_confined(sb)
    r = sb.judge(stdio_job(UNWAITED, [""], ["42"], time_limit_s=1.0))
    assert r.verdict is Status.time_limit, r
    assert r.tests[0].cpu_s > 1.0 or r.tests[0].limit_hit == "wall_time", r.tests[0]
    every_slot_correct(sb)
    assert_nothing_left(sb)


def test_call_result_counts_against_the_output_cap(sb: Handle) -> None:
    assert_confined(sb)
    prog = GUARD + "def f(x):\n    return 'x' * (17 << 20)\n"
    r = sb.judge(CodeJob(prog, TestSpec("call", ["1"], ['"x"'], fn_name="f"), memory_limit_mb=1024))
    assert r.verdict is Status.output_limit, r
    every_slot_correct(sb)


KERNEL_SURFACE = (
    GUARD
    + """
import ctypes, os, shutil, subprocess
libc = ctypes.CDLL(None, use_errno=True)
def errno_of(rc):
    return "ok" if rc == 0 else str(ctypes.get_errno())
nr = {"x86_64": {"keyctl": 250, "bpf": 321, "perf_event_open": 298},
      "aarch64": {"keyctl": 219, "bpf": 280, "perf_event_open": 241}}[os.uname().machine]
attr = ctypes.create_string_buffer(128)
res = [
    errno_of(libc.unshare(0x10000000)),                       # CLONE_NEWUSER
    errno_of(libc.unshare(0x10000000 | 0x00020000)),          # user + mount namespace
    errno_of(libc.syscall(nr["keyctl"], 0, 0, 0)),            # KEYCTL_GET_KEYRING_ID
    errno_of(libc.syscall(nr["bpf"], 0, attr, 128)),          # BPF_MAP_CREATE
    errno_of(libc.syscall(nr["perf_event_open"], attr, 0, -1, -1, 0)),
    errno_of(libc.mount(b"none", b".", b"tmpfs", 0, None)),
]
shutil.copy("/bin/true", "true")
os.chmod("true", 0o755)
try:
    subprocess.run(["./true"])
    res.append("exec ok")
except PermissionError:
    res.append("noexec")
print(*res)
"""
)


def test_no_user_namespaces_keyrings_bpf_perf_mount_or_exec_from_scratch(sb: Handle) -> None:
    assert_confined(sb)
    r = sb.judge(stdio_job(KERNEL_SURFACE, [""], ["1 1 1 1 1 1 noexec\n"], checker="exact"))
    assert r.verdict is Status.correct, (r.tests[0].stdout, r.tests[0].stderr)
    assert sb.health()["executors"], "no executor"
    every_slot_correct(sb)
    assert_nothing_left(sb)
