"""The fast math path gives math-verify's verdicts on every shipped benchmark answer, right and shifted.

For each gold answer of MATH500, AIME24, AIME25 and AMC23 (all of them), five responses: the right
answer boxed (the exact-match path), the next problem's and the 7th next problem's answers boxed
(shifted, usually wrong answers of another kind: the sympy path, where ``math_fast`` disproves before
``simplify``), the right answer as inline ``$...$`` without a box (math-verify's own anchors) and the
right answer in braces inside the box (antlr reads a set, where its LL prediction needs the full
context). The reference is ``check_answer``, the plain recipe (gold parsed per call, whole parse,
``verify``, math-verify untouched); ``Scorer`` takes ``math_fast``'s routes.
"""

from __future__ import annotations

import asyncio
import json
from fractions import Fraction

import pytest
from mucode.eval.data import MATH_DATA_DIR

from mucode.rewards import math_worker
from mucode.rewards.math import MathSpec
from mucode.rewards.math_pool import MathWorkerPool
from mucode.rewards.math_worker import (
    Scorer,
    _numbers_verdict,
    _parsed_number,
    _simple_number,
    check_answer,
    final_answer,
)

SHIPPED = {
    "math500.jsonl": "answer",
    "aime24.json": "expected_answer",
    "aime25.json": "answer",
    "amc23.json": "answer",
}


def _golds(name: str, field: str) -> list[str]:
    text = (MATH_DATA_DIR / name).read_text(encoding="utf-8")
    return [
        MathSpec.model_validate({"answer": json.loads(line)[field]}).answer
        for line in text.splitlines()
        if line
    ]


def _cases() -> list[tuple[str, str]]:
    cases = []
    for name, field in SHIPPED.items():
        golds = _golds(name, field)
        for i, gold in enumerate(golds):
            shifted = golds[(i + 1) % len(golds)]
            further = golds[(i + 7) % len(golds)]
            cases += [
                (gold, f"Adding up, the answer is \\boxed{{{gold}}}."),
                (gold, f"So we get \\boxed{{{shifted}}}"),
                (gold, f"Hence \\boxed{{{further}}}."),
                (gold, f"The final answer is ${gold}$."),
                (gold, f"So it is \\boxed{{{{{gold}}}}}."),  # a set to antlr: LL needs the full context
            ]
    return cases


@pytest.fixture(scope="module")
def reference() -> list[tuple[str, str, str]]:
    cases = _cases()
    assert len(cases) == 5 * (500 + 30 + 30 + 40)
    return [(gold, response, check_answer(gold, response)["status"]) for gold, response in cases]


def test_scorer_matches_math_verify_on_every_shipped_answer(reference: list[tuple[str, str, str]]) -> None:
    scorer = Scorer()
    got = [scorer.score(gold, final_answer(response))["status"] for gold, response, _ in reference]
    mismatches = [
        (g, r, want, have) for (g, r, want), have in zip(reference, got, strict=True) if want != have
    ]
    assert not mismatches, mismatches[:10]
    statuses = {s for *_, s in reference}
    assert {"correct", "wrong_answer"} <= statuses  # the cases exercise both verdicts


def test_a_recurring_answer_is_parsed_once_and_judged_against_each_gold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The answer LRU: one boxed answer scored against several golds (as another problem's answer
    recurs in a stage) gets check_answer's verdict every time, from one parse."""
    golds = _golds("math500.jsonl", "answer")[:120]
    cases = [
        (golds[(i + k) % len(golds)], f"\\boxed{{{golds[i]}}}") for i in range(len(golds)) for k in (1, 2, 3)
    ]
    want = [check_answer(gold, text)["status"] for gold, text in cases]
    parses: list[str] = []
    real = math_worker._parse_text
    monkeypatch.setattr(math_worker, "_parse_text", lambda text: parses.append(text) or real(text))
    scorer = Scorer()
    got = [scorer.score(gold, text)["status"] for gold, text in cases]
    assert got == want
    assert parses and len(parses) == len(set(parses)) == len(scorer._answers)  # each text once
    assert {"correct", "wrong_answer"} <= set(want)


def test_pool_matches_math_verify_with_every_answer_sent_twice(reference: list[tuple[str, str, str]]) -> None:
    """Through the worker processes: chunks, shared in-flight items and remembered verdicts."""

    async def run() -> tuple[list[str], int, int]:
        pool = MathWorkerPool(2, timeout_s=30.0)
        await pool.start()
        try:
            outs = await asyncio.gather(*(pool.check(g, r) for _ in range(2) for g, r, _ in reference))
            return [o.status for o in outs], pool.sent, pool.shared
        finally:
            await pool.close()

    statuses, sent, shared = asyncio.run(run())
    want = [s for *_, s in reference] * 2
    mismatches = [(i, w, h) for i, (w, h) in enumerate(zip(want, statuses, strict=True)) if w != h]
    assert not mismatches, mismatches[:10]
    distinct = len({(g, final_answer(r)) for g, r, _ in reference})
    assert sent == distinct and shared == len(want) - distinct


def test_text_without_latex_marks_is_no_answer_for_math_verify_too() -> None:
    # The shortcut's premise: no "$", "\\" or "[" means math-verify finds nothing to parse.
    for text in [
        "The answer is 42.",
        "answer: 7 (final answer is 7). I hope it is correct.",
        "1/2 = 0.5",
        "x = {3}",
    ]:
        assert check_answer("42", text)["status"] == "no_answer"
        assert Scorer().score("42", final_answer(text))["status"] == "no_answer"


def test_integer_shortcut_matches_math_verify() -> None:
    """Every integer gold of the shipped sets against itself written otherwise and its neighbours."""
    golds = sorted(
        {g for name, field in SHIPPED.items() for g in _golds(name, field) if g.lstrip("-").isdigit()}
    )
    assert len(golds) > 100
    scorer = Scorer()
    mismatches = []
    for gold in golds:
        n = int(gold)
        for answer in (f"0{gold}", str(n + 1), str(n - 1), str(-n), str(10 * n), "0", "-0"):
            text = f"\\boxed{{{answer}}}"
            want, have = check_answer(gold, text)["status"], scorer.score(gold, text)["status"]
            if want != have:
                mismatches.append((gold, answer, want, have))
    assert not mismatches, mismatches[:10]


def _number_answers(gold: str, value: Fraction) -> list[str]:
    """Other spellings of ``value`` and near or far misses, all simple numbers."""
    p, q = value.numerator, value.denominator
    answers = [
        f"{{{gold}}}",
        f"\\frac{{{2 * p}}}{{{2 * q}}}",
        f"\\dfrac{{{p}}}{{{q}}}",
        f"-\\frac{{{-p}}}{{{q}}}",
    ]
    answers += [str(p + q) if q == 1 else f"\\frac{{{p + 1}}}{{{q}}}", f"\\tfrac{{{p}}}{{{q + 1}}}"]
    if 10**6 % q == 0 and abs(value) < 10**5:  # a terminating decimal: itself, and close and far misses
        exact = f"{float(value):.6f}"
        answers += [exact, exact.rstrip("0"), f"{float(value) + 1e-6:.6f}", f"{float(value) + 0.001:.6f}"]
    else:
        answers += [f"{float(value):.6f}", f"{float(value):.3f}", f"{float(value):.1f}"]
    return answers


def test_number_shortcut_matches_math_verify() -> None:
    """Every simple-number gold (fractions and decimals all, every 4th integer) against equal
    spellings, near and far misses, the next simple golds; and a grid of close decimals."""
    golds = sorted({g for name, field in SHIPPED.items() for g in _golds(name, field)})
    simple = [(g, v[0]) for g in golds if (v := _simple_number(g)) is not None]
    fractional = [(g, v) for g, v in simple if v.denominator != 1 or "." in g]
    whole = [(g, v) for g, v in simple if (g, v) not in fractional][::4]
    assert len(fractional) > 20 and len(whole) > 25
    cases = []
    for i, (gold, value) in enumerate(fractional + whole):
        cases += [(gold, a) for a in _number_answers(gold, value)]
        cases += [(gold, other) for other, _ in fractional[i + 1 : i + 4]]
    for gold in ("\\frac{1}{3}", "0.5", "\\frac{2}{3}", "0.125", "-0.75", "12.5"):
        cases += [(gold, a) for a in ("0.333333", "0.333", "0.5", "0.500001", "0.499999", "0.666667")]
        cases += [(gold, a) for a in ("0.125", "0.1250", "-0.75", "12.50", "12.500009", "\\frac{25}{2}")]
    scorer = Scorer()
    mismatches = []
    shortcut = 0
    for gold, answer in cases:
        text = f"\\boxed{{{answer}}}"
        want, have = check_answer(gold, text)["status"], scorer.score(gold, text)["status"]
        shortcut += _numbers_verdict(gold, answer) is not None
        if want != have:
            mismatches.append((gold, answer, want, have))
    assert not mismatches, mismatches[:10]
    assert shortcut > 0.8 * len(cases)  # the cases do exercise the shortcut


def test_parsed_number_is_math_verifys_parse() -> None:
    """A boxed integer or fraction against every gold that is not a simple number (the shortcut
    builds math-verify's parse and lets its verify decide): Scorer and check_answer agree, and the
    built parse equals math-verify's own."""
    from math_verify import LatexExtractionConfig, parse

    answers = ["3", "-3", "0", "12", "\\frac{1}{2}", "-\\frac{3}{4}", "\\frac{6}{8}", "\\frac{-1}{2}", "2"]
    for answer in answers:
        mine = _parsed_number(answer)
        theirs = parse(
            f"\\boxed{{{answer}}}", [LatexExtractionConfig(boxed_match_priority=0)], parsing_timeout=None
        )
        assert mine == theirs and [type(x) for x in mine or []] == [type(x) for x in theirs], answer
    golds = sorted(
        {g for name, field in SHIPPED.items() for g in _golds(name, field) if _simple_number(g) is None}
    )
    assert len(golds) > 100
    scorer = Scorer()
    mismatches = []
    for i, gold in enumerate(golds):
        for answer in (answers[i % len(answers)], answers[(i + 4) % len(answers)]):
            text = f"\\boxed{{{answer}}}"
            want, have = check_answer(gold, text)["status"], scorer.score(gold, text)["status"]
            if want != have:
                mismatches.append((gold, answer, want, have))
    assert not mismatches, mismatches[:10]
