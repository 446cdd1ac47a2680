"""The mucode sandbox executor: a stdlib-only fork server that runs untrusted programs per test.

    python3 -I -S /opt/sandbox/executor.py (--socket /run/mucode/executor.sock | --socket-dir /run/mucode) \
        [--slots 4] [--scratch /scratch] [--uid-base 10000]

Process tree (all root inside the sandbox, every program child unprivileged):

    main (pid 1 in its pid namespace; serves health pings on <socket>.ctl, respawns slot managers)
    └── slot manager i (one per slot; forks one handler at a time; never reads a job)
        └── job handler (pre-forked by the manager; serves jobs one at a time, holding their data)
            ├── zygote (forked by the handler before its first job; never reads a job; zygote.py)
            ├── test child (cloned from the zygote per test, a child of the handler; it reads only
            │   its own run; uid = uid_base + i, rlimits, no-new-privs; runner.py)
            └── assert harness (assert format: the test code, in a process of its own; harness.py)

Jobs carry the program and the test inputs, never the expected outputs; large inputs come by key
from a cache the handlers share and no program can reach (testsets.py); a handler keeps the last test
set it read (its blob, never decoded: stdin gets each input's bytes), for the next job of the same
problem. The handler streams one result frame per test and waits for ``next``/``stop`` from the
client before the next test, so ``stop_on_first_failure`` costs no extra runs. A test process gets
its own run only (its program, its input; never the assert test code, never another test's input or
another job's anything). Wire format: protocol.py.

Each slot has its own uid and scratch dir ``<scratch>/<i>`` (owned by that uid; a tmpfs of its own
in the docker and local deployments), so runs in different slots share no writable state and
cannot signal or ptrace each other. Limits: see runner.py. Standard library only.
"""

from __future__ import annotations

import argparse
import base64
import functools
import os
import select
import signal
import socket
import sys

if __name__ == "__main__":  # -I drops the script's dir from sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import contextlib
import dataclasses

import cleanup  # noqa: E402
import pyrun  # noqa: E402
import seccomp  # noqa: E402
import testsets  # noqa: E402
import zygote  # noqa: E402
from languages import ALIASES, BUILD_UID_OFFSET, LANGUAGES, Language  # noqa: E402
from protocol import ProtocolError, encode_frame, recv_frame, recv_raw, send_frame  # noqa: E402
from runner import Limits, Slot, clean, run_test  # noqa: E402
from slots import SECCOMP_FAILED, Board, slot_manager  # noqa: E402

TYPE_CHECKING = False  # typing's own flag without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

VERSION = "2"
MODES = ("stdio", "call", "assert")


def _limits(req: dict[str, Any], args: argparse.Namespace) -> Limits:
    tl = float(req.get("time_limit_s", 5.0))
    mem = int(req.get("memory_limit_mb", 512))
    if not (0 < tl <= 300) or not (16 <= mem <= 65536):
        raise ValueError("time_limit_s must be in (0, 300] and memory_limit_mb in [16, 65536]")
    wall = float(req.get("wall_limit_s") or tl * args.wall_factor + 0.5)
    out = int(req.get("output_limit_bytes") or args.output_limit_bytes)
    return Limits(
        time_limit_s=tl,
        memory_limit_mb=mem,
        wall_limit_s=wall,
        output_limit_bytes=out,
        nproc=args.nproc,
        nofile=args.nofile,
        fsize_bytes=args.fsize_mb << 20,
    )


def handle_job(
    conn: socket.socket, slot: Slot, board: Board, zyg: zygote.Zygote, args: argparse.Namespace
) -> None:
    conn.settimeout(args.idle_timeout_s)
    req = recv_frame(conn)
    if req is None:
        return
    if req.get("op") == "ping":
        send_frame(conn, {"ev": "pong", "ok": True, "slot": slot.index})
        return
    try:
        if req.get("op") != "run":
            raise ValueError(f"unknown op {req.get('op')!r}; expected 'run' or 'ping'")
        name = str(req.get("language", "python"))
        lang = LANGUAGES.get(ALIASES.get(name, name))
        if lang is None:
            raise ValueError(f"unknown language {name!r}; known: {sorted(LANGUAGES)}")
        if lang.compile and slot.build_root is None:
            raise ValueError(f"language {name!r} needs a build dir: this executor has none (--build)")
        mode = req.get("mode", "stdio")
        if mode not in lang.modes:
            raise ValueError(f"language {lang.name} supports modes {lang.modes}, not {mode!r}")
        if not isinstance(req.get("program"), str):
            raise ValueError("'program' must be a string")
        if mode == "call" and not req.get("fn_name"):
            raise ValueError("mode 'call' needs fn_name")
        lim = _limits(req, args)
        inputs: list[memoryview] | None
        if "test_set" in req and mode != "assert":
            inputs = named_inputs(conn, req)
        else:
            _HELD.clear()  # not kept through another problem's jobs (the slot's memory)
            inputs = [memoryview(str(x).encode("utf-8", "surrogatepass")) for x in req.get("inputs") or []]
        if inputs is None:
            return
        inputs = _in_range(inputs, req.get("test_range"), mode)
        if mode == "assert" or not inputs:
            inputs = [memoryview(b"")]
        files = _files(req.get("files"))
    except (ValueError, TypeError) as exc:
        send_frame(conn, {"ev": "error", "message": str(exc)})
        return
    job = {k: req.get(k) for k in ("program", "mode", "fn_name", "assert_code", "entry_point")}
    job.update(mode=mode, files=files, source=lang.source(job["program"]))
    compiled = None
    if lang.compile:
        compiled = _compile(conn, job, lang, slot, board, req, lim, args, zyg)
        if compiled is None:
            if len(inputs) > 1:  # the client answers every test frame but the last it expects
                board.deadline(slot.index, args.idle_timeout_s + args.deadline_slack_s)
                recv_frame(conn)
            send_frame(conn, {"ev": "done"})
            return
    for index, test_input in enumerate(inputs):
        board.deadline(slot.index, lim.wall_limit_s + args.deadline_slack_s)
        outcome = run_test(job, lang, slot, lim, test_input, index, slot.build_root or "", zyg)
        board.deadline(slot.index, args.idle_timeout_s + args.deadline_slack_s)
        if index == 0 and compiled is not None:
            outcome["compile"] = compiled
        send_outcome(conn, index, outcome)
        if index + 1 < len(inputs):
            ctrl = recv_frame(conn)
            if ctrl is None or ctrl.get("op") != "next":
                return
    send_frame(conn, {"ev": "done"})


def _in_range(inputs: list[memoryview], span: object, mode: str) -> list[memoryview]:
    """The tests a request's ``test_range`` ``[start, stop]`` names (all of them without one); its
    test frames are numbered from 0 within the range. ValueError for a range that is not inside."""
    if span is None:
        return inputs
    if (
        mode == "assert"
        or not isinstance(span, list)
        or len(span) != 2
        or not all(type(x) is int for x in span)
        or not 0 <= span[0] < span[1] <= len(inputs)
    ):
        raise ValueError(
            f"'test_range' must be [start, stop] with 0 <= start < stop <= {len(inputs)} (the number of "
            "inputs), and only for the stdio and call modes"
        )
    return inputs[span[0] : span[1]]


def _compile(
    conn: socket.socket,
    job: dict[str, Any],
    lang: Language,
    slot: Slot,
    board: Board,
    req: dict[str, Any],
    lim: Limits,
    args: argparse.Namespace,
    zyg: zygote.Zygote,
) -> dict[str, Any] | None:
    """Once per job: the compile step, as the slot's build uid in its build dir, under the compile
    limits (the request may lower them). Returns what the first test frame reports of it, or None
    after sending the failure as test 0 (``compile_error``, or ``sandbox_error``)."""
    seconds = min(
        float(req.get("compile_time_limit_s") or args.compile_time_limit_s), args.compile_time_limit_s
    )
    mem = min(
        int(req.get("compile_memory_limit_mb") or args.compile_memory_limit_mb), args.compile_memory_limit_mb
    )
    clim = dataclasses.replace(
        lim,
        time_limit_s=max(seconds, 0.1),
        memory_limit_mb=max(mem, 16),
        wall_limit_s=max(seconds, 0.1) * args.wall_factor + 0.5,
    )
    board.deadline(slot.index, clim.wall_limit_s + args.deadline_slack_s)
    built = run_test(
        {**job, "mode": "compile", "phase": "compile"},
        lang,
        slot.builder(),
        clim,
        memoryview(b""),
        0,
        slot.build_root or "",
        zyg,
    )
    if built["status"] == "ok":
        return {k: built[k] for k in ("wall_s", "cpu_s", "stdout", "stderr", "exit_code")}
    if built["status"] != "sandbox_error":
        built.update(status="compile_error", phase="compile")
    send_outcome(conn, 0, built)
    return None


def _files(files: object) -> dict[str, bytes]:
    """The request's ``files`` (name -> base64), written into the run's dir (and the build dir)
    before the program starts; names are relative paths without ``..``."""
    if not files:
        return {}
    if not isinstance(files, dict) or len(files) > 256:
        raise ValueError("'files' must be an object of at most 256 names -> base64 text")
    out = {}
    for name, data in files.items():
        parts = str(name).split("/")
        if not name or str(name).startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"files: {name!r} is not a relative path (no '..', no leading '/')")
        if not isinstance(data, str):
            raise ValueError(f"files: {name!r} must be base64 text")
        out[str(name)] = base64.b64decode(data, validate=True)
    return out


_HELD: dict[str, list[memoryview]] = {}
"""The handler's last test set by key (checked against its key when it was read), as views of its
blob: the G samples of one problem, sent to one slot in turn, read it once; no input is decoded (stdin
gets its bytes; a call-mode test decodes its own, runner.py)."""


def named_inputs(conn: socket.socket, req: dict[str, Any]) -> list[memoryview] | None:
    """The inputs a request names by ``test_set`` (the exchange of testsets.py); None when the client
    went away. ValueError for a bad key, or a blob that is not the key's (never run: resent or refused)."""
    key = str(req.get("test_set"))
    if not testsets.valid_key(key):
        raise ValueError("'test_set' must be a SHA-256 in lowercase hex (64 characters)")
    follows = bool(req.get("test_set_follows"))
    if not follows and key in _HELD:
        return _HELD[key]
    _HELD.clear()  # one set at most: another problem's goes before this one is read
    store = testsets.STORE[0] if testsets.STORE else testsets.Store(0)
    blob = None if follows else store.get(key)
    inputs: list[memoryview]
    if blob is not None:
        inputs = _HELD[key] = testsets.views(blob)
        return inputs
    if not follows:
        send_frame(conn, {"ev": "unknown_test_set", "key": key})
    blob = recv_raw(conn)
    if blob is None:
        return None
    if testsets.key_of(blob) != key:
        raise ValueError(f"the test set sent is not the one of key {key} (its SHA-256 differs)")
    inputs = _HELD[key] = testsets.views(blob)
    send_frame(conn, {"ev": "test_set", "stored": store.put(key, blob)})
    return inputs


def send_outcome(conn: socket.socket, index: int, outcome: dict[str, Any]) -> None:
    """One test frame. An outcome that cannot be encoded (what the program produced is too deep or
    too big for a frame) is the program's ``runtime_error``, never a dead handler."""
    try:
        data = encode_frame({"ev": "test", "index": index, **outcome})
    except (ValueError, TypeError, RecursionError, OverflowError, MemoryError, ProtocolError) as exc:
        data = encode_frame(
            {
                "ev": "test",
                "index": index,
                **outcome,
                "status": "runtime_error",
                "stdout": "",
                "stderr": "",
                "asserts": [],
                "exception": None,
                "message": f"the program's output could not be sent: {type(exc).__name__}",
            }
        )
    conn.sendall(data)


OOM_SCORE_ADJ = -1000  # the executor's own processes: never the OOM killer's choice (tests: +1000)


def protect_from_oom() -> int | None:
    """Out of the OOM killer's reach (inherited by every manager and handler; test children raise
    theirs to 1000). Needs CAP_SYS_RESOURCE to lower it: docker sets it for the container instead
    (docker_engine.container_options). Returns the value in force."""
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
        f.write(str(OOM_SCORE_ADJ))
    try:
        with open("/proc/self/oom_score_adj") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


SHARED_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue", "/run/lock")


def close_shared_dirs() -> list[str]:
    """World-writable dirs would let runs in different slots share state. A read-only root makes
    most of them unwritable; the rest (e.g. docker's /dev/mqueue on the /dev tmpfs) are chmod'ed
    0755 here. Returns the ones that stay writable (reported by health)."""
    still = []
    for path in SHARED_DIRS:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if st.st_mode & 0o002:
            with contextlib.suppress(OSError):
                os.chmod(path, 0o755)
            if os.stat(path).st_mode & 0o002 and os.access(path, os.W_OK):
                still.append(path)
    return still


CONTAINER_OOM_CONTROL = "/sys/fs/cgroup/memory/memory.oom_control"  # cgroup v1, as docker mounts it


def _slot(i: int, args: argparse.Namespace) -> Slot:
    procs: list[str] = []
    oom = None
    if args.cgroup_dir:
        for ctrl in sorted(os.listdir(args.cgroup_dir)):
            path = os.path.join(args.cgroup_dir, ctrl, f"slot{i}")
            if os.path.isfile(os.path.join(path, "cgroup.procs")):
                procs.append(os.path.join(path, "cgroup.procs"))
                if os.path.isfile(os.path.join(path, "memory.oom_control")):
                    oom = os.path.join(path, "memory.oom_control")
    shared = oom is None and os.access(CONTAINER_OOM_CONTROL, os.R_OK)  # docker: the container's cgroup
    build = os.path.join(args.build, str(i))
    uid = args.uid_base + i
    has_build = os.path.isdir(build)
    return Slot(
        i,
        uid,
        os.path.join(args.scratch, str(i)),
        tuple(procs),
        CONTAINER_OOM_CONTROL if shared else oom,
        shared,
        build if has_build else None,
        uid + args.build_uid_offset if has_build else None,
    )


def _slots(args: argparse.Namespace) -> list[Slot]:
    slots = [_slot(i, args) for i in range(args.slots)]
    for slot in slots:
        if not os.path.isdir(slot.root):
            os.makedirs(slot.root, mode=0o700)
            os.chown(slot.root, slot.uid, slot.uid)
        st = os.stat(slot.root)
        if st.st_uid != slot.uid:
            sys.exit(
                f"executor: scratch dir {slot.root} must be owned by uid {slot.uid} (mount a tmpfs "
                f"with uid={slot.uid},mode=0700 there, or let the executor create it)"
            )
        if slot.build_root is not None:
            st = os.stat(slot.build_root)
            if (st.st_uid, st.st_gid, st.st_mode & 0o7777) != (slot.build_uid, slot.uid, 0o750):
                sys.exit(
                    f"executor: build dir {slot.build_root} must be owned by uid {slot.build_uid}, group "
                    f"{slot.uid}, mode 0750 (mount a tmpfs with uid={slot.build_uid},gid={slot.uid},"
                    "mode=0750,nosuid,nodev there: exec allowed)"
                )
    if len({s.build_root is None for s in slots}) > 1:
        sys.exit(f"executor: some slots have a build dir under {args.build} and some do not")
    return slots


def serve(args: argparse.Namespace) -> None:
    pyrun.prepare()
    testsets.STORE.append(testsets.Store(args.test_cache_mb << 20))  # before any slot: all inherit it
    oom_score_adj = protect_from_oom()
    if seccomp.supported():
        seccomp.program()  # built once, before any fork
    writable_shared = close_shared_dirs()
    slots = _slots(args)
    sock_path = args.socket
    ctl_path = sock_path[:-5] + ".ctl" if sock_path.endswith(".sock") else sock_path + ".ctl"
    listeners = []
    for path in (sock_path, ctl_path):
        if os.path.exists(path):
            os.unlink(path)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(path)
        os.chmod(path, args.socket_mode)
        s.listen(128)
        listeners.append(s)
    jobs, ctl = listeners
    board = Board(args.slots)
    managers: dict[int, int] = {}
    broken: set[int] = set()
    counts = {"manager_restarts": 0, "stuck_killed": 0}
    job = functools.partial(handle_job, args=args)

    def spawn(slot: Slot) -> None:
        pid = os.fork()
        if pid == 0:
            ctl.close()
            try:
                slot_manager(slot, jobs, board, args.idle_timeout_s, job)
            finally:
                os._exit(1)
        managers[slot.index] = pid

    def stop(*_: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for slot in slots:
        spawn(slot)
    ctl.settimeout(0.5)
    try:
        while True:
            _watchdog(slots, board, managers, broken, counts, spawn)
            watched: list[socket.socket | int] = [ctl, 0] if args.exit_on_stdin_eof else [ctl]
            ready, _, _ = select.select(watched, [], [], 0.5)
            if 0 in ready and not os.read(0, 4096):
                return  # the owner (local backend) is gone: take the whole namespace down with us
            if ctl not in ready:
                continue
            try:
                conn, _ = ctl.accept()
            except (TimeoutError, BlockingIOError):
                continue
            with conn:
                conn.settimeout(2.0)
                try:
                    if recv_frame(conn) is None:
                        continue
                    send_frame(
                        conn,
                        {
                            **_health(args, slots, board, broken, counts, writable_shared),
                            "oom_score_adj": oom_score_adj,
                        },
                    )
                except (OSError, ProtocolError, ValueError):
                    pass
    finally:
        for pid in managers.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for slot in slots:
            clean(slot)
        for path in (sock_path, ctl_path):
            with contextlib.suppress(OSError):
                os.unlink(path)
        cleanup.reap(0.5)


def _watchdog(
    slots: list[Slot],
    board: Board,
    managers: dict[int, int],
    broken: set[int],
    counts: dict[str, int],
    spawn: object,
) -> None:
    """Kill the manager of a slot busy past its deadline; clean and respawn dead managers (a slot
    that cannot be cleaned in time is *broken*: health says so and the backend replaces us)."""
    for index in board.stuck(grace_s=1.0):
        pid = managers.get(index)
        if pid is not None:
            counts["stuck_killed"] += 1
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # its handler follows (PDEATHSIG)
            board.set(index, 1, 0.0)
    while True:  # reap: respawn dead managers, collect orphans
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        for index, mpid in list(managers.items()):
            if mpid == pid:
                del managers[index]
                counts["manager_restarts"] += 1
                board.set(index, 1, 0.0)
                if os.WIFEXITED(status) and os.WEXITSTATUS(status) == SECCOMP_FAILED:
                    broken.add(index)
                elif clean(slots[index]):
                    board.set(index, 0, 0.0)
                    spawn(slots[index])  # type: ignore[operator]
                else:
                    broken.add(index)


def _uids(slot: Slot) -> tuple[int, ...]:
    return (slot.uid,) if slot.build_uid is None else (slot.uid, slot.build_uid)


def _health(
    args: argparse.Namespace,
    slots: list[Slot],
    board: Board,
    broken: set[int],
    counts: dict[str, int],
    writable_shared: list[str],
) -> dict[str, Any]:
    before = board.snapshot()
    found = cleanup.slot_pids({u for s in slots if before[s.index][0] == 0 for u in _uids(s)})
    after = board.snapshot()  # a slot that took a job meanwhile is not idle: skip it
    still_idle = {
        u
        for s in slots
        if after[s.index][0] == 0 and after[s.index][1] == before[s.index][1]
        for u in _uids(s)
    }
    leftovers = [(pid, uid) for pid, uid in found if uid in still_idle]
    stuck = board.stuck()
    return {
        # tampered: the executor cannot repair itself (the backend replaces it); stuck slots are
        # repaired here (their manager is killed and replaced) but make health not ok meanwhile
        "ev": "pong",
        "ok": not leftovers and not writable_shared and not broken and not stuck,
        "tampered": bool(leftovers or writable_shared or broken),
        "writable_shared_dirs": writable_shared,
        "version": VERSION,
        "slots": args.slots,
        "busy": sum(rec[0] for rec in after),
        "stuck_slots": stuck,
        "broken_slots": sorted(broken),
        **counts,
        "leftover_processes": leftovers[:20],
        "languages": sorted(n for n, lang in LANGUAGES.items() if slots[0].build_root or not lang.compile),
        "uids": [s.uid for s in slots],
        "cgroups": sorted(
            {os.path.basename(os.path.dirname(os.path.dirname(p))) for s in slots for p in s.cgroup_procs}
        ),
        "pid_namespace": os.readlink("/proc/self/ns/pid"),
        "seccomp": seccomp.supported(),
        "test_set_cache_bytes": testsets.STORE[0].capacity if testsets.STORE else 0,
        "test_range": True,  # a job may run a range of its tests (handle_job, _in_range)
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--socket", help="job socket path <name>.sock; health pings on <name>.ctl")
    where.add_argument("--socket-dir", help="use <dir>/<hostname>.sock (for replicas sharing one volume)")
    p.add_argument("--slots", type=int, default=4, help="concurrent runs (one uid each)")
    p.add_argument("--scratch", default="/scratch", help="parent of the per-slot scratch dirs <scratch>/<i>")
    p.add_argument("--uid-base", type=int, default=10000, help="slot i runs as uid uid_base+i")
    p.add_argument("--socket-mode", type=lambda s: int(s, 8), default=0o600)
    p.add_argument("--nproc", type=int, default=64, help="RLIMIT_NPROC per slot uid")
    p.add_argument("--nofile", type=int, default=256)
    p.add_argument("--fsize-mb", type=int, default=64, help="RLIMIT_FSIZE (largest file a run may write)")
    p.add_argument("--output-limit-bytes", type=int, default=16 << 20)
    p.add_argument("--wall-factor", type=float, default=2.0, help="wall limit = factor * time limit + 0.5 s")
    p.add_argument("--idle-timeout-s", type=float, default=120.0)
    p.add_argument(
        "--deadline-slack-s",
        type=float,
        default=45.0,
        help="a slot may be busy this long past a test's wall limit (killing, reaping, cleaning) "
        "before it counts as stuck and its manager is killed and replaced",
    )
    p.add_argument(
        "--test-cache-mb", type=int, default=128, help="test sets kept between jobs (testsets.py); 0: none"
    )
    p.add_argument("--compile-time-limit-s", type=float, default=30.0, help="CPU limit of a compile step")
    p.add_argument(
        "--compile-memory-limit-mb", type=int, default=2048, help="memory limit of a compile step (MB)"
    )
    p.add_argument(
        "--build",
        default="/build",
        help="parent of the per-slot build dirs <build>/<i> (compiled languages; without them: none)",
    )
    p.add_argument(
        "--build-uid-offset",
        type=int,
        default=BUILD_UID_OFFSET,
        help="slot i compiles as uid uid_base+i+offset (owner of <build>/<i>)",
    )
    p.add_argument(
        "--exit-on-stdin-eof",
        action="store_true",
        help="exit when stdin closes (the local backend holds the other end: no orphan jails)",
    )
    p.add_argument(
        "--cgroup-dir", help="dir of <controller>/slot<i> cgroups (v1): test processes join their slot's"
    )
    args = p.parse_args(argv)
    if args.socket_dir:
        args.socket = os.path.join(args.socket_dir, socket.gethostname() + ".sock")
    if os.geteuid() != 0:
        sys.exit("executor: must run as root (inside its container or jail) to switch to the slot uids")
    serve(args)


if __name__ == "__main__":
    main()
