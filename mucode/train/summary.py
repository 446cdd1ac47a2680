"""The run's arithmetic: each stage's record, the run's totals, and the end-of-run summary table
(one row per stage plus a total), printed and saved as JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from mucode.train.checkpoint import TrainerState

__all__ = [
    "STAGE_COLUMNS",
    "async_line",
    "render_summary",
    "run_totals",
    "stage_line",
    "stage_record",
    "write_summary",
]

STAGE_COLUMNS: list[tuple[str, str, str]] = [
    # (key in a stage record, header, format)
    ("stage", "stage", "{:d}"),
    ("updates", "updates", "{:d}"),
    ("reward/rollout_mean", "reward of β_k rollouts", "{:.3f}"),
    ("verifier/masked", "masked", "{:d}"),
    ("time/rollout", "rollout s", "{:.1f}"),
    ("time/verify", "verify s", "{:.1f}"),
    ("time/optimize", "optimize s", "{:.1f}"),
    ("time/eval", "eval s", "{:.1f}"),
    ("time/total", "total s", "{:.1f}"),
]


def _fmt(fmt: str, value: Any) -> str:
    if value is None:
        return "-"
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


def render_summary(stages: list[dict[str, Any]], totals: dict[str, Any]) -> str:
    """A plain-text table (also readable in a log file)."""
    headers = [h for _, h, _ in STAGE_COLUMNS]
    rows = [[_fmt(f, s.get(k)) for k, _, f in STAGE_COLUMNS] for s in stages]
    final = totals.get("final")
    if isinstance(final, dict):  # the final policy's own rollouts (train.final_rollout_prompts)
        rows.append(["final", "-", *(_fmt(f, final.get(k)) for k, _, f in STAGE_COLUMNS[2:])])
    total_row = [
        _fmt(f, totals.get(k))
        if k not in ("stage", "reward/rollout_mean")
        else ("all" if k == "stage" else "")
        for k, _, f in STAGE_COLUMNS
    ]
    widths = [max(len(h), *(len(r[i]) for r in [*rows, total_row])) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True))

    rule = "  ".join("-" * w for w in widths)
    out = [line(headers), rule, *(line(r) for r in rows), rule, line(total_row)]
    extra = [f"engine switches: {totals.get('engine_switches', 0)}"]
    if totals.get("data/dropped_long_prompts"):
        extra.append(
            f"prompts: {totals.get('data/prompts')} used, {totals['data/dropped_long_prompts']} dropped "
            f"(longer than data.max_prompt_tokens)"
        )
    if "async/trainer_idle_ratio" in totals:
        extra.append(async_line(stages, totals))
    first, final = totals.get("reward/first_rollout_mean"), totals.get("reward/final_mean")
    if first is not None and final is not None:
        extra.append(f"reward: {first:.3f} (initial policy, stage 0 rollouts) → {final:.3f} (final policy)")
    elif first is not None and stages:
        extra.append(
            f"reward of the rollouts: {first:.3f} (stage 0) → {stages[-1].get('reward/rollout_mean', 0):.3f} "
            f"(stage {stages[-1]['stage']}, before its updates)"
        )
    return "\n".join(out + extra)


def async_line(stages: list[dict[str, Any]], totals: dict[str, Any]) -> str:
    """The asynchronous run's figures: idle ratios, staleness (per stage and in all), hand-off times."""
    per_stage = ", ".join(f"{s['stage']}: {s.get('async/staleness_max', '-')}" for s in stages)
    publish, load = totals.get("async/publish_s_mean"), totals.get("async/load_s_mean")
    return (
        f"asynchronous: trainer idle {100 * totals['async/trainer_idle_ratio']:.1f}%, generators idle "
        f"{100 * totals.get('async/generator_idle_ratio', 0.0):.1f}%; staleness max "
        f"{totals.get('async/staleness_max')} (per stage {per_stage}; histogram "
        f"{totals.get('async/staleness_hist')}); dropped for age {totals.get('async/dropped_for_age')}; "
        f"publish {_fmt('{:.2f}', publish)} s, load {_fmt('{:.2f}', load)} s (means); generator restarts "
        f"{totals.get('async/generator_restarts', 0)}"
    )


def write_summary(run_dir: Path, stages: list[dict[str, Any]], totals: dict[str, Any]) -> str:
    text = render_summary(stages, totals)
    (run_dir / "summary.json").write_text(json.dumps({"stages": stages, "totals": totals}, indent=2))
    (run_dir / "summary.txt").write_text(text + "\n")
    return text


def stage_record(
    stage: int,
    updates: int,
    rollout: dict[str, Any],
    rows: int,
    times: dict[str, float],
    recent_rewards: list[float],
) -> dict[str, Any]:
    """One finished stage: its rollout metrics (``rows`` responses in its store), the mean training reward
    of its last quarter of updates (``recent_rewards``: this invocation's) and its phase ``times``."""
    tail = [r for r in recent_rewards[-max(1, len(recent_rewards) // 4) :] if not math.isnan(r)]
    return {
        "stage": stage,
        "updates": updates,
        **rollout,
        "reward/last_updates_mean": sum(tail) / len(tail) if tail else None,
        "verifier/masked": int(rollout.get("verifier/masked", 0)),
        "rollout/responses": int(rollout.get("rollout/responses", rows)),
        **times,
    }


def stage_line(record: dict[str, Any]) -> str:
    """The printed ``stage K done: …`` line's figures."""
    keys = [
        "reward/rollout_mean",
        "reward/last_updates_mean",
        "verifier/masked",
        "verifier/masked_frac",
        "time/rollout",
        "time/verify",
        "time/optimize",
        "time/total",
    ]
    return ", ".join(
        f"{k}={record[k]:.3f}" if isinstance(record.get(k), float) else f"{k}={record.get(k)}" for k in keys
    )


def run_totals(state: TrainerState, wall: float, base: str) -> dict[str, Any]:
    """The run's totals over its finished stages (``wall``: this invocation's seconds; ``base``: β_0)."""
    stages = state.stage_times
    firsts = [s["reward/rollout_mean"] for s in stages if s.get("reward/rollout_mean") is not None]
    lasts = [s["reward/last_updates_mean"] for s in stages if s.get("reward/last_updates_mean") is not None]
    totals: dict[str, Any] = {
        "updates": state.global_update,
        "verifier/masked": sum(int(s.get("verifier/masked", 0)) for s in stages),
        "engine_switches": state.engine_switches,
        "reward/rollout_mean": firsts[-1] if firsts else None,
        "reward/last_updates_mean": lasts[-1] if lasts else None,
        "time/this_invocation": wall,
        **dict(state.times),
        "base_policy": base,
    }
    if firsts:
        totals["reward/first_rollout_mean"] = firsts[0]
    return totals
