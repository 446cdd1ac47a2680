"""Wire format between mucode's backends and the executor: length-prefixed JSON frames.

Each frame is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON (one object).
Standard library only: this file runs inside the sandbox image.

Requests (client -> executor, on the job socket):
  {"op": "run", "language": "python", "mode": "stdio"|"call"|"assert", "program": str,
   "inputs": [str], "fn_name": str?, "assert_code": str?, "entry_point": str?,
   "time_limit_s": float, "memory_limit_mb": int, "wall_limit_s": float?, "output_limit_bytes": int?}
  after every test frame but the last: {"op": "next"} or {"op": "stop"}
Replies: one {"ev": "test", "index": i, ...outcome} per test, then {"ev": "done"};
  {"ev": "error", "message": str} for a request the executor cannot run (bad fields, unknown language).
On the control socket: {"op": "ping"} -> {"ev": "pong", "ok": bool, ...}.
Expected outputs never cross this boundary: checking happens in the caller.
"""

from __future__ import annotations

import json
import socket
import struct

MAX_FRAME_BYTES = 512 << 20
_HEADER = struct.Struct(">I")


class ProtocolError(Exception):
    """The peer sent something that is not a frame (or closed the socket mid-frame)."""


def send_frame(sock: socket.socket, obj: dict) -> None:
    data = json.dumps(obj, separators=(",", ":")).encode("utf-8")
    if len(data) > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame of {len(data)} bytes exceeds {MAX_FRAME_BYTES}")
    sock.sendall(_HEADER.pack(len(data)) + data)


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            if not buf:
                return None
            raise ProtocolError("connection closed mid-frame")
        buf += chunk
    return bytes(buf)


def recv_frame(sock: socket.socket) -> dict | None:
    """The next frame, or None when the peer closed the connection cleanly."""
    head = _recv_exact(sock, _HEADER.size)
    if head is None:
        return None
    (length,) = _HEADER.unpack(head)
    if length > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame of {length} bytes exceeds {MAX_FRAME_BYTES}")
    body = _recv_exact(sock, length)
    if body is None:
        raise ProtocolError("connection closed mid-frame")
    obj = json.loads(body.decode("utf-8"))
    if not isinstance(obj, dict):
        raise ProtocolError("frame is not a JSON object")
    return obj
