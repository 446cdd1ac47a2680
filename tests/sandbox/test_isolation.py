"""Adversarial tests: one per isolation property, each against both backends.

Every destructive test first checks that programs run unprivileged in a pid namespace of their own
(assert_confined) and its hostile program refuses to run otherwise (GUARD), so a broken isolation
fails the test instead of hurting this machine. Each test ends with: the right verdict, no process
of any slot uid left anywhere on the host, and a benign program still judged correctly.
"""

from __future__ import annotations

import os
import socket
import tempfile
import time

from sandbox_helpers import (
    CANARY,
    GUARD,
    Handle,
    assert_confined,
    assert_nothing_left,
    assert_still_works,
    stdio_job,
)

from mucode.protocol import Status
from mucode.sandbox import CodeJob, TestSpec


def test_runs_unprivileged_without_capabilities(sb: Handle) -> None:
    assert_confined(sb)
    prog = (
        'import os\nst = open("/proc/self/status").read()\n'
        'print(*[l.split()[1] for l in st.splitlines() if l.split()[0] in ("CapPrm:", "CapEff:", "CapAmb:")])\n'
        "print(os.getgroups())"
    )
    r = sb.judge(
        stdio_job(prog, [""], ["0000000000000000 0000000000000000 0000000000000000\n[]\n"], checker="exact")
    )
    assert r.verdict is Status.correct, (r.tests[0].stdout, r.tests[0].stderr)


def test_no_network_to_host_loopback(sb: Handle) -> None:
    assert_confined(sb)
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    port = server.getsockname()[1]
    prog = (
        GUARD
        + f"""
import socket
results = []
for host in ("127.0.0.1", "localhost", "::1"):
    try:
        s = socket.create_connection((host, {port}), timeout=2)
        results.append("connected")
    except OSError:
        results.append("blocked")
print(" ".join(results))
"""
    )
    try:
        r = sb.judge(stdio_job(prog, [""], ["blocked blocked blocked"]))
        try:
            conn, _ = server.accept()
            conn.close()
            accepted = True
        except BlockingIOError:
            accepted = False
    finally:
        server.close()
    assert not accepted, "a sandboxed program reached a port on the host's loopback"
    assert r.verdict is Status.correct, r.tests[0]
    assert_nothing_left(sb)
    assert_still_works(sb)


def test_no_host_files_environment_or_secrets(sb: Handle) -> None:
    assert_confined(sb)
    with tempfile.NamedTemporaryFile("w", dir="/tmp", prefix="mucode-canary-", delete=False) as f:
        f.write(CANARY)
        host_file = f.name
    repo_file = os.path.abspath("pyproject.toml")
    prog = (
        GUARD
        + f"""
import os
seen = []
for path in ({host_file!r}, {repo_file!r}, "/etc/shadow", "/root/.bash_history", "/proc/1/environ",
             "/proc/1/cmdline", "/proc/self/environ"):
    try:
        with open(path, "rb") as f:
            data = f.read()
        if {CANARY!r}.encode() in data or path == {repo_file!r} or path == "/etc/shadow":
            seen.append(path)
    except OSError:
        pass
if {CANARY!r} in repr(dict(os.environ)):
    seen.append("environ")
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            if {CANARY!r}.encode() in open(f"/proc/{{pid}}/environ", "rb").read():
                seen.append(f"/proc/{{pid}}/environ")
        except OSError:
            pass
print("clean" if not seen else "LEAK " + " ".join(seen))
"""
    )
    try:
        r = sb.judge(stdio_job(prog, [""], ["clean"]))
    finally:
        os.unlink(host_file)
    assert r.verdict is Status.correct, (r.tests[0].stdout, r.tests[0].stderr)
    assert CANARY not in r.tests[0].stdout
    assert_nothing_left(sb)


def test_no_write_outside_scratch(sb: Handle) -> None:
    assert_confined(sb)
    name = "mucode-escape-" + os.urandom(4).hex()
    prog = (
        GUARD
        + f"""
import os
wrote = []
for d in ("/", "/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue", "/dev", "/etc", "/usr", "/opt/sandbox",
          "/run", "/run/mucode", "/scratch", "/proc", os.path.dirname(os.getcwd())):
    try:
        with open(os.path.join(d, {name!r}), "w") as f:
            f.write("x")
        wrote.append(d)
    except OSError:
        pass
with open("here.txt", "w") as f:  # the run's own scratch dir is writable
    f.write("ok")
print("confined" if not wrote else "ESCAPED " + " ".join(wrote), open("here.txt").read())
"""
    )
    r = sb.judge(stdio_job(prog, [""], ["confined ok"]))
    assert r.verdict is Status.correct, (r.tests[0].stdout, r.tests[0].stderr)
    assert not os.path.exists(os.path.join("/tmp", name)) and not os.path.exists(os.path.join("/", name))
    assert_nothing_left(sb)


def test_fork_bomb_is_contained_and_others_keep_running(sb: Handle) -> None:
    assert_confined(sb)
    bomb = (
        GUARD
        + """
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""
    )
    benign = stdio_job("print(sum(map(int, input().split())))", ["1 2 3\n"], ["6"])
    results = sb.judge_many([stdio_job(bomb, [""], [""], time_limit_s=1.0), benign, benign])
    assert results[0].verdict is Status.time_limit, results[0]
    assert all(r.verdict is Status.correct for r in results[1:]), results[1:]
    assert_nothing_left(sb)
    assert sb.health()["ok"]
    assert_still_works(sb)


def test_memory_bomb(sb: Handle) -> None:
    assert_confined(sb)
    prog = GUARD + "blocks = []\nwhile True:\n    blocks.append(bytearray(8 << 20))\n"
    r = sb.judge(stdio_job(prog, [""], [""], memory_limit_mb=128))
    assert r.verdict is Status.memory_limit, r.tests[0]
    assert r.tests[0].limit_hit == "memory"
    assert_nothing_left(sb)
    assert_still_works(sb)


def test_cpu_spin(sb: Handle) -> None:
    assert_confined(sb)
    r = sb.judge(stdio_job(GUARD + "while True:\n    pass\n", [""], [""], time_limit_s=1.0))
    assert r.verdict is Status.time_limit, r.tests[0]
    assert r.tests[0].limit_hit in ("cpu_time", "wall_time")
    assert_nothing_left(sb)
    assert_still_works(sb)


def test_sleeping_past_the_timeout(sb: Handle) -> None:
    assert_confined(sb)
    start = time.monotonic()
    r = sb.judge(stdio_job(GUARD + "import time\ntime.sleep(600)\n", [""], [""], time_limit_s=0.5))
    assert r.verdict is Status.time_limit, r.tests[0]
    assert r.tests[0].limit_hit == "wall_time"
    assert time.monotonic() - start < 300  # stopped at its limit, not after its 600 s sleep
    assert_nothing_left(sb)
    assert_still_works(sb)


def test_endless_output(sb: Handle) -> None:
    assert_confined(sb)
    prog = GUARD + 'import sys\nwhile True:\n    sys.stdout.write("y" * 65536)\n'
    r = sb.judge(stdio_job(prog, [""], [""], time_limit_s=5.0))
    assert r.verdict is Status.output_limit, r.tests[0]
    assert r.tests[0].truncated and r.tests[0].limit_hit == "output"
    assert_nothing_left(sb)
    assert_still_works(sb)


def test_disk_fill(sb: Handle) -> None:
    assert_confined(sb)
    one_big_file = (
        GUARD + 'with open("big", "wb") as f:\n    while True:\n        f.write(b"x" * (1 << 20))\n'
    )
    many_files = GUARD + (
        'i = 0\nwhile True:\n    with open(f"f{i}", "wb") as f:\n'
        '        f.write(b"x" * (4 << 20))\n    i += 1\n'
    )
    for prog in (one_big_file, many_files):
        r = sb.judge(stdio_job(prog, [""], [""], time_limit_s=5.0))
        assert r.verdict is Status.runtime_error, r.tests[0]
        assert "OSError" in r.tests[0].stderr or "No space" in r.tests[0].stderr, r.tests[0].stderr
    # the scratch space is wiped: the next run can write again
    writer = 'with open("f", "wb") as f:\n    f.write(b"x" * (8 << 20))\nprint("wrote")'
    assert sb.judge(stdio_job(writer, [""], ["wrote"])).verdict is Status.correct
    assert_nothing_left(sb)
    assert_still_works(sb)


def test_double_forked_daemon_does_not_survive(sb: Handle) -> None:
    assert_confined(sb)
    prog = (
        GUARD
        + """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        if "{close}" == "yes":
            os.closerange(0, 4)
        time.sleep(300)
        os._exit(0)
    os._exit(0)
time.sleep(0.2)
print(sum(map(int, input().split())))
"""
    )
    for close in ("yes", "no"):  # a daemon that closes its pipes, and one that keeps them open
        start = time.monotonic()
        r = sb.judge(stdio_job(prog.replace("{close}", close), ["4 5\n"], ["9"], time_limit_s=5.0))
        assert r.verdict is Status.correct, r.tests[0]
        assert time.monotonic() - start < 150  # the judge did not wait for the daemon's 300 s sleep
        assert_nothing_left(sb)
    assert_still_works(sb)


def test_signals_and_ptrace_at_the_executor(sb: Handle) -> None:
    assert_confined(sb)
    prog = (
        GUARD
        + """
import ctypes, os, signal
me = os.getpid()
hit = []
targets = {1, os.getppid()} | {int(p) for p in os.listdir("/proc") if p.isdigit()}
for pid in sorted(targets - {me}):
    for sig in (signal.SIGKILL, signal.SIGSTOP, signal.SIGTERM):
        try:
            os.kill(pid, sig)
            hit.append((pid, int(sig)))
        except OSError:
            pass
libc = ctypes.CDLL(None, use_errno=True)
for pid in (1, os.getppid()):
    if libc.ptrace(16, pid, None, None) == 0:  # PTRACE_ATTACH
        hit.append(("ptrace", pid))
print("denied" if not hit else f"HIT {hit}")
"""
    )
    r = sb.judge(stdio_job(prog, [""], ["denied"]))
    assert r.verdict is Status.correct, (r.tests[0].stdout, r.tests[0].stderr)
    assert sb.health()["ok"]
    assert_nothing_left(sb)
    assert_still_works(sb)


def test_one_run_cannot_touch_a_concurrent_run(sb: Handle) -> None:
    assert_confined(sb)
    victim = """
import os, time
with open("secret.txt", "w") as f:
    f.write("victim-data")
open("/proc/self/cwd/marker", "w").write(str(os.getpid()))
time.sleep(1.5)
print(open("secret.txt").read(), sum(map(int, input().split())))
"""
    attacker = (
        GUARD
        + """
import glob, os, signal, time
time.sleep(0.4)
got = []
mine = os.getcwd()
for path in glob.glob("/scratch/*") + glob.glob("/scratch/*/*") + glob.glob("/scratch/*/*/*"):
    if path == mine or path.startswith(mine + "/"):
        continue
    try:
        if os.path.isfile(path):
            got.append(("read", path, open(path).read()))
        with open(os.path.join(path if os.path.isdir(path) else os.path.dirname(path), "secret.txt"), "w") as f:
            f.write("tampered")
            got.append(("write", path))
    except OSError:
        pass
for pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
    try:
        got.append(("cwd", pid, os.listdir(f"/proc/{pid}/cwd")))
    except OSError:
        pass
    try:
        os.kill(int(pid), signal.SIGKILL)
        got.append(("kill", pid))
    except OSError:
        pass
print("isolated" if not got else f"REACHED {got}")
"""
    )
    results = sb.judge_many(
        [stdio_job(victim, ["20 22\n"], ["victim-data 42"]), stdio_job(attacker, [""], ["isolated"])]
    )
    assert results[1].verdict is Status.correct, (results[1].tests[0].stdout, results[1].tests[0].stderr)
    assert results[0].verdict is Status.correct, results[0].tests[0]
    assert_nothing_left(sb)
    assert_still_works(sb)


def test_expected_outputs_never_enter_the_sandbox(sb: Handle) -> None:
    """The program searches its own memory and files for the expected output: it is not there."""
    secret = "expected-" + os.urandom(6).hex()
    prog = f"""
import gc
SUFFIX = {secret[len("expected-") :]!r}
def search():
    needle = "".join(["expected-", SUFFIX])  # only ever a local: not in any container below
    for o in gc.get_objects():
        if isinstance(o, (list, dict, tuple)):
            try:
                if needle in repr(o):
                    return True
            except Exception:
                pass
    return False
print("found" if search() else "absent")
"""
    r = sb.judge(CodeJob(prog, TestSpec("stdio", ["x\n"], [secret])))
    assert r.verdict is Status.wrong_answer
    assert r.tests[0].stdout.strip() == "absent"


def test_concurrent_load_while_hostile_runs_keeps_serving(sb: Handle) -> None:
    """While a memory bomb, a spin and an output flood run, benign jobs keep being judged."""
    assert_confined(sb)
    hostile = [
        stdio_job(GUARD + "while True:\n    pass\n", [""], [""], time_limit_s=2.0),
        stdio_job(GUARD + 'import sys\nwhile True:\n    sys.stdout.write("z" * 4096)\n', [""], [""]),
    ]
    benign = [stdio_job("print(int(input()) * 2)", [f"{i}\n"], [str(2 * i)]) for i in range(12)]
    results = sb.judge_many(hostile + benign)
    assert results[0].verdict is Status.time_limit
    assert results[1].verdict is Status.output_limit
    assert all(r.verdict is Status.correct for r in results[2:]), [r.verdict for r in results[2:]]
    assert_nothing_left(sb)
