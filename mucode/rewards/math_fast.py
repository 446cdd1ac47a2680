"""Two faster routes inside math-verify that keep its verdicts, switched on only inside ``fast_paths()``.

math-verify spends a stage's time in two places: antlr's full-context (LL) prediction while
latex2sympy2 parses, and sympy's ``simplify(gold - answer)`` when it checks a wrong answer. Both are
reached only through the libraries' internals, so the two routes are wrappers installed on them once
per process (the math worker's; this module is imported nowhere else), each active only in a
``fast_paths()`` block. Outside one (``check_answer``, the plain reference the tests and benchmarks
compare with) math-verify runs untouched.

- **SLL first.** antlr documents SLL prediction as giving either the very tree LL prediction gives or
  a syntax error, and latex2sympy2's start rule (``math``) ends at EOF, so a tree SLL returns covers
  the whole input and is LL's tree. latex2sympy2's error listener raises at the first error it is
  told of (antlr reports every error before recovering from it), and on any error the text is
  parsed again by a fresh LL parser, which returns or raises what math-verify would.
- **A sure disproof before ``simplify``.** math-verify's ``sympy_symbolic_eq(a, b)`` is true only when
  ``simplify(a - b)`` is zero. ``simplify`` keeps an expression's value, so it cannot be zero where
  ``a - b`` is certainly not: a constant (no free symbols) whose value, evaluated to 30 digits, is
  more than 1e-10 from 0; or a polynomial in its free symbols with rational coefficients that is not
  the zero polynomial (it vanishes at finitely many points, and a symbol's assumptions never pin it
  to finitely many values). Anything else, or any error while deciding, goes to ``simplify`` as
  before. A timeout is a ``BaseException`` and passes through.

Where a library no longer has the attribute a wrapper needs, that route is left off (``installed()``
says which are on) and math-verify runs as it is; the verdict tests would then show no change, and
the benchmark the lost speed. Remove a route when its library does the same itself.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["fast_paths", "installed", "surely_unequal"]

_ON: contextvars.ContextVar[bool] = contextvars.ContextVar("math_fast_paths", default=False)
_INSTALLED: dict[str, bool] = {}
DISPROOF_DIGITS = 30
DISPROOF_MARGIN = 1e-10


def surely_unequal(a: Any, b: Any) -> bool:
    """True only where ``simplify(a - b)`` cannot be zero (see the module docstring)."""
    from sympy import QQ, ZZ, Expr, Poly  # type: ignore[import-untyped]  # lazy: sympy

    if not (isinstance(a, Expr) and isinstance(b, Expr)):
        return False
    try:
        diff = a - b
        symbols = diff.free_symbols
        if not symbols:
            value = diff.evalf(DISPROOF_DIGITS)
            if not value.is_number or value.is_finite is not True:
                return False
            real, imag = value.as_real_imag()
            return bool(abs(real) > DISPROOF_MARGIN or abs(imag) > DISPROOF_MARGIN)
        if not diff.is_polynomial(*symbols):
            return False
        poly = Poly(diff, *sorted(symbols, key=str))
        return poly.domain in (ZZ, QQ) and not poly.is_zero
    except Exception:  # noqa: BLE001 - undecided: simplify decides, as it always did
        return False


def _sll_first_parser_factory() -> bool:
    try:
        from antlr4.atn.PredictionMode import PredictionMode  # type: ignore[import-untyped]  # lazy: antlr4
        from latex2sympy2_extended.latex2sympy2 import _Latex2Sympy  # type: ignore[import-untyped]  # lazy: latex2sympy2_extended
    except ImportError:
        return False
    original: Callable[[Any, str], Any] | None = getattr(_Latex2Sympy, "create_parser", None)
    if original is None:
        return False

    def create_parser(self: Any, latex_str: str) -> Any:
        parser = original(self, latex_str)
        if not _ON.get():
            return parser
        parser._interp.predictionMode = PredictionMode.SLL
        sll_math = parser.math

        def math() -> Any:
            try:
                return sll_math()
            except Exception:  # noqa: BLE001 - a real error or one that needs LL: LL decides
                return original(self, latex_str).math()

        parser.math = math
        return parser

    _Latex2Sympy.create_parser = create_parser
    return True


def _disproof_before_simplify() -> bool:
    try:
        from math_verify import grader  # lazy: math_verify
    except ImportError:
        return False
    original: Callable[[Any, Any], bool] | None = getattr(grader, "sympy_symbolic_eq", None)
    if original is None:
        return False

    def sympy_symbolic_eq(a: Any, b: Any) -> bool:
        if _ON.get() and surely_unequal(a, b):
            return False
        return original(a, b)

    grader.sympy_symbolic_eq = sympy_symbolic_eq
    return True


def installed() -> dict[str, bool]:
    """Which routes are on in this process: ``{"sll_first": ..., "disproof": ...}`` (installs them once)."""
    if not _INSTALLED:
        _INSTALLED.update(sll_first=_sll_first_parser_factory(), disproof=_disproof_before_simplify())
    return dict(_INSTALLED)


@contextlib.contextmanager
def fast_paths() -> Iterator[None]:
    """math-verify's parses and comparisons in this block take the routes of the module docstring."""
    installed()
    token = _ON.set(True)
    try:
        yield
    finally:
        _ON.reset(token)
