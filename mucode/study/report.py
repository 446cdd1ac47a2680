"""A study's report: per variant the mean ± sd over seeds, the collapse rule, the findings, a plot.

Read from each run's ``metrics.jsonl``: the ``heldout`` events (the current policy's reward every N
updates, :mod:`mucode.study.heldout`) and the update lines (``stale/veto_token_frac``,
``stale/ratio_mean_neg_adv``). Per run:

- ``peak``: the highest held-out reward; ``final``: the last one; ``at_128``: the one at update 128
  (or the last before it);
- ``collapse``: the update of collapse by :func:`collapse_update` (None: no collapse);
- ``veto``: the mean vetoed token share of each stage's updates (0 where the objective vetoes nothing).

Per variant: how many of its seeds finished, the mean and sample sd over the *finished* seeds of each
figure (sd 0 for one seed), the collapsed runs ``k/n`` and the mean update of collapse over those,
the runs ending below ``LOW_FINAL``, and every seed's final reward (none is hidden; a run that did not
finish is listed as such, with its last evaluation so far, and counts in no statistic).
:func:`findings` checks the paper's claims on the ``veto-scopes`` study and says, with the numbers,
which held on this toy and which did not.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from mucode.study.runner import RunSpec

__all__ = ["COLLAPSE_DROP", "COLLAPSE_FLOOR", "VariantStats", "collapse_update", "findings", "write_report"]

COLLAPSE_DROP = 0.5
"""A collapse is a fall below this share of the best held-out reward so far …"""
COLLAPSE_FLOOR = 0.2
"""… once that best is at least this (a run that never learned cannot collapse) …"""
COLLAPSE_RECOVERY = 0.8
"""… after which no evaluation gets back to this share of that best."""
LOW_FINAL = 0.8
"""The issue's toy counted the runs ending below this held-out reward; the report does too."""


def collapse_update(curve: list[tuple[int, float]]) -> int | None:
    """The update of collapse of a held-out curve ``[(update, reward), …]`` in update order.

    Rule: the first evaluation whose reward is below ``COLLAPSE_DROP`` × the best reward so far, when
    that best is at least ``COLLAPSE_FLOOR`` and no later evaluation reaches ``COLLAPSE_RECOVERY`` ×
    that best (a dip that recovers is noise, not a collapse). None when there is no such evaluation."""
    best = -math.inf
    for i, (update, reward) in enumerate(curve):
        best = max(best, reward)
        fell = best >= COLLAPSE_FLOOR and reward < COLLAPSE_DROP * best
        if fell and all(r < COLLAPSE_RECOVERY * best for _, r in curve[i + 1 :]):
            return update
    return None


@dataclass
class RunFigures:
    seed: int
    finished: bool
    curve: list[tuple[int, float]] = field(default_factory=list)
    veto: list[float] = field(default_factory=list)
    rho_neg: list[float] = field(default_factory=list)
    seconds: float = math.nan

    @property
    def peak(self) -> float:
        return max((r for _, r in self.curve), default=math.nan)

    @property
    def final(self) -> float:
        return self.curve[-1][1] if self.curve else math.nan

    def at(self, update: int) -> float:
        before = [r for u, r in self.curve if u <= update]
        return before[-1] if before else math.nan

    @property
    def collapse(self) -> int | None:
        return collapse_update(self.curve)


def read_run(spec: RunSpec) -> RunFigures:
    """A run's figures from its ``metrics.jsonl`` (empty when it never started)."""
    fig = RunFigures(seed=spec.seed, finished=spec.done())
    path = spec.path / "metrics.jsonl"
    if not path.exists():
        return fig
    per_stage: dict[int, list[float]] = {}
    rho: dict[int, list[float]] = {}
    heldout: dict[int, float] = {}  # by update: a resumed run evaluates its resume point again
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if row.get("event") == "heldout":
            heldout[int(row["update"])] = float(row["study/heldout_reward"])
        elif "event" not in row and "stage" in row:
            per_stage.setdefault(int(row["stage"]), []).append(float(row.get("stale/veto_token_frac", 0.0)))
            if "stale/ratio_mean_neg_adv" in row:
                rho.setdefault(int(row["stage"]), []).append(float(row["stale/ratio_mean_neg_adv"]))
    fig.curve = sorted(heldout.items())
    fig.veto = [statistics.fmean(per_stage[k]) for k in sorted(per_stage)]
    fig.rho_neg = [statistics.fmean(rho[k]) for k in sorted(rho)]
    if fig.finished:
        done = json.loads((spec.path / "done.json").read_text())
        totals = done.get("totals", {})  # the stages' seconds summed over invocations (a resumed run's too)
        fig.seconds = float(totals.get("time/total", totals.get("time/this_invocation")) or math.nan)
    return fig


def _mean_sd(values: list[float]) -> tuple[float, float]:
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return math.nan, math.nan
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


@dataclass
class VariantStats:
    name: str
    mu: int
    runs: list[RunFigures]
    """Every seed's run, finished or not (the table lists each); the statistics are the finished ones'."""

    @property
    def done(self) -> list[RunFigures]:
        return [r for r in self.runs if r.finished]

    def stat(self, attr: str) -> tuple[float, float]:
        return _mean_sd([getattr(r, attr) for r in self.done])

    def at(self, update: int) -> tuple[float, float]:
        return _mean_sd([r.at(update) for r in self.done])

    @property
    def collapsed(self) -> list[int]:
        return [c for c in (r.collapse for r in self.done) if c is not None]

    def veto_by_stage(self) -> list[float]:
        stages = max((len(r.veto) for r in self.done), default=0)
        return [statistics.fmean([r.veto[k] for r in self.done if k < len(r.veto)]) for k in range(stages)]


def _mu(spec: RunSpec) -> int:
    for o in spec.overrides:
        if o.startswith("batch.updates_per_stage="):
            return int(o.partition("=")[2])
    return 0


def collect(specs: list[RunSpec]) -> list[VariantStats]:
    out: dict[str, VariantStats] = {}
    for spec in specs:
        v = out.setdefault(spec.variant, VariantStats(spec.variant, _mu(spec), []))
        v.runs.append(read_run(spec))
    return list(out.values())


def _pm(pair: tuple[float, float]) -> str:
    mean, sd = pair
    return "n/a" if math.isnan(mean) else f"{mean:.2f} ± {sd:.2f}"


def _veto_cell(shares: list[float]) -> str:
    if not shares:
        return "n/a"
    if len(shares) <= 4:
        return " / ".join(f"{s:.3f}" for s in shares)
    later = statistics.fmean(shares[1:])
    return f"{shares[0]:.3f} / later {later:.3f} ({len(shares)} stages)"


def _final_cell(r: RunFigures) -> str:
    if not r.curve:
        return "not started"
    return f"{r.final:.2f}" + ("" if r.finished else f" (unfinished, at {r.curve[-1][0]})")


def table(stats: list[VariantStats]) -> str:
    """The markdown table: one row per variant, every seed's final reward in the last column."""
    lines = [
        "| variant | μ | finished | reward at 128 | peak | final | collapsed | update of collapse | ending below "
        f"{LOW_FINAL} | vetoed share per stage | s/run | final per seed |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for v in stats:
        collapsed = v.collapsed
        when = f"{statistics.fmean(collapsed):.0f}" if collapsed else "–"
        seeds = ", ".join(f"{r.seed}: {_final_cell(r)}" for r in v.runs)
        seconds, n = _mean_sd([r.seconds for r in v.done])[0], len(v.done)
        lines.append(
            f"| {v.name} | {v.mu} | {n}/{len(v.runs)} | {_pm(v.at(128))} | {_pm(v.stat('peak'))} "
            f"| {_pm(v.stat('final'))} "
            f"| {len(collapsed)}/{n} | {when} | {sum(r.final < LOW_FINAL for r in v.done)}/{n} "
            f"| {_veto_cell(v.veto_by_stage())} "
            f"| {'n/a' if math.isnan(seconds) else f'{seconds:.0f}'} | {seeds} |"
        )
    return "\n".join(lines)


def findings(stats: list[VariantStats]) -> list[str]:
    """The paper's veto-scopes claims checked on these runs: one line each, ``held``/``did not hold``
    (or ``not run`` when a variant it needs is missing), with the numbers."""
    by = {v.name: v for v in stats if v.done}  # a variant without a finished run is "not run"

    def verdict(ok: bool) -> str:
        return "held" if ok else "did NOT hold"

    out = []
    if {"GRPO mu=4", "GRPO clip=0.2"} <= set(by):
        a4, ac = by["GRPO mu=4"].at(128)[0], by["GRPO clip=0.2"].at(128)[0]
        out.append(f"(a) GRPO clip 0.2 at high μ behind GRPO μ=4 early (reward at 128: {ac:.2f} vs {a4:.2f}): "
                   f"{verdict(ac < a4)}")  # fmt: skip
    else:
        out.append("(a) not run (needs 'GRPO mu=4' and 'GRPO clip=0.2')")
    for name in ("veto=none", "veto=trigger"):
        if name in by:
            n, k = len(by[name].done), len(by[name].collapsed)
            out.append(f"(c) {name} collapses in most seeds ({k}/{n}): {verdict(k > n / 2)}")
        else:
            out.append(f"(c) {name}: not run")
    if {"veto=sequence", "veto=none"} <= set(by):
        (ms, ss), (mn, sn) = by["veto=sequence"].stat("final"), by["veto=none"].stat("final")
        seeds = min(len(by["veto=sequence"].done), len(by["veto=none"].done))
        out.append(f"(c) sequence veto's final reward above no-veto's by more than their spread "
                   f"({ms:.2f} ± {ss:.2f} vs {mn:.2f} ± {sn:.2f}): "
                   + (verdict(ms - mn > ss + sn) if seeds > 1 else "undecided (one seed has no spread)"))  # fmt: skip
    else:
        out.append("(c) sequence vs none: not run")
    if "veto=sequence" in by and len(by["veto=sequence"].veto_by_stage()) > 1:
        shares = by["veto=sequence"].veto_by_stage()
        later = statistics.fmean(shares[1:])
        out.append(f"(d) vetoed share in stage 0 well above later stages ({shares[0]:.3f} vs {later:.3f}; "
                   f"rule: more than twice): {verdict(shares[0] > 2 * later)}")  # fmt: skip
    else:
        out.append("(d) not run (needs 'veto=sequence' with more than one stage)")
    return out


def plot(stats: list[VariantStats], path: Path, stage_every: int) -> Path:
    """Held-out reward against updates: mean line and ±sd band per variant, thin per-seed lines,
    dashed stage boundaries every ``stage_every`` updates."""
    import matplotlib  # lazy: matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: matplotlib

    fig, ax = plt.subplots(figsize=(9, 5))
    last = 0
    for i, v in enumerate(stats):
        color = f"C{i % 10}"
        updates = sorted({u for r in v.runs for u, _ in r.curve})
        means, sds = [], []
        for u in updates:
            m, s = _mean_sd([dict(r.curve).get(u, math.nan) for r in v.runs])
            means.append(m)
            sds.append(s)
        for r in v.runs:
            ax.plot([u for u, _ in r.curve], [x for _, x in r.curve], color=color, alpha=0.25, lw=0.7)
        ax.plot(updates, means, color=color, lw=2, label=f"{v.name} ({len(v.done)}/{len(v.runs)} finished)")
        ax.fill_between(
            updates,
            [m - s for m, s in zip(means, sds, strict=True)],
            [m + s for m, s in zip(means, sds, strict=True)],
            color=color,
            alpha=0.15,
        )
        last = max([last, *updates])
    for boundary in range(stage_every, last, stage_every):
        ax.axvline(boundary, color="grey", ls="--", lw=0.8)
    ax.set_xlabel(f"update (dashed: stage boundaries every {stage_every})")
    ax.set_ylabel("held-out reward (current policy)")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_report(specs: list[RunSpec], root: Path, *, title: str, stage_every: int) -> Path:
    """``report.md`` (table, findings, the collapse rule), ``report.json`` and ``reward.png`` in ``root``."""
    stats = collect(specs)
    picture = plot(stats, root / "reward.png", stage_every)
    lines = [f"# {title}", "", table(stats), ""]
    if {"veto=none", "veto=sequence"} & {v.name for v in stats}:
        lines += ["## The paper's findings on this toy", "", *(f"- {f}" for f in findings(stats)), ""]
    lines += [
        f"Rewards are the current policy's on the task's prompts (held-out samples), mean ± sd over seeds. "
        f"Collapse: the first evaluation below {COLLAPSE_DROP} × the best so far (best ≥ {COLLAPSE_FLOOR}) "
        f"with no later evaluation back at {COLLAPSE_RECOVERY} × that best. Plot: {picture.name}.",
        "",
    ]
    report = root / "report.md"
    report.write_text("\n".join(lines))
    data = {
        v.name: {
            "mu": v.mu,
            "runs": [
                {"seed": r.seed, "finished": r.finished, "peak": r.peak, "final": r.final, "collapse": r.collapse,
                 "veto_by_stage": r.veto, "rho_neg_adv_by_stage": r.rho_neg, "curve": r.curve, "seconds": r.seconds}
                for r in v.runs
            ],
        }
        for v in stats
    }  # fmt: skip
    (root / "report.json").write_text(json.dumps(data, indent=1, default=str) + "\n")
    return report
