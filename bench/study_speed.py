"""The study run's two cut costs, each against its former setting in the same process: ratios.

    .venv/bin/python bench/study_speed.py [--responses 8192] [--evals 8] [--base-steps 40]

On a study base (built here with ``--base-steps`` supervised steps; the timing does not depend on how
well it was trained), one thread:

- generation: the ``hf`` engine generating ``--responses`` chain responses (G = 8) with
  ``rollout.batch_size`` 1024 (the study's former setting) and 4096 (now);
- held-out evaluation: ``--evals`` calls of :func:`mucode.study.base.sample_reward` (KV-cached, now)
  against the former loop that re-ran the whole sequence at every position (written out here).

Prints seconds and the old/new ratio of each. On a shared machine the absolute seconds move with the
load; the ratios, measured alternately in one process, much less.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from mucode.data.chain import chain_records, response_budget
from mucode.data.prompts import render_prompt
from mucode.rollout.hf import HFEngine
from mucode.study.base import BaseRecipe, ensure_base, sample_reward
from mucode.train.policy import load_policy


def _generate(model: Any, tokenizer: Any, prompts: list[tuple[str, list[int]]], batch: int) -> float:
    engine = HFEngine(
        model, tokenizer, temperature=1.0, max_new_tokens=response_budget("plain"), batch_size=batch
    )
    start = time.perf_counter()
    for _ in engine.generate(prompts, 8):
        pass
    return time.perf_counter() - start


@torch.no_grad()
def _heldout_without_cache(model: Any, tokenizer: Any, samples: int, seed: int) -> None:
    """The former held-out sampling: the whole sequence re-run at every position (scoring left out)."""
    records = chain_records()
    ids = torch.tensor([render_prompt(tokenizer, r) for r in records for _ in range(samples)])
    generator = torch.Generator().manual_seed(seed)
    for _ in range(response_budget("plain")):
        logits = model(input_ids=ids).logits[:, -1, :].float()
        ids = torch.cat([ids, torch.multinomial(torch.softmax(logits, -1), 1, generator=generator)], 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--responses", type=int, default=8192)
    parser.add_argument("--evals", type=int, default=8)
    parser.add_argument("--base-steps", type=int, default=40)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        base = ensure_base(Path(tmp), 0, BaseRecipe(steps=args.base_steps))
        model, tokenizer = load_policy(str(base), dtype="float32", device=torch.device("cpu"))
        model.eval()
        records = chain_records()
        prompts = [
            (str(i % 64), render_prompt(tokenizer, records[i % 64])) for i in range(args.responses // 8)
        ]
        old = new = 0.0
        for _ in range(2):  # alternately, so a change in load hits both
            old += _generate(model, tokenizer, prompts, 1024)
            new += _generate(model, tokenizer, prompts, 4096)
        print(
            f"generation, 2 × {args.responses} responses: batch 1024 {old:.1f} s, 4096 {new:.1f} s, "
            f"ratio {old / new:.2f}"
        )
        old = new = 0.0
        for i in range(args.evals):
            start = time.perf_counter()
            _heldout_without_cache(model, tokenizer, 4, i)
            mid = time.perf_counter()
            sample_reward(model, tokenizer, samples=4, seed=i)
            old, new = old + mid - start, new + time.perf_counter() - mid
        print(
            f"held-out, {args.evals} evaluations: no cache {old:.1f} s, KV cache {new:.1f} s, ratio {old / new:.2f}"
        )


if __name__ == "__main__":
    main()
