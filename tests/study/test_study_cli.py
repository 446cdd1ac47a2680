"""A reduced study end to end through the real CLI: 2 variants × 2 seeds, 4 updates each.

Real parts throughout: the worker processes run mucode's trainer on the chain task from bases built
by supervised learning, scoring with the chain reward program in-process; the report is read back
from the runs' metrics. A second invocation skips the finished runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mucode.cli import get_app

pytestmark = pytest.mark.slow

ARGS = ["--seeds", "2", "--updates", "4", "--heldout-every", "2", "--jobs", "2", "--base-steps", "40"]


@pytest.mark.timeout(1800)  # six worker processes (2 bases, 4 runs): ~2 min on 2 idle cores
def test_a_reduced_study_runs_resumes_and_reports(tmp_path: Path) -> None:
    root = tmp_path / "study"
    args = ["study", "veto-scopes", *ARGS, "--variants", "veto=none,veto=sequence", "--root", str(root)]
    result = CliRunner().invoke(get_app(), args)
    assert result.exit_code == 0, result.output
    runs = sorted(root.glob("runs/*/seed-*"))
    assert [p.relative_to(root / "runs").as_posix() for p in runs] == [
        "veto=none/seed-0", "veto=none/seed-1", "veto=sequence/seed-0", "veto=sequence/seed-1",
    ]  # fmt: skip
    for run in runs:
        assert (run / "done.json").exists() and (run / "config.yaml").exists()
        events = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        assert [e["update"] for e in events if e.get("event") == "heldout"] == [0, 2, 4]
        assert sum("event" not in e for e in events) == 4  # 4 updates logged by the trainer
    report = (root / "report.md").read_text()
    for line in ("| veto=none | 4 |", "| veto=sequence | 4 |", "0: ", "1: ", "## The paper's findings"):
        assert line in report
    assert (root / "reward.png").stat().st_size > 1000
    data = json.loads((root / "report.json").read_text())
    assert [r["seed"] for r in data["veto=none"]["runs"]] == [0, 1]
    assert len(list((root / "bases").glob("chain-*-seed*"))) == 2  # one base per seed, shared by variants

    again = CliRunner().invoke(get_app(), args)
    assert again.exit_code == 0, again.output
    assert "4 of 4 runs already finished: skipped" in again.output


def test_an_unknown_study_or_variant_is_one_line_naming_the_choices(tmp_path: Path) -> None:
    result = CliRunner().invoke(get_app(), ["study", "nope", "--root", str(tmp_path)])
    assert (
        result.exit_code == 2
        and "built-in studies: methods, staleness, tau, upper-clip, veto-scopes" in result.output
    )
    result = CliRunner().invoke(get_app(), ["study", "tau", "--variants", "x", "--root", str(tmp_path)])
    assert result.exit_code == 2 and "'tau=1e-4'" in result.output
