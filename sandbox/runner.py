"""Run one test of an untrusted program: clone, drop privileges, apply limits, watch, kill, report.

The caller (a job handler, running as root inside the sandbox) owns one *slot*: an unprivileged uid
used by nobody else and a scratch directory owned by that uid. Per test:

1. pipes for stdin/stdout/stderr and a control pipe (fd 3), then a clone of the handler's zygote
   (zygote.py): a child of the handler that starts from memory no job ever touched and reads its
   own run (``PROGRAM_KEYS`` of the job, its limits; for the assert harness, the compiled test code)
   from a payload pipe: a program holds its own program and input, nothing else of any job;
2. the child: new session, fds 0-3 on the pipes and every other fd closed, rlimits (CPU, AS, NPROC,
   FSIZE, NOFILE, CORE=0), ``setgroups([])``/``setgid``/``setuid`` to the slot uid,
   ``PR_SET_NO_NEW_PRIVS`` (the seccomp filter, seccomp.py, is inherited from the slot manager), an emptied
   scratch dir as cwd, a clean environment, then it writes ``ready`` on the
   control pipe and runs the program (see languages.py). A failure before ``ready`` is a sandbox
   error; the program cannot forge one (it only runs after ``ready``);
3. the parent feeds stdin and reads stdout/stderr/control *while the child runs* (caps enforced on
   the fly: past the stdout cap the run is killed with ``output_limit``), until the child exits or
   the wall-clock deadline passes;
4. clean-up (cleanup.py), from the handler (root; never as the slot uid, outside every limit of
   the program): after each run every process of the slot uid is SIGKILLed and reaped (orphans
   come to the handler, a subreaper) and its SysV IPC objects are removed (before the run's result
   is sent, so no job that starts after it can see them), so the run's CPU time is the handler's children rusage
   delta: the program's, its threads' and every descendant's, waited for or not; before each run
   but a job's first the scratch dir is emptied (a compiled job's build dir is a mount of
   its own, languages.py), whatever its modes or depth (the manager empties it before each job).
   After each job the slot manager does the same and removes the slot's SysV IPC objects. Every
   wait has a deadline; a slot that cannot be cleaned in time raises ``SlotStuck``.

Assert format (``fork_python``): two children per test, the harness (harness.py, cloned first,
non-dumpable, its own control pipe and the run's token) and the program (which then serves calls
on fds 4/5). The harness's exit ends the run; the program, if still serving, is killed through its
pidfd (no ``/proc`` scan) and its status then counts as a clean exit. A harness that died before
writing ``ready`` is the program's failure (it may kill it, same uid) unless it exited
``_SETUP_FAILED``. Only the harness's end-of-tests record, with the token, passes the test.

The control pipe is the program's too (it can write anything there): it is parsed defensively and
anything malformed is the program's own failure (``runtime_error``), never a ``sandbox_error``.
A call-mode return value counts against the output cap like stdout.

Status here is execution status only (``ok`` / ``runtime_error`` / ``time_limit`` /
``memory_limit`` / ``output_limit`` / ``compile_error`` / ``sandbox_error``): outputs are compared
by the caller outside the sandbox. Standard library only.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import fcntl
import json
import marshal
import math
import os
import resource
import select
import selectors
import signal
import time
from dataclasses import dataclass, field

import cleanup
import harness
import lcbrun
import pyrun
import zygote
from languages import LANGUAGES, Language

TYPE_CHECKING = False  # typing's own flag without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
CTL_FD = 3
STDERR_KEEP_BYTES = 64 << 10
CTL_SLACK_BYTES = 1 << 20  # the control pipe may carry a call result up to the output cap, plus this
REAP_DEADLINE_S = 10.0
_LIBC = ctypes.CDLL(None, use_errno=True)
_SETUP_FAILED = 121
_exit = os._exit  # bound here: a program that replaces os._exit does not change it
_MAX_FD = max(1 << 16, resource.getrlimit(resource.RLIMIT_NOFILE)[1])  # close_range(2): cheap either way


def prctl(option: int, arg: int) -> None:
    if _LIBC.prctl(option, arg, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}) failed: {os.strerror(err)}")


@dataclass(frozen=True)
class Slot:
    index: int
    uid: int
    root: str  # scratch dir owned by uid (a tmpfs of its own where the deployment allows)
    cgroup_procs: tuple[str, ...] = ()  # cgroup.procs files of this slot's own cgroups, if any
    oom_control: str | None = None  # the slot memory cgroup's memory.oom_control
    oom_shared: bool = False  # oom_control is the container's, shared with the other slots
    build_root: str | None = None  # the build dir (exec allowed), owned by build_uid, group uid, 0750
    build_uid: int | None = None  # compiles run as this uid (group: uid); None: no compiled languages
    gid: int | None = None  # None: uid (a compile step runs as build_uid with the slot uid's group)

    def builder(self) -> Slot:
        """The slot as its compile step sees it: the build uid, in the build dir."""
        assert self.build_root is not None and self.build_uid is not None
        return dataclasses.replace(self, uid=self.build_uid, root=self.build_root, gid=self.uid)

    def oom_kills(self) -> int:
        """OOM kills so far in the slot's memory cgroup (0 without one)."""
        if self.oom_control is None:
            return 0
        try:
            with open(self.oom_control) as f:
                for line in f:
                    if line.startswith("oom_kill "):
                        return int(line.split()[1])
        except OSError:
            pass
        return 0

    def memory_cgroup_mb(self) -> float:
        """The slot memory cgroup's limit in MiB (0 without one)."""
        if self.oom_control is None:
            return 0.0
        try:
            with open(os.path.join(os.path.dirname(self.oom_control), "memory.limit_in_bytes")) as f:
                return int(f.read()) / (1 << 20)
        except (OSError, ValueError):
            return 0.0


class CgroupPeak:
    """What the slot's memory cgroup went through while a run went on, sampled every ``EVERY_S``
    once the run is ``AFTER_S`` old (short runs never read it): the highest non-file usage
    (anonymous memory, tmpfs and memfd pages, kernel memory: what the kernel cannot reclaim without
    swap), and the file pages the kernel read back soon after reclaiming them (the cgroup's
    ``workingset_refault_file``). A cgroup full of the first leaves only file pages to reclaim: the
    kernel may then thrash, reclaiming and refaulting the interpreter's own code, instead of
    OOM-killing."""

    AFTER_S = 0.5
    EVERY_S = 0.1
    THRASH_MB = 100.0
    """File pages refaulted past which the cgroup thrashed: a thrashing run refaults hundreds of MB
    a second (measured: 0.6 to 7.7 GB in 6 to 8 CPU-s); the next program in that cgroup, none."""

    def __init__(self, slot: Slot, start: float) -> None:
        self.slot = slot
        self.dir = os.path.dirname(slot.oom_control) if slot.oom_control is not None else None
        self.next = start + self.AFTER_S
        self.peak_mb = 0.0
        self.first_refaults: int | None = None  # pages, at the first sample
        self.refaulted_mb = 0.0
        self.cap_mb = 0.0  # the cgroup's limit, read at the first sample
        self.pid = 0  # the program's main process, once forked
        self.rss_mb = 0.0  # its resident memory at the latest sample

    @property
    def thrashing(self) -> bool:
        """The kernel refaulted ``THRASH_MB`` of the cgroup's file pages while the program held half
        of the cgroup: it is stopped there, as ``memory_limit``, instead of reading the disk until
        its time runs out (which slows every neighbour)."""
        return self.refaulted_mb >= self.THRASH_MB and self.rss_mb >= 0.5 * self.cap_mb > 0

    def due(self, now: float) -> float | None:
        """Seconds until the next sample (0: now), or None when there is nothing to sample."""
        return None if self.dir is None else max(0.0, self.next - now)

    def sample(self, now: float) -> None:
        assert self.dir is not None
        self.next = now + self.EVERY_S
        try:
            with open(os.path.join(self.dir, "memory.usage_in_bytes")) as f:
                usage = int(f.read())
            files = 0
            refaults = None
            with open(os.path.join(self.dir, "memory.stat")) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key in ("total_active_file", "total_inactive_file"):
                        files += int(value)
                    elif key == "total_workingset_refault_file":
                        refaults = int(value)
        except (OSError, ValueError):
            return
        self.peak_mb = max(self.peak_mb, (usage - files) / (1 << 20))
        if refaults is not None:
            if self.first_refaults is None:
                self.first_refaults = refaults
                self.cap_mb = self.slot.memory_cgroup_mb()
            self.refaulted_mb = (refaults - self.first_refaults) * resource.getpagesize() / (1 << 20)
        if self.pid:
            try:
                with open(f"/proc/{self.pid}/statm") as f:
                    self.rss_mb = int(f.read().split()[1]) * resource.getpagesize() / (1 << 20)
            except (OSError, ValueError, IndexError):
                pass


@dataclass(frozen=True)
class Limits:
    time_limit_s: float
    memory_limit_mb: int
    wall_limit_s: float
    output_limit_bytes: int = 16 << 20
    nproc: int = 64
    nofile: int = 256
    fsize_bytes: int = 64 << 20


@dataclass
class Capture:
    cap: int
    keep: int
    data: bytearray = field(default_factory=bytearray)
    total: int = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.keep - len(self.data)
        if room > 0:
            self.data += chunk[:room]

    @property
    def over(self) -> bool:
        return self.total > self.cap

    @property
    def truncated(self) -> bool:
        return self.total > len(self.data)


def clean(slot: Slot, scan: bool = True) -> bool:
    """cleanup.clean_slot for the slot's uid and scratch dir, and for its build uid and build dir."""
    ok: bool = cleanup.clean_slot(slot.uid, slot.root, scan=scan)
    if slot.build_root is not None and slot.build_uid is not None:
        ok = cleanup.clean_slot(slot.build_uid, slot.build_root, scan=scan, mode=0o750) and ok
    return ok


class SlotStuck(Exception):
    """A slot's processes or files could not be cleaned within their deadline."""


INHERITED_MAPS: list[Any] = []
"""Shared mappings of the executor (its bookkeeping): the zygote closes them, and a test process
closes any still there before the program runs, so a program cannot write them."""
PAYLOAD_LIMIT = 1 << 30
PROGRAM_KEYS = ("program", "mode", "fn_name", "files", "source", "phase")
"""What a program's (or compile step's) test process gets of its job: never the assert test code,
which only the harness process gets (compiled: ``_Harness``)."""


def child_main(fds: list[int]) -> None:
    """A clone of the zygote (zygote.py): read the run from the payload pipe ``fds[0]`` and become its
    test process (``_child``); never returns. A payload that cannot be read is a setup failure."""
    try:
        data = zygote.read_payload(fds[0], PAYLOAD_LIMIT)
        os.close(fds[0])
        job, lang, slot, run_dir, build_dir, lim, test_input, role = marshal.loads(data)
        args = (job, LANGUAGES[lang], Slot(*slot), run_dir, build_dir, Limits(*lim), tuple(fds[1:]))
    except BaseException as exc:
        try:
            os.write(fds[3] if len(fds) > 3 else 2, f"sandbox: bad run payload: {exc!r}\n".encode())
        finally:
            os._exit(_SETUP_FAILED)
    _child(*args, test_input, role)


def _spawn(
    zyg: zygote.Zygote,
    fds: tuple[int, ...],
    job: dict[str, Any],
    lang: Language,
    slot: Slot,
    run_dir: str,
    build_dir: str,
    lim: Limits,
    test_input: str,
    role: str = "program",
) -> int:
    """A test process from the zygote holding ``fds`` (stdin, stdout, stderr, control pipe, then
    assert mode's two), running ``_child`` on this run; its pid (a child of ours)."""
    payload = marshal.dumps(
        (
            job,
            lang.name,
            dataclasses.astuple(slot),
            run_dir,
            build_dir,
            dataclasses.astuple(lim),
            test_input,
            role,
        )
    )
    read_end, write_end = os.pipe()
    try:
        pid = int(zyg.spawn([read_end, *fds]))
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    _write_payload(write_end, payload, time.monotonic() + lim.wall_limit_s)
    return pid


def _write_payload(fd: int, data: bytes, deadline: float) -> None:
    """All of ``data`` into the payload pipe, then closed; stops early when the child is gone (it
    then fails its setup) or the deadline passed (it reads a cut payload: a setup failure too)."""
    view = memoryview(data)
    try:
        os.set_blocking(fd, False)
        while view:
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return
                select.select([], [fd], [], 0.1)
    except BrokenPipeError:
        pass
    finally:
        os.close(fd)


def _set_limits(lim: Limits, lang: Language) -> None:
    cpu = max(1, math.ceil(lim.time_limit_s))
    mem = lim.memory_limit_mb << 20
    space = mem + ((lang.as_slack_mb or 0) << 20)  # the JVM reserves more than it uses (languages.py)
    if lang.stack_is_memory:  # never above the hard limit in force (raising it needs CAP_SYS_RESOURCE)
        hard = resource.getrlimit(resource.RLIMIT_STACK)[1]
        stack = mem if hard == resource.RLIM_INFINITY else min(mem, hard)
        resource.setrlimit(resource.RLIMIT_STACK, (stack, stack))
    for res, value in (
        (resource.RLIMIT_CPU, (cpu, cpu + 1)),
        (resource.RLIMIT_AS, (space, space)),
        (resource.RLIMIT_NPROC, (lim.nproc, lim.nproc)),
        (resource.RLIMIT_FSIZE, (lim.fsize_bytes, lim.fsize_bytes)),
        (resource.RLIMIT_NOFILE, (lim.nofile, lim.nofile)),
        (resource.RLIMIT_CORE, (0, 0)),
    ):
        resource.setrlimit(res, value)


_READY = (json.dumps({"ev": "ready"}) + "\n").encode()
"""The ready event of the control pipe, encoded once: a clone that ran json's encoder for it would copy
~30 pages."""
_ZYGOTE_ENV: dict[str, str] = {}
"""The environment ``zygote_setup`` gave the zygote (so every clone starts with it)."""


def _child(
    job: dict[str, Any],
    lang: Language,
    slot: Slot,
    run_dir: str,
    build_dir: str,
    lim: Limits,
    fds: tuple[int, ...],
    test_input: str,
    role: str = "program",
) -> None:
    """Runs in the forked child; never returns. ``fds``: stdin, stdout, stderr, control pipe, then
    (assert mode) the two pipes to the other process, put on fds 4 and 5. ``role`` "harness": the
    assert test harness (harness.py), non-dumpable, in ``/``."""
    try:
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 64) for fd in fds]  # no dup2 below clobbers a source
        os.setsid()
        call_mode = job.get("mode") == "call"
        os.dup2(high[0], 0)
        os.dup2(high[2] if call_mode else high[1], 1)  # call mode: prints go to stderr, result to ctl
        os.dup2(high[2], 2)
        for target, fd in enumerate(high[3:], start=CTL_FD):
            os.dup2(fd, target)
        os.closerange(CTL_FD + len(high) - 3, _MAX_FD)
        for shared in INHERITED_MAPS:  # the executor's bookkeeping: not the program's to write
            shared.close()
        INHERITED_MAPS.clear()
        for sig in (signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP, signal.SIGALRM):
            signal.signal(sig, signal.SIG_DFL)
        _write_proc("/proc/self/oom_score_adj", b"1000")  # the OOM killer picks programs before us
        _set_limits(lim, lang)
        os.setgroups([])
        os.setgid(slot.uid if slot.gid is None else slot.gid)
        os.setuid(slot.uid)
        if os.getuid() == 0 or os.geteuid() == 0:
            raise RuntimeError("still root after setuid")
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        if role == "harness":
            prctl(PR_SET_DUMPABLE, 0)  # the program (same uid) cannot open our /proc/<pid>/mem or fd/
        os.chdir(run_dir)
        env = program_env(run_dir, lang)
        if env != _ZYGOTE_ENV:  # the zygote set the slot's Python one already (zygote_setup); comparing
            os.environ.clear()  # with os.environ would decode it all: ~25 more pages copied
            os.environ.update(env)
        _write_files(job.get("files") or {})
        os.write(CTL_FD, _READY)
    except BaseException as exc:  # never run the program if any setup step failed
        try:
            os.write(2, f"sandbox: child setup failed: {exc!r}\n".encode())
        finally:
            os._exit(_SETUP_FAILED)
    compiling = job.get("phase") == "compile"
    if role == "harness":
        try:
            harness.run_harness(
                job["compiled"], job["wanted"], job["error"], job["token"], lim.output_limit_bytes
            )
        finally:
            _exit(1)
    if lang.runner == "fork_python" and not compiling:
        try:
            pyrun.run_python(job, test_input)  # never returns (unless the program patched it)
        finally:
            _exit(1)
    # A compile step runs in the build dir (run_dir is build_dir then): source and build output
    # stay there for the job's tests, which run in the (noexec) scratch dir.
    src_name, main = job.get("source") or lang.source(job["program"])
    src = os.path.join(build_dir if lang.compile else run_dir, src_name)
    if compiling or not lang.compile:
        with open(src, "w", encoding="utf-8") as f:
            f.write(job["program"])
    template = lang.compile if compiling and lang.compile else lang.run
    fields = {"src": src, "build": build_dir, "main": main, "mem": str(lim.memory_limit_mb)}
    argv = [a.format(**fields) for a in template]
    os.set_inheritable(CTL_FD, False)
    try:
        os.execve(argv[0], argv, dict(os.environ))
    except BaseException as exc:
        os.write(2, f"exec failed: {exc!r}\n".encode())
    os._exit(127)


def program_env(run_dir: str, lang: Language) -> dict[str, str]:
    """The whole environment of a test process that runs in ``run_dir``."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": run_dir,
        "TMPDIR": run_dir,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        # numpy/scipy: one BLAS thread (each thread reserves address space under RLIMIT_AS)
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        **lang.env,
    }


def zygote_setup(slot: Slot) -> None:
    """In the zygote, once: the environment of the slot's Python programs, so that their clones need
    not build it (a test process sets another one where it differs: a compile step, the harness),
    a warm interpreter (``pyrun.warm``) and LiveCodeBench's import header executed (``lcbrun``)."""
    _ZYGOTE_ENV.update(program_env(slot.root, LANGUAGES["python"]))
    os.environ.clear()
    os.environ.update(_ZYGOTE_ENV)
    pyrun.warm()
    try:  # only speed depends on it: a LiveCodeBench program finds no module and runs the header itself
        lcbrun.prebuild()
    except Exception as exc:  # noqa: BLE001
        os.write(2, f"sandbox: LiveCodeBench's import header not prebuilt: {exc!r}\n".encode())


def _write_proc(path: str, data: bytes) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)


def _write_files(files: dict[str, bytes]) -> None:
    """The request's files (SandboxFusion's ``files``; names checked by the handler) into the cwd."""
    for name, data in files.items():
        if os.path.dirname(name):
            os.makedirs(os.path.dirname(name), mode=0o755, exist_ok=True)
        with open(name, "wb") as f:
            f.write(data)


def run_test(
    job: dict[str, Any],
    lang: Language,
    slot: Slot,
    lim: Limits,
    test_input: memoryview,
    index: int,
    build_dir: str,
    zyg: zygote.Zygote,
) -> dict[str, Any]:
    """Run the program once on one input; returns the outcome dict of protocol.py's test frame.
    A compile step gets ``slot.builder()`` (its uid and dir). Raises SlotStuck when the slot cannot
    be cleaned (before or after the run) in time."""
    # The slot manager cleaned the slot before this job's handler started: a job's first run
    # (its compile step, or its first test) finds its dir empty already.
    if index > 0 and not cleanup.wipe(slot.root, slot.uid):
        raise SlotStuck(f"scratch dir {slot.root} could not be emptied")
    stdin_r, stdin_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    ctl_r, ctl_w = os.pipe()
    stdio = job.get("mode") == "stdio"  # the input goes to stdin (its UTF-8 bytes); a call's, in the payload
    stdin_data = test_input if stdio else memoryview(b"")
    oom_before = slot.oom_kills()
    token = os.urandom(16).hex()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    peak = CgroupPeak(slot, start)
    two = job.get("mode") == "assert" and lang.runner == "fork_python"
    h = _Harness.start(job, lang, slot, lim, token, zyg) if two else None
    fds = (stdin_r, out_w, err_w, ctl_w, *(h.program_fds if h is not None else ()))
    mine = {k: job[k] for k in PROGRAM_KEYS if k in job}
    own_input = "" if stdio else str(test_input, "utf-8", "surrogatepass")
    pid = _spawn(zyg, fds, mine, lang, slot, slot.root, build_dir, lim, own_input)
    peak.pid = pid
    for fd in (stdin_r, out_w, err_w, ctl_w):
        os.close(fd)
    if h is not None:
        h.forked_program()
    out = Capture(lim.output_limit_bytes, lim.output_limit_bytes)
    err = Capture(lim.output_limit_bytes, STDERR_KEEP_BYTES)
    ctl = Capture(lim.output_limit_bytes + CTL_SLACK_BYTES, lim.output_limit_bytes + CTL_SLACK_BYTES)
    pidfd = os.pidfd_open(pid)
    sel = selectors.DefaultSelector()
    for fd, cap in ((out_r, out), (err_r, err), (ctl_r, ctl), *(h.captures() if h is not None else ())):
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ, cap)
    exit_fd = h.pidfd if h is not None else pidfd  # assert mode: the end of the tests ends the run
    sel.register(exit_fd, selectors.EVENT_READ, "exit")
    stopped = False  # assert mode: the program still serving when the tests ended (stopped here)
    try:
        limit_hit = _watch(sel, stdin_w, stdin_data, start + lim.wall_limit_s, peak)
        if h is not None and limit_hit is None and not select.select([pidfd], [], [], 0)[0]:
            with cleanup.as_slot(slot.uid), contextlib.suppress(OSError):  # docker drops CAP_KILL
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)  # the tests are over: no /proc scan
                stopped = True
    finally:
        sel.unregister(exit_fd)  # readable from now on: draining must not spin on it
        # Kill first when the run is over its limits, or when someone (a daemon) still holds the
        # pipes open after the child exited; then, always, every process of the slot uid.
        if limit_hit is not None or not _drain(sel, 0.02):
            cleanup.kill_slot(slot.uid)
            _drain(sel, 1.0)
        if h is not None:  # both gone before reaping: no /proc scan for a process still exiting
            select.select([pidfd], [], [], 1.0)
        sel.close()
        for fd in (out_r, err_r, ctl_r, pidfd):
            os.close(fd)
        if h is not None:
            h.close_all()
    reaped = _reap_run(slot, [pid] if h is None else [pid, h.pid], zyg.pid)
    status, usage = reaped[pid]
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    wall = time.monotonic() - start
    killed_by_kernel = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL and not stopped
    if limit_hit is None and slot.oom_kills() > oom_before and (killed_by_kernel or not slot.oom_shared):
        limit_hit = "memory_cgroup"  # a shared cgroup's kill is this run's only if it took this run
    # The time limits as _outcome reads them; never the SIGKILL that ends an assert run's program
    # once its tests are over (``stopped``), nor one a program sent itself early.
    sigxcpu = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU
    hard_cpu = killed_by_kernel and cpu >= math.ceil(lim.time_limit_s)
    timed_out = limit_hit == "wall_time" or (limit_hit is None and (sigxcpu or hard_cpu))
    if timed_out and _cgroup_was_full(slot, usage.ru_maxrss / 1024.0, peak):
        limit_hit = "memory_cgroup"
    if limit_hit == "memory_cgroup" and not cleanup.wipe(slot.root, slot.uid):
        raise SlotStuck(f"scratch dir {slot.root} could not be emptied")  # what filled it goes first
    try:
        tests = h.outcome(reaped, token) if h is not None else None
        result = _outcome(
            job,
            lim,
            0 if stopped else status,
            cpu,
            usage.ru_maxrss / 1024.0,
            wall,
            out,
            err,
            ctl,
            limit_hit,
            tests,
        )
    except Exception as exc:  # whatever the program wrote, it is its own failure  # noqa: BLE001
        return {
            **_EMPTY_OUTCOME,
            "status": "runtime_error",
            "wall_s": round(wall, 6),
            "cpu_s": round(cpu, 6),
            "message": f"malformed output from the program: {type(exc).__name__}",
            **({"asserts": []} if job.get("mode") == "assert" else {}),
        }
    if lang.oom_text and result["status"] == "runtime_error" and lang.oom_text in result["stderr"]:
        result.update(status="memory_limit", limit_hit="memory")  # the JVM's OutOfMemoryError
    return result


def _cgroup_was_full(slot: Slot, peak_mb: float, cgroup: CgroupPeak) -> bool:
    """Whether a run that hit its time limits did so in a full memory cgroup (the slot's, or the
    container's): the kernel may reclaim the cgroup's file pages (the interpreter's own code among
    them) instead of OOM-killing, and the program then spends its time refaulting them (seen on
    fresh machines). Its cause is memory: ``memory_limit``, as if the OOM killer had come. Full:
    the program itself held 90% of the cgroup; or, while it ran, the cgroup's non-file usage
    reached 90%, or the kernel refaulted ``CgroupPeak.THRASH_MB`` of the cgroup's file pages, with the
    program holding half of the cgroup itself (in a cgroup that slots share, the non-file rule
    needs that too). Only a job whose ``memory_limit_mb`` is near the cgroup's can get here."""
    cap = slot.memory_cgroup_mb()
    if cap <= 0:
        return False
    half = peak_mb >= 0.5 * cap
    pinned = cgroup.peak_mb >= 0.9 * cap and (half or not slot.oom_shared)
    thrashed = cgroup.refaulted_mb >= cgroup.THRASH_MB and half
    return peak_mb >= 0.9 * cap or pinned or thrashed


def _reap_run(slot: Slot, pids: list[int], keep: int) -> Any:
    """Reap every process of the run (all descend from us: none left but the zygote ``keep`` means
    none alive), killing what is left; then remove the slot uid's SysV IPC objects, before any reply
    leaves (another slot's next job must not see them). Raises SlotStuck past the deadline."""
    reaped, left = cleanup.reap(0.0, keep)
    killed = True
    if left:
        killed = cleanup.kill_slot(slot.uid)
        more, _ = cleanup.reap(REAP_DEADLINE_S, keep)
        reaped.update(more)
    if not killed or any(p not in reaped for p in pids):
        raise SlotStuck(f"the processes of slot {slot.index} did not die within their deadline")
    cleanup.remove_ipc(slot.uid)
    return reaped


@dataclass
class _Harness:
    """The assert test harness of one run (harness.py), forked before the program. The program may
    kill it (same uid) even before it is ready: that is the program's failure; only a harness that
    failed its own setup (exit ``_SETUP_FAILED``, which nothing of the program can cause: it fails
    before the switch to the slot uid or in steps the program cannot reach) is a sandbox error."""

    pid: int
    pidfd: int
    err: Capture
    ctl: Capture
    fds: list[int]  # its stderr and control pipes (read here), then the program's two pipe ends

    @classmethod
    def start(
        cls, job: dict[str, Any], lang: Language, slot: Slot, lim: Limits, token: str, zyg: zygote.Zygote
    ) -> _Harness:
        req_r, req_w = os.pipe()  # harness -> program
        rep_r, rep_w = os.pipe()  # program -> harness
        in_r, in_w = os.pipe()
        err_r, err_w = os.pipe()
        ctl_r, ctl_w = os.pipe()
        os.close(in_w)
        compiled, wanted, error = harness.prepare(job.get("assert_code") or "", job.get("entry_point"))
        tests = {"mode": "assert", "compiled": compiled, "wanted": wanted, "error": error, "token": token}
        try:
            pid = _spawn(
                zyg, (in_r, err_w, err_w, ctl_w, req_w, rep_r), tests, lang, slot, "/", "", lim, "", "harness"
            )
        except BaseException:
            for fd in (in_r, err_r, err_w, ctl_r, ctl_w, req_r, req_w, rep_r, rep_w):
                os.close(fd)
            raise
        for fd in (in_r, err_w, ctl_w, req_w, rep_r):
            os.close(fd)
        return cls(
            pid,
            os.pidfd_open(pid),
            Capture(lim.output_limit_bytes, STDERR_KEEP_BYTES),
            Capture(CTL_SLACK_BYTES, CTL_SLACK_BYTES),
            [err_r, ctl_r, req_r, rep_w],
        )

    @property
    def program_fds(self) -> tuple[int, int]:
        return self.fds[2], self.fds[3]

    def forked_program(self) -> None:
        for fd in self.fds[2:]:
            os.close(fd)
        del self.fds[2:]

    def captures(self) -> tuple[tuple[int, Capture], ...]:
        return (self.fds[0], self.err), (self.fds[1], self.ctl)

    def close_all(self) -> None:
        for fd in (*self.fds, self.pidfd):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds.clear()

    def outcome(self, reaped: dict[int, tuple[int, Any]], token: str) -> dict[str, Any]:
        """What the handler needs of the harness's run: did the tests end, with which events."""
        status = reaped[self.pid][0]
        events = _ctl_events(self.ctl)
        done = (
            os.WIFEXITED(status)
            and os.WEXITSTATUS(status) == 0
            and any(ev["ev"] == "asserts_done" and ev.get("token") == token for ev in events)
        )
        setup_failed = (
            os.WIFEXITED(status)
            and os.WEXITSTATUS(status) == _SETUP_FAILED
            and not any(ev["ev"] == "ready" for ev in events)
        )
        return {
            "done": done,
            "events": events,
            "setup_failed": setup_failed,
            "sig": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            "stderr": bytes(self.err.data),
            "truncated": self.err.truncated,
        }


def _watch(
    sel: selectors.BaseSelector, stdin_w: int, stdin_data: memoryview, deadline: float, peak: CgroupPeak
) -> str | None:
    """Feed stdin and read the pipes until the child exits, sampling ``peak`` when it is due;
    returns the limit hit, if any (``memory_cgroup``: the cgroup thrashed)."""
    os.set_blocking(stdin_w, False)
    if stdin_data:
        sel.register(stdin_w, selectors.EVENT_WRITE, "stdin")
    else:
        os.close(stdin_w)
        stdin_w = -1
    sent = 0
    try:
        while True:
            now = time.monotonic()
            remaining = deadline - now
            if remaining <= 0:
                return "wall_time"
            due = peak.due(now)
            if due == 0.0:
                peak.sample(now)
                if peak.thrashing:
                    return "memory_cgroup"
                due = peak.EVERY_S
            for key, _ in sel.select(remaining if due is None else min(remaining, due)):
                if key.data == "exit":
                    return None
                if key.data == "stdin":
                    try:
                        sent += os.write(stdin_w, stdin_data[sent : sent + (1 << 16)])
                    except BlockingIOError:
                        pass
                    except BrokenPipeError:  # the program stopped reading: fine
                        sent = len(stdin_data)
                    if sent >= len(stdin_data):
                        sel.unregister(stdin_w)
                        os.close(stdin_w)
                        stdin_w = -1
                else:
                    _read_into(sel, key.fd, key.data)
                    if key.data.over:
                        return "output"
    finally:
        if stdin_w >= 0:
            sel.unregister(stdin_w)
            os.close(stdin_w)


def _read_into(sel: selectors.BaseSelector, fd: int, cap: Capture) -> None:
    try:
        chunk = os.read(fd, 1 << 16)
    except BlockingIOError:
        return
    if chunk:
        cap.add(chunk)
    else:
        sel.unregister(fd)


def _drain(sel: selectors.BaseSelector, timeout_s: float) -> bool:
    """Read what is left in the pipes; True once every pipe reached EOF (all writers gone)."""
    end = time.monotonic() + timeout_s
    while True:
        keys = [k for k in sel.get_map().values() if isinstance(k.data, Capture)]
        if not keys:
            return True
        remaining = end - time.monotonic()
        if remaining <= 0:
            return False
        for key, _ in sel.select(remaining):
            if isinstance(key.data, Capture):
                _read_into(sel, key.fd, key.data)


_EMPTY_OUTCOME = {
    "status": "runtime_error",
    "stdout": "",
    "stderr": "",
    "truncated": False,
    "exit_code": None,
    "signal": None,
    "wall_s": 0.0,
    "cpu_s": 0.0,
    "peak_memory_mb": 0.0,
    "limit_hit": None,
    "exception": None,
    "message": None,
}


def _ctl_events(ctl: Capture) -> list[dict[str, Any]]:
    """The control pipe's events, parsed defensively: a line that is not a small flat JSON object
    (at most 8 keys, scalar values) with a string ``ev`` is skipped (deep nesting, huge numbers,
    bad UTF-8, many keys)."""
    events = []
    for line in bytes(ctl.data).splitlines():
        try:  # objects as pair lists: no hashing of the program's keys (it knows our hash seed)
            pairs = json.loads(line, object_pairs_hook=list)
        except (ValueError, RecursionError, MemoryError, TypeError):
            continue
        if type(pairs) is not list or not 0 < len(pairs) <= 8 or not all(type(p) is tuple for p in pairs):
            continue
        ev = dict(pairs)  # at most 8 keys
        if isinstance(ev.get("ev"), str) and all(
            type(v) in (str, int, float, bool, type(None)) for v in ev.values()
        ):
            events.append(ev)
    return events


def _text(value: object, limit: int) -> str | None:
    """A str that survives UTF-8 (no lone surrogates) and fits ``limit`` chars, else None."""
    if not isinstance(value, str) or len(value) > limit:
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return value


def _outcome(
    job: dict[str, Any],
    lim: Limits,
    status: int,
    cpu: float,
    peak_mb: float,
    wall: float,
    out: Capture,
    err: Capture,
    ctl: Capture,
    limit_hit: str | None,
    tests: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The test frame. ``tests``: the assert harness's side (``_Harness.outcome``); the program's
    own control pipe then counts for its setup, its exceptions and its limits, never for the end of
    the tests (only the harness's record, with the token only the harness knows, does)."""
    events = _ctl_events(ctl)
    if tests is not None:
        events = [ev for ev in events if ev["ev"] not in ("asserts_done", "output_limit")]
    exit_code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    kinds = {ev["ev"] for ev in events}
    harness_events = tests["events"] if tests is not None else []
    exc_types = _exc_types(harness_events) + _exc_types(events)  # the harness's first: what failed
    stdout = bytes(out.data)
    truncated = out.truncated or err.truncated
    message = None
    if ("ready" not in kinds or (tests is not None and tests["setup_failed"])) and limit_hit is None:
        verdict = "sandbox_error"
        message = "the test process failed before running the program: " + (
            bytes(err.data)[-500:] + (tests["stderr"][-500:] if tests is not None else b"")
        ).decode("utf-8", "replace")
    elif limit_hit == "output" or ctl.over or any(ev["ev"] == "output_limit" for ev in harness_events):
        verdict, limit_hit = "output_limit", "output"
    elif limit_hit == "memory_cgroup":  # before the time limits: a thrashing run times out too
        verdict, limit_hit = "memory_limit", "memory"
    elif limit_hit == "wall_time":
        verdict = "time_limit"
    elif (
        signal.SIGXCPU in (sig, tests and tests["sig"])
        or cpu > lim.time_limit_s
        or (sig == signal.SIGKILL and cpu >= math.ceil(lim.time_limit_s))
    ):
        verdict, limit_hit = "time_limit", "cpu_time"
    elif "MemoryError" in exc_types or (sig is not None and peak_mb >= 0.9 * lim.memory_limit_mb):
        verdict, limit_hit = "memory_limit", "memory"
    elif "compile_error" in kinds:
        verdict = "compile_error"
    elif tests is not None:
        verdict = "ok" if tests["done"] else "runtime_error"
        if not tests["done"] and not exc_types:
            message = "the test code did not run to its end (the program exited early?)"
    elif exit_code != 0:
        verdict = "runtime_error"
    elif job.get("mode") == "call":
        results = [ev for ev in events if ev["ev"] == "result"]
        value = _text(results[-1].get("value"), 1 << 62) if results else None
        if value is not None and len(value.encode("utf-8")) > lim.output_limit_bytes:
            verdict, stdout, limit_hit = "output_limit", b"", "output"
        elif value is not None:
            verdict, stdout = "ok", value.encode("utf-8")
        else:
            verdict, stdout = "runtime_error", b""
            message = "the program ended without returning a value from the called function"
    else:
        verdict = "ok"
    stderr = bytes(err.data)
    if tests is not None and tests["stderr"]:
        stderr += b"\n--- tests ---\n" + tests["stderr"]
        truncated = truncated or tests["truncated"]
    return {
        "status": verdict,
        "stdout": stdout.decode("utf-8", "replace"),
        "stderr": stderr.decode("utf-8", "replace"),
        "truncated": truncated,
        "exit_code": exit_code,
        "signal": sig,
        "wall_s": round(wall, 6),
        "cpu_s": round(cpu, 6),
        "peak_memory_mb": round(peak_mb, 3),
        "limit_hit": limit_hit,
        "exception": exc_types[0] if exc_types else None,
        "message": message,
        **({"asserts": []} if job.get("mode") == "assert" else {}),
    }


def _exc_types(events: list[dict[str, Any]]) -> list[str]:
    return sorted(
        {
            t
            for ev in events
            if ev["ev"] == "exc"
            for t in [_text(ev.get("type"), 200)]
            if t is not None and t.isidentifier()
        }
    )
