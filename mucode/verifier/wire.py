"""What ``VerifierClient`` and the service must agree on: the request cap and shared test sets.

Shared test sets. Samples of one problem carry the same tests, which can be many megabytes
(LiveCodeBench's largest problems carry over 10 MB). A ``/v1/verify`` request may therefore carry
each distinct tests object once, in a request-level table, and items point at it::

    {"test_sets": {"<sha256>": {"format": "stdio", "inputs": [...], "outputs": [...]}},
     "items": [{"program": "code", "response": "...", "spec": {"tests": {"ref": "<sha256>"}}}, ...]}

The key is the SHA-256 (hex) of the tests object's canonical JSON (``canonical_json``: sorted keys,
no spaces, ASCII escapes, no NaN). The service resolves every ref before it validates or scores
anything, so reward programs see the full spec as if it had been inlined; an unknown ref or a key
that is not the hash of its object is a 422. In the client's layout (the table first, each value its
canonical JSON) the service hashes each value's bytes in the body instead of encoding it again
(``_keys_as_sent``); so a key that is the hash of its value's bytes as sent is accepted too.
``VerifierClient`` hoists identical ``spec.tests`` objects into the table by itself, so callers send
plain items.

Limits: a ref lives for one request only (nothing is stored between requests); only ``spec.tests``
can be shared; a tests object whose only key is ``ref`` is always taken as a ref.
"""

from __future__ import annotations

import collections
import hashlib
import json
import threading
from typing import Any, TypeGuard

__all__ = [
    "CLIENT_TIMEOUT_HEADER",
    "MAX_ITEMS_HEADER",
    "MAX_REQUEST_BYTES_HEADER",
    "DEFAULT_MAX_REQUEST_BYTES",
    "REF_KEY",
    "answer_within",
    "canonical_json",
    "encoded_tests",
    "is_ref",
    "resolve_test_sets",
    "digest_of",
]

DEFAULT_MAX_REQUEST_BYTES = 64 * 1024 * 1024
"""The service's default request cap (``MUCODE_MAX_REQUEST_BYTES``) and the client's default batch cap."""

CLIENT_TIMEOUT_HEADER = "X-Mucode-Timeout-S"
"""Seconds the client will wait for this answer; the service answers before (``answer_within``)."""

MAX_REQUEST_BYTES_HEADER = "X-Mucode-Max-Request-Bytes"
MAX_ITEMS_HEADER = "X-Mucode-Max-Items-Per-Request"
"""Sent with a 413: the service's caps, which the client then cuts below (it never raises its own)."""

REF_KEY = "ref"
"""``spec.tests = {"ref": key}`` points at ``test_sets[key]`` of the same request."""


def answer_within(request_timeout_s: float, client_timeout_s: float | None) -> float:
    """The outer limit of one request: the service's own, shortened so that the answer (with
    ``verifier_error`` for what is unfinished) reaches a client that waits ``client_timeout_s`` before it
    gives up and re-sends the same work."""
    if client_timeout_s is None or client_timeout_s <= 0:
        return request_timeout_s
    return min(request_timeout_s, max(1.0, 0.9 * client_timeout_s - 1.0))


def canonical_json(obj: Any) -> bytes:
    """The canonical JSON encoding hashed for test-set keys (also what the client sends)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode(
        "ascii"
    )


def digest_of(encoded: bytes) -> str:
    """The key of a test set given its ``canonical_json`` encoding."""
    return hashlib.sha256(encoded).hexdigest()


_KEPT_MAX_BYTES = 64 << 20
_kept: collections.OrderedDict[int, tuple[object, str, bytes]] = collections.OrderedDict()
_kept_bytes = 0
_kept_lock = threading.Lock()


def encoded_tests(tests: object, *, keep: bool = False) -> tuple[str, bytes]:
    """(key, ``canonical_json``) of a tests object; raises what ``canonical_json`` raises.

    ``keep``: hold the encoding, by the object's identity, until a call without ``keep`` takes it
    (the most recent 64 MB at most): the evaluator's result store fingerprints a test set by its key
    and the client then sends the same encoding, so a 12 MB test set is encoded once between them.
    Tests objects are never changed once built (samples share them everywhere)."""
    global _kept_bytes
    with _kept_lock:
        hit = _kept.get(id(tests))
        if hit is not None and hit[0] is tests:
            if not keep:
                del _kept[id(tests)]
                _kept_bytes -= len(hit[2])
            return hit[1], hit[2]
    encoded = canonical_json(tests)
    key = digest_of(encoded)
    if keep and len(encoded) <= _KEPT_MAX_BYTES:
        with _kept_lock:
            old = _kept.pop(id(tests), None)
            _kept_bytes -= len(old[2]) if old is not None else 0
            _kept[id(tests)] = (tests, key, encoded)
            _kept_bytes += len(encoded)
            while _kept_bytes > _KEPT_MAX_BYTES:
                _, (_, _, gone) = _kept.popitem(last=False)
                _kept_bytes -= len(gone)
    return key, encoded


def is_ref(tests: Any) -> TypeGuard[dict[str, Any]]:
    """Whether a ``spec.tests`` value is a reference into the request's ``test_sets``."""
    return isinstance(tests, dict) and len(tests) == 1 and REF_KEY in tests


_BODY_HEAD = b'{"test_sets":{'
_BODY_ITEMS = b'},"items":['


def _keys_as_sent(test_sets: dict[str, Any], raw: bytes | None) -> set[str]:
    """The keys of ``test_sets`` that are the SHA-256 of their value's bytes as the body carries them:
    the layout ``VerifierClient`` sends (the table first, each value its canonical JSON, the table
    contiguous up to ``"items"``), hashed where it lies, instead of encoding each set again (a 12 MB
    set: ~40 ms and 24 MB of fresh memory saved). A key this cannot vouch for (another layout, or
    another encoding) is checked by ``canonical_json``, as before; the first one ends the scan."""
    if raw is None or not raw.startswith(_BODY_HEAD):
        return set()
    view = memoryview(raw)
    good: set[str] = set()
    keys = list(test_sets)
    pos = len(_BODY_HEAD)
    for n, key in enumerate(keys):
        name = (b"," if n else b"") + b'"' + key.encode("ascii", "replace") + b'":'
        if raw[pos : pos + len(name)] != name:
            break
        start = pos + len(name)
        if n + 1 < len(keys):
            end = raw.find(b',"' + keys[n + 1].encode("ascii", "replace") + b'":', start)
        else:
            end = raw.rfind(_BODY_ITEMS, start)
        if end < start or hashlib.sha256(view[start:end]).hexdigest() != key:
            break
        good.add(key)
        pos = end
    return good


def _check_table(test_sets: dict[str, Any], raw: bytes | None = None) -> tuple[set[str], list[str]]:
    good = _keys_as_sent(test_sets, raw)
    problems: list[str] = []
    for key, obj in test_sets.items():
        if key in good and isinstance(obj, dict):
            continue
        good.discard(key)
        if not isinstance(obj, dict):
            problems.append(
                f"test_sets[{key!r}]: must be a tests object (a JSON object), got {type(obj).__name__}"
            )
            continue
        try:
            digest = digest_of(canonical_json(obj))
        except ValueError as exc:  # NaN/Infinity cannot be hashed canonically
            problems.append(f"test_sets[{key!r}]: cannot be encoded as canonical JSON: {exc}")
            continue
        if digest != key:
            problems.append(
                f"test_sets[{key!r}]: key is not the SHA-256 of the object's canonical JSON (that is {digest}); "
                "key each test set by sha256(json.dumps(tests, sort_keys=True, separators=(',', ':'))) "
                "- VerifierClient does this for you"
            )
            continue
        good.add(key)
    return good, problems


def resolve_test_sets(items: list[Any], test_sets: dict[str, Any], raw: bytes | None = None) -> list[str]:
    """Replaces every ``spec.tests`` ref of ``items`` (objects with a ``spec`` dict) by its test set;
    ``raw``: the request body the table was decoded from, when at hand (keys checked where they lie).

    Returns the problems found (empty when all is well); items with a bad ref are left as they are.
    Each item gets a new ``spec`` dict; the resolved tests object is shared, not copied.
    """
    good, problems = _check_table(test_sets, raw) if test_sets else (set(), [])
    for i, item in enumerate(items):
        spec = item.spec
        tests = spec.get("tests") if isinstance(spec, dict) else None
        if not is_ref(tests):
            continue
        ref = tests[REF_KEY]
        if not isinstance(ref, str) or ref not in test_sets:
            problems.append(
                f"items[{i}].spec.tests.ref: unknown test set {ref!r}; send it in the request's "
                "'test_sets' (keyed by its SHA-256) or inline the tests object"
            )
            continue
        if ref in good:
            item.spec = {**spec, "tests": test_sets[ref]}
    return problems
