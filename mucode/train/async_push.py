"""The ``push`` weight hand-off of asynchronous μ-GRPO: a torch.distributed broadcast from the trainer's
memory to every generator process (``asynchronous.handoff=push``).

Same code for both backends: ``nccl`` (trainer GPU to generator GPU) and ``gloo`` (through CPU memory;
what the CPU tests run). The trainer holds a ``TCPStore`` on loopback; each generator process joins it
and forms a **pair group** (2 ranks: the trainer 0, the generator 1) under a prefix naming the
generator and its join count, so a restarted generator simply forms a new pair (a static world of all
processes could not take a process back). Groups are built from the store directly
(``ProcessGroupGloo``/``ProcessGroupNCCL``), never as torch's default group: a vLLM engine in the
generator (external launcher) keeps its own.

A published version is one **message** on each pair: a header ``[MAGIC, version, meta bytes]``, the
meta (JSON: the version, a path, each tensor's name, dtype and shape), the payload (every tensor's
bytes, one flat buffer sent in chunks of :data:`CHUNK_BYTES`) and a trailer ``[MAGIC_END, version]``.
The receiver (a thread of the generator) writes into a fresh buffer and makes the version its latest
only after the trailer matches: a generator never applies a half-received policy (a sender killed
mid-message fails the receive; the previous version stays the latest). Version 0 (the base policy) is
a message without tensors naming the base directory.

The trainer's :meth:`PushHandoff.publish` copies the weights into a new flat buffer (the snapshot:
one model's size, on the trainer's GPU for nccl, in CPU memory for gloo) and returns; a sender thread
sends the newest snapshot to every pair (a generator that joins later gets the newest at once; a
sender that falls behind skips to the newest). A pair whose receive or send fails is dropped.

Limits: nccl needs the trainer and each generator on different GPUs (``asynchronous.generator_devices``:
NCCL cannot join two processes on one GPU); with one GPU for both, ``auto`` takes gloo. The snapshot
costs one model's memory on the trainer (and each generator holds up to two received copies besides
its engine's); sends to several generators go one after the other (no fan-out tree); one machine
(the store listens on 127.0.0.1). The nccl path is ``gpu``-tested only (``scripts/gpu_check.py
--async``).
"""

from __future__ import annotations

import datetime
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from mucode.train.async_handoff import PolicyVersion

__all__ = ["CHUNK_BYTES", "PushHandoff", "PushReceiver", "join_pair", "push_backend"]

logger = logging.getLogger(__name__)

MAGIC, MAGIC_END = 0x6D75636F, 0x656E6421
CHUNK_BYTES = 1 << 28
"""The payload goes in pieces of this many bytes (256 MiB)."""
TIMEOUT = datetime.timedelta(hours=12)
"""How long a pair waits in one collective: a receiver waits for the next version (the trainer may take
hours between publishes); a vanished peer fails the collective much sooner (connection closed)."""


def push_backend(name: str, device: str, generator_devices: list[str]) -> str:
    """``asynchronous.push_backend`` resolved: ``auto`` is nccl when the trainer trains on a GPU and the
    generators have GPUs of their own (``generator_devices``: NCCL cannot join two processes on one GPU),
    else gloo."""
    if name != "auto":
        return name
    resolved = device if device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    return "nccl" if resolved.startswith("cuda") and generator_devices else "gloo"


def _group(backend: str, store: Any, rank: int) -> Any:
    if backend == "nccl":
        options = dist.ProcessGroupNCCL.Options()
        options._timeout = TIMEOUT
        return dist.ProcessGroupNCCL(store, rank, 2, options)
    return dist.ProcessGroupGloo(store, rank, 2, TIMEOUT)


def _bcast(group: Any, tensor: torch.Tensor) -> None:
    opts = dist.BroadcastOptions()
    opts.rootRank = 0
    group.broadcast([tensor], opts).wait()


def join_pair(address: str, backend: str, generator: int, rank: int, count: int | None = None) -> Any:
    """The pair group of ``generator`` (its ``count``-th join; the generator's side counts itself in)."""
    host, port = address.rsplit(":", 1)
    store = dist.TCPStore(host, int(port), is_master=False, timeout=datetime.timedelta(seconds=60))
    if count is None:
        count = int(store.add(f"join/{generator}", 1))
    return _group(backend, dist.PrefixStore(f"pair/{generator}/{count}", store), rank)


@dataclass(frozen=True)
class _Message:
    version: int
    path: str
    meta: bytes
    payload: torch.Tensor | None


def _pack(
    version: int, path: str, tensors: Iterable[tuple[str, torch.Tensor]], device: torch.device
) -> _Message:
    items = [(name, t.detach().contiguous()) for name, t in tensors]
    sizes = [t.numel() * t.element_size() for _, t in items]
    flat = torch.empty(sum(sizes), dtype=torch.uint8, device=device)
    offset = 0
    for (_, t), n in zip(items, sizes, strict=True):
        flat[offset : offset + n].copy_(t.reshape(-1).view(torch.uint8))
        offset += n
    meta = {
        "version": version,
        "path": path,
        "tensors": [[name, str(t.dtype).removeprefix("torch."), list(t.shape)] for name, t in items],
    }
    return _Message(version, path, json.dumps(meta).encode(), flat)


def send_message(
    group: Any, message: _Message, device: torch.device, *, stop_after: str | None = None
) -> None:
    """One version on one pair, its small tensors on ``device`` (see the module doc); ``stop_after="meta"``
    ends after the meta (a torn message, for tests)."""
    payload = message.payload
    nbytes = 0 if payload is None else payload.numel()
    _bcast(
        group,
        torch.tensor([MAGIC, message.version, len(message.meta), nbytes], dtype=torch.int64, device=device),
    )
    _bcast(group, torch.frombuffer(bytearray(message.meta), dtype=torch.uint8).to(device))
    if stop_after == "meta":
        return
    for start in range(0, nbytes, CHUNK_BYTES):
        assert payload is not None
        _bcast(group, payload[start : start + CHUNK_BYTES])
    _bcast(group, torch.tensor([MAGIC_END, message.version], dtype=torch.int64, device=device))


def receive_message(group: Any, device: torch.device) -> PolicyVersion:
    """The next complete version from the pair; raises (and applies nothing) on a torn or foreign message."""
    header = torch.zeros(4, dtype=torch.int64, device=device)
    _bcast(group, header)
    magic, version, meta_len, nbytes = (int(x) for x in header.tolist())
    if magic != MAGIC:
        raise RuntimeError(f"weight push: bad header {header.tolist()}")
    raw = torch.zeros(meta_len, dtype=torch.uint8, device=device)
    _bcast(group, raw)
    meta = json.loads(bytes(raw.cpu().tolist()).decode())
    flat = torch.empty(nbytes, dtype=torch.uint8, device=device)
    for start in range(0, nbytes, CHUNK_BYTES):
        _bcast(group, flat[start : start + CHUNK_BYTES])
    trailer = torch.zeros(2, dtype=torch.int64, device=device)
    _bcast(group, trailer)
    if trailer.tolist() != [MAGIC_END, version] or meta["version"] != version:
        raise RuntimeError(f"weight push: version {version} ended with {trailer.tolist()}; not applied")
    weights: dict[str, torch.Tensor] = {}
    offset = 0
    for name, dtype, shape in meta["tensors"]:
        dt = getattr(torch, dtype)
        n = int(torch.Size(shape).numel()) * torch.empty((), dtype=dt).element_size()
        weights[name] = flat[offset : offset + n].view(dt).view(shape)
        offset += n
    return PolicyVersion(version=version, path=str(meta["path"]), weights=weights or None)


class PushHandoff:
    """The trainer's side (a :class:`~mucode.train.async_handoff.PolicyHandoff`); see the module doc."""

    def __init__(self, backend: str, generators: int, device: torch.device) -> None:
        self.backend, self.generators, self.device = backend, generators, device
        self.store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
        self.address = f"127.0.0.1:{self.store.port}"
        self._cond = threading.Condition()
        self._message: _Message | None = None
        self._pairs: dict[int, tuple[int, Any, int]] = {}  # generator -> (join count, group, version sent)
        self._closed = False
        self.sent = 0
        self._thread = threading.Thread(target=self._serve, name="weight-push", daemon=True)
        self._thread.start()

    def child_info(self) -> dict[str, str]:
        """What a generator needs to join (passed in its start message)."""
        return {"handoff": "push", "address": self.address, "backend": self.backend}

    def publish_path(self, version: int, path: str) -> None:
        self._set(
            _Message(
                version, path, json.dumps({"version": version, "path": path, "tensors": []}).encode(), None
            )
        )

    def publish(
        self,
        version: int,
        save: Callable[[Path], None],
        tensors: Callable[[], Iterable[tuple[str, torch.Tensor]]],
    ) -> float:
        start = time.perf_counter()
        message = _pack(version, "", tensors(), self.device)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # the sender thread's stream must see the copy
        self._set(message)
        return time.perf_counter() - start

    def _set(self, message: _Message) -> None:
        with self._cond:
            self._message = message
            self._cond.notify_all()

    def latest(self) -> PolicyVersion | None:
        m = self._message
        return None if m is None else PolicyVersion(version=m.version, path=m.path)

    def drop_after(self, version: int) -> None:
        pass  # nothing is kept: a resumed trainer pushes its checkpoint's version again

    def _joins(self) -> dict[int, int]:
        return {g: int(self.store.add(f"join/{g}", 0)) for g in range(self.generators)}

    def _serve(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        while not self._closed:
            for g, count in self._joins().items():
                if count and (g not in self._pairs or self._pairs[g][0] < count):
                    try:
                        self._pairs[g] = (count, join_pair(self.address, self.backend, g, 0, count), -1)
                    except Exception as err:  # noqa: BLE001 - a generator that died while joining
                        logger.warning("weight push: generator %d did not join (%s)", g, err)
                        self._pairs.pop(g, None)
            message = self._message
            for g, (count, group, sent) in list(self._pairs.items()):
                if message is None or sent == message.version:
                    continue
                try:
                    send_message(group, message, self.device)
                    self._pairs[g] = (count, group, message.version)
                    self.sent += 1
                except Exception as err:  # noqa: BLE001 - the generator is gone; it rejoins if restarted
                    logger.warning("weight push: generator %d dropped (%s)", g, err)
                    self._pairs.pop(g, None)
            with self._cond:
                self._cond.wait(timeout=0.05)

    def close(self) -> None:
        self._closed = True
        with self._cond:
            self._cond.notify_all()
        self._thread.join(timeout=5)


class PushReceiver:
    """A generator's side: a thread receiving versions; :meth:`latest` is the newest complete one."""

    def __init__(self, address: str, backend: str, generator: int, device: torch.device) -> None:
        self.device = device
        self._lock = threading.Lock()
        self._latest: PolicyVersion | None = None
        self.error: BaseException | None = None
        self.group = join_pair(address, backend, generator, rank=1)
        self._thread = threading.Thread(target=self._receive, name="weight-receive", daemon=True)
        self._thread.start()

    def _receive(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        while True:
            try:
                version = receive_message(self.group, self.device)
            except Exception as err:  # noqa: BLE001 - the trainer is gone or the message was torn
                self.error = err
                return
            with self._lock:
                self._latest = version

    def latest(self) -> PolicyVersion | None:
        with self._lock:
            return self._latest

    def close(self) -> None:
        """Nothing to release: the receiving thread is a daemon that ends with the process."""
