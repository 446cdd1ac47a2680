"""The child side of the math worker pool: math-verify in a process of its own.

math-verify's own timeouts use SIGALRM, which raises ``ValueError`` outside the main thread and, with
a float value, silently returns ``[]``/False. So its internal timeouts are switched off here and each
item instead runs under one ``setitimer`` alarm in this process's main thread (an ``ItemTimeout``,
reported as ``time_limit``). The parent adds an outer wall-clock kill for the cases a signal cannot
interrupt (a long C-level computation inside sympy or gmpy).

Parsing follows the measured recipe in NOTES.md: the gold answer is parsed as ``\\boxed{<answer>}``
with the default ``LatexExtractionConfig()`` and the response with
``LatexExtractionConfig(boxed_match_priority=0)``; ``verify`` gets the gold first (it is not
symmetric). Deviation: when the response has a ``\\boxed{}``, only its last one is parsed (see
``last_boxed``); otherwise math-verify's own anchors (``$...$``, "final answer is") apply.

``check_answer`` is that recipe done plainly (the reference the tests and benchmarks compare with).
A worker scores with ``Scorer``, which gives the same verdicts with less work:

- each gold answer is parsed once per worker (an LRU of parsed golds; a stage's G responses share one);
- ``final_answer`` (the parent calls it) cuts the response down to what is parsed: its last box, else
  the whole text; a text with none of ``$``, ``\\`` or ``[`` is ``no_answer`` without math-verify,
  since every LaTeX pattern math-verify matches needs one of them (``$..$``, ``\\[..\\]``, ``\\(..\\)``,
  `` [..] ``, ``\\boxed``, ``\\frac``);
- a final answer that is exactly ``\\boxed{<gold>}`` is ``correct`` without sympy (math-verify would
  parse it as the gold itself); its ``extracted`` detail is then the parsed gold;
- a plain integer in a box (``-?[0-9]{1,12}``, nothing else) against an integer gold is compared as
  integers, without math-verify (which parses both as sympy ``Integer`` and compares them exactly);
- a simple number in a box against a simple-number gold (``_simple_number``: an integer, a decimal of
  at most 6+6 digits, ``\\frac{p}{q}``/``\\dfrac``/``\\tfrac`` of integers, optionally negated or in one
  pair of braces) is decided exactly where math-verify's own comparison is certain: two rationals
  (sympy ``Rational``: exact equality), or a decimal (math-verify reads ``0.5`` as ``1/2``, and may
  round floats to 6 places) equal to the other value exactly or more than 1e-5 away from it; anything
  closer goes to math-verify;
- a boxed plain integer or ``\\frac`` of integers against any other gold skips math-verify's parse
  (antlr): ``_parsed_number`` builds the ``[value, text]`` its parse returns, and its ``verify`` decides;
- any other boxed answer is parsed once per worker (an LRU of parsed answers, whatever the gold: the
  parse does not depend on it), so a wrong answer that recurs across prompts costs one parse.

Requests are chunks: one line holds a list of ``[gold, final answer, timeout_s]`` items; the reply is
one line per item, written as each is done, so the parent can time every item on its own.
"""

from __future__ import annotations

import collections
import fractions
import json
import logging
import os
import re
import resource
import signal
import sys
from typing import Any

from mucode.rewards.math_fast import fast_paths

__all__ = ["Scorer", "check_answer", "final_answer", "last_boxed", "worker_main"]

_LATEX_MARKS = ("$", "\\", "[")
"""Every LaTeX pattern of math-verify's ``LatexExtractionConfig`` needs one of these characters."""
_INTEGER = re.compile(r"-?[0-9]{1,12}")
"""A plain integer: math-verify parses it as ``[Integer(n), text]`` and compares integers exactly."""
_WHOLE = r"(?:0|[1-9][0-9]{0,11})"
_SIMPLE = re.compile(
    rf"(?:(?P<int>-?{_WHOLE})|(?P<dec>-?(?:0|[1-9][0-9]{{0,5}})\.[0-9]{{1,6}})"
    rf"|(?P<neg>-?)\\[dt]?frac\{{(?P<p>-?{_WHOLE})\}}\{{(?P<q>[1-9][0-9]{{0,11}})\}})"
)
_FAR = fractions.Fraction(1, 10**5)
ANSWER_CACHE_CHARS = 1000  # boxed answers longer than this are parsed each time (and not kept)
_PARSED_INT = re.compile(r"-?[1-9][0-9]{0,11}|0")
_PARSED_FRAC = re.compile(r"(-?)\\frac\{(-?[1-9][0-9]{0,11})\}\{([1-9][0-9]{0,11})\}")


class ItemTimeout(BaseException):
    """Raised by the per-item alarm. A BaseException so library ``except Exception`` blocks let it through."""


def _on_alarm(signum: int, frame: object) -> None:
    raise ItemTimeout()


def last_boxed(text: str) -> str | None:
    """The last ``\\boxed{...}`` (or ``\\fbox{...}``) of ``text`` with balanced braces, or None.

    math-verify on a whole response joins several boxes into a set (``\\boxed{2} ... \\boxed{3}``
    parses as ``{2, 3}``); the final answer is the last box, so only that one is handed to it.
    """
    start = max(text.rfind("\\boxed{"), text.rfind("\\fbox{"))
    if start < 0:
        return None
    depth = 0
    for i in range(text.index("{", start), len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    return None  # unbalanced: let math-verify look at the whole response


def final_answer(response: str) -> str:
    """What is parsed of ``response``: its last box (``last_boxed``), else the whole text."""
    boxed = last_boxed(response)
    return response if boxed is None else boxed


def _simple_number(text: str) -> tuple[fractions.Fraction, bool] | None:
    """(value, written as a decimal?) of a simple number (see the module docstring), else None."""
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    m = _SIMPLE.fullmatch(text)
    if m is None:
        return None
    if m["int"] is not None:
        return fractions.Fraction(int(m["int"])), False
    if m["dec"] is not None:
        return fractions.Fraction(m["dec"]), True
    value = fractions.Fraction(int(m["p"]), int(m["q"]))
    return (-value if m["neg"] else value), False


def _numbers_verdict(gold: str, inner: str) -> bool | None:
    """math-verify's verdict on two simple numbers where it is certain, else None."""
    answer = _simple_number(inner)
    expected = _simple_number(gold) if answer is not None else None
    if answer is None or expected is None:
        return None
    (x, x_decimal), (y, y_decimal) = answer, expected
    if x == y:
        return True
    if not (x_decimal or y_decimal):
        return False
    return False if abs(x - y) > _FAR else None


def _parsed_number(inner: str) -> list[Any] | None:
    """math-verify's parse of ``\\boxed{inner}`` for a plain integer or a ``\\frac`` of integers that is
    not a whole number (``[Integer(n), inner]``, ``[Rational(p, q), inner]``: the value and the text
    as math-verify returns them), else None."""
    from sympy import Integer, Rational  # type: ignore[import-untyped]  # lazy: sympy

    if _PARSED_INT.fullmatch(inner):
        return [Integer(int(inner)), inner]
    m = _PARSED_FRAC.fullmatch(inner)
    if m is None or (m[1] and m[2].startswith("-")) or int(m[2]) % int(m[3]) == 0:
        return None
    value = Rational(int(m[2]), int(m[3]))
    return [-value if m[1] else value, inner]


def _verify(gold_parsed: list[Any], parsed: list[Any]) -> bool:
    from math_verify import verify  # lazy: math_verify

    return bool(verify(gold_parsed, parsed, timeout_seconds=None))


def _parse_gold(gold: str) -> tuple[list[Any], str | None]:
    """math-verify's parse of ``\\boxed{gold}`` and, when it fails, why (a data set problem)."""
    from math_verify import LatexExtractionConfig, parse  # lazy: math_verify

    try:
        return parse(
            "\\boxed{" + gold + "}", [LatexExtractionConfig()], parsing_timeout=None, raise_on_error=True
        ), None
    except Exception as exc:  # noqa: BLE001 - any parser failure on the gold is the data set's problem
        return [], f"{type(exc).__name__}: {exc}"


def _gold_error(gold: str, error: str | None) -> dict[str, Any]:
    return {
        "status": "verifier_error",
        "details": {
            "error": f"the gold answer {gold!r} could not be parsed by math-verify"
            + (f" ({error})" if error else "")
            + "; fix the data set's answer (e.g. write it as LaTeX)"
        },
    }


def _parse_text(text: str) -> list[Any] | str:
    """math-verify's parse of a final-answer text, or why it failed (a parse error's text)."""
    from math_verify import LatexExtractionConfig, parse  # lazy: math_verify

    try:
        return list(
            parse(
                text,
                [LatexExtractionConfig(boxed_match_priority=0)],
                parsing_timeout=None,
                raise_on_error=True,
            )
        )
    except Exception as exc:  # noqa: BLE001 - an unparsable response is "no answer", not a crash
        return f"{type(exc).__name__}: {exc}"[:500]


def _judge_parsed(gold_parsed: list[Any], parsed: list[Any] | str) -> dict[str, Any]:
    if isinstance(parsed, str):
        return {"status": "no_answer", "details": {"parse_error": parsed}}
    if not parsed:
        return {"status": "no_answer", "details": {}}
    ok = _verify(gold_parsed, parsed)
    return {"status": "correct" if ok else "wrong_answer", "details": {"extracted": str(parsed[-1])[:1000]}}


def _score_text(gold_parsed: list[Any], text: str) -> dict[str, Any]:
    """math-verify on the final-answer text ``text`` against a parsed gold."""
    return _judge_parsed(gold_parsed, _parse_text(text))


def check_answer(gold: str, response: str) -> dict[str, Any]:
    """Scores one response against a gold answer, plainly. Returns ``{"status": ..., "details": {...}}``.

    Runs without any timeout of its own: call it under ``ItemTimeout`` protection or in a pool.
    """
    gold_parsed, error = _parse_gold(gold)
    if not gold_parsed:
        return _gold_error(gold, error)
    return _score_text(gold_parsed, final_answer(response))


class Scorer:
    """``check_answer``'s verdicts with each gold parsed once and the shortcuts of the module docstring.

    ``score(gold, text)`` takes the final-answer text (``final_answer(response)``)."""

    def __init__(self, max_golds: int = 4096, max_answers: int = 4096) -> None:
        self.max_golds = max_golds
        self.max_answers = max_answers
        self._golds: collections.OrderedDict[str, tuple[list[Any], str | None]] = collections.OrderedDict()
        self._answers: collections.OrderedDict[str, list[Any] | str] = collections.OrderedDict()

    def answer(self, text: str) -> list[Any] | str:
        """``_parse_text(text)``, from an LRU of boxed answers: a wrong answer recurs across prompts
        (another problem's answer, a common slip), and the parse does not depend on the gold."""
        if not text.startswith("\\boxed{") or len(text) > ANSWER_CACHE_CHARS:
            return _parse_text(text)
        entry = self._answers.get(text)
        if entry is None:
            entry = self._answers[text] = _parse_text(text)  # a timeout raises: nothing is kept
            if len(self._answers) > self.max_answers:
                self._answers.popitem(last=False)
        else:
            self._answers.move_to_end(text)
        return entry

    def gold(self, gold: str) -> tuple[list[Any], str | None]:
        entry = self._golds.get(gold)
        if entry is None:
            entry = self._golds[gold] = _parse_gold(gold)
            if len(self._golds) > self.max_golds:
                self._golds.popitem(last=False)
        else:
            self._golds.move_to_end(gold)
        return entry

    def score(self, gold: str, text: str) -> dict[str, Any]:
        with fast_paths():
            return self._score(gold, text)

    def _score(self, gold: str, text: str) -> dict[str, Any]:
        inner = text[7:-1] if text.startswith("\\boxed{") and text.endswith("}") else None
        if inner is not None and _INTEGER.fullmatch(inner) and _INTEGER.fullmatch(gold):
            return {
                "status": "correct" if int(inner) == int(gold) else "wrong_answer",
                "details": {"extracted": inner},
            }
        same = _numbers_verdict(gold, inner) if inner is not None else None
        if same is not None:
            return {"status": "correct" if same else "wrong_answer", "details": {"extracted": inner}}
        gold_parsed, error = self.gold(gold)
        if not gold_parsed:
            return _gold_error(gold, error)
        if not any(mark in text for mark in _LATEX_MARKS):
            return {"status": "no_answer", "details": {}}
        if text == "\\boxed{" + gold + "}":
            return {"status": "correct", "details": {"extracted": str(gold_parsed[-1])[:1000]}}
        parsed = _parsed_number(inner) if inner is not None else None
        if parsed is not None:  # what math-verify's parse gives, without antlr; its verify decides
            ok = _verify(gold_parsed, parsed)
            return {"status": "correct" if ok else "wrong_answer", "details": {"extracted": inner}}
        return _judge_parsed(gold_parsed, self.answer(text))


def _check_with_alarm(scorer: Scorer, gold: str, text: str, timeout_s: float) -> dict[str, Any]:
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        return scorer.score(gold, text)
    except ItemTimeout:
        return {"status": "time_limit", "details": {"error": f"math-verify took over {timeout_s} s"}}
    except MemoryError:
        return {"status": "memory_limit", "details": {"error": "math-verify ran out of its memory limit"}}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _serve(scorer: Scorer, line: str, out: Any) -> None:
    """Answers one request line (a list of ``[gold, text, timeout_s]``), one reply line per item."""
    try:
        request = json.loads(line)
        items = [(str(gold), str(text), float(limit)) for gold, text, limit in request]
    except Exception as exc:  # noqa: BLE001 - the parent only sends its own lines: a bug, said once per item
        error = json.dumps({"status": "verifier_error", "details": {"error": f"bad request: {exc!r}"[:500]}})
        out.write((error + "\n") * (line.count("],[") + 1))  # the parent counts one reply per item
        return
    for gold, text, limit in items:
        try:
            reply = _check_with_alarm(scorer, gold, text, limit)
        except Exception as exc:  # noqa: BLE001 - report, keep serving
            reply = {"status": "verifier_error", "details": {"error": f"{type(exc).__name__}: {exc}"[:500]}}
        out.write(json.dumps(reply) + "\n")


def worker_main(memory_limit_mb: int) -> None:
    """Entry point of one worker process: answers JSON-line requests on stdin.

    Request: one line ``[[gold, text, timeout_s], ...]`` (``text`` is ``final_answer(response)``);
    reply: one JSON line ``{"status": ..., "details": ...}`` per item on the original stdout (fd 1 is
    pointed at stderr so a stray print cannot corrupt the protocol), line-buffered so each item's
    reply leaves as it is done.
    """
    out = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    if memory_limit_mb > 0:
        limit = memory_limit_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when this process ends
    check_answer("1", "\\boxed{2}")  # import and warm sympy/antlr before announcing readiness
    scorer = Scorer()
    out.write('"ready"\n')
    for line in sys.stdin:
        _serve(scorer, line, out)


if __name__ == "__main__":
    worker_main(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
