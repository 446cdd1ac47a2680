"""Evaluation during training: every `train.eval_every` updates, with the evaluators' own code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mucode.eval.data import MATH_DATA_DIR as MATH_DATA
from train_helpers import run_overrides, write_tasks

from mucode.config import ConfigError, load_config
from mucode.train.loop import run_training


def test_eval_every_runs_the_math_evaluator_and_logs_pass_at_1(
    small_policy: Path, plugins_on_path: Path, tmp_path: Path
) -> None:
    assert MATH_DATA.is_dir(), f"{MATH_DATA} is missing: CI clones the repository with shared/ beside it"
    data = write_tasks(tmp_path / "tasks.jsonl", "parity")
    run_dir = tmp_path / "run"
    overrides = run_overrides(small_policy, data, run_dir, train__eval_every=3)
    overrides += [
        "eval.benchmarks=[math500]",
        f"eval.data_dir={MATH_DATA}",
        "eval.limit=2",
        "eval.samples_per_problem=2",
    ]
    run_training(load_config(None, overrides))

    events = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    evals = [e for e in events if e.get("event") == "eval"]
    assert [e["update"] for e in evals] == [3, 6]  # 2 stages × 3 updates, every 3 updates
    for e in evals:
        assert 0.0 <= e["eval/math500/pass@1"] <= 1.0
        report = json.loads((run_dir / "eval" / f"update-{e['update']:07d}" / "report.json").read_text())
        assert report["math500"]["pass@1"] == e["eval/math500/pass@1"]
        assert report["math500"]["n_problems"] == 2 and report["math500"]["samples_per_problem"] == 2


def test_evaluated_policies_are_kept_the_best_is_marked_and_eval_time_is_apart(
    small_policy: Path, plugins_on_path: Path, tmp_path: Path
) -> None:
    data = write_tasks(tmp_path / "tasks.jsonl", "parity")
    run_dir = tmp_path / "run"
    overrides = run_overrides(small_policy, data, run_dir, train__eval_every=3, train__keep_policies=1)
    overrides += [
        "eval.benchmarks=[math500, amc23]",
        f"eval.data_dir={MATH_DATA}",
        "eval.limit=2",
        "eval.samples_per_problem=2",
    ]
    result = run_training(load_config(None, overrides))

    events = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    evals = [e for e in events if e.get("event") == "eval"]
    assert [e["update"] for e in evals] == [3, 6]
    for e in evals:
        assert e["eval/score"] == pytest.approx((e["eval/math500/pass@1"] + e["eval/amc23/pass@1"]) / 2)
        assert 0 < e["time/train_since_start"] < e["time/since_start"]
        assert e["time/eval_so_far"] == pytest.approx(e["time/since_start"] - e["time/train_since_start"])
    assert evals[1]["time/since_start"] > evals[0]["time/since_start"]
    assert evals[1]["time/eval_so_far"] > evals[0]["time/eval_so_far"] > 0

    best = json.loads((run_dir / "best.json").read_text())
    scores = {e["update"]: e["eval/score"] for e in evals}
    expected = 6 if scores[6] > scores[3] else 3  # ties keep the earlier policy
    assert best["update"] == expected and best["score"] == scores[expected]
    assert [e["eval/is_best"] for e in evals] == [True, expected == 6]
    link = run_dir / "policy" / "best"
    assert link.is_symlink() and link.resolve() == (run_dir / "policy" / f"update-{expected:07d}").resolve()
    assert (link / "model.safetensors").exists() and (link / "config.json").exists()
    # keep_policies=1: the newest export, the best, and the newest stage policy (β of the next stage)
    kept = {p.name for p in (run_dir / "policy").iterdir()}
    assert kept == {"best", "stage-0001", "update-0000006", f"update-{expected:07d}"}

    # evaluation time is reported apart from optimization time
    stages = result.summary["stages"]
    assert all(s["time/eval"] > 0 for s in stages)
    for s in stages:
        assert s["time/optimize"] + s["time/eval"] <= s["time/total"] + 1e-6
    totals = result.summary["totals"]
    assert totals["time/eval"] == pytest.approx(sum(s["time/eval"] for s in stages))


def test_an_eval_protocol_that_does_not_fit_the_run_is_refused_before_anything_is_written(
    small_policy: Path, tmp_path: Path
) -> None:
    data = write_tasks(tmp_path / "tasks.jsonl", "parity")
    run_dir = tmp_path / "run"
    overrides = run_overrides(small_policy, data, run_dir, train__eval_every=3)
    with pytest.raises(ConfigError, match="stated for contexts 4096, 8192"):
        run_training(load_config(None, [*overrides, "eval.benchmarks=[math500]", "eval.protocol=paper"]))
    with pytest.raises(ConfigError, match="unknown benchmark 'math5000'"):
        run_training(load_config(None, [*overrides, "eval.benchmarks=[math5000]"]))
    assert not run_dir.exists()


def test_paper_presets_evaluate_with_the_paper_protocol_at_their_context() -> None:
    from mucode.train.evaluation import eval_sampling

    assert eval_sampling(load_config("qwen2.5-math-7b")) == (1.0, 0.7, 4096 - 1536, "paper")
    assert eval_sampling(load_config("qwen3-8b-base,grpo_mu4")) == (1.0, 0.7, 8192 - 1536, "paper")
    coder = load_config("qwen2.5-coder-7b")
    assert eval_sampling(coder) == (1.0, 0.7, 8192 - 1536, "paper") and coder.eval.select_metric == "pass@4"


def test_eval_every_without_benchmarks_is_refused() -> None:
    with pytest.raises(ConfigError, match="eval.benchmarks"):
        load_config(None, ["train.eval_every=10"])
