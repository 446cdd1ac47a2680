"""Evaluation during training: every `train.eval_every` updates, with the evaluators' own code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mucode.config import ConfigError, load_config
from mucode.train.loop import run_training
from train_helpers import run_overrides, write_tasks

from mucode.assets import MATH_DATA_DIR as MATH_DATA  # noqa: E402


def test_eval_every_runs_the_math_evaluator_and_logs_pass_at_1(small_policy: Path, plugins_on_path: Path,
                                                                tmp_path: Path) -> None:
    assert MATH_DATA.is_dir(), f"{MATH_DATA} is missing: CI clones the repository with shared/ beside it"
    data = write_tasks(tmp_path / "tasks.jsonl", "parity")
    run_dir = tmp_path / "run"
    overrides = run_overrides(small_policy, data, run_dir, train__eval_every=3)
    overrides += ["eval.benchmarks=[math500]", f"eval.data_dir={MATH_DATA}", "eval.limit=2",
                  "eval.samples_per_problem=2"]
    run_training(load_config(None, overrides))

    events = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    evals = [e for e in events if e.get("event") == "eval"]
    assert [e["update"] for e in evals] == [3, 6]  # 2 stages × 3 updates, every 3 updates
    for e in evals:
        assert 0.0 <= e["eval/math500/pass@1"] <= 1.0
        report = json.loads((run_dir / "eval" / f"update-{e['update']:07d}" / "report.json").read_text())
        assert report["math500"]["pass@1"] == e["eval/math500/pass@1"]
        assert report["math500"]["n_problems"] == 2 and report["math500"]["samples_per_problem"] == 2


def test_eval_every_without_benchmarks_is_refused() -> None:
    with pytest.raises(ConfigError, match="eval.benchmarks"):
        load_config(None, ["train.eval_every=10"])
