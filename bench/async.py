"""Staged versus asynchronous μ-GRPO at equal updates, side by side in one run: wall time and idle ratios.

    .venv/bin/python bench/async.py [--config configs/tiny.yaml] [--task math] [--updates 8] [--mu 4]
                                    [--delay 0.3] [--ratio 2] [--handoffs file,push] [--out runs/bench-async]
                                    [key=value ...]

Two regimes, each run staged and asynchronous on the same config (the tiny policy on the toy task by
default) with the same number of updates and prompts:

- ``slow engine``: every generated group costs ``--delay`` extra seconds (a sleep in the engine) and
  every update ``--delay`` × prompts-per-update / ``--ratio`` (a sleep after it): generation is
  ``--ratio`` times slower than training;
- ``slow trainer``: the other way round (``--delay`` / ``--ratio`` per group, ``--delay`` ×
  prompts-per-update per update).

Staged, an update costs generation + training; overlapped, the larger of the two: the asynchronous
mode can save at most the smaller side's time (with ``--ratio`` r, a stage takes r/(r + 1) of the
staged time at best), and it pays its generator's start-up once. ``--ratio 0`` makes the faster side
free (only the slower side sleeps): nothing to overlap.

The staged run has μ = ``--mu`` updates per stage; the asynchronous one one generator, publishes every
μ updates and admits a lag of 2μ updates (so the generator can work one stage ahead), once per weight
hand-off of ``--handoffs``. The generator process starts before the trainer loads and keeps its engine
across versions (loaded in place). Printed per run: wall seconds, the stages' seconds (``time/total``;
for the asynchronous run also how much of it the first update waited for its groups: what is left of
the generator's start-up once it overlapped the trainer's), the trainer's idle ratio (asynchronous:
measured; staged: rollout + verify + hand-over over the stages' time), the generator's idle ratio, the
largest staleness, and the async/staged wall ratio. Both modes use the hf engine (staged: loaded from
the handed-over policy, ``train.weight_sync=disk``), and the asynchronous generator is a second
process: on a machine with fewer free cores than processes the two compete for CPU, which the figures
include.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from mucode.config import MucodeConfig, load_config
from mucode.rollout.types import RolloutEngine
from mucode.train.async_generator import build_engine
from mucode.train.async_loop import run_async_training
from mucode.train.checkpoint import TrainerState
from mucode.train.loop import run_training
from mucode.train.report import idle_ratios

DELAY_ENV = "MUCODE_BENCH_ENGINE_DELAY_S"


class _Slow:
    """An engine that sleeps ``delay`` seconds before handing over each group."""

    def __init__(self, engine: RolloutEngine, delay: float) -> None:
        self.engine, self.delay = engine, delay
        self.generator = getattr(engine, "generator", None)  # reseeded by the generator process

    def generate(self, prompts: list[tuple[str, list[int]]], samples_per_prompt: int) -> Any:
        for group in self.engine.generate(prompts, samples_per_prompt):
            time.sleep(self.delay)
            yield group

    def close(self) -> None:
        self.engine.close()


def slow_engine(cfg: MucodeConfig, policy_path: str, seed: int) -> Any:
    """``asynchronous.engine_factory`` of the bench (the delay comes through the environment)."""
    plain = cfg.model_copy(
        update={"asynchronous": cfg.asynchronous.model_copy(update={"engine_factory": None})}
    )
    return _Slow(build_engine(plain, policy_path, seed), float(os.environ.get(DELAY_ENV, "0")))


def _run(
    mode: str,
    args: argparse.Namespace,
    regime: str,
    delays: tuple[float, float],
    handoff: str = "file",
) -> dict[str, Any]:
    engine_delay, trainer_delay = delays
    name = mode if mode == "staged" else f"async-{handoff}"
    run_dir = args.out / f"{name}-{regime.replace(' ', '-')}"
    shutil.rmtree(run_dir, ignore_errors=True)
    mu = args.mu
    common = [
        f"data.task={args.task}",
        f"train.run_dir={run_dir}",
        "train.progress=false",
        "train.tensorboard=false",
        "train.weight_sync=disk",
        "train.final_rollout_prompts=0",
        f"batch.updates_per_stage={mu}",
        f"batch.num_stages={args.updates // mu}",
        *args.overrides,
    ]
    if mode == "async":
        common += [
            "asynchronous.enabled=true",
            f"asynchronous.sync_every={mu}",
            f"asynchronous.max_lag_updates={2 * mu}",
            "asynchronous.engine_factory=async:slow_engine",
            f"asynchronous.handoff={handoff}",
        ]
    cfg = load_config(args.config, common)
    os.environ[DELAY_ENV] = str(engine_delay)

    def pause(state: TrainerState) -> None:
        time.sleep(trainer_delay)

    start = time.perf_counter()
    if mode == "async":
        result = run_async_training(cfg, on_update=pause)
    else:
        result = run_training(
            cfg, engine_factory=lambda stage, path, seed: slow_engine(cfg, str(path), seed), on_update=pause
        )
    wall = time.perf_counter() - start
    totals = json.loads((result.run_dir / "summary.json").read_text())["totals"]
    trainer_idle, generator_idle = idle_ratios(totals)
    rows = [
        json.loads(x)
        for x in (result.run_dir / "metrics.jsonl").read_text().splitlines()
        if '"event"' not in x
    ]
    startup = float(rows[0].get("async/wait_s", 0.0)) if rows else 0.0
    return {
        "mode": name,
        "wall_s": wall,
        "loop_s": float(totals.get("time/total", 0.0)),
        "startup_s": startup,
        "gen_startup_s": float(totals.get("async/generator_startup_s") or 0.0),
        "updates": result.state.global_update,
        "trainer_idle": trainer_idle,
        "generator_idle": generator_idle,
        "staleness_max": totals.get("async/staleness_max", mu - 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", default="configs/tiny.yaml")
    parser.add_argument("--task", default="math")
    parser.add_argument("--updates", type=int, default=8)
    parser.add_argument("--mu", type=int, default=4)
    parser.add_argument("--delay", type=float, default=0.3)
    parser.add_argument("--ratio", type=float, default=2.0, help="slower side / faster side (0: faster free)")
    parser.add_argument("--handoffs", default="file,push", help="the asynchronous runs' weight hand-offs")
    parser.add_argument("--out", type=Path, default=Path("runs/bench-async"))
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # the generator imports this file as ``async``
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).resolve().parent), os.environ.get("PYTHONPATH", "")]
    )
    prompts = int(load_config(args.config, args.overrides).batch.prompts_per_update)
    lines = []
    fast = 1.0 / args.ratio if args.ratio > 0 else 0.0
    for regime, engine_delay, trainer_delay in (
        ("slow engine", args.delay, args.delay * prompts * fast),
        ("slow trainer", args.delay * fast, args.delay * prompts),
    ):
        delays = (engine_delay, trainer_delay)
        staged = _run("staged", args, regime, delays)
        runs = [_run("async", args, regime, delays, h) for h in args.handoffs.split(",")]
        for r in (staged, *runs):
            lines.append(
                f"{regime:<13} {r['mode']:<11} updates {r['updates']:>3}  wall {r['wall_s']:6.1f} s  stages "
                f"{r['loop_s']:6.1f} s (first update waited {r['startup_s']:5.1f} s; generator start-up "
                f"{r['gen_startup_s']:4.1f} s)  "
                f"trainer idle {100 * (r['trainer_idle'] or 0):5.1f}%  generator idle "
                f"{100 * (r['generator_idle'] or 0):5.1f}%  max staleness {r['staleness_max']}"
            )
        for r in runs:
            steady = (r["loop_s"] - r["startup_s"]) / max(1e-9, staged["loop_s"])
            lines.append(
                f"{regime:<13} {r['mode']}/staged: wall {r['wall_s'] / staged['wall_s']:.2f}, stages without "
                f"the first wait {steady:.2f}"
            )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
