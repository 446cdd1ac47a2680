"""``mucode plot RUN_DIR``: PNGs of a run's metrics over updates, stage boundaries marked.

Writes ``<run_dir>/plots/{reward,veto_fraction,clip_fraction,rho_neg_adv}.png`` and
``overview.png`` (all four in one figure), and for an asynchronous run ``async.png``
(``mucode.train.async_plot``). Each panel draws the first metric key of its list that
the run logged, so a GRPO run (no veto) still plots; a panel with no data says so.

The methods' own diagnostics (:data:`METHOD_PANELS`: reference KL, zero-variance groups, ConSPO's
margin and discarded groups, AGPO's temperatures and clip, the replay buffer) are drawn only when
the run logged them, each in its own PNG and together in ``methods.png``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mucode.train.async_plot import plot_async
from mucode.train.logger import read_metrics

__all__ = ["METHOD_PANELS", "PANELS", "plot_run"]

# (file stem, title, metric keys drawn (first group present wins), y label)
PANELS: list[tuple[str, str, list[list[str]], str]] = [
    ("reward", "Reward", [["reward/mean"]], "mean reward of the minibatch"),
    (
        "veto_fraction",
        "Veto fraction",
        [["stale/veto_token_frac", "stale/veto_seq_frac"], ["stale/m2po_masked_token_frac"]],
        "fraction vetoed (tokens, responses)",
    ),
    (
        "clip_fraction",
        "Clip fraction",
        [["stale/clip_frac_low", "stale/clip_frac_high", "stale/clip_frac_dual"]],
        "fraction of tokens clipped",
    ),
    ("rho_neg_adv", "E[ρ | A<0]", [["stale/ratio_mean_neg_adv"]], "mean ratio on A<0 tokens"),
]


METHOD_PANELS: list[tuple[str, str, list[list[str]], str]] = [
    ("kl_ref", "KL to the reference policy", [["kl/ref"]], "KL(π_θ ‖ π_ref) per token"),
    ("zero_variance", "Zero-variance groups", [["groups/zero_variance_frac"]], "fraction of groups"),
    ("conspo_margin", "ConSPO margin", [["conspo/margin"]], "m_t"),
    (
        "conspo_discarded",
        "ConSPO groups",
        [["conspo/discarded_groups", "conspo/groups"]],
        "groups per update",
    ),
    (
        "agpo_temperature",
        "AGPO temperature",
        [["agpo/temperature_mean", "agpo/temperature_min", "agpo/temperature_max"]],
        "sampling temperature",
    ),
    ("agpo_clip", "AGPO clip ε", [["agpo/clip_eps_mean", "agpo/clip_eps_min", "agpo/clip_eps_max"]], "ε"),
    ("replay_buffer", "Replay buffer", [["replay/buffer_size"]], "rollouts buffered"),
    ("replay_fraction", "Replayed fraction", [["replay/fraction"]], "replayed / trained rollouts"),
    ("replay_age", "Replay age", [["replay/age_mean", "replay/age_max"]], "updates since first use"),
]
"""(file stem, title, metric keys, y label) of the methods' diagnostics, drawn when logged."""


def _series(rows: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    """(updates, values) of ``key``, leaving out updates where the metric had nothing to average
    (e.g. E[ρ|A<0] of a minibatch without A<0 tokens, which the algo core reports as 0)."""
    from mucode.algo.metrics import METRICS  # lazy: torch

    spec = METRICS.get(key)
    weight = spec.weight if spec is not None else None
    xs, ys = [], []
    for row in rows:
        value = row.get(key)
        if weight is not None and not row.get(weight):
            continue
        if isinstance(value, int | float):
            xs.append(int(row["update"]))
            ys.append(float(value))
    return xs, ys


def _smooth(ys: list[float], window: int) -> list[float]:
    out, acc = [], 0.0
    for i, y in enumerate(ys):
        acc += y
        if i >= window:
            acc -= ys[i - window]
        out.append(acc / min(i + 1, window))
    return out


def _draw(
    ax: Any,
    rows: list[dict[str, Any]],
    boundaries: list[float],
    title: str,
    key_groups: list[list[str]],
    ylabel: str,
    stage_rewards: Sequence[tuple[float, float]] = (),
) -> None:
    keys = next((g for g in key_groups if any(_series(rows, k)[0] for k in g)), [])
    drawn = False
    for key in keys:
        xs, ys = _series(rows, key)
        if not xs:
            continue
        drawn = True
        window = max(1, min(32, len(xs) // 8))
        line = ax.plot(xs, ys, alpha=0.3 if window > 1 else 1.0, linewidth=0.8)[0]
        if window > 1:  # a running mean that restarts at each stage boundary
            smooth: list[float] = []
            edges = [float("-inf"), *boundaries, float("inf")]
            for lo, hi in zip(edges, edges[1:], strict=False):
                smooth += _smooth([y for x, y in zip(xs, ys, strict=True) if lo < x < hi], window)
            ax.plot(xs, smooth, color=line.get_color(), label=f"{key} (running mean of {window}, per stage)")
        else:
            line.set_label(key)
    for b in boundaries:
        ax.axvline(b, color="grey", linestyle="--", linewidth=0.8)
    if stage_rewards and keys == ["reward/mean"]:
        stage_xs, stage_ys = zip(*stage_rewards, strict=True)
        ax.plot(
            stage_xs,
            stage_ys,
            "o",
            color="black",
            markersize=4,
            label="rollouts of β_k (and of the final policy)",
        )
        drawn = True
    if not drawn:
        ax.text(0.5, 0.5, "not logged by this run", ha="center", va="center", transform=ax.transAxes)
    else:
        ax.legend(fontsize=7)
    ax.set_title(title)
    ax.set_xlabel("update")
    ax.set_ylabel(ylabel)


def plot_run(run_dir: str | Path) -> list[Path]:
    """Write the PNGs and return their paths."""
    import matplotlib  # lazy: matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: matplotlib

    run_dir = Path(run_dir)
    rows, events = read_metrics(run_dir)
    if not rows:
        raise ValueError(f"{run_dir}/metrics.jsonl has no update rows yet: nothing to plot")
    # A boundary sits after the last update of every stage but the final one.
    ends = sorted({int(e["update"]) for e in events if e.get("event") == "stage" and "update" in e})
    last = max(int(r["update"]) for r in rows)
    boundaries = [u + 0.5 for u in ends if u < last]
    # the reward of each stage's rollouts, drawn at the stage's first update
    starts = [0, *ends]
    stage_rewards = [
        (starts[i] + 1, float(e["reward/rollout_mean"]))
        for i, e in enumerate(ev for ev in events if ev.get("event") == "stage")
        if isinstance(e.get("reward/rollout_mean"), int | float) and i < len(starts)
    ]
    stage_rewards += [
        (last + 1, float(e["reward/rollout_mean"]))
        for e in events
        if e.get("event") == "final" and isinstance(e.get("reward/rollout_mean"), int | float)
    ]
    out = run_dir / "plots"
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for stem, title, keys, ylabel in PANELS:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        _draw(ax, rows, boundaries, title, keys, ylabel, stage_rewards)
        fig.tight_layout()
        fig.savefig(out / f"{stem}.png", dpi=110)
        plt.close(fig)
        paths.append(out / f"{stem}.png")
    paths += _method_plots(plt, rows, boundaries, out)
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    for ax, (_, title, keys, ylabel) in zip(axes.flat, PANELS, strict=True):
        _draw(ax, rows, boundaries, title, keys, ylabel, stage_rewards)
    fig.suptitle(f"{run_dir.name} (dashed: stage boundaries)")
    fig.tight_layout()
    fig.savefig(out / "overview.png", dpi=110)
    plt.close(fig)
    paths.append(out / "overview.png")
    return paths + plot_async(run_dir, rows, events)  # an asynchronous run's staleness and idle ratio


def _method_plots(plt: Any, rows: list[dict[str, Any]], boundaries: list[float], out: Path) -> list[Path]:
    """The :data:`METHOD_PANELS` this run logged: one PNG each and ``methods.png`` with all of them."""
    logged = [panel for panel in METHOD_PANELS if any(_series(rows, k)[0] for g in panel[2] for k in g)]
    paths = []
    for stem, title, keys, ylabel in logged:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        _draw(ax, rows, boundaries, title, keys, ylabel)
        fig.tight_layout()
        fig.savefig(out / f"{stem}.png", dpi=110)
        plt.close(fig)
        paths.append(out / f"{stem}.png")
    if logged:
        cols = min(3, len(logged))
        rows_n = -(-len(logged) // cols)
        fig, axes = plt.subplots(rows_n, cols, figsize=(5.5 * cols, 3.5 * rows_n), squeeze=False)
        for ax, (_, title, keys, ylabel) in zip(axes.flat, logged, strict=False):
            _draw(ax, rows, boundaries, title, keys, ylabel)
        for ax in list(axes.flat)[len(logged) :]:
            ax.axis("off")
        fig.suptitle(f"{out.parent.name}: method diagnostics (dashed: stage boundaries)")
        fig.tight_layout()
        fig.savefig(out / "methods.png", dpi=110)
        plt.close(fig)
        paths.append(out / "methods.png")
    return paths
