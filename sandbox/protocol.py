"""Wire format between mucode's backends and the executor: length-prefixed JSON frames.

Each frame is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON (one object).
This is the only implementation of it: the executor (blocking sockets), mucode's asyncio client
(``mucode.sandbox.client``), the compose health check and the tests all use this module. Standard
library only, and importable as a plain file: it runs inside the sandbox image, where it is
``/opt/sandbox/protocol.py``.

Requests (client -> executor, on the job socket):
  {"op": "run", "language": "python", "mode": "stdio"|"call"|"assert", "program": str,
   "inputs": [str], "fn_name": str?, "assert_code": str?, "entry_point": str?,
   "time_limit_s": float, "memory_limit_mb": int, "wall_limit_s": float?, "output_limit_bytes": int?,
   "files": {path: base64}?, "compile_time_limit_s": float?, "compile_memory_limit_mb": int?}
  after every test frame but the last: {"op": "next"} or {"op": "stop"}
  instead of "inputs": "test_set": sha256 hex [, "test_set_follows": true], the inputs packed as one
  *raw* frame (a header and bytes that are not JSON: ``send_raw``/``write_raw``); see testsets.py
  "test_range": [start, stop]? (stdio, call): run only those of the inputs (or test set), numbered
  from 0 within the range; executors that take it say "test_range": true in their health reply
Replies: one {"ev": "test", "index": i, ...outcome} per test, then {"ev": "done"};
  {"ev": "error", "message": str} for a request the executor cannot run (bad fields, unknown language);
  before the tests, for a test set: {"ev": "unknown_test_set", "key": k} (send its raw frame now)
  and, once one was received, {"ev": "test_set", "stored": bool}.
On the control socket: {"op": "ping"} -> {"ev": "pong", "ok": bool, ...}.
Expected outputs never cross this boundary: checking happens in the caller.

As a program, a health check (exit 0 when the executor answers ``ok``, 1 otherwise)::

    python3 -I -S protocol.py ping /run/mucode/{hostname}.ctl [--timeout 5]

``{hostname}`` in the path is replaced by this host's name (a compose service's executor names its
sockets after its container's hostname).
"""

from __future__ import annotations

import json
import socket
import struct
import sys
from typing import Any, Protocol

MAX_FRAME_BYTES = 512 << 20
HEADER = struct.Struct(">I")
RAW_CHUNK = 1 << 20
"""A raw frame is written to a stream in pieces of this size (``write_raw``)."""

Frame = dict[str, Any]


class ProtocolError(Exception):
    """The peer sent something that is not a frame (or closed the socket mid-frame)."""


class AsyncReader(Protocol):
    """What ``read_frame`` needs of an ``asyncio.StreamReader``."""

    async def readexactly(self, n: int) -> bytes: ...


class AsyncWriter(Protocol):
    """What ``write_frame`` needs of an ``asyncio.StreamWriter``."""

    def write(self, data: bytes | memoryview) -> None: ...

    async def drain(self) -> None: ...


def encode_frame(obj: Frame) -> bytes:
    """Header and body of one frame."""
    data = json.dumps(obj, separators=(",", ":")).encode("utf-8")
    if len(data) > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame of {len(data)} bytes exceeds {MAX_FRAME_BYTES}")
    return HEADER.pack(len(data)) + data


def body_length(head: bytes | bytearray) -> int:
    """The body length a header announces (refusing one over ``MAX_FRAME_BYTES``)."""
    (length,) = HEADER.unpack(head)
    if length > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame of {length} bytes exceeds {MAX_FRAME_BYTES}")
    return int(length)


def decode_body(body: bytes | bytearray) -> Frame:
    """The JSON object of one frame's body."""
    try:
        obj = json.loads(body.decode("utf-8"))
    except ValueError as exc:  # bad UTF-8 or bad JSON
        raise ProtocolError(f"frame is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise ProtocolError("frame is not a JSON object")
    return obj


# ---- blocking sockets (the executor, the health check) ----------------------------------------


def send_frame(sock: socket.socket, obj: Frame) -> None:
    sock.sendall(encode_frame(obj))


def _recv_exact(sock: socket.socket, n: int) -> bytearray | None:
    """``n`` bytes received into one buffer of that size (a test set's megabytes are copied once)."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        count = sock.recv_into(view[got:], min(n - got, 1 << 20))
        if not count:
            if not got:
                return None
            raise ProtocolError("connection closed mid-frame")
        got += count
    return buf


def send_raw(sock: socket.socket, data: bytes) -> None:
    """A raw frame: the header, then ``data`` as it is (no JSON)."""
    if len(data) > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame of {len(data)} bytes exceeds {MAX_FRAME_BYTES}")
    sock.sendall(HEADER.pack(len(data)))
    sock.sendall(data)


def recv_raw(sock: socket.socket) -> bytearray | None:
    """The next frame's body, not decoded; None when the peer closed the connection cleanly."""
    head = _recv_exact(sock, HEADER.size)
    if head is None:
        return None
    body = _recv_exact(sock, body_length(head))
    if body is None:
        raise ProtocolError("connection closed mid-frame")
    return body


def recv_frame(sock: socket.socket) -> Frame | None:
    """The next frame, or None when the peer closed the connection cleanly."""
    body = recv_raw(sock)
    return None if body is None else decode_body(body)


# ---- asyncio streams (mucode's client) ----------------------------------------------------------


async def write_frame(writer: AsyncWriter, obj: Frame) -> None:
    writer.write(encode_frame(obj))
    await writer.drain()


async def write_raw(writer: AsyncWriter, data: bytes) -> None:
    """``send_raw`` on a stream: ``data`` as it is (not copied into a frame), a megabyte at a time,
    each drained before the next, so a transport that cannot send it at once buffers a megabyte at
    most (never a second copy of a whole test set)."""
    if len(data) > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame of {len(data)} bytes exceeds {MAX_FRAME_BYTES}")
    writer.write(HEADER.pack(len(data)))
    view = memoryview(data)
    for start in range(0, len(view), RAW_CHUNK):
        writer.write(view[start : start + RAW_CHUNK])
        await writer.drain()
    if not view:
        await writer.drain()


async def read_frame(reader: AsyncReader) -> Frame | None:
    """The next frame, or None when the peer closed the connection cleanly (``asyncio``'s
    IncompleteReadError is an EOFError: no asyncio import needed here)."""
    try:
        head = await reader.readexactly(HEADER.size)
    except EOFError as exc:
        if getattr(exc, "partial", b""):
            raise ProtocolError("connection closed mid-frame") from None
        return None
    try:
        body = await reader.readexactly(body_length(head))
    except EOFError:
        raise ProtocolError("connection closed mid-frame") from None
    return decode_body(body)


# ---- health check -------------------------------------------------------------------------------


def ping(ctl_path: str, timeout_s: float = 5.0) -> Frame:
    """The executor's health reply on its control socket ``ctl_path``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        s.connect(ctl_path)
        send_frame(s, {"op": "ping"})
        reply = recv_frame(s)
    if reply is None:
        raise ProtocolError("the executor closed the control socket without a reply")
    return reply


def main(argv: list[str]) -> int:
    """``ping CTL_PATH [--timeout S]``: print the health reply; exit 0 when it says ok."""
    if len(argv) not in (2, 4) or argv[0] != "ping" or (len(argv) == 4 and argv[2] != "--timeout"):
        print("usage: protocol.py ping CTL_PATH [--timeout SECONDS]", file=sys.stderr)
        return 2
    path = argv[1].replace("{hostname}", socket.gethostname())
    try:
        reply = ping(path, float(argv[3]) if len(argv) == 4 else 5.0)
    except (OSError, ProtocolError) as exc:
        print(f"no health reply on {path}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(reply, sort_keys=True))
    return 0 if reply.get("ok") is True else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
