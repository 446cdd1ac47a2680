"""A small seccomp filter for test processes, built with the standard library (struct + prctl).

Installed once by each slot manager (after ``PR_SET_NO_NEW_PRIVS``), so every job handler and
test process forked from it inherits it, on both backends (docker adds its own default profile on
top). Loading a filter costs ~0.5 ms of CPU: once per manager, not once per test. It denies with ``EPERM``:

- new namespaces: ``unshare``, ``setns``, and ``clone`` with any ``CLONE_NEW*`` flag (so no user
  namespace, where a program would hold a full capability set); ``clone3`` gets ``ENOSYS`` (its
  flags sit in memory a filter cannot read; libc then falls back to ``clone``);
- mounts: ``mount``, ``umount2``, ``pivot_root`` and the new mount API;
- keyrings (``add_key``, ``request_key``, ``keyctl``), ``bpf``, ``perf_event_open``,
  ``userfaultfd``, ``io_uring_*``;
- SysV IPC objects (``shmget``, ``semget``, ``msgget``): on the docker backend the slots of one
  container share one IPC namespace (no capability to give each its own), so an object would be a
  channel between jobs running at the same time; POSIX shared memory and semaphores are unaffected;
- kernel memory no limit of the program's counts: extended attributes (``setxattr``,
  ``lsetxattr``, ``fsetxattr``: on tmpfs they are bounded by neither the scratch size nor the
  inode count, and outlive the program in the slot's memory cgroup) and ``memfd_create`` (anonymous
  files outside the scratch tmpfs, whose pages are charged to the cgroup but to no process, so the
  OOM killer would pick a neighbour);
- reaching other processes or the kernel: ``ptrace``, ``process_vm_readv/writev``, ``kcmp``,
  module and kexec loading, ``acct``, ``swapon/off``, ``reboot``, ``syslog``, ``quotactl``,
  ``open_by_handle_at``.
A system call of another ABI (e.g. 32-bit ``int 0x80`` on x86-64, or x32 numbers) kills the
process. Architectures: x86-64 and aarch64; elsewhere ``supported()`` is False and no filter is
installed (health reports it). Limits: a denylist, not an allowlist: the rest of the syscall
surface stays reachable (as an unprivileged uid, with no capabilities).
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct

PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
_RET_ALLOW = 0x7FFF0000
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (little-endian: low word of args[0])
CLONE_NEW_ANY = 0x7E020000  # NEWUSER | NEWPID | NEWNET | NEWIPC | NEWUTS | NEWCGROUP | NEWNS

_DENIED = (
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "add_key",
    "request_key",
    "keyctl",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "acct",
    "swapon",
    "swapoff",
    "reboot",
    "syslog",
    "quotactl",
    "open_by_handle_at",
    "shmget",
    "semget",
    "msgget",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "memfd_create",
)
_COMMON = {
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "clone3": 435,
}
_TABLES: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (
        0xC000003E,
        {
            **_COMMON,
            "unshare": 272,
            "setns": 308,
            "mount": 165,
            "umount2": 166,
            "pivot_root": 155,
            "add_key": 248,
            "request_key": 249,
            "keyctl": 250,
            "bpf": 321,
            "perf_event_open": 298,
            "userfaultfd": 323,
            "ptrace": 101,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "kcmp": 312,
            "kexec_load": 246,
            "kexec_file_load": 320,
            "init_module": 175,
            "finit_module": 313,
            "delete_module": 176,
            "acct": 163,
            "swapon": 167,
            "swapoff": 168,
            "reboot": 169,
            "syslog": 103,
            "quotactl": 179,
            "open_by_handle_at": 304,
            "clone": 56,
            "shmget": 29,
            "semget": 64,
            "msgget": 68,
            "setxattr": 188,
            "lsetxattr": 189,
            "fsetxattr": 190,
            "memfd_create": 319,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            **_COMMON,
            "unshare": 97,
            "setns": 268,
            "mount": 40,
            "umount2": 39,
            "pivot_root": 41,
            "add_key": 217,
            "request_key": 218,
            "keyctl": 219,
            "bpf": 280,
            "perf_event_open": 241,
            "userfaultfd": 282,
            "ptrace": 117,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "kcmp": 272,
            "kexec_load": 104,
            "kexec_file_load": 294,
            "init_module": 105,
            "finit_module": 273,
            "delete_module": 106,
            "acct": 89,
            "swapon": 224,
            "swapoff": 225,
            "reboot": 142,
            "syslog": 116,
            "quotactl": 60,
            "open_by_handle_at": 265,
            "clone": 220,
            "shmget": 194,
            "semget": 190,
            "msgget": 186,
            "setxattr": 5,
            "lsetxattr": 6,
            "fsetxattr": 7,
            "memfd_create": 279,
        },
    ),
}
_PROGRAM: list[bytes] = []
_LIBC: list[ctypes.CDLL] = []
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_SPEC_ALLOW = 4
_SECCOMP_NR = {"x86_64": 317, "aarch64": 277}


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def supported() -> bool:
    return platform.machine() in _TABLES


def program() -> bytes:
    """The filter as raw ``sock_filter`` instructions (built once)."""
    if not _PROGRAM:
        arch, nr = _TABLES[platform.machine()]
        eperm = _RET_ERRNO | errno.EPERM
        ins = [
            _ins(_LD_ABS, _ARCH),
            _ins(_JEQ, arch, jt=1),
            _ins(_RET, _RET_KILL_PROCESS),
            _ins(_LD_ABS, _NR),
        ]
        if platform.machine() == "x86_64":  # x32 ABI numbers
            ins += [_ins(_JGE, 0x40000000, jf=1), _ins(_RET, _RET_KILL_PROCESS)]
        for name in _DENIED:
            ins += [_ins(_JEQ, nr[name], jf=1), _ins(_RET, eperm)]
        ins += [_ins(_JEQ, nr["clone3"], jf=1), _ins(_RET, _RET_ERRNO | errno.ENOSYS)]
        ins += [
            _ins(_JEQ, nr["clone"], jf=3),
            _ins(_LD_ABS, _ARG0),
            _ins(_JSET, CLONE_NEW_ANY, jf=1),
            _ins(_RET, eperm),
            _ins(_RET, _RET_ALLOW),
        ]
        _PROGRAM.append(b"".join(ins))
        _libc()
    return _PROGRAM[0]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install() -> None:
    """Install the filter on the calling process (needs no-new-privs set). Raises OSError.
    ``SECCOMP_FILTER_FLAG_SPEC_ALLOW``: without it the kernel also turns on speculative-store-bypass
    mitigation for the process, which made each test ~3 ms slower here (the filter is about
    syscalls, not side channels; falls back to plain ``prctl`` where the flag is unknown)."""
    code = program()
    buf = ctypes.create_string_buffer(code, len(code))
    prog = _SockFprog(len(code) // 8, ctypes.cast(buf, ctypes.c_void_p))
    libc = _libc()
    nr = _SECCOMP_NR[platform.machine()]
    if libc.syscall(nr, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_SPEC_ALLOW, ctypes.byref(prog)) == 0:
        return
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp filter: {errno.errorcode.get(err, err)}")


def _libc() -> ctypes.CDLL:
    if not _LIBC:
        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]
