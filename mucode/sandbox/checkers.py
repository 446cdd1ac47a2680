"""Output checkers, applied outside the sandbox: ``check(name, expected, actual) -> bool``.

- ``code_contests``: lowercase, split on whitespace, equal token counts, then token by token: equal
  strings match; otherwise, by the *expected* token: an integer (``[+-]?[0-9]+``) needs an integer
  of exactly the same value (compared as digit strings: no float rounding, no size limit); a float
  (digits with a ``.`` and/or an exponent) accepts any number within 1e-5 (absolute); anything else
  needs the same string. Deviation, on purpose: code_contests' ``ValuesMatch`` (execution/
  tester_sandboxer.cc) means to compare two integers exactly, but ``absl::SimpleAtod`` accepts
  integers too, so as written it compares every numeric pair as doubles (100000000000000001 ==
  100000000000000000, ``1e5`` == 100000); we keep its stated intent and also refuse a float
  (``1e5``, ``3.0``) where the expected token is an integer.
- ``livecodebench``: strip, split into lines, strip each line; equal line counts; a line matches
  exactly, or when it has the same number of tokens and every token pair is equal as a Decimal.
- ``exact``: the strings are identical (no normalisation at all).

``CHECKERS`` (a :class:`mucode.registry.Registry`) is the one list of checker names: the code spec's
``checker`` and :class:`mucode.sandbox.types.CodeJob` are validated against it; an unknown name raises
:class:`mucode.registry.UnknownNameError` listing the valid ones. New checkers are registered there.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation

from mucode.registry import Registry

__all__ = ["CHECKERS", "Checker", "check", "code_contests", "exact", "livecodebench"]

Checker = Callable[[str, str], bool]

_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[+-]?[0-9]+)?")  # tokens are lowercased


def _int_key(token: str) -> tuple[bool, str]:
    """An integer token as (negative, digits without leading zeros): exact, any length."""
    digits = token.lstrip("+-").lstrip("0") or "0"
    return token.startswith("-") and digits != "0", digits


def _float(token: str) -> float | None:
    if not _FLOAT.fullmatch(token):
        return None
    value = float(token)
    return None if math.isnan(value) else value


def _token_matches(exp: str, act: str) -> bool:
    if exp == act:
        return True
    if _INT.fullmatch(exp):
        return _INT.fullmatch(act) is not None and _int_key(exp) == _int_key(act)
    fe = _float(exp)
    if fe is None:
        return False
    fa = _float(act)
    return fa is not None and abs(fe - fa) < 1e-5


def code_contests(expected: str, actual: str) -> bool:
    exp, act = expected.lower().split(), actual.lower().split()
    if len(exp) != len(act):
        return False
    return all(_token_matches(a, b) for a, b in zip(exp, act, strict=True))


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


CHECKERS: Registry[Checker] = Registry("output checker")
"""Output checkers by name: ``fn(expected, actual) -> bool``."""
for _checker in (code_contests, livecodebench, exact):
    CHECKERS.register(_checker.__name__, _checker)


def check(checker_name: str, expected: str, actual: str) -> bool:
    """Whether ``actual`` matches ``expected`` under the checker ``checker_name``."""
    return CHECKERS.get(checker_name)(expected, actual)
