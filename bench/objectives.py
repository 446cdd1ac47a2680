"""Forward + backward time of each objective vs a plain GRPO clip loss, in one process.

Usage: .venv/bin/python bench/objectives.py [--responses 256] [--tokens 4096] [--repeats 5]

The inputs are what an objective sees in training: [B, T] float32 log-probs of the sampled tokens
(requiring grad), stored behaviour log-probs, one advantage per response and a response mask with
lengths between T/4 and T; a few tokens per negative-advantage response are made triggers (ρ ≈ 1e-5).
Only the objective is timed (no model): that is the cost μ-GRPO adds over GRPO. Each row is the
median of ``--repeats`` timed runs after one warm-up round; the rows are run round-robin so that
load from other processes affects all of them alike. "plain GRPO" is the textbook PPO-clip loss
written inline here (verl's vanilla without dual-clip, seq-mean-token-mean), without diagnostics.

Checked on the lower quartile of each row's runs (the least disturbed by other processes): mu_grpo (default
scope ``sequence``) costs at most 1.15× the plain GRPO clip loss and mucode's ``grpo`` without
diagnostics, and at most 1.15× ``grpo`` when both compute their diagnostics. Exit status 1 if not.
``--threads`` defaults to 1: on a shared 2-core machine two threads wait on each other.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from mucode.algo import (
    GRPOParams,
    LossAggregation,
    M2POParams,
    MuGRPOParams,
    ObjectiveParams,
    get_objective,
    loss_denominator,
)

LIMIT = 1.15


def make_inputs(responses: int, tokens: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(tokens // 4, tokens + 1, (responses,), generator=g)
    mask = torch.arange(tokens)[None, :] < lengths[:, None]
    behaviour = -torch.rand(responses, tokens, generator=g) * 3.0
    logprobs = behaviour + torch.randn(responses, tokens, generator=g) * 0.3
    advantages = torch.randn(responses, generator=g)
    negative = (advantages < 0).nonzero().flatten()
    for i in negative[::4].tolist():  # a quarter of the A<0 responses get a trigger
        logprobs[i, int(lengths[i]) // 2] = behaviour[i, int(lengths[i]) // 2] - 11.5
    return logprobs, behaviour, advantages, mask


def plain_grpo_clip(logprobs, behaviour, advantages, mask, eps: float = 0.2) -> torch.Tensor:
    ratio = torch.exp(logprobs - behaviour)
    a = advantages[:, None]
    losses = torch.maximum(-a * ratio, -a * torch.clamp(ratio, 1 - eps, 1 + eps))
    m = mask.to(losses.dtype)
    per_response = (losses * m).sum(dim=1) / m.sum(dim=1).clamp(min=1)
    return per_response.mean()


def time_fwd_bwd(fn: Callable[[torch.Tensor], torch.Tensor], logprobs: torch.Tensor) -> float:
    x = logprobs.detach().clone().requires_grad_()
    start = time.perf_counter()
    fn(x).backward()
    return time.perf_counter() - start


def lower_quartile(values: list[float]) -> float:
    return statistics.quantiles(values, n=4, method="inclusive")[0] if len(values) > 1 else values[0]


def objective_fn(name: str, params: ObjectiveParams, b, adv, mask, metrics: bool, denominators):
    objective = get_objective(name)
    d = denominators[params.aggregation]
    return lambda x: objective(x, b, adv, mask, params, denominator=d, metrics=metrics)[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--responses", type=int, default=256)
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (1: steadier on a shared box)"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    lp, b, adv, mask = make_inputs(args.responses, args.tokens)
    # the trainer passes the minibatch denominator; computing it is not part of the per-call cost
    denominators = {mode: loss_denominator(mask, mode) for mode in LossAggregation}
    rows: list[tuple[str, Callable[[torch.Tensor], torch.Tensor]]] = [
        ("plain GRPO clip (inline)", lambda x: plain_grpo_clip(x, b, adv, mask)),
    ]
    for metrics in (False, True):
        tag = "+diag" if metrics else ""
        rows += [
            (f"grpo{tag}", objective_fn("grpo", GRPOParams(), b, adv, mask, metrics, denominators)),
            (f"mu_grpo{tag}", objective_fn("mu_grpo", MuGRPOParams(), b, adv, mask, metrics, denominators)),
            (
                f"mu_grpo[suffix]{tag}",
                objective_fn(
                    "mu_grpo", MuGRPOParams(veto_scope="suffix"), b, adv, mask, metrics, denominators
                ),
            ),
            (f"m2po{tag}", objective_fn("m2po", M2POParams(), b, adv, mask, metrics, denominators)),
            (
                f"m2po[water_fill]{tag}",
                objective_fn("m2po", M2POParams(mode="water_fill"), b, adv, mask, metrics, denominators),
            ),
        ]

    print(
        f"objective forward+backward, {args.responses} responses x {args.tokens} tokens "
        f"({int(mask.sum())} valid), float32, {torch.get_num_threads()} threads, median of {args.repeats} round-robin runs"  # noqa: E501
    )
    samples: dict[str, list[float]] = {name: [] for name, _ in rows}
    for round_ in range(args.repeats + 1):  # round-robin, so load changes hit every row alike
        for name, fn in rows:
            seconds = time_fwd_bwd(fn, lp)
            if round_ > 0:  # round 0 is a warm-up
                samples[name].append(seconds)
    results = {name: statistics.median(values) for name, values in samples.items()}
    best = {name: lower_quartile(values) for name, values in samples.items()}
    plain = results["plain GRPO clip (inline)"]
    print(f"{'objective':28s} {'median ms':>10s} {'q1 ms':>8s} {'x plain':>8s} {'x grpo':>8s}")
    for name, seconds in results.items():
        same_grpo = results["grpo+diag" if name.endswith("+diag") else "grpo"]
        print(
            f"{name:28s} {seconds * 1e3:10.1f} {best[name] * 1e3:8.1f} "
            f"{seconds / plain:8.2f} {seconds / same_grpo:8.2f}"
        )

    # the checks use each row's lower quartile: on a shared machine the faster runs are the best
    # estimate of a row's own cost (the medians above include more of other processes' load)
    checks = [
        ("mu_grpo / plain GRPO", best["mu_grpo"] / best["plain GRPO clip (inline)"]),
        ("mu_grpo / grpo", best["mu_grpo"] / best["grpo"]),
        ("mu_grpo+diag / grpo+diag", best["mu_grpo+diag"] / best["grpo+diag"]),
    ]
    ok = True
    for label, value in checks:
        verdict = "ok" if value <= LIMIT else "OVER"
        ok &= value <= LIMIT
        print(f"check {label}: {value:.2f} (limit {LIMIT}) {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
