"""Kill, reap and wipe a slot from outside its reach, with a deadline on every wait.

A slot's processes all have the slot uid as their *real* uid (they cannot change it: no
capabilities). Everything here runs in the executor's root processes and never becomes the slot
uid entirely: to signal (docker drops ``CAP_KILL``) or to repair files (no ``CAP_FOWNER`` /
``CAP_DAC_OVERRIDE``), it switches only its *effective* uid to the slot uid and keeps real and saved
uid 0. The kernel lets a process signal another when the sender's real or effective uid matches the
target's real or saved uid: we can reach the slot's processes, they cannot reach us (nor ptrace us),
so a program spinning ``kill(-1, SIGSTOP)`` stops nothing of ours.

- ``slot_pids``: processes whose real uid is the slot's (from ``/proc/<pid>/status``, which a
  process cannot hide by making itself non-dumpable), zombies excluded;
- ``kill_slot``: ``pidfd_open`` each (the pid cannot be reused under us), re-check its uid, SIGKILL
  through the pidfd; repeat until none is left or the deadline passes (False then);
- ``wipe``: empty the scratch dir whatever the program did to it: modes repaired (``chmod 000``),
  trees deeper than the fd limit flattened by renaming deep dirs to the top, hundreds of thousands
  of links unlinked; bounded by a deadline (False when it ran out);
- ``remove_ipc``: ``IPC_RMID`` every SysV shared memory segment, semaphore set and message queue
  created or owned by the slot uid;
- ``reap``: collect exited children until none is left or the deadline passes.

Every process a run starts descends from its test child, and orphans come back to the handler (a
subreaper) or the manager: when, after a run, the handler has no child left, no process of that
run is left either, and the ``/proc`` scan is skipped (it costs ~1 ms per 10 processes).
Standard library only.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import stat
import time
from collections.abc import Iterator

IPC_RMID = 0
_LIBC = ctypes.CDLL(None, use_errno=True)
_FLATTEN_DEPTH = 32  # deeper dirs are moved to the top of the tree instead of holding more fds


PR_SET_PDEATHSIG, PR_GET_PDEATHSIG = 1, 2


@contextlib.contextmanager
def as_slot(uid: int) -> Iterator[None]:
    """Effective uid (and gid) = the slot's for the block; real and saved stay root, so the slot's
    processes cannot signal or trace us meanwhile. A no-op when we are not root.

    The kernel clears a process's parent-death signal when its effective ids change: a job handler
    (killed by ``PDEATHSIG`` with its slot manager) sets it again afterwards, and follows at once a
    parent that died in between."""
    if os.geteuid() != 0:
        yield
        return
    death = ctypes.c_int(0)
    _LIBC.prctl(PR_GET_PDEATHSIG, ctypes.byref(death), 0, 0, 0)
    parent = os.getppid()
    os.setegid(uid)
    os.seteuid(uid)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)
        if death.value:
            _LIBC.prctl(PR_SET_PDEATHSIG, death.value, 0, 0, 0)
            if os.getppid() != parent:
                os.kill(os.getpid(), death.value)


def _real_uid_and_state(pid: str) -> tuple[int, str] | None:
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            data = f.read(1024)
        i, j = data.index(b"\nState:"), data.index(b"\nUid:")
        return int(data[j + 5 : data.index(b"\t", j + 6)]), data[i + 7 : i + 10].strip()[:1].decode()
    except (OSError, ValueError):
        return None


def slot_pids(uids: set[int]) -> list[tuple[int, int]]:
    """(pid, uid) of every live (non-zombie) process whose real uid is in ``uids``."""
    found = []
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        info = _real_uid_and_state(name)
        if info is not None and info[0] in uids and info[1] != "Z":
            found.append((int(name), info[0]))
    return found


def kill_slot(uid: int, deadline_s: float = 10.0) -> bool:
    """SIGKILL every process of the slot uid; True once none is left (zombies aside)."""
    end = time.monotonic() + deadline_s
    while True:
        pids = slot_pids({uid})
        if not pids:
            return True
        if time.monotonic() > end:
            return False
        with as_slot(uid):
            for pid, _ in pids:
                try:
                    fd = os.pidfd_open(pid)
                except OSError:
                    continue
                try:
                    info = _real_uid_and_state(str(pid))  # pinned by the pidfd: no reuse race
                    if info is not None and info[0] == uid:
                        signal.pidfd_send_signal(fd, signal.SIGKILL)
                except OSError:
                    pass
                finally:
                    os.close(fd)
        time.sleep(0.001)  # zombies do not count: the caller reaps them


def reap(wait_s: float = 0.0, keep: int = 0) -> tuple[dict[int, tuple[int, object]], bool]:
    """Reap exited children, waiting up to ``wait_s`` for every child but ``keep`` (a job handler's
    zygote, a child that belongs to no run) to be gone. Returns ({pid: (status, rusage)} of what was
    reaped, whether children other than ``keep`` are left)."""
    end = time.monotonic() + wait_s
    got: dict[int, tuple[int, object]] = {}
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return got, False
        if pid:
            got[pid] = (status, usage)
            continue
        if keep and not _children_but(keep):
            return got, False
        if time.monotonic() > end:
            return got, True
        time.sleep(0.001)


def _children_but(keep: int) -> bool:
    """Whether this process has a child other than ``keep`` (zombies included: not reaped yet)."""
    me = os.getpid()
    try:
        with open(f"/proc/self/task/{me}/children") as f:  # CONFIG_PROC_CHILDREN; single-threaded
            return any(int(pid) != keep for pid in f.read().split())
    except OSError:
        pass
    for name in os.listdir("/proc"):  # without that file: every process's parent
        if name.isdigit() and int(name) != keep:
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    if int(f.read().rsplit(b")", 1)[1].split()[1]) == me:
                        return True
            except (OSError, ValueError, IndexError):
                continue
    return False


def _rm_entries(dfd: int, root_fd: int, depth: int, keep: str | None, end: float, counter: list[int]) -> None:
    """Remove everything in the dir ``dfd`` but ``keep``; loops until it is empty."""
    while True:
        names = [n for n in os.listdir(dfd) if n != keep]
        if not names:
            return
        for name in names:
            if time.monotonic() > end:
                raise TimeoutError("wipe deadline")
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if not stat.S_ISDIR(st.st_mode):
                os.unlink(name, dir_fd=dfd)
                continue
            if stat.S_IMODE(st.st_mode) & 0o700 != 0o700:
                os.chmod(name, 0o700, dir_fd=dfd, follow_symlinks=False)
            try:
                os.rmdir(name, dir_fd=dfd)
                continue
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
            if depth >= _FLATTEN_DEPTH:  # too deep to hold one more fd per level: move it to the top
                counter[0] += 1
                os.rename(name, f".flat-{os.urandom(8).hex()}", src_dir_fd=dfd, dst_dir_fd=root_fd)
                continue
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dfd)
            try:
                _rm_entries(sub, root_fd, depth + 1, None, end, counter)
            finally:
                os.close(sub)
            os.rmdir(name, dir_fd=dfd)


def wipe(root: str, uid: int, keep: str | None = None, deadline_s: float = 30.0, mode: int = 0o700) -> bool:
    """Empty ``root`` (all but ``keep``) whatever its contents' modes and depth; the dir itself
    stays (it may be a mount point) with ``mode`` (a build dir: 0750). True when empty in time."""
    end = time.monotonic() + deadline_s
    counter = [0]
    with as_slot(uid):
        try:
            root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except PermissionError:
            os.chmod(root, 0o700)
            root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            os.fchmod(root_fd, mode)
            _rm_entries(root_fd, root_fd, 0, keep, end, counter)
            return True
        except (OSError, TimeoutError):
            return False
        finally:
            os.close(root_fd)


def _ipc_ids(kind: str, uid: int) -> list[int]:
    """Ids of /proc/sysvipc/<kind> objects whose owner or creator is ``uid``."""
    try:
        with open(f"/proc/sysvipc/{kind}") as f:
            header, *rows = f.read().splitlines()
    except OSError:
        return []
    cols = header.split()
    idx = cols.index("shmid" if kind == "shm" else "semid" if kind == "sem" else "msqid")
    who = [cols.index(c) for c in ("uid", "cuid")]
    ids = []
    for row in rows:
        parts = row.split()
        if len(parts) >= len(cols) and any(int(parts[w]) == uid for w in who):
            ids.append(int(parts[idx]))
    return ids


def remove_ipc(uid: int) -> int:
    """IPC_RMID every SysV IPC object of the slot uid; returns how many were removed."""
    found = [(kind, ident) for kind in ("shm", "sem", "msg") for ident in _ipc_ids(kind, uid)]
    if not found:
        return 0
    removed = 0
    with as_slot(uid):
        for kind, ident in found:
            if kind == "shm":
                rc = _LIBC.shmctl(ident, IPC_RMID, None)
            elif kind == "sem":
                rc = _LIBC.semctl(ident, 0, IPC_RMID)
            else:
                rc = _LIBC.msgctl(ident, IPC_RMID, None)
            removed += rc == 0
    return removed


def clean_slot(uid: int, root: str, keep: str | None = None, scan: bool = True, mode: int = 0o700) -> bool:
    """Everything a job may leave: processes (``scan``: look for them in /proc), files, SysV IPC.
    True when all of it is gone."""
    killed = kill_slot(uid) if scan else True  # the caller reaps (its children are its business)
    wiped = killed and wipe(root, uid, keep, mode=mode)
    remove_ipc(uid)
    return killed and wiped
