"""The collapse rule on planted curves, and the report's findings on planted runs."""

from __future__ import annotations

from mucode.study.report import RunFigures, VariantStats, collapse_update, findings, table


def _curve(values: list[float], every: int = 16) -> list[tuple[int, float]]:
    return [(i * every, v) for i, v in enumerate(values)]


def test_a_fall_below_half_the_best_that_stays_down_is_a_collapse() -> None:
    assert collapse_update(_curve([0.3, 0.6, 0.9, 0.95, 0.6, 0.4, 0.2, 0.1])) == 80  # 0.4 < 0.475
    assert collapse_update(_curve([0.3, 0.9, 0.0, 0.0, 0.0])) == 32


def test_steady_learning_noise_and_recovered_dips_are_not_collapses() -> None:
    assert collapse_update(_curve([0.3, 0.5, 0.7, 0.9, 1.0, 1.0])) is None
    assert collapse_update(_curve([0.3, 0.8, 0.35, 0.75, 0.9])) is None  # dips, then back above 0.8 × best
    assert collapse_update(_curve([0.9, 0.85, 0.8, 0.7, 0.6])) is None  # a slide, never below half
    assert collapse_update(_curve([0.15, 0.05, 0.0])) is None  # never learned (best < 0.2)
    assert collapse_update([]) is None


def test_a_partial_recovery_below_the_recovery_mark_is_still_a_collapse() -> None:
    assert collapse_update(_curve([0.3, 1.0, 0.3, 0.7, 0.2])) == 32  # 0.7 < 0.8 × 1.0


def _variant(
    name: str, finals: list[list[float]], veto: list[float] | None = None, mu: int = 256
) -> VariantStats:
    runs = [
        RunFigures(seed=i, finished=True, curve=_curve(c, 64), veto=list(veto or []))
        for i, c in enumerate(finals)
    ]
    return VariantStats(name, mu, runs)


def test_findings_say_held_and_did_not_hold_with_numbers() -> None:
    stats = [
        _variant("GRPO mu=4", [[0.3, 0.9, 1.0, 1.0]] * 2, mu=4),
        _variant("GRPO clip=0.2", [[0.3, 0.4, 0.8, 0.95]] * 2),
        _variant("veto=none", [[0.3, 0.9, 0.2, 0.1], [0.3, 0.9, 0.1, 0.0]]),
        _variant("veto=trigger", [[0.3, 0.9, 0.9, 0.9], [0.3, 0.9, 0.95, 0.9]]),
        _variant(
            "veto=sequence", [[0.3, 0.9, 0.95, 1.0], [0.3, 0.9, 0.9, 0.9]], veto=[0.2, 0.01, 0.02, 0.01]
        ),
    ]
    lines = findings(stats)
    assert lines[0].startswith("(a)") and lines[0].endswith(": held")
    assert "veto=none collapses in most seeds (2/2): held" in lines[1]
    assert "veto=trigger collapses in most seeds (0/2): did NOT hold" in lines[2]
    assert lines[3].endswith(": held") and "0.95 ± 0.07 vs 0.05 ± 0.07" in lines[3]
    assert "(0.200 vs 0.013" in lines[4] and lines[4].endswith(": held")
    one_seed = [_variant("veto=none", [[0.3, 0.9, 0.9]]), _variant("veto=sequence", [[0.3, 0.9, 1.0]])]
    assert findings(one_seed)[3].endswith(": undecided (one seed has no spread)")
    assert findings(stats[2:3])[0] == "(a) not run (needs 'GRPO mu=4' and 'GRPO clip=0.2')"


def test_unfinished_runs_are_listed_but_count_in_no_statistic() -> None:
    none = _variant("veto=none", [[0.3, 0.9, 0.1, 0.1], [0.3, 0.9, 0.9, 0.9]])
    none.runs[1].finished = False  # a run still going: its last evaluation is not a final reward
    none.runs.append(RunFigures(seed=2, finished=False))  # a run not started
    assert len(none.done) == 1 and none.stat("final") == (0.1, 0.0) and none.collapsed == [128]
    assert "veto=none collapses in most seeds (1/1): held" in findings([none])[1]
    row = table([none]).splitlines()[2]
    assert row.startswith("| veto=none | 256 | 1/3 | ") and "| 1/1 | 128 | 1/1 |" in row
    assert row.endswith("0: 0.10, 1: 0.90 (unfinished, at 192), 2: not started |")
    none.runs[0].finished = False
    assert findings([none])[1] == "(c) veto=none: not run"
