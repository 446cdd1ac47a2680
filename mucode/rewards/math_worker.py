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
"""

from __future__ import annotations

import json
import logging
import os
import resource
import signal
import sys
from typing import Any

__all__ = ["check_answer", "last_boxed", "worker_main"]


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


def check_answer(gold: str, response: str) -> dict[str, Any]:
    """Scores one response against a gold answer. Returns ``{"status": ..., "details": {...}}``.

    Runs without any timeout of its own: call it under ``ItemTimeout`` protection or in a pool.
    """
    from math_verify import LatexExtractionConfig, parse, verify  # lazy: math_verify

    gold_error: str | None = None
    try:
        gold_parsed = parse(
            "\\boxed{" + gold + "}", [LatexExtractionConfig()], parsing_timeout=None, raise_on_error=True
        )
    except Exception as exc:  # noqa: BLE001 - any parser failure on the gold is the data set's problem
        gold_parsed, gold_error = [], f"{type(exc).__name__}: {exc}"
    if not gold_parsed:
        return {
            "status": "verifier_error",
            "details": {
                "error": f"the gold answer {gold!r} could not be parsed by math-verify"
                + (f" ({gold_error})" if gold_error else "")
                + "; fix the data set's answer (e.g. write it as LaTeX)"
            },
        }
    boxed = last_boxed(response)
    try:
        parsed = parse(
            response if boxed is None else boxed,
            [LatexExtractionConfig(boxed_match_priority=0)],
            parsing_timeout=None,
            raise_on_error=True,
        )
    except Exception as exc:  # noqa: BLE001 - an unparsable response is "no answer", not a crash
        return {"status": "no_answer", "details": {"parse_error": f"{type(exc).__name__}: {exc}"[:500]}}
    if not parsed:
        return {"status": "no_answer", "details": {}}
    extracted = str(parsed[-1])[:1000]
    ok = verify(gold_parsed, parsed, timeout_seconds=None)
    return {"status": "correct" if ok else "wrong_answer", "details": {"extracted": extracted}}


def _check_with_alarm(gold: str, response: str, timeout_s: float) -> dict[str, Any]:
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        return check_answer(gold, response)
    except ItemTimeout:
        return {"status": "time_limit", "details": {"error": f"math-verify took over {timeout_s} s"}}
    except MemoryError:
        return {"status": "memory_limit", "details": {"error": "math-verify ran out of its memory limit"}}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def worker_main(memory_limit_mb: int) -> None:
    """Entry point of one worker process: answers JSON-line requests on stdin, one per line.

    Request: ``{"gold": str, "response": str, "timeout_s": float}``; reply: one JSON line on the
    original stdout (fd 1 is pointed at stderr so a stray print cannot corrupt the protocol).
    """
    out = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    if memory_limit_mb > 0:
        limit = memory_limit_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when this process ends
    check_answer("1", "\\boxed{1}")  # import and warm sympy/antlr before announcing readiness
    out.write('"ready"\n')
    for line in sys.stdin:
        try:
            request = json.loads(line)
            reply = _check_with_alarm(
                str(request["gold"]), str(request["response"]), float(request["timeout_s"])
            )
        except Exception as exc:  # noqa: BLE001 - report, keep serving
            reply = {"status": "verifier_error", "details": {"error": f"{type(exc).__name__}: {exc}"[:500]}}
        out.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    worker_main(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
