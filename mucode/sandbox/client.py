"""asyncio client for the in-sandbox executor (``sandbox/executor.py``) and a pool
of its slots.

An *endpoint* is one executor: a job socket ``<name>.sock`` (one connection per job) and a health
socket ``<name>.ctl``. Frames are written and read by the executor's own standard-library-only
``protocol`` module (shipped in this package), so both sides speak one implementation of the wire
format. ``SlotPool`` hands out free slots across endpoints, so a backend never queues more jobs on
an executor than it has slots.

A job's reply frames carry what the program produced, so they are read here under the host's own
caps (``mucode.sandbox.judging``): a frame over ``MAX_FRAME_BYTES`` is drained unread and becomes
the test's ``output_limit``; a frame the host cannot decode because of the program's data (nested
too deeply, too large for memory) becomes its ``runtime_error`` / ``memory_limit``. Decoding is the
caller's (``Endpoint.run``'s ``decode``), so large frames can be decoded off the event loop. Only
what the program cannot cause (no connection, a broken frame header, bad JSON from the executor, a
deadline) is an ``ExecutorError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mucode.sandbox.executor.protocol import (
    HEADER,
    ProtocolError,
    decode_body,
    read_frame,
    write_frame,
    write_raw,
)
from mucode.sandbox.judging import MAX_FRAME_BYTES
from mucode.sandbox.testsets import PackedTests, Shipments

Frame = dict[str, Any]
Decode = Callable[[bytes], Awaitable[Frame]]
"""Turns one reply frame's body into a frame (may run off the loop; returns a program-verdict frame
for a body the program made undecodable; raises ``ProtocolError`` for one the executor broke)."""


class ExecutorError(Exception):
    """The executor could not be reached, broke the protocol, or went away mid-job."""


class ExecutorRejected(ExecutorError):
    """The executor refused the request (an ``error`` frame: bad fields, unknown language)."""


async def _send(writer: asyncio.StreamWriter, obj: Frame) -> None:
    try:
        await write_frame(writer, obj)
    except ProtocolError as exc:
        raise ExecutorError(f"cannot send to the executor: {exc}") from None


async def _send_raw(writer: asyncio.StreamWriter, data: bytes) -> None:
    try:
        await write_raw(writer, data)
    except ProtocolError as exc:
        raise ExecutorError(f"cannot send to the executor: {exc}") from None


async def _recv(reader: asyncio.StreamReader) -> Frame:
    try:
        frame: Frame | None = await read_frame(reader)
    except ProtocolError as exc:
        raise ExecutorError(f"executor broke the protocol: {exc}") from None
    if frame is None:
        raise ExecutorError("executor closed the connection mid-job")
    return frame


def program_fault(status: str, message: str) -> Frame:
    """A test frame for a reply the host refused or could not decode because of the program's data."""
    return {
        "ev": "test",
        "status": status,
        "stdout": "",
        "stderr": message,
        "message": message,
        "limit_hit": "output" if status == "output_limit" else None,
    }


def decode_inline(body: bytes) -> Frame:
    """``decode_body`` on the caller's thread, with the program's faults turned into its verdicts."""
    try:
        frame: Frame = decode_body(body)
        return frame
    except RecursionError:
        return program_fault(
            "runtime_error", "the program's output is nested too deeply for the host to decode"
        )
    except MemoryError:
        return program_fault("memory_limit", "the program's output does not fit the host's memory")


async def _decode_inline(body: bytes) -> Frame:
    return decode_inline(body)


async def _recv_reply(reader: asyncio.StreamReader, decode: Decode) -> Frame:
    """The next reply frame of a job, under the host's size cap (see the module docstring)."""
    try:
        head = await reader.readexactly(HEADER.size)
        (length,) = HEADER.unpack(head)
        if length > MAX_FRAME_BYTES:
            left = length
            while left:  # drain it: the stream stays in step and nothing is decoded
                left -= len(await reader.readexactly(min(left, 1 << 20)))
            return program_fault(
                "output_limit",
                f"the test's reply of {length} bytes is over the host's cap of {MAX_FRAME_BYTES} bytes",
            )
        body = await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise ExecutorError("executor closed the connection mid-job") from None
    try:
        return await decode(body)
    except ProtocolError as exc:
        raise ExecutorError(f"executor broke the protocol: {exc}") from None


def ctl_path_for(socket_path: str | Path) -> Path:
    p = Path(socket_path)
    return p.with_suffix(".ctl") if p.suffix == ".sock" else Path(str(p) + ".ctl")


@dataclass(eq=False)
class Endpoint:
    """One executor. ``slots`` comes from its health reply."""

    name: str
    socket_path: Path
    slots: int = 1
    free: int = 0
    alive: bool = True
    info: Frame = field(default_factory=dict)
    shipments: Shipments = field(default_factory=Shipments)
    """The test sets this executor holds, as far as this host knows (mucode.sandbox.testsets)."""

    async def ping(self, timeout_s: float = 5.0) -> Frame:
        """The executor's health reply (raises ExecutorError when it does not answer)."""
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_unix_connection(str(ctl_path_for(self.socket_path))), timeout_s
            )
        except (OSError, asyncio.TimeoutError) as exc:
            raise ExecutorError(f"{self.name}: health socket unreachable: {exc!r}") from exc
        try:
            await asyncio.wait_for(_send(writer, {"op": "ping"}), timeout_s)
            reply = await asyncio.wait_for(_recv(reader), timeout_s)
        except (OSError, asyncio.TimeoutError, ValueError) as exc:
            raise ExecutorError(f"{self.name}: no health reply: {exc!r}") from exc
        finally:
            writer.close()
        self.info = reply
        return reply

    async def ping_twice(self, timeout_s: float = 3.0) -> Frame:
        """``ping``, tried once more after a failure (a busy host can delay one reply)."""
        try:
            return await self.ping(timeout_s)
        except ExecutorError:
            await asyncio.sleep(0.5)
            return await self.ping(timeout_s)

    async def run(
        self,
        request: Frame,
        keep_going: Callable[[Frame], bool],
        timeout_s: float,
        decode: Decode = _decode_inline,
        tests: PackedTests | None = None,
    ) -> list[Frame]:
        """Run one job; ``keep_going(test_frame)`` decides whether the next test runs. ``decode``
        turns each reply's body into a frame (default: on the loop, fine for small replies).
        ``tests``: the request's inputs packed, sent by key where the executor keeps test sets.
        ``request["test_range"] = [start, stop]``: only those tests (frames numbered from 0 within
        the range), by key where the executor takes ranges, else with those inputs inline.
        Returns the test frames received (a test frame without an ``index`` gets its position).
        Raises ExecutorError on any infrastructure failure."""
        n_tests = max(1, len(request.get("inputs") or []))
        if request.get("mode") == "assert":
            n_tests = 1
        span = request.get("test_range")
        if span is not None:
            start, stop = span
            n_tests = stop - start
            if tests is None or not self.info.get("test_set_cache_bytes") or not self.info.get("test_range"):
                request = {k: v for k, v in request.items() if k != "test_range"}
                request["inputs"] = request["inputs"][start:stop]
                tests = None
        if tests is None or not self.info.get("test_set_cache_bytes"):
            return await self._run(request, keep_going, timeout_s, decode, n_tests, None)
        try:  # another job may be sending this test set: wait for it (it has its own deadlines)
            follows, future = await asyncio.wait_for(self.shipments.claim(tests.key), timeout_s)
        except asyncio.TimeoutError:
            raise ExecutorError(
                f"{self.name}: test set {tests.key[:12]} not sent within {timeout_s:.0f} s"
            ) from None
        stored: list[bool] = []
        named = {k: v for k, v in request.items() if k != "inputs"}
        named.update(test_set=tests.key, test_set_follows=follows)
        try:
            return await self._run(named, keep_going, timeout_s, decode, n_tests, (tests, follows, stored))
        finally:
            self.shipments.settle(tests.key, future, stored[-1] if stored else None)

    async def _run(
        self,
        request: Frame,
        keep_going: Callable[[Frame], bool],
        timeout_s: float,
        decode: Decode,
        n_tests: int,
        shipping: tuple[PackedTests, bool, list[bool]] | None,
    ) -> list[Frame]:
        """``run``'s exchange; ``shipping``: (the packed tests, sent with the request?, what the
        executor said it stored)."""
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_unix_connection(str(self.socket_path), limit=1 << 20), 10.0
            )
        except (OSError, asyncio.TimeoutError) as exc:
            raise ExecutorError(f"{self.name}: job socket unreachable: {exc!r}") from exc
        frames: list[Frame] = []
        try:
            # every send and receive has a deadline: an executor that stops reading (a large
            # request to a stuck slot) cannot hold the caller for ever
            await asyncio.wait_for(_send(writer, request), timeout_s)
            if shipping is not None and shipping[1]:
                await asyncio.wait_for(_send_raw(writer, shipping[0].blob), timeout_s)
                self.shipments.sent += 1
            while True:
                frame = await asyncio.wait_for(_recv_reply(reader, decode), timeout_s)
                ev = frame.get("ev")
                if shipping is not None and ev in ("unknown_test_set", "test_set"):
                    await self._shipped(writer, frame, shipping, timeout_s)
                    continue
                if ev == "done":
                    return frames
                if ev == "error":
                    raise ExecutorRejected(str(frame.get("message")))
                if ev != "test":
                    raise ExecutorError(f"{self.name}: unexpected frame {ev!r}")
                frame.setdefault("index", len(frames))
                frames.append(frame)
                if len(frames) >= n_tests:
                    continue  # "done" follows
                if keep_going(frame):
                    await asyncio.wait_for(_send(writer, {"op": "next"}), timeout_s)
                else:
                    await asyncio.wait_for(_send(writer, {"op": "stop"}), timeout_s)
                    return frames
        except asyncio.TimeoutError as exc:
            raise ExecutorError(f"{self.name}: no reply within {timeout_s:.0f} s") from exc
        except (OSError, ValueError) as exc:
            raise ExecutorError(f"{self.name}: connection failed mid-job: {exc!r}") from exc
        finally:
            writer.close()

    async def _shipped(
        self,
        writer: asyncio.StreamWriter,
        frame: Frame,
        shipping: tuple[PackedTests, bool, list[bool]],
        timeout_s: float,
    ) -> None:
        """The executor lacks the job's test set (send it now) or says whether it stored it."""
        tests, _, stored = shipping
        if frame.get("ev") == "test_set":
            stored.append(frame.get("stored") is True)
            return
        if frame.get("key") != tests.key:
            raise ExecutorError(f"{self.name}: asked for test set {frame.get('key')!r}, not {tests.key}")
        self.shipments.forget(tests.key)
        await asyncio.wait_for(_send_raw(writer, tests.blob), timeout_s)
        self.shipments.sent += 1
        self.shipments.resent += 1


class NoSandbox(ExecutorError):
    """No healthy executor slot became free in time."""


class SlotPool:
    """Free slots over a changing set of endpoints. Create inside the running event loop.

    ``on_idle``, when set, is called (soon, on the loop) whenever a slot is left free with nobody
    waiting for one: after a release, and after an acquire that left others free (the backend then
    spreads a running job's tests over them, ``pooled.py``)."""

    def __init__(self) -> None:
        self._cond = asyncio.Condition()
        self.endpoints: dict[str, Endpoint] = {}
        self.on_idle: Callable[[], None] | None = None
        self.waiting = 0
        """Callers of ``acquire`` waiting for a slot."""

    def _maybe_idle(self) -> None:
        if self.on_idle is not None:
            asyncio.get_running_loop().call_soon(self._idle_now)

    def _idle_now(self) -> None:
        """Checked when it runs: the slot may have been taken, or a waiter come, meanwhile."""
        if self.on_idle is not None and self.waiting == 0 and self.idle_slots > 0:
            self.on_idle()

    async def add(self, ep: Endpoint) -> None:
        async with self._cond:
            ep.free = ep.slots
            ep.alive = True
            self.endpoints[ep.name] = ep
            self._cond.notify_all()

    async def remove(self, name: str) -> Endpoint | None:
        async with self._cond:
            ep = self.endpoints.pop(name, None)
            if ep is not None:
                ep.alive = False
            return ep

    async def acquire(self, timeout_s: float) -> Endpoint:
        def pick() -> Endpoint | None:
            best = max(
                (e for e in self.endpoints.values() if e.alive and e.free > 0),
                key=lambda e: e.free,
                default=None,
            )
            return best

        async with self._cond:
            self.waiting += 1
            try:
                await asyncio.wait_for(self._cond.wait_for(lambda: pick() is not None), timeout_s)
            except asyncio.TimeoutError:
                raise NoSandbox(
                    f"no sandbox slot became free within {timeout_s:.0f} s "
                    f"({len(self.endpoints)} executors known)"
                ) from None
            finally:
                self.waiting -= 1
            ep = pick()
            assert ep is not None
            ep.free -= 1
            self._maybe_idle()
            return ep

    async def release(self, ep: Endpoint) -> None:
        async with self._cond:
            ep.free += 1
            self._cond.notify_all()
            self._maybe_idle()

    @property
    def total_slots(self) -> int:
        return sum(e.slots for e in self.endpoints.values() if e.alive)

    @property
    def idle_slots(self) -> int:
        return sum(e.free for e in self.endpoints.values() if e.alive)
