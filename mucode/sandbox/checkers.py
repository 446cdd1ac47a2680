"""Output checkers, applied outside the sandbox: ``check(name, expected, actual) -> bool``.

- ``code_contests``: the official rule: lowercase, split on whitespace, compare token by token; two
  tokens that differ as strings still match when both parse as floats and differ by < 1e-5
  (absolute). Token counts must match.
- ``livecodebench``: strip, split into lines, strip each line; equal line counts; a line matches
  exactly, or when it has the same number of tokens and every token pair is equal as a Decimal.
- ``exact``: the strings are identical (no normalisation at all).

New checkers are added to ``CHECKERS`` (a registry); an unknown name raises with the valid names.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal, InvalidOperation

Checker = Callable[[str, str], bool]


def _float(token: str) -> float | None:
    try:
        value = float(token)
    except ValueError:
        return None
    return None if math.isnan(value) else value


def code_contests(expected: str, actual: str) -> bool:
    exp, act = expected.lower().split(), actual.lower().split()
    if len(exp) != len(act):
        return False
    for a, b in zip(exp, act, strict=False):
        if a == b:
            continue
        fa, fb = _float(a), _float(b)
        if fa is None or fb is None or not abs(fa - fb) < 1e-5:
            return False
    return True


def _decimal(token: str) -> Decimal | None:
    try:
        value = Decimal(token)
    except (InvalidOperation, ValueError):
        return None
    return None if value.is_nan() else value


def livecodebench(expected: str, actual: str) -> bool:
    exp = [line.strip() for line in expected.strip().split("\n")]
    act = [line.strip() for line in actual.strip().split("\n")]
    if len(exp) != len(act):
        return False
    for a, b in zip(exp, act, strict=False):
        if a == b:
            continue
        ta, tb = a.split(), b.split()
        if len(ta) != len(tb):
            return False
        for x, y in zip(ta, tb, strict=False):
            dx, dy = _decimal(x), _decimal(y)
            if dx is None or dy is None or dx != dy:
                return False
    return True


def exact(expected: str, actual: str) -> bool:
    return expected == actual


CHECKERS: dict[str, Checker] = {
    "code_contests": code_contests,
    "livecodebench": livecodebench,
    "exact": exact,
}


def check(checker_name: str, expected: str, actual: str) -> bool:
    try:
        fn = CHECKERS[checker_name]
    except KeyError:
        raise ValueError(f"unknown checker {checker_name!r}; valid: {sorted(CHECKERS)}") from None
    return fn(expected, actual)
