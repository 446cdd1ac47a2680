"""The host's side of the executor's test-set cache (``sandbox/testsets.py``): pack once, send once.

A problem's G samples carry the same test inputs. ``TestSets.packed`` turns a job's inputs into one
blob and its SHA-256 key, once per problem: the packing and hashing run in a thread (off the event
loop; hashlib releases the GIL), and a later job whose inputs are the *same string objects* (what the
verifier's shared test sets and pydantic hand over: nothing is copied) finds the blob by their
identities, in O(number of tests). The memo holds the strings it keys by, so an id is never reused
while its entry lives; it keeps at most ``max_bytes`` of blobs (least recently used first out).

``Shipments`` (one per executor, on its ``Endpoint``) says, per key, whether that executor has the
blob: known (send the key only), being sent by another job (wait for it, then send the key), or not
(send it with this job). The executor checks every blob against its key and answers a key it lacks
(evicted, restarted) with ``unknown_test_set``, on which the job sends the blob; so the host's view
may be wrong without any verdict being wrong. Jobs below ``min_bytes`` of inputs are sent inline,
as before (a key and a table lookup would cost more than they save).
"""

from __future__ import annotations

import asyncio
import collections
from dataclasses import dataclass, field

from mucode.sandbox.executor.testsets import key_of, pack

__all__ = ["PackedTests", "Shipments", "TestSets"]

MIN_BYTES = 64 << 10


@dataclass(frozen=True, eq=False)
class PackedTests:
    """One job's inputs as the executor's blob; ``inputs`` holds the strings it was packed from."""

    key: str
    blob: bytes
    inputs: tuple[str, ...]


def _pack(inputs: tuple[str, ...]) -> PackedTests:
    blob = pack(list(inputs))
    return PackedTests(key_of(blob), blob, inputs)


class TestSets:
    """Packed test sets by the identity of their input strings (see the module docstring)."""

    __test__ = False  # not a pytest test class

    def __init__(self, max_bytes: int = 256 << 20, min_bytes: int = MIN_BYTES) -> None:
        self.max_bytes = max_bytes
        self.min_bytes = min_bytes
        self._memo: collections.OrderedDict[tuple[int, ...], PackedTests] = collections.OrderedDict()
        self._pending: dict[tuple[int, ...], asyncio.Future[PackedTests]] = {}
        self._bytes = 0
        self.packed_count = 0

    async def packed(self, inputs: list[str]) -> PackedTests | None:
        """The blob of ``inputs``, or None when they are small enough to send inline. Packing runs
        in a task of its own, shared by every job that asks for the same inputs meanwhile."""
        if sum(map(len, inputs)) < self.min_bytes:
            return None
        ids = tuple(map(id, inputs))
        hit = self._memo.get(ids)
        if hit is not None and all(a is b for a, b in zip(hit.inputs, inputs, strict=True)):
            self._memo.move_to_end(ids)
            return hit
        task = self._pending.get(ids)
        if task is None:
            task = asyncio.ensure_future(asyncio.to_thread(_pack, tuple(inputs)))
            self._pending[ids] = task
            task.add_done_callback(lambda t: self._finished(ids, t))
        return await asyncio.shield(task)

    def _finished(self, ids: tuple[int, ...], task: asyncio.Future[PackedTests]) -> None:
        self._pending.pop(ids, None)
        if not task.cancelled() and task.exception() is None:
            self.packed_count += 1
            self._remember(ids, task.result())

    def _remember(self, ids: tuple[int, ...], done: PackedTests) -> None:
        old = self._memo.pop(ids, None)
        if old is not None:
            self._bytes -= len(old.blob)
        if len(done.blob) > self.max_bytes:
            return
        self._memo[ids] = done
        self._bytes += len(done.blob)
        while self._bytes > self.max_bytes:
            _, gone = self._memo.popitem(last=False)
            self._bytes -= len(gone.blob)


@dataclass
class Shipments:
    """Which test sets one executor holds, as far as this host knows (see the module docstring)."""

    max_keys: int = 4096
    _state: collections.OrderedDict[str, bool | asyncio.Future[bool]] = field(
        default_factory=collections.OrderedDict
    )
    sent: int = 0
    """Blobs sent to this executor."""
    resent: int = 0
    """Of those, sent because the executor answered ``unknown_test_set``."""

    async def claim(self, key: str) -> tuple[bool, asyncio.Future[bool] | None]:
        """(send the blob with this job?, the future this job must settle with ``settle``): a key
        another job is sending is waited for first, so a problem's samples send its blob once."""
        while True:
            state = self._state.get(key)
            if state is True:
                self._state.move_to_end(key)
                return False, None
            if state is False:  # the executor does not keep it (too large): inline every time
                return True, None
            if state is None:
                future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
                self._state[key] = future
                while len(self._state) > self.max_keys:
                    self._state.popitem(last=False)
                return True, future
            await asyncio.shield(state)  # settled with a bool by its owner, whatever happens to it

    def settle(self, key: str, future: asyncio.Future[bool] | None, stored: bool | None) -> None:
        """What the executor said of ``key`` (``stored`` None: it said nothing, the job failed)."""
        if stored is not None:
            self._state[key] = stored
        elif future is not None and self._state.get(key) is future:
            del self._state[key]  # someone else sends it
        # (future None: this job only named the key; what the executor said, if anything, was
        # recorded by ``forget`` or by the job that resent it; the key may be gone already)
        if future is not None and not future.done():
            future.set_result(bool(stored))

    def forget(self, key: str) -> None:
        """The executor answered ``unknown_test_set``: it lost the key."""
        if self._state.get(key) is True:
            del self._state[key]
