"""What ``VerifierClient`` and the service must agree on: the request cap and shared test sets.

Shared test sets. Samples of one problem carry the same tests, which can be many megabytes
(LiveCodeBench's largest problems carry over 10 MB). A ``/v1/verify`` request may therefore carry
each distinct tests object once, in a request-level table, and items point at it::

    {"test_sets": {"<sha256>": {"format": "stdio", "inputs": [...], "outputs": [...]}},
     "items": [{"program": "code", "response": "...", "spec": {"tests": {"ref": "<sha256>"}}}, ...]}

The key is the SHA-256 (hex) of the tests object's canonical JSON (``canonical_json``: sorted keys,
no spaces, ASCII escapes, no NaN). The service resolves every ref before it validates or scores
anything, so reward programs see the full spec as if it had been inlined; an unknown ref or a key
that is not the hash of its object is a 422. ``VerifierClient`` hoists identical ``spec.tests``
objects into the table by itself, so callers send plain items.

Limits: a ref lives for one request only (nothing is stored between requests); only ``spec.tests``
can be shared; a tests object whose only key is ``ref`` is always taken as a ref.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, TypeGuard

__all__ = [
    "CLIENT_TIMEOUT_HEADER",
    "MAX_ITEMS_HEADER",
    "MAX_REQUEST_BYTES_HEADER",
    "DEFAULT_MAX_REQUEST_BYTES",
    "REF_KEY",
    "answer_within",
    "canonical_json",
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


def is_ref(tests: Any) -> TypeGuard[dict[str, Any]]:
    """Whether a ``spec.tests`` value is a reference into the request's ``test_sets``."""
    return isinstance(tests, dict) and len(tests) == 1 and REF_KEY in tests


def _check_table(test_sets: dict[str, Any]) -> tuple[set[str], list[str]]:
    good: set[str] = set()
    problems: list[str] = []
    for key, obj in test_sets.items():
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


def resolve_test_sets(items: list[Any], test_sets: dict[str, Any]) -> list[str]:
    """Replaces every ``spec.tests`` ref of ``items`` (objects with a ``spec`` dict) by its test set.

    Returns the problems found (empty when all is well); items with a bad ref are left as they are.
    Each item gets a new ``spec`` dict; the resolved tests object is shared, not copied.
    """
    good, problems = _check_table(test_sets) if test_sets else (set(), [])
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
