"""How ``VerifierClient`` turns items into request bodies: shared test sets, cut by count and by bytes.

``prepare(items)`` hoists every ``spec.tests`` object into a per-call table keyed by the SHA-256 of its
canonical JSON (``mucode.verifier.wire``), so each distinct test set is encoded once, however many
samples carry it, and sent once per request that needs it. Objects are looked up by identity first
(samples of one problem usually share one object), so a 10 MB test set is encoded once; an equal but
distinct object costs one transient encoding to find its key.

``cut(prepared, indices, ...)`` groups the items by test set (first appearance order) and packs them
greedily into batches of at most ``batch_size`` items and ``max_bytes`` bytes of body; results are
put back by index, so order is the caller's. An item that cannot fit in any request (its own JSON
plus its test set over the cap) raises ``RequestTooLargeError`` before anything is sent.

``body(prepared, batch)`` yields the body in chunks that reuse the encoded test sets: the client never
builds a whole body in memory, and retries re-send the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from mucode.verifier.wire import REF_KEY, encoded_tests, is_ref

__all__ = [
    "Batch",
    "Prepared",
    "RequestTooLargeError",
    "VerifierRequestError",
    "body",
    "body_length",
    "cut",
    "prepare",
]

_HEAD = b'{"test_sets":{'
_MID = b'},"items":['
_TAIL = b"]}"
_ENVELOPE = len(_HEAD) + len(_MID) + len(_TAIL)
_CHUNK = 256 * 1024


class VerifierRequestError(ValueError):
    """The verifier rejected the request (a 4xx): fix the items; retrying would not help."""

    def __init__(self, status_code: int, error: str, problems: list[str]) -> None:
        self.status_code = status_code
        self.error = error
        self.problems = problems
        lines = [f"verifier rejected the request (HTTP {status_code}): {error}", *problems[:20]]
        super().__init__("\n  ".join(lines))


class RequestTooLargeError(VerifierRequestError):
    """One item (with its tests) is larger than any request may be: raise the cap on both sides.

    Raised by the client before anything is sent; ``status_code`` is 413 as the service would answer."""

    def __init__(self, error: str) -> None:
        super().__init__(413, error, [])
        self.args = (error,)


@dataclass
class Prepared:
    """Items encoded for the wire (see the module docstring)."""

    item_json: list[bytes]
    refs: list[str | None]
    sets: dict[str, bytes] = field(default_factory=dict)

    def set_cost(self, key: str) -> int:
        return len(key) + 4 + len(self.sets[key])  # "key": + comma

    def item_cost(self, i: int) -> int:
        return len(self.item_json[i]) + 1  # comma


@dataclass
class Batch:
    indices: list[int]
    keys: list[str]
    size: int


def _hoist(
    item: dict[str, Any], sets: dict[str, bytes], by_id: dict[int, str]
) -> tuple[dict[str, Any], str | None]:
    spec: Any = item.get("spec")
    tests = spec.get("tests") if isinstance(spec, dict) else None
    if not isinstance(tests, dict) or is_ref(tests):
        return item, None
    key = by_id.get(id(tests))
    if key is None:
        key, encoded = encoded_tests(tests)
        sets.setdefault(key, encoded)
        by_id[id(tests)] = key
    return {**item, "spec": {**spec, "tests": {REF_KEY: key}}}, key


def prepare(items: list[dict[str, Any]]) -> Prepared:
    """Encodes every item once, its ``spec.tests`` replaced by a ref into the shared table."""
    sets: dict[str, bytes] = {}
    by_id: dict[int, str] = {}  # id() of a tests object -> key; the objects live in ``items`` meanwhile
    item_json: list[bytes] = []
    refs: list[str | None] = []
    for item in items:
        wire_item, key = _hoist(item, sets, by_id)
        item_json.append(
            json.dumps(wire_item, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode("ascii")
        )
        refs.append(key)
    return Prepared(item_json=item_json, refs=refs, sets=sets)


def _too_large(
    prepared: Prepared, items: list[dict[str, Any]], i: int, need: int, max_bytes: int
) -> RequestTooLargeError:
    key = prepared.refs[i]
    tests = f" (its tests alone are {len(prepared.sets[key])} bytes)" if key else ""
    return RequestTooLargeError(
        f"item {i} (id {items[i].get('id')!r}) needs a request of {need} bytes{tests}, over the request cap of "
        f"{max_bytes} bytes: raise MUCODE_MAX_REQUEST_BYTES on the verifier and VerifierClient(max_request_bytes=...) "
        "together, or make the item smaller"
    )


def cut(
    prepared: Prepared, items: list[dict[str, Any]], indices: list[int], *, batch_size: int, max_bytes: int
) -> list[Batch]:
    """Batches of at most ``batch_size`` items and ``max_bytes`` body bytes; items sharing tests go together."""
    rank: dict[str | None, int] = {}
    for i in indices:
        rank.setdefault(prepared.refs[i], len(rank))
    order = sorted(indices, key=lambda i: (rank[prepared.refs[i]], i))
    for i in order:  # refuse up front: nothing is sent when one item can never fit
        key = prepared.refs[i]
        need = _ENVELOPE + prepared.item_cost(i) + (prepared.set_cost(key) if key else 0)
        if need > max_bytes:
            raise _too_large(prepared, items, i, need, max_bytes)
    batches: list[Batch] = []
    current = Batch([], [], _ENVELOPE)
    for i in order:
        key = prepared.refs[i]
        extra = prepared.item_cost(i) + (prepared.set_cost(key) if key and key not in current.keys else 0)
        if current.indices and (len(current.indices) >= batch_size or current.size + extra > max_bytes):
            batches.append(current)
            current = Batch([], [], _ENVELOPE)
            extra = prepared.item_cost(i) + (prepared.set_cost(key) if key else 0)
        current.indices.append(i)
        if key and key not in current.keys:
            current.keys.append(key)
        current.size += extra
    if current.indices:
        batches.append(current)
    return batches


def body_length(prepared: Prepared, batch: Batch) -> int:
    """The exact byte length of ``body(prepared, batch)``."""
    sets = sum(len(k) + 3 + len(prepared.sets[k]) for k in batch.keys) + max(0, len(batch.keys) - 1)
    items = sum(len(prepared.item_json[i]) for i in batch.indices) + max(0, len(batch.indices) - 1)
    return _ENVELOPE + sets + items


async def body(prepared: Prepared, batch: Batch) -> AsyncIterator[bytes]:
    """The request body of ``batch``, in chunks (the encoded test sets are yielded as they are)."""
    yield _HEAD
    for n, key in enumerate(batch.keys):
        yield (b"," if n else b"") + b'"' + key.encode("ascii") + b'":'
        yield prepared.sets[key]
    yield _MID
    chunk: list[bytes] = []
    size = 0
    for n, i in enumerate(batch.indices):
        part = prepared.item_json[i]
        chunk.append(b"," + part if n else part)
        size += len(part)
        if size >= _CHUNK:
            yield b"".join(chunk)
            chunk, size = [], 0
    if chunk:
        yield b"".join(chunk)
    yield _TAIL
