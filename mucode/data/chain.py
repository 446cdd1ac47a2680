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
"""

from __future__ import annotations

import random
from typing import Any

from mucode.data.types import TaskRecord

__all__ = [
    "FORMATS",
    "PROGRAM",
    "STEPS",
    "SYMBOLS",
    "chain_answer",
    "chain_records",
    "permutation",
    "sl_answer",
    "symbol",
]

SYMBOLS = 64
STEPS = 16
TASK_SEED = 0
PROGRAM = "chain"
FORMATS = ("A", "B")
"""The scored format first; the second always fails."""


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


def chain_records(*, steps: int = STEPS) -> list[TaskRecord]:
    """The task's prompts, one per start symbol."""
    perm = permutation()
    records = []
    for start in range(len(perm)):
        answer = " ".join(symbol(x) for x in chain_answer(start, perm, steps))
        records.append(
            TaskRecord(
                prompt_id=f"chain-{start}",
                messages=[{"role": "user", "content": symbol(start)}],
                program=PROGRAM,
                spec={"answer": answer},
                meta={"source": "chain"},
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
