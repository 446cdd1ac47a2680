"""Per-benchmark figures from verdicts, the JSON report, and tables for terminals and Markdown.

A report is a dict keyed by benchmark name. Each entry holds `pass@1` (a fraction in [0, 1]) and
`pass@k` for every k up to the samples per problem, plus counts and breakdowns:

    {"math500": {"pass@1": 0.41, "pass@2": 0.52, "n_problems": 500, "samples_per_problem": 4,
                 "n_samples": 2000, "n_correct": 820, "charged": 0, "infra_errors": 0,
                 "statuses": {"correct": 820, "wrong_answer": 1100, "no_answer": 80}}, ...}

Samples whose verification still failed for infrastructure reasons after the retries
(`verifier_error`, `sandbox_error`) are *charged* to the model: they count in n as failures, never
left out (leaving them out would let a model raise its pass@k by making the verifier fail on its
wrong samples), and their number is reported as `charged` (also `infra_errors`, its older name). A
rerun with the same run directory verifies them again (they are never cached). A problem with fewer
than k samples is left out of pass@k (`pass@k` then averages fewer problems, and `n_problems_at_k`
says how many when that happens).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mucode.eval.passk import mean_pass_at_k
from mucode.eval.store import INFRA_STATUSES

__all__ = ["ProblemOutcome", "format_table", "metrics_from_report", "summarize", "write_report"]


@dataclass
class ProblemOutcome:
    """The verdicts of one problem's samples."""

    problem_id: str
    statuses: list[str]
    """One status per sample (`correct` passes)."""
    labels: dict[str, str] = field(default_factory=dict)
    """Breakdown labels, e.g. {"difficulty": "easy", "platform": "atcoder"}."""

    @property
    def n(self) -> int:
        """Every sample, charged ones included (they are failures)."""
        return len(self.statuses)

    @property
    def charged(self) -> int:
        """Samples the verifier could not judge after its retries (counted as failures)."""
        return sum(s in INFRA_STATUSES for s in self.statuses)

    @property
    def c(self) -> int:
        return sum(s == "correct" for s in self.statuses)


def _pass_table(outcomes: Sequence[ProblemOutcome], max_k: int) -> dict[str, Any]:
    counts = [(o.n, o.c) for o in outcomes if o.n > 0]
    table: dict[str, Any] = {}
    partial: dict[str, int] = {}
    for k in range(1, max_k + 1):
        mean, used = mean_pass_at_k(counts, k)
        if used == 0:
            continue
        table[f"pass@{k}"] = mean
        if used < len(outcomes):
            partial[f"pass@{k}"] = used
    if partial:
        table["n_problems_at_k"] = partial
    return table


def summarize(
    outcomes: Sequence[ProblemOutcome], samples_per_problem: int, breakdowns: Iterable[str] = ()
) -> dict[str, Any]:
    """A benchmark's report entry: pass@k for k = 1 … samples_per_problem, counts, and breakdowns."""
    statuses = Counter(s for o in outcomes for s in o.statuses)
    entry: dict[str, Any] = _pass_table(outcomes, samples_per_problem)
    entry.update(
        n_problems=len(outcomes),
        samples_per_problem=samples_per_problem,
        n_samples=sum(len(o.statuses) for o in outcomes),
        n_correct=statuses.get("correct", 0),
        charged=sum(o.charged for o in outcomes),
        infra_errors=sum(o.charged for o in outcomes),
        statuses=dict(sorted(statuses.items())),
    )
    for label in breakdowns:
        groups: dict[str, list[ProblemOutcome]] = {}
        for outcome in outcomes:
            groups.setdefault(outcome.labels.get(label, "unknown"), []).append(outcome)
        entry[f"by_{label}"] = {
            value: {**_pass_table(group, samples_per_problem), "n_problems": len(group)}
            for value, group in sorted(groups.items())
        }
    return entry


def write_report(report: dict[str, Any], path: str | Path) -> Path:
    """Write the JSON report (parent directories are created)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, sort_keys=False, allow_nan=True) + "\n")
    return out


def metrics_from_report(report: dict[str, Any], prefix: str = "eval/") -> dict[str, float]:
    """Flat metric keys for a logger: `eval/<benchmark>/pass@k` (and `eval/average/pass@1`)."""
    metrics: dict[str, float] = {}
    for name, entry in report.items():
        if not isinstance(entry, dict):
            continue
        for key, value in entry.items():
            if key.startswith("pass@") and isinstance(value, int | float):
                metrics[f"{prefix}{name}/{key}"] = float(value)
    return metrics


def _pct(value: Any) -> str:
    if not isinstance(value, int | float) or math.isnan(value):
        return "–"
    return f"{100 * value:.1f}"


def _ks(rows: dict[str, dict[str, Any]], ks: Sequence[int] | None) -> list[int]:
    if ks is not None:
        return list(ks)
    max_k = max((r.get("samples_per_problem", 1) for r in rows.values()), default=1)
    chosen = [k for k in (1, 2, 4, 8, 16, 32, 64) if k <= max_k]
    return chosen + ([max_k] if max_k not in chosen else [])


def format_table(report: dict[str, Any], *, ks: Sequence[int] | None = None, title: str | None = None) -> str:
    """A Markdown table (aligned, so it reads in a terminal too) of the report's benchmarks, in %.

    Rows: each benchmark, then its breakdowns indented under it (`difficulty=easy`, …).
    """
    rows: dict[str, dict[str, Any]] = {
        k: v for k, v in report.items() if isinstance(v, dict) and "pass@1" in v
    }
    columns = [f"pass@{k}" for k in _ks(rows, ks)]
    header = ["benchmark", "problems", "n", *columns]
    lines: list[list[str]] = []
    for name, entry in rows.items():
        n = entry.get("samples_per_problem", "")
        if entry.get("partial"):  # an average that lacks some benchmarks
            have = len(entry.get("benchmarks", []))
            name = f"{name} ({have} of {have + len(entry.get('missing', []))})"
        lines.append([name, str(entry.get("n_problems", "")), str(n), *(_pct(entry.get(c)) for c in columns)])
        for key, groups in entry.items():
            if not key.startswith("by_") or not isinstance(groups, dict):
                continue
            for value, sub in groups.items():
                label = f"  {key[3:]}={value}"
                lines.append(
                    [label, str(sub.get("n_problems", "")), str(n), *(_pct(sub.get(c)) for c in columns)]
                )
    widths = [max(len(h), *(len(r[i]) for r in lines)) if lines else len(h) for i, h in enumerate(header)]

    def render(cells: list[str]) -> str:
        padded = [
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if i else ("-" * (w + 2)) for i, w in enumerate(widths)) + "|"
    out = ([f"### {title}", ""] if title else []) + [render(header), rule, *(render(r) for r in lines)]
    return "\n".join(out)
