"""``mucode report``: two runs side by side, time-to-accuracy, accuracy against wall-clock."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mucode.eval.data import MATH_DATA_DIR
from train_helpers import run_overrides, write_tasks
from typer.testing import CliRunner

from mucode.cli import get_app
from mucode.config import load_config
from mucode.train.loop import run_training
from mucode.train.report import RunReport, load_run, time_to_accuracy


def _run(name: str, evals: list[tuple[float, float]]) -> RunReport:
    return RunReport(
        name=name,
        path=Path(name),
        metric="pass@1",
        benchmarks=[],
        evals=[
            {"update": 10 * (i + 1), "eval/score": s, "time/train_since_start": t}
            for i, (s, t) in enumerate(evals)
        ],
    )


def test_time_to_accuracy_is_the_time_to_the_lower_best_score() -> None:
    grpo = _run("grpo", [(0.30, 100.0), (0.40, 200.0), (0.47, 400.0), (0.46, 500.0)])
    mu = _run("mu", [(0.35, 50.0), (0.48, 150.0), (0.45, 300.0)])
    tta = time_to_accuracy(grpo, mu)
    assert tta is not None and tta["target"] == 0.47
    assert tta["seconds"] == (400.0, 150.0) and tta["ratio"] == pytest.approx(400 / 150)
    assert time_to_accuracy(mu, grpo)["ratio"] == pytest.approx(150 / 400)  # type: ignore[index]
    assert time_to_accuracy(grpo, _run("none", [])) is None


def test_report_on_two_tiny_runs(small_policy: Path, plugins_on_path: Path, tmp_path: Path) -> None:
    data = write_tasks(tmp_path / "tasks.jsonl", "parity")
    evaluation = [
        "eval.benchmarks=[math500, amc23]",
        f"eval.data_dir={MATH_DATA_DIR}",
        "eval.limit=2",
        "eval.samples_per_problem=2",
    ]
    mu_dir, grpo_dir = tmp_path / "mu_grpo", tmp_path / "grpo"
    run_training(
        load_config(None, [*run_overrides(small_policy, data, mu_dir, train__eval_every=3), *evaluation])
    )
    run_training(
        load_config(
            "grpo_mu4",
            [
                *run_overrides(small_policy, data, grpo_dir, train__eval_every=3, batch__updates_per_stage=3),
                *evaluation,
            ],
        )
    )

    out = CliRunner().invoke(get_app(), ["report", str(grpo_dir), str(mu_dir)])
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    header = lines[0].split()
    assert header[:4] == ["run", "math500", "amc23", "avg"] and "veto % per stage" in lines[0]
    rows = {line.split()[0]: line for line in lines[2:4]}
    assert set(rows) == {"grpo", "mu_grpo"}
    best_update = load_run(mu_dir).best["update"]  # type: ignore[index]
    assert re.search(rf"\s{best_update}\s", rows["mu_grpo"])
    # engine switches (2 stages, 2 per stage), then μ-GRPO's veto fraction per stage and its mean
    assert re.search(r"\s4\s+\d+\.\d\d / \d+\.\d\d\s+\d+\.\d\d$", rows["mu_grpo"])
    assert re.search(r"\s4\s+–\s+–$", rows["grpo"])  # GRPO has no veto
    ratio = next(line for line in lines if line.startswith("time-to-accuracy"))
    assert re.search(r"grpo [\d.]+ h, mu_grpo [\d.]+ h → ratio [\d.]+×", ratio)
    plot = grpo_dir / "accuracy_vs_time.png"
    assert plot.exists() and plot.stat().st_size > 5000

    missing = CliRunner().invoke(get_app(), ["report", str(tmp_path / "nothing")])
    assert missing.exit_code == 2 and "holds no mucode run" in missing.output


def test_report_on_a_run_without_evaluation_says_so(tmp_path: Path) -> None:
    """A run directory as the trainer leaves it without eval: config.yaml, metrics.jsonl, summary.json."""
    import json

    import yaml

    from mucode.train.logger import MetricsLogger

    run_dir = tmp_path / "no_eval"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(yaml.safe_dump(load_config(None, []).model_dump(mode="json")))
    metrics = MetricsLogger(run_dir, tensorboard=False)
    metrics.log_update({"update": 1, "stage": 0, "update_in_stage": 1, "stale/veto_token_frac": 0.01})
    metrics.close()
    (run_dir / "summary.json").write_text(
        json.dumps({"totals": {"time/total": 3600.0, "time/rollout": 1800.0}})
    )
    out = CliRunner().invoke(get_app(), ["report", str(run_dir)])
    assert out.exit_code == 0, out.output
    assert "no_eval has no evaluation (no eval in metrics.jsonl, no best.json)" in out.stdout
    assert "plot: none (no run has an evaluation)" in out.stdout
    assert not (run_dir / "accuracy_vs_time.png").exists()
