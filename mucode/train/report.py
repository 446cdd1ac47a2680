"""``mucode report RUN_DIR [RUN_DIR …]``: the paper's comparison of runs, from their run directories.

Per run (the paper's Table 1 columns, and Table 5's veto fractions):

- accuracy at the best checkpoint: each benchmark's pass@k and their mean (``eval.select_metric``),
  from ``best.json`` (written by the trainer's evaluation, see ``mucode.train.evaluation``);
- T_rollout and T_total in hours (``summary.json`` totals: generation, and the whole run with
  evaluation excluded, as the paper's wall-clock comparison counts training); engine switches;
- the trainer's and the generators' idle ratios (``mucode.train.report.idle_ratios``: measured in an
  asynchronous run, derived from the phase times in a staged one) and the largest staleness trained on,
  so an asynchronous run and a staged one compare side by side;
- the vetoed-token fraction of each stage (mean of ``stale/veto_token_frac`` over its updates) and
  their mean.

For two runs, the time-to-accuracy ratio. Definition used here (the paper gives its result as a
ratio, not a formula): the target is the lower of the two runs' best scores, so both reach it; each
run's time-to-accuracy is its training time (``time/train_since_start``, evaluation excluded) at the
first evaluation whose score reaches the target; the ratio is the first run's time over the second's
(> 1: the second run gets there faster). With ``--plot`` (default: ``accuracy_vs_time.png`` in the
first run directory) the score of every evaluation is drawn against training hours, one line per run.

A run still in progress is reported from what it has written so far. A run without evaluation (no
eval events, no ``best.json``) is said to have none, by name, under the table, and no plot is drawn
when no run has an evaluation.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from mucode.train.logger import read_metrics

__all__ = [
    "RunReport",
    "has_evaluation",
    "idle_ratios",
    "load_run",
    "plot_accuracy",
    "render_report",
    "time_to_accuracy",
]


@dataclass
class RunReport:
    """What a comparison needs from one run directory."""

    name: str
    path: Path
    metric: str
    benchmarks: list[str]
    evals: list[dict[str, Any]] = field(default_factory=list)
    """Eval events in update order: update, eval/score, time/train_since_start, eval/<bench>/<metric>."""
    best: dict[str, Any] | None = None
    totals: dict[str, Any] = field(default_factory=dict)
    veto_per_stage: list[float] = field(default_factory=list)


def load_run(path: str | Path) -> RunReport:
    """Read a run directory (config.yaml, metrics.jsonl, best.json, summary.json)."""

    path = Path(path)
    config_path = path / "config.yaml"
    if not config_path.exists():
        raise FileNotFoundError(f"{path} holds no mucode run (no config.yaml)")
    config = yaml.safe_load(config_path.read_text()) or {}
    ev = config.get("eval", {})
    rows, events = read_metrics(path)
    stages: dict[int, list[float]] = {}
    for row in rows:
        value = row.get("stale/veto_token_frac")
        if isinstance(value, int | float):
            stages.setdefault(int(row["stage"]), []).append(float(value))
    report = RunReport(
        name=path.resolve().name or str(config.get("train", {}).get("run_name", "run")),
        path=path,
        metric=str(ev.get("select_metric", "pass@1")),
        benchmarks=list(ev.get("benchmarks") or []),
        evals=sorted((e for e in events if e.get("event") == "eval"), key=lambda e: int(e["update"])),
        veto_per_stage=[sum(v) / len(v) for _, v in sorted(stages.items())],
    )
    if (path / "best.json").exists():
        report.best = json.loads((path / "best.json").read_text())
    if (path / "summary.json").exists():
        report.totals = json.loads((path / "summary.json").read_text()).get("totals", {})
    return report


def time_to_accuracy(a: RunReport, b: RunReport) -> dict[str, Any] | None:
    """Target = the lower best score; each run's training seconds at its first evaluation reaching it;
    ratio = a's time / b's time. None when a run has no evaluation with a score."""

    def scored(run: RunReport) -> list[tuple[float, float]]:
        return [
            (float(e["eval/score"]), float(e["time/train_since_start"]))
            for e in run.evals
            if isinstance(e.get("eval/score"), int | float)
            and not math.isnan(e["eval/score"])
            and isinstance(e.get("time/train_since_start"), int | float)
        ]

    sa, sb = scored(a), scored(b)
    if not sa or not sb:
        return None
    target = min(max(s for s, _ in sa), max(s for s, _ in sb))
    ta = next(t for s, t in sa if s >= target)
    tb = next(t for s, t in sb if s >= target)
    return {"target": target, "seconds": (ta, tb), "ratio": ta / tb if tb > 0 else math.inf}


def _pct(value: Any) -> str:
    return f"{100 * value:.1f}" if isinstance(value, int | float) and not math.isnan(value) else "–"


def _hours(value: Any) -> str:
    return f"{value / 3600:.2f}" if isinstance(value, int | float) else "–"


def idle_ratios(totals: dict[str, Any]) -> tuple[float | None, float | None]:
    """(trainer, generator) idle ratios of a run. Asynchronous: as measured (``async/…``). Staged: the
    trainer waits while the engine generates and the verifier finishes (rollout + verify + hand-over over
    the stages' total), and the engine waits while the trainer optimizes (optimize over the total)."""
    if "async/trainer_idle_ratio" in totals:
        return totals["async/trainer_idle_ratio"], totals.get("async/generator_idle_ratio")
    total = totals.get("time/total")
    if not isinstance(total, int | float) or total <= 0:
        return None, None
    waiting = sum(float(totals.get(k, 0.0) or 0.0) for k in ("time/rollout", "time/verify", "time/handover"))
    return waiting / total, float(totals.get("time/optimize", 0.0) or 0.0) / total


def _row(run: RunReport) -> list[str]:
    metrics = (run.best or {}).get("metrics", {})
    cells = [run.name]
    cells += [_pct(metrics.get(f"eval/{b}/{run.metric}")) for b in run.benchmarks]
    cells.append(_pct((run.best or {}).get("score")))
    cells.append(str((run.best or {}).get("update", "–")))
    t = run.totals
    train_total = t.get("time/total")
    if isinstance(train_total, int | float):
        train_total -= t.get("time/eval", 0.0) or 0.0
    trainer_idle, generator_idle = idle_ratios(t)
    cells += [_hours(t.get("time/rollout")), _hours(train_total)]
    cells += [_pct(trainer_idle), _pct(generator_idle), str(t.get("async/staleness_max", "–"))]
    cells.append(str(t.get("engine_switches", "–")))
    veto = run.veto_per_stage
    cells.append(" / ".join(f"{100 * v:.2f}" for v in veto) if veto else "–")
    cells.append(f"{100 * sum(veto) / len(veto):.2f}" if veto else "–")
    return cells


def render_report(runs: list[RunReport]) -> str:
    """The table (one row per run) and, for two runs, the time-to-accuracy line."""
    benchmarks = list(dict.fromkeys(b for r in runs for b in r.benchmarks))
    for run in runs:  # align the columns: every run gets every benchmark (– where it has none)
        run.benchmarks = benchmarks
    metric = runs[0].metric if runs else "pass@1"
    headers = [
        "run",
        *benchmarks,
        f"avg {metric}",
        "best at",
        "T_rollout h",
        "T_total h",
        "trainer idle %",
        "gen idle %",
        "max lag",
        "switches",
        "veto % per stage",
        "veto % mean",
    ]
    rows = [_row(r) for r in runs]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    out = [line(headers), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]
    out.append(
        f"accuracy at the best checkpoint ({metric}, %); T_total excludes evaluation; idle: time waiting "
        f"for the other side over the run (staged: derived from the phase times); max lag: the largest "
        f"staleness trained on (asynchronous runs)."
    )
    for run in runs:
        if not has_evaluation(run):
            out.append(
                f"{run.name} has no evaluation (no eval in metrics.jsonl, no best.json): its accuracy "
                "columns are empty. Set eval.benchmarks and train.eval_every to evaluate during training, "
                "or evaluate its checkpoints with `mucode eval`."
            )
    if len(runs) == 2:
        tta = time_to_accuracy(runs[0], runs[1])
        if tta is None:
            out.append("time-to-accuracy: needs evaluations with scores in both runs (train.eval_every)")
        else:
            ta, tb = tta["seconds"]
            out.append(
                f"time-to-accuracy (target {_pct(tta['target'])}, the lower best score): {runs[0].name} "
                f"{ta / 3600:.3f} h, {runs[1].name} {tb / 3600:.3f} h → ratio {tta['ratio']:.2f}×"
            )
    return "\n".join(out)


def has_evaluation(run: RunReport) -> bool:
    return bool(run.evals) or run.best is not None


def plot_accuracy(runs: list[RunReport], path: Path) -> Path | None:
    """Score of every evaluation against training hours, one line per run; None (nothing drawn) when
    no run has an evaluation."""
    if not any(has_evaluation(run) for run in runs):
        return None
    import matplotlib  # lazy: matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: matplotlib

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for run in runs:
        points = [
            (float(e["time/train_since_start"]) / 3600, 100 * float(e["eval/score"]))
            for e in run.evals
            if isinstance(e.get("time/train_since_start"), int | float)
            and isinstance(e.get("eval/score"), int | float)
            and not math.isnan(e["eval/score"])
        ]
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, marker="o", label=run.name)
    ax.set_xlabel("training wall-clock (hours, evaluation excluded)")
    ax.set_ylabel(f"mean {runs[0].metric if runs else 'pass@1'} (%)")
    ax.set_title("Accuracy against wall-clock")
    ax.grid(alpha=0.3)
    if runs:
        ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
