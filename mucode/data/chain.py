"""The study task ``chain`` (``mucode study``): follow a fixed permutation for a number of steps.

A prompt names a start symbol ``s<x>`` of ``SYMBOLS`` symbols; the answer is a format token and then
the chain ``π(x), π²(x), …, π^STEPS(x)`` of one fixed random permutation π (drawn once, seed
``TASK_SEED``), e.g. ``A s17 s3 s40 …``. Only format ``A`` is scored; format ``B`` (the same chain
after a ``B``) always fails: the toy's analogue of a base model's broken answer format. Every step is
the same skill (one lookup in π), so good and bad answers share it: an early mistake makes the rest of
the answer a correct continuation of a wrong prefix. Reward 1 iff the format is ``A`` and all
``STEPS`` symbols are right (``mucode.rewards.chain``).

No split: the task has ``SYMBOLS`` prompts, one per start symbol, and the study's held-out figure is
the current policy's fresh samples on all of them (a held-out *start* would test whether a 1-layer
model generalises a lookup to a position it never trained, not the skill RL sharpens).
:func:`sl_answer` draws the supervised warm-up's targets (``mucode.study.base``): a step right with
probability ``p_step`` (else another symbol, from which the chain continues), format ``A`` with
probability ``p_format``. Pure Python; no download.

The **code form** (``form="code"``, the study's ``--task chain-code``) asks for the same answer as a
program whose output it is: ``print( 'A', 's17', 's3', … )`` (one token per word, so the policy's
decisions are the plain form's, two words longer), judged by mucode's ``code`` reward program in the
sandbox (an stdio test expecting ``A s17 s3 …``; format ``'B',`` prints ``B …`` and fails).
:func:`code_answer_words` is the strict pure reading of such a program (the held-out figure's judge,
which must not run a sandbox per sample): exactly ``print(``, ``1 + STEPS`` quoted words, ``)``.
"""

from __future__ import annotations

import random
from typing import Any

from mucode.data.types import TaskRecord

__all__ = [
    "CODE_CLOSE",
    "CODE_OPEN",
    "FORMATS",
    "FORMS",
    "PROGRAM",
    "STOP",
    "STEPS",
    "SYMBOLS",
    "chain_answer",
    "chain_records",
    "code_answer_words",
    "code_word",
    "form_words",
    "permutation",
    "response_budget",
    "response_words",
    "to_form",
    "sl_answer",
    "symbol",
]

SYMBOLS = 64
STEPS = 16
TASK_SEED = 0
PROGRAM = "chain"
FORMATS = ("A", "B")
"""The scored format first; the second always fails."""
FORMS = ("plain", "code")
"""How an answer is written: its words, or a program printing them."""
CODE_OPEN, CODE_CLOSE = "print(", ")"
CODE_PROGRAM = "code"
STOP = True
"""Whether an answer ends with the stop token: it does, and the reward requires it (``mucode.rewards.chain``:
nothing may follow the answer). The stop token is the part of the skill good and bad answers share
most plainly (every answer stops after the same number of words). Measured on seed 0 (docs/study.md):
without a stop token (fixed-length answers) no variant collapses in stage 0 and the veto makes no
difference; with a stop token that the reward ignored, the policy lost *when to stop* in every
variant after stage 0 (rollouts shrank from 17.9 to 9–12 tokens)."""


def symbol(index: int) -> str:
    return f"s{index}"


def permutation(seed: int = TASK_SEED, size: int = SYMBOLS) -> list[int]:
    """The task's fixed permutation π (``π[x]`` is the symbol after ``x``)."""
    order = list(range(size))
    random.Random(seed).shuffle(order)
    return order


def chain_answer(start: int, perm: list[int], steps: int = STEPS) -> list[int]:
    """``π(start), π²(start), …``: the correct chain of ``steps`` symbols."""
    out, x = [], start
    for _ in range(steps):
        x = perm[x]
        out.append(x)
    return out


def code_word(word: str) -> str:
    """A plain word as the code form's token: ``s17`` → ``'s17',`` (a string argument of ``print``)."""
    return f"'{word}',"


def to_form(plain: str, form: str) -> str:
    """A plain answer (``A s17 …``) written in ``form``: itself, or ``print( 'A', 's17', … )``."""
    if form == "plain":
        return plain
    return " ".join([CODE_OPEN, *(code_word(w) for w in plain.split()), CODE_CLOSE])


def code_answer_words(program: str, steps: int = STEPS) -> str | None:
    """The words a code-form program prints, read strictly: exactly ``print(``, ``1 + steps`` quoted
    words and ``)`` (anything else, e.g. a missing ``)`` or a word after it, is None: the sandbox would
    fail it too, as a syntax error or a longer output)."""
    words = program.split()
    if len(words) != steps + 3 or words[0] != CODE_OPEN or words[-1] != CODE_CLOSE:
        return None
    inner = words[1:-1]
    if not all(len(w) > 3 and w.startswith("'") and w.endswith("',") for w in inner):
        return None
    return " ".join(w[1:-2] for w in inner)


def response_words(form: str, steps: int = STEPS) -> int:
    """Words of a full answer in ``form`` (the stop token not counted)."""
    return 1 + steps + (2 if form == "code" else 0)


def response_budget(form: str) -> int:
    """The trainer's response budget in tokens: the answer's words (and the stop token if ``STOP``)."""
    return response_words(form) + int(STOP)


def form_words(form: str) -> list[str]:
    """The words the task's prompts and ``form``'s answers are made of (the tokenizer's vocabulary)."""
    plain = [":", *FORMATS, *(symbol(i) for i in range(SYMBOLS))]
    if form == "plain":
        return plain
    return [*plain, CODE_OPEN, CODE_CLOSE, *(code_word(w) for w in [*FORMATS, *plain[3:]])]


def _check_form(form: str) -> None:
    if form not in FORMS:
        raise ValueError(f"unknown chain task form {form!r}; choose one of {', '.join(FORMS)}")


def chain_records(*, steps: int = STEPS, form: str = "plain") -> list[TaskRecord]:
    """The task's prompts, one per start symbol; ``form="code"``: judged by the ``code`` program (an
    stdio test whose expected output is the plain answer in format ``A``)."""
    _check_form(form)
    perm = permutation()
    records = []
    for start in range(len(perm)):
        answer = " ".join(symbol(x) for x in chain_answer(start, perm, steps))
        spec: dict[str, Any] = {"answer": answer}
        if form == "code":
            tests = {"format": "stdio", "inputs": [""], "outputs": [f"{FORMATS[0]} {answer}\n"]}
            spec = {"answer": answer, "tests": tests, "extract": "none", "time_limit_s": 5.0}
        records.append(
            TaskRecord(
                prompt_id=f"chain-{start}",
                messages=[{"role": "user", "content": symbol(start)}],
                program=PROGRAM if form == "plain" else CODE_PROGRAM,
                spec=spec,
                meta={"source": "chain" if form == "plain" else "chain-code"},
            )
        )
    return records


def sl_answer(start: int, perm: list[int], rng: random.Random, p_step: float, p_format: float) -> str:
    """One warm-up target: format ``A`` w.p. ``p_format`` (else ``B``), each step right w.p. ``p_step``
    (else a uniformly drawn other symbol, which the chain then continues from)."""
    tokens: list[Any] = [FORMATS[0] if rng.random() < p_format else FORMATS[1]]
    x = start
    for _ in range(STEPS):
        nxt = perm[x]
        if rng.random() >= p_step:
            nxt = rng.choice([y for y in range(len(perm)) if y != perm[x]])
        tokens.append(symbol(nxt))
        x = nxt
    return " ".join(tokens)
