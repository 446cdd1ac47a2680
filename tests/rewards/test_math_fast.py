"""math_fast's two routes: on only inside ``fast_paths()``, and never a verdict math-verify would not give.

The verdicts on every shipped benchmark answer are pinned in test_math_verdicts.py; here each route is
tried where it could go wrong: a text SLL cannot parse, texts nothing parses, and answers equal to the
gold in disguise (a disproof there would turn a right answer wrong).
"""

from __future__ import annotations

import pytest
from antlr4.atn.PredictionMode import PredictionMode
from latex2sympy2_extended.latex2sympy2 import _Latex2Sympy
from math_verify import grader
from sympy import Integer, Rational, Symbol, cos, pi, sin, sqrt

from mucode.rewards import math_fast, math_worker
from mucode.rewards.math_fast import fast_paths, surely_unequal
from mucode.rewards.math_worker import Scorer, check_answer


def test_both_routes_install_on_the_pinned_libraries() -> None:
    assert math_fast.installed() == {"sll_first": True, "disproof": True}


def test_sll_first_only_inside_fast_paths_and_ll_where_sll_cannot_parse() -> None:
    """A text SLL rejects but LL parses (a polynomial, from MATH500) is parsed by LL: math-verify's result."""
    text = "\\boxed{x^3+3x-6}"
    plain = math_worker._parse_text(text)
    assert isinstance(plain, list) and plain, plain
    with fast_paths():
        assert _Latex2Sympy().create_parser("1")._interp.predictionMode == PredictionMode.SLL
        assert math_worker._parse_text(text) == plain
    assert _Latex2Sympy().create_parser("1")._interp.predictionMode == PredictionMode.LL
    sll_only = _Latex2Sympy().create_parser("x^3+3x-6")
    sll_only._interp.predictionMode = PredictionMode.SLL
    with pytest.raises(Exception, match="expected"):  # SLL alone fails here: the fallback is needed
        sll_only.math()
    assert Scorer().score("x^3+3x-6", "\\boxed{x^3 + 3x - 6}")["status"] == "correct"


def test_sll_first_fails_as_math_verify_fails() -> None:
    """Texts neither prediction parses give math-verify's own error, from the LL parse."""
    for text in ["\\boxed{{864}", "\\boxed{{\\frac{270}{7}}", "\\boxed{x +* 2}"]:
        plain = math_worker._parse_text(text)
        with fast_paths():
            assert math_worker._parse_text(text) == plain, text


x, y = Symbol("x"), Symbol("y")
n = Symbol("n", integer=True)
p = Symbol("p", positive=True)

EQUAL_IN_DISGUISE = [
    (sqrt(3) / 2, 3 / (2 * sqrt(3))),  # constants: evaluated, within the margin
    (Integer(1), (sqrt(2) + 1) * (sqrt(2) - 1)),
    (x, x * (sqrt(2) + 1) * (sqrt(2) - 1)),  # a polynomial whose coefficient is 1 only after algebra
    (Integer(1), sin(x) ** 2 + cos(x) ** 2),  # not a polynomial in x
    (Integer(1), (-1) ** (2 * n)),  # an identity only for integers
    (p, sqrt(p**2)),  # an identity only for positive values
    (pi, Rational(355, 113) + (pi - Rational(355, 113))),
]
SURELY_UNEQUAL = [
    (Integer(2000), x**5 - x**4 + x**3 - x**2 + x - 1),
    (Integer(21), (x + 5) * (y + 2)),
    (x**3 + 3 * x - 6, Integer(9901)),
    (sqrt(2), Rational(1414, 1000)),
    (pi, Integer(3)),
]


def test_no_disproof_of_what_simplify_finds_equal() -> None:
    for a, b in EQUAL_IN_DISGUISE:
        assert not surely_unequal(a, b), (a, b)
        assert not surely_unequal(b, a), (b, a)


def test_disproves_what_differs_and_agrees_with_simplify() -> None:
    for a, b in SURELY_UNEQUAL:
        assert surely_unequal(a, b), (a, b)
        assert not grader.sympy_symbolic_eq(a, b)  # outside fast_paths: math-verify's own simplify


def test_disproof_only_inside_fast_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside a ``fast_paths`` block (check_answer, the reference) math-verify's comparison runs as is."""
    math_fast.installed()
    calls: list[object] = []
    real = math_fast.surely_unequal
    monkeypatch.setattr(math_fast, "surely_unequal", lambda a, b: calls.append(a) or real(a, b))
    assert check_answer("2000", "\\boxed{x^5 - x^4 + x^3 - x^2 + x - 1}")["status"] == "wrong_answer"
    assert calls == []
    assert Scorer().score("2000", "\\boxed{x^5 - x^4 + x^3 - x^2 + x - 1}")["status"] == "wrong_answer"
    assert calls


@pytest.mark.parametrize(
    ("gold", "answer"),
    [
        ("\\frac{\\sqrt{3}}{2}", "\\frac{3}{2\\sqrt{3}}"),
        ("1", "\\sin^2 x + \\cos^2 x"),
        ("2\\sqrt{2}", "\\sqrt{8}"),
        ("x^2 - 1", "(x-1)(x+1)"),
        ("\\frac{1}{\\sqrt{2}}", "\\frac{\\sqrt{2}}{2}"),
        ("2000", "x^5 - x^4 + x^3 - x^2 + x - 1"),
        ("\\pi", "3.14"),
        ("\\sqrt{19}", "4.3589"),
    ],
)
def test_scorer_gives_math_verifys_verdict_on_forms_of_one_value(gold: str, answer: str) -> None:
    text = f"\\boxed{{{answer}}}"
    assert Scorer().score(gold, text)["status"] == check_answer(gold, text)["status"]
