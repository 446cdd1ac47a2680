"""Math verification on stage-like responses: mucode's worker pool vs a plain math_verify process pool.

    .venv/bin/python bench/math_stage.py [--prompts 200] [--samples 8] [--workers 2] [--seed 0]
                                         [--warm-prompts 200] [--answers math500|integer]

Responses are shaped like a stage's: ``--samples`` per prompt over MATH500's gold answers, each a few
hundred characters of reasoning with inline ``$...$`` math, ending in a boxed answer drawn from a
small per-prompt set (the gold, written as it is or as an equal form, and two recurring wrong
answers: other problems' golds), and 1 in 10 cut off before any box (math-verify then reads the
whole text). Both sides get the same items in the same order and ``--workers`` processes:

- plain math_verify: ``concurrent.futures.ProcessPoolExecutor`` mapping what a user writes over the
  items: ``parse`` of the gold (boxed) and of the whole response, ``verify``; chunksize 16, workers
  warmed. The issue's target is against this row;
- baseline: the same pool mapping ``check_answer`` (mucode's recipe done plainly: gold parsed per
  item, every response verified, but only the response's last box handed to math-verify, one of
  mucode's own shortcuts): the stricter comparison;
- mucode: ``MathWorkerPool`` (final answer extracted in the parent, each (gold, answer) verified
  once, golds parsed once per worker, chunks per message), every item ``check``ed at once, per
  group of ``--samples`` as the trainer sends them; started and warmed before the clock.

Before the clock each side scores ``--warm-prompts`` other prompts' responses (later golds of the set;
an item whose gold is a measured prompt's is left out), as a stage's long-lived workers are warm:
imports, sympy's caches and the parser's DFA. An answer that recurs by value in MATH500 (``2``, say)
may be parsed already, as it would be in a stage; with ``--warm-prompts 0`` nothing is.

Printed: wall seconds and items/s of each, and their ratio; CPU seconds of the worker processes
(from /proc, so a loaded machine does not distort it) plus the parent's, and that ratio; whether
the statuses agree item by item. The machine may be shared: the ratio is the figure, not the rate.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MATH500 = ROOT / "eval" / "math" / "math500.jsonl"

WRONG_SHIFTS = (7, 13)
"""Prompt p's two recurring wrong answers are the golds of prompts p + 7 and p + 13."""
FILLER = (
    "We first rewrite the expression as $x^2 + {a}x = {b}$ and complete the square, so "
    "$(x + {h})^2 = {c}$. Checking the case $x = {a}$ gives ${a}^2 = {sq}$, which is consistent. "
)


def _golds(kind: str) -> list[str]:
    rows = [json.loads(line) for line in MATH500.read_text().splitlines() if line.strip()]
    golds = [str(r["answer"]) for r in rows]
    return [g for g in golds if g.lstrip("-").isdigit()] if kind == "integer" else golds


def stage_items(
    prompts: int, samples: int, seed: int, kind: str = "math500", first: int = 0
) -> list[tuple[str, str]]:
    """Responses to prompts ``first`` .. ``first + prompts - 1`` (prompt p's gold is the p-th answer)."""
    golds = _golds(kind)
    rng = random.Random(seed)
    items = []
    for p in range(first, first + prompts):
        gold = golds[p % len(golds)]
        if kind == "integer":  # wrong answers near the gold, as a policy's arithmetic slips are
            wrong = [str(int(gold) + d) for d in rng.sample([-2, -1, 1, 2, 10], 2)]
            choices = [gold, gold, f"{gold}.0", *wrong]
        else:  # other problems' answers: LaTeX of every kind
            wrong = [golds[(p + k) % len(golds)] for k in WRONG_SHIFTS]
            choices = [gold, gold, f"{{{gold}}}", *wrong]  # an equal form: braces around the gold
        for _ in range(samples):
            a = rng.randint(2, 99)
            text = "".join(
                FILLER.format(a=a, b=a * 3, h=a / 2, c=a * a, sq=a * a) for _ in range(rng.randint(2, 6))
            )
            if rng.random() < 0.1:
                items.append((gold, text))
            else:
                items.append((gold, text + f"Therefore the answer is $\\boxed{{{rng.choice(choices)}}}$."))
    return items


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _warm(_: int) -> int:
    from mucode.rewards.math_worker import check_answer

    check_answer("1", "\\boxed{1}")
    return os.getpid()


def _check(pair: tuple[str, str]) -> str:
    from mucode.rewards.math_worker import check_answer

    return str(check_answer(*pair)["status"])


def _plain(pair: tuple[str, str]) -> str:
    """math-verify as its README uses it, on the whole response (statuses named as mucode's)."""
    from math_verify import LatexExtractionConfig, parse, verify

    gold, response = pair
    try:
        expected = parse("\\boxed{" + gold + "}", [LatexExtractionConfig()], parsing_timeout=None)
        answer = parse(response, [LatexExtractionConfig(boxed_match_priority=0)], parsing_timeout=None)
    except Exception:  # noqa: BLE001 - as mucode: an unparsable response is no answer
        return "no_answer"
    if not expected:
        return "verifier_error"
    if not answer:
        return "no_answer"
    return "correct" if verify(expected, answer, timeout_seconds=None) else "wrong_answer"


def baseline(
    items: list[tuple[str, str]], warm: list[tuple[str, str]], workers: int, fn: Any = _check
) -> tuple[float, float, list[str]]:
    import logging

    logging.getLogger("math_verify").setLevel(logging.ERROR)
    with ProcessPoolExecutor(workers) as pool:
        pids = set(pool.map(_warm, range(workers * 4)))
        list(pool.map(fn, warm, chunksize=16))
        cpu0, c0 = sum(_cpu_s(p) for p in pids), time.process_time()
        t0 = time.perf_counter()
        statuses = list(pool.map(fn, items, chunksize=16))
        wall = time.perf_counter() - t0
        cpu = sum(_cpu_s(p) for p in pids) - cpu0 + time.process_time() - c0
    return wall, cpu, statuses


async def mucode(
    items: list[tuple[str, str]], warm: list[tuple[str, str]], workers: int, samples: int
) -> tuple[float, float, list[str]]:
    from mucode.rewards.math_pool import MathWorkerPool

    pool = MathWorkerPool(workers, timeout_s=30.0)
    await pool.start()
    try:

        async def group(batch: list[tuple[str, str]], start: int) -> list[str]:
            outs = await asyncio.gather(*(pool.check(g, r) for g, r in batch[start : start + samples]))
            return [o.status for o in outs]

        await asyncio.gather(*(group(warm, s) for s in range(0, len(warm), samples)))
        sent, shared = pool.sent, pool.shared
        pids = [w.process.pid for w in pool._workers]
        cpu0, c0 = sum(_cpu_s(p) for p in pids), time.process_time()
        t0 = time.perf_counter()
        groups = await asyncio.gather(*(group(items, s) for s in range(0, len(items), samples)))
        wall = time.perf_counter() - t0
        cpu = sum(_cpu_s(p) for p in pids) - cpu0 + time.process_time() - c0
        print(
            f"mucode pool: {pool.sent - sent} items sent to workers, {pool.shared - shared} answered by a "
            "shared verdict; "
            f"parent CPU {time.process_time() - c0:.2f} s"
        )
    finally:
        await pool.close()
    return wall, cpu, [s for g in groups for s in g]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=200)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--warm-prompts",
        type=int,
        default=200,
        help="prompts (other answers of the set) each side scores before the clock, as a stage's "
        "long-lived workers have: caches and parser state warm, no measured answer among them",
    )
    parser.add_argument(
        "--answers",
        choices=["math500", "integer"],
        default="math500",
        help="gold answers: all of MATH500's, or its integer ones (AIME/DeepScaleR-like)",
    )
    args = parser.parse_args(argv)
    items = stage_items(args.prompts, args.samples, args.seed, args.answers)
    # Warm-up prompts: later answers of the same set, none of them a measured prompt's gold or wrong answer.
    first = args.prompts + WRONG_SHIFTS[-1]
    warm_prompts = max(0, min(args.warm_prompts, len(_golds(args.answers)) - WRONG_SHIFTS[-1] - first))
    measured = {gold for gold, _ in items}
    warm = [
        item
        for item in stage_items(warm_prompts, args.samples, args.seed + 1, args.answers, first=first)
        if item[0] not in measured  # a gold written twice in the set ("2") would share remembered verdicts
    ]
    print(
        f"{len(items)} items ({args.prompts} prompts x {args.samples}), {args.workers} worker processes each, "
        f"after {len(warm)} warm-up items (other prompts); load average {os.getloadavg()[0]:.1f}"
    )
    p_wall, p_cpu, p_status = baseline(items, warm, args.workers, _plain)
    b_wall, b_cpu, b_status = baseline(items, warm, args.workers)
    m_wall, m_cpu, m_status = asyncio.run(mucode(items, warm, args.workers, args.samples))
    n = len(items)
    print(f"{'':40}{'wall s':>9}{'items/s':>10}{'CPU s':>9}")
    print(f"{'plain math_verify pool (whole response)':40}{p_wall:>9.2f}{n / p_wall:>10.0f}{p_cpu:>9.2f}")
    print(f"{'check_answer pool (last box only)':40}{b_wall:>9.2f}{n / b_wall:>10.0f}{b_cpu:>9.2f}")
    print(f"{'mucode MathWorkerPool':40}{m_wall:>9.2f}{n / m_wall:>10.0f}{m_cpu:>9.2f}")
    for name, wall, cpu in (("plain math_verify", p_wall, p_cpu), ("check_answer", b_wall, b_cpu)):
        print(
            f"ratio (mucode / {name}): throughput {wall / m_wall:.2f}x, CPU per item {cpu / m_cpu:.2f}x less"
        )
    plain_agree = sum(a == b for a, b in zip(p_status, m_status, strict=True))
    print(f"plain math_verify statuses agree on {plain_agree}/{n} items")
    agree = sum(a == b for a, b in zip(b_status, m_status, strict=True))
    counts: dict[str, int] = {}
    for s in b_status:
        counts[s] = counts.get(s, 0) + 1
    print(f"statuses agree on {agree}/{n} items; baseline statuses {counts}")


if __name__ == "__main__":
    main()
