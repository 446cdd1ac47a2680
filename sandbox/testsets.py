"""The executor's test-set cache: each problem's test inputs cross the job socket once, not once per sample.

A *test set* is a job's inputs packed as one blob (``pack``): ``MTS1``, a 4-byte count, one 8-byte
length per input, then the inputs' UTF-8 bytes (lone surrogates kept, as JSON frames keep them). Its
key is the blob's SHA-256 (hex). A run request names its inputs by key (``"test_set": key``) instead
of listing them; the blob itself travels as one raw frame (protocol.py), never as JSON:

- ``"test_set_follows": true``: the blob is the next frame; the executor checks it against the key,
  stores it, and answers ``{"ev": "test_set", "stored": bool}`` before the tests run;
- otherwise the executor looks the key up; on a miss (never sent here, evicted, the executor
  restarted) it answers ``{"ev": "unknown_test_set", "key": key}`` and waits for the blob, as above.
So a miss costs one resend, never a verdict: a blob is used only when its SHA-256 is the key.

``Store`` keeps the blobs in one memory file (``memfd``) that the executor's main process creates
before any slot starts and that every job handler inherits: a ring of ``capacity`` bytes (oldest
overwritten first) and a table of at most ``ENTRIES`` keys, under a POSIX record lock on the same file
(per process, released by the kernel when a handler dies holding it). It is read and written with
``pread``/``pwrite`` only (no mapping), and test processes close every inherited descriptor before the
program runs (runner.py), so no program can read or change a cached test set, its own problem's or
another's: the file is reachable only through the handlers' descriptors, and /proc/<pid>/fd of a root
process is closed to a slot uid. Each blob read back is checked against its key again.

Limits: pages of the file are charged to the memory cgroup of the handler that first writes them (a
slot's, where slots have cgroups), up to ``capacity`` in all; a test set larger than ``capacity`` is not
cached (the host then sends it with every job). Standard library only.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import struct

TYPE_CHECKING = False  # typing's own flag without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import TypeGuard

MAGIC = b"MTS1"
_COUNT = struct.Struct(">I")
_LEN = struct.Struct(">Q")
ENTRIES = 1024
_HEAD = struct.Struct("<QQ")  # ring position, stamp counter
_ENTRY = struct.Struct("<32sQQQ")  # sha256, offset in the ring, length, stamp (0: free)
_TABLE = _HEAD.size + ENTRIES * _ENTRY.size
MAX_INPUTS = 1 << 20


def pack(inputs: list[str]) -> bytes:
    """The blob of a test set (see the module docstring)."""
    data = [s.encode("utf-8", "surrogatepass") for s in inputs]
    lengths = b"".join(_LEN.pack(len(d)) for d in data)
    return b"".join((MAGIC, _COUNT.pack(len(data)), lengths, *data))


def views(blob: bytes | bytearray) -> list[memoryview]:
    """The inputs of a blob as views into it, their UTF-8 bytes not decoded (a job handler writes them
    to stdin as they are: no copy of a test set per job); ValueError when it is not a blob."""
    if blob[:4] != MAGIC or len(blob) < 8:
        raise ValueError("not a test set blob")
    (count,) = _COUNT.unpack_from(blob, 4)
    pos = 8 + count * _LEN.size
    if count > MAX_INPUTS or pos > len(blob):
        raise ValueError("test set blob: bad count")
    view = memoryview(blob)
    inputs = []
    for i in range(count):
        (n,) = _LEN.unpack_from(blob, 8 + i * _LEN.size)
        if pos + n > len(blob):
            raise ValueError("test set blob: truncated")
        inputs.append(view[pos : pos + n])
        pos += n
    if pos != len(blob):
        raise ValueError("test set blob: trailing bytes")
    return inputs


def key_of(blob: bytes | bytearray) -> str:
    return hashlib.sha256(blob).hexdigest()


def valid_key(key: object) -> TypeGuard[str]:
    return isinstance(key, str) and len(key) == 64 and all(c in "0123456789abcdef" for c in key)


class Store:
    """Blobs by key in a ring of ``capacity`` bytes (see the module docstring). ``capacity`` 0: none."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(0, int(capacity))
        self.fd = -1
        if self.capacity:
            self.fd = os.memfd_create("mucode-test-sets", os.MFD_CLOEXEC)
            os.ftruncate(self.fd, _TABLE + self.capacity)

    @contextlib.contextmanager
    def _locked(self, kind: int) -> Iterator[None]:
        fcntl.lockf(self.fd, kind)
        try:
            yield
        finally:
            fcntl.lockf(self.fd, fcntl.LOCK_UN)

    def _table(self) -> tuple[int, int, list[tuple[bytes, int, int, int]]]:
        raw = os.pread(self.fd, _TABLE, 0)
        pos, stamp = _HEAD.unpack_from(raw, 0)
        entries = [_ENTRY.unpack_from(raw, _HEAD.size + i * _ENTRY.size) for i in range(ENTRIES)]
        return pos, stamp, entries

    def get(self, key: str) -> bytes | None:
        """The blob stored under ``key`` (checked against it), or None."""
        if self.fd < 0:
            return None
        digest = bytes.fromhex(key)
        with self._locked(fcntl.LOCK_SH):
            _, _, entries = self._table()
            found = next((e for e in entries if e[3] and e[0] == digest), None)
            blob = _pread(self.fd, found[2], _TABLE + found[1]) if found is not None else None
        if blob is None or hashlib.sha256(blob).digest() != digest:
            return None
        return blob

    def put(self, key: str, blob: bytes | bytearray) -> bool:
        """Store ``blob`` (whose SHA-256 the caller checked is ``key``); False when it does not fit."""
        if self.fd < 0 or len(blob) > self.capacity:
            return False
        digest = bytes.fromhex(key)
        with self._locked(fcntl.LOCK_EX):
            pos, stamp, entries = self._table()
            if any(e[3] and e[0] == digest for e in entries):
                return True
            if pos + len(blob) > self.capacity:
                pos = 0
            end = pos + len(blob)
            # free what the blob overwrites (first, so no reader ever finds a half-written entry),
            # and the oldest entry when the table is full
            live = [i for i, e in enumerate(entries) if e[3] and e[1] < end and pos < e[1] + e[2]]
            if all(e[3] for e in entries):
                live.append(min(range(ENTRIES), key=lambda i: entries[i][3]))
            for i in live:
                os.pwrite(self.fd, _ENTRY.pack(b"", 0, 0, 0), _HEAD.size + i * _ENTRY.size)
                entries[i] = (b"", 0, 0, 0)
            _pwrite(self.fd, blob, _TABLE + pos)
            slot = next(i for i, e in enumerate(entries) if not e[3])
            os.pwrite(
                self.fd, _ENTRY.pack(digest, pos, len(blob), stamp + 1), _HEAD.size + slot * _ENTRY.size
            )
            os.pwrite(self.fd, _HEAD.pack(end, stamp + 1), 0)
        return True


def _pread(fd: int, n: int, offset: int) -> bytes:
    parts = []
    while n > 0:
        chunk = os.pread(fd, n, offset)
        if not chunk:
            break
        parts.append(chunk)
        n -= len(chunk)
        offset += len(chunk)
    return b"".join(parts)


def _pwrite(fd: int, data: bytes | bytearray, offset: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


STORE: list[Store] = []
"""The executor's store (set once by ``serve`` before any slot starts)."""
