"""The executor's wire-protocol module: one implementation of the frames, spoken by the executor,
the asyncio client, the health check (``protocol.py ping``, a bare ``python3 -I -S`` as in the image)
and these tests."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import subprocess
import threading
from pathlib import Path

import pytest
from mucode.sandbox.executor import EXECUTOR_DIR
from mucode.sandbox.executor.protocol import (
    MAX_FRAME_BYTES,
    ProtocolError,
    encode_frame,
    read_frame,
    recv_frame,
    send_frame,
)
from sandbox_helpers import Handle

from mucode.sandbox.client import Endpoint, ExecutorError

BARE_PYTHON = "/usr/bin/python3"  # what the image and the jail run it with: no mucode, no site-packages


def test_frames_round_trip_and_a_clean_close_is_none() -> None:
    a, b = socket.socketpair()
    with a, b:
        frames = [{"op": "ping"}, {"ev": "test", "stdout": "é\x00" * 1000, "index": 3}]
        for f in frames:
            send_frame(a, f)
        assert [recv_frame(b), recv_frame(b)] == frames
        a.shutdown(socket.SHUT_WR)
        assert recv_frame(b) is None


@pytest.mark.parametrize(
    "raw, message",
    [
        (struct.pack(">I", 10) + b"{}", "closed mid-frame"),
        (b"\x00\x00", "closed mid-frame"),
        (struct.pack(">I", MAX_FRAME_BYTES + 1), "exceeds"),
        (struct.pack(">I", 2) + b"[]", "not a JSON object"),
        (struct.pack(">I", 3) + b"{x}", "not JSON"),
        (struct.pack(">I", 2) + b"\xff{", "not JSON"),
    ],
)
def test_broken_frames_are_protocol_errors_on_both_kinds_of_socket(raw: bytes, message: str) -> None:
    a, b = socket.socketpair()
    with a, b:
        a.sendall(raw)
        a.shutdown(socket.SHUT_WR)
        with pytest.raises(ProtocolError, match=message):
            recv_frame(b)

    async def read_async() -> None:
        reader = asyncio.StreamReader()
        reader.feed_data(raw)
        reader.feed_eof()
        await read_frame(reader)

    with pytest.raises(ProtocolError, match=message):
        asyncio.run(read_async())


def test_async_reader_reads_what_the_blocking_writer_wrote() -> None:
    async def go() -> list[object]:
        reader = asyncio.StreamReader()
        reader.feed_data(encode_frame({"ev": "done"}) + encode_frame({"ev": "pong", "ok": True}))
        reader.feed_eof()
        return [await read_frame(reader), await read_frame(reader), await read_frame(reader)]

    assert asyncio.run(go()) == [{"ev": "done"}, {"ev": "pong", "ok": True}, None]


def test_an_oversized_request_is_refused_before_it_is_sent() -> None:
    with pytest.raises(ProtocolError, match="exceeds"):
        encode_frame({"program": "x" * (MAX_FRAME_BYTES + 1)})


def _ping(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BARE_PYTHON, "-I", "-S", str(EXECUTOR_DIR / "protocol.py"), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_health_check_program_pings_a_live_executor(local_handle: Handle, tmp_path: Path) -> None:
    """What compose's health check runs inside each sandbox container, here against the local
    backend's executor: exit 0 and the executor's health reply; 1 and one line without one."""
    workdir = local_handle.backend._workdir  # type: ignore[attr-defined]
    ctl = Path(workdir) / "run" / "executor.ctl"
    done = _ping("ping", str(ctl), "--timeout", "20")
    assert done.returncode == 0, done.stderr
    reply = json.loads(done.stdout)
    assert reply["ok"] is True and reply["slots"] == local_handle.backend.slots  # type: ignore[attr-defined]

    # "{hostname}" stands for this host's name (compose: the container's), as the executor names its sockets
    (tmp_path / f"{socket.gethostname()}.ctl").symlink_to(ctl)
    assert _ping("ping", str(tmp_path / "{hostname}.ctl"), "--timeout", "20").returncode == 0

    missing = _ping("ping", str(tmp_path / "nobody.ctl"))
    assert missing.returncode == 1 and missing.stdout == ""
    assert missing.stderr.startswith(f"no health reply on {tmp_path / 'nobody.ctl'}")
    assert len(missing.stderr.strip().splitlines()) == 1
    assert _ping("pong").returncode == 2


def test_a_silent_peer_fails_the_health_check_and_the_client(tmp_path: Path) -> None:
    """A socket that accepts and closes without a reply: not healthy for either speaker."""
    path = tmp_path / "x.ctl"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)

    def accept_read_close() -> None:
        for _ in range(2):
            conn, _addr = server.accept()
            with conn:
                recv_frame(conn)

    thread = threading.Thread(target=accept_read_close, daemon=True)
    thread.start()
    try:
        done = _ping("ping", str(path))
        assert done.returncode == 1 and "without a reply" in done.stderr
        ep = Endpoint(name="silent", socket_path=tmp_path / "x.sock")
        with pytest.raises(ExecutorError, match="closed the connection"):
            asyncio.run(ep.ping(timeout_s=20))
        thread.join(20)
    finally:
        server.close()
