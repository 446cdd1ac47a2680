"""``plots/async.png`` of an asynchronous run: staleness histogram per stage, idle ratio and lag per update.

Drawn by ``mucode plot`` (``mucode.train.plot.plot_run``) when the run's metrics hold ``async/…`` keys;
the histogram comes from the stage events (the stores' ``policy_version`` per group, see
``mucode.train.async_loop.stage_staleness``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["plot_async"]


def plot_async(run_dir: Path, rows: list[dict[str, Any]], events: list[dict[str, Any]]) -> list[Path]:
    """Write ``plots/async.png`` (nothing, and ``[]``, for a staged run)."""
    series = [r for r in rows if "async/staleness_max" in r]
    if not series:
        return []
    import matplotlib  # lazy: matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: matplotlib

    fig, (hist_ax, idle_ax, lag_ax) = plt.subplots(1, 3, figsize=(14, 3.8))
    stages = [e for e in events if e.get("event") == "stage" and e.get("async/staleness_hist")]
    width = 0.8 / max(1, len(stages))
    for i, event in enumerate(stages):
        hist = {int(s): n for s, n in event["async/staleness_hist"].items()}
        xs = sorted(hist)
        hist_ax.bar(
            [x + i * width for x in xs], [hist[x] for x in xs], width=width, label=f"stage {event['stage']}"
        )
    hist_ax.set(title="Staleness (consuming update − sampling version)", xlabel="updates", ylabel="groups")
    if stages:
        hist_ax.legend(fontsize=7)
    updates = [int(r["update"]) for r in series]
    idle_ax.plot(updates, [float(r.get("async/trainer_idle_ratio", 0.0)) for r in series])
    idle_ax.set(
        title="Trainer idle ratio (cumulative)", xlabel="update", ylabel="waiting / total", ylim=(0, 1)
    )
    lag_ax.plot(updates, [float(r["async/staleness_max"]) for r in series], label="max")
    lag_ax.plot(updates, [float(r.get("async/staleness_mean", 0.0)) for r in series], label="mean")
    lag_ax.set(title="Staleness per update", xlabel="update", ylabel="updates")
    lag_ax.legend(fontsize=7)
    fig.suptitle(f"{run_dir.name}: asynchronous figures")
    fig.tight_layout()
    out = run_dir / "plots" / "async.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return [out]
