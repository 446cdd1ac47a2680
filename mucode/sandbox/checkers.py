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
:class:`mucode.registry.UnknownNameError` listing the valid ones. Installed packages add checkers
under the ``mucode.checkers`` entry-point group (docs/plugins.md), without editing mucode:

- a function ``fn(expected, actual) -> bool`` (or a class whose instances are one), run here, in the
  verifier process (small outputs) or in a judge worker (``judging.JudgePool``, large outputs), on
  what the program printed: it must be cheap and bounded on any input. Whatever it raises on the
  program's output (but ``MemoryError``, the program's ``memory_limit``) is a wrong answer, never an
  infrastructure status: an output that crashes a checker scores no better than a wrong one;
- a :class:`mucode.sandbox.types.CheckerProgram` (a testlib-style program: source + language), run in
  the sandbox after the judged program (checker_program.py); :func:`check` refuses it.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation

from mucode.registry import Registry
from mucode.sandbox.types import CheckerProgram, CodeJob

__all__ = [
    "CHECKERS",
    "Checker",
    "CheckerEntry",
    "check",
    "checker_program_of",
    "code_contests",
    "exact",
    "livecodebench",
]

logger = logging.getLogger(__name__)

Checker = Callable[[str, str], bool]
CheckerEntry = Checker | CheckerProgram
"""What a checker name stands for: an in-process function or a checker program."""

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


def _adapt(loaded: object) -> CheckerEntry:
    """An entry point names a checker function, a :class:`CheckerProgram`, or a class of either."""
    item = loaded() if isinstance(loaded, type) and not issubclass(loaded, CheckerProgram) else loaded
    if isinstance(item, CheckerProgram) or callable(item):
        return item
    raise TypeError(
        f"a mucode.checkers entry point must name fn(expected, actual) -> bool or a "
        f"mucode.sandbox.types.CheckerProgram, not {type(item).__name__}"
    )


CHECKERS: Registry[CheckerEntry] = Registry(
    "output checker", entry_point_group="mucode.checkers", adapt=_adapt
)
"""Output checkers by name: ``fn(expected, actual) -> bool`` or a :class:`CheckerProgram`."""
for _checker in (code_contests, livecodebench, exact):
    CHECKERS.register(_checker.__name__, _checker)


def check(checker_name: str, expected: str, actual: str) -> bool:
    """Whether ``actual`` matches ``expected`` under the checker ``checker_name``. A checker that
    raises on the program's output is a wrong answer (``MemoryError`` propagates: the program's
    ``memory_limit``); a name that is a checker program raises TypeError (it runs in the sandbox)."""
    fn = CHECKERS.get(checker_name)
    if isinstance(fn, CheckerProgram):
        raise TypeError(f"checker {checker_name!r} is a checker program: it runs in the sandbox, not here")
    try:
        return bool(fn(expected, actual))
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - the program's output broke the checker: a wrong answer
        logger.debug(
            "checker %r raised %s on a program's output: wrong answer", checker_name, type(exc).__name__
        )
        return False


def checker_program_of(job: CodeJob) -> CheckerProgram | None:
    """The checker program that judges ``job``: its own ``checker_program``, else its ``checker``
    name when that names a program (a plug-in), else None (an in-process checker)."""
    if job.checker_program is not None:
        return job.checker_program
    entry = CHECKERS.get(job.checker)
    return entry if isinstance(entry, CheckerProgram) else None
