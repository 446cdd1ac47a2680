"""GRPO μ=4 versus staged μ-GRPO at equal total updates, side by side in one run (timing).

    .venv/bin/python bench/stages.py [--task math] [--config configs/tiny.yaml] [--updates 64]
                                     [--mu 16] [--out runs/bench-stages] [key=value ...]

Both runs use the same config (the tiny policy on the toy task by default) and the same total
number of optimizer updates; they differ only in the objective and the staging:

- ``grpo_mu4``: ``algo.objective=grpo`` (ε = 0.2), μ = 4 updates per stage, updates/4 stages;
- ``mu_grpo``: ``algo.objective=mu_grpo`` (clip [0, 5], sequence veto), μ = ``--mu``, updates/μ stages.

Every stage samples B_mini × μ prompts, so both generate the same number of responses in total.
Printed per run: wall-clock per phase (rollout, verify tail, optimize, hand-over) and in total,
engine switches, and reward: of the first and last stages' rollouts (β_0, β_last) and, when
``train.final_rollout_prompts`` > 0 (configs/tiny.yaml sets 64), of the final policy. On this repository's CPU
machines the hf engine shares the trainer's process, so an
engine switch costs little here; with vLLM on GPUs each switch reloads the engine and the gap grows.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from mucode.config import load_config
from mucode.train.loop import run_training

PHASES = ["time/rollout", "time/verify", "time/optimize", "time/handover", "time/total"]


def _run(name: str, config: str, task: str, out: Path, extra: list[str]) -> dict[str, Any]:
    run_dir = out / name
    shutil.rmtree(run_dir, ignore_errors=True)
    cfg = load_config(
        config,
        [
            f"data.task={task}",
            f"train.run_dir={run_dir}",
            "train.progress=false",
            "train.tensorboard=false",
            *extra,
        ],
    )
    start = time.perf_counter()
    result = run_training(cfg)
    wall = time.perf_counter() - start
    totals = result.summary["totals"]
    stages = result.summary["stages"]
    return {
        "run": name,
        "stages": len(stages),
        "mu": cfg.batch.updates_per_stage,
        "updates": totals["updates"],
        "responses": sum(int(s.get("rollout/responses", 0)) for s in stages),
        **{k: totals.get(k, 0.0) for k in PHASES},
        "wall": wall,
        "engine_switches": totals["engine_switches"],
        "reward_first": stages[0].get("reward/rollout_mean"),
        "reward_last_rollout": stages[-1].get("reward/rollout_mean"),
        "reward_final": totals.get("reward/final_mean"),
    }


def _table(rows: list[dict[str, Any]]) -> str:
    cols = [
        ("run", "run", "{}"),
        ("mu", "μ", "{}"),
        ("stages", "stages", "{}"),
        ("updates", "updates", "{}"),
        ("responses", "responses", "{}"),
        ("time/rollout", "rollout s", "{:.1f}"),
        ("time/verify", "verify s", "{:.1f}"),
        ("time/optimize", "optimize s", "{:.1f}"),
        ("time/handover", "hand-over s", "{:.1f}"),
        ("time/total", "total s", "{:.1f}"),
        ("engine_switches", "switches", "{}"),
        ("reward_first", "reward stage 0", "{:.3f}"),
        ("reward_last_rollout", "reward last stage", "{:.3f}"),
        ("reward_final", "reward final policy", "{:.3f}"),
    ]
    cells = [[h for _, h, _ in cols]] + [
        [f.format(r[k]) if r.get(k) is not None else "-" for k, _, f in cols] for r in rows
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cols))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--task", default="math", choices=["math", "code"])
    parser.add_argument("--config", default="configs/tiny.yaml")
    parser.add_argument("--updates", type=int, default=64, help="total optimizer updates of each run")
    parser.add_argument("--mu", type=int, default=16, help="μ of the staged μ-GRPO run")
    parser.add_argument("--out", type=Path, default=Path("runs/bench-stages"))
    parser.add_argument("overrides", nargs="*", help="key=value overrides applied to both runs")
    args = parser.parse_args()
    for mu in (4, args.mu):
        if args.updates % mu:
            sys.exit(f"--updates {args.updates} must be a multiple of μ = {mu}")
    runs = [
        (
            "grpo_mu4",
            [
                "algo.objective=grpo",
                "algo.clip_low=0.2",
                "algo.clip_high=0.2",
                "batch.updates_per_stage=4",
                f"batch.num_stages={args.updates // 4}",
            ],
        ),
        (
            f"mu_grpo_mu{args.mu}",
            [
                "algo.objective=mu_grpo",
                "algo.ratio_upper=5.0",
                "algo.veto_scope=sequence",
                f"batch.updates_per_stage={args.mu}",
                f"batch.num_stages={args.updates // args.mu}",
            ],
        ),
    ]
    rows = [_run(name, args.config, args.task, args.out, [*extra, *args.overrides]) for name, extra in runs]
    table = _table(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(rows, indent=2))
    print("\n" + table)
    print(
        f"\n(saved to {args.out / 'results.json'}; time/verify is the verifier's tail after generation ended)"
    )


if __name__ == "__main__":
    main()
