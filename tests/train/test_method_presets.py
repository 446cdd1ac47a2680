"""Each method preset finishes `mucode train --task math|code --config tiny,<preset>` (shortened
with overrides) and logs its own diagnostics every update."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mucode.cli import get_app

SHORT = [
    "batch.num_stages=2",
    "batch.prompts_per_update=2",
    "batch.samples_per_prompt=4",
    "rollout.max_response_tokens=16",
    "train.final_rollout_prompts=0",
    "train.progress=false",
    "train.tensorboard=false",
    "data.limit=8",
]

PRESETS = {
    "conspo": (
        ["batch.updates_per_stage=2"],
        ["conspo/margin", "conspo/discarded_groups", "groups/zero_variance_frac"],
    ),
    "offpolicy_grpo": (
        ["batch.updates_per_stage=2", "reference.reset_every_stages=1"],
        ["kl/ref", "groups/zero_variance_frac"],
    ),
    "replay_grpo": (
        ["batch.updates_per_stage=2", "compose.warmup_updates=1"],
        [
            "replay/buffer_size",
            "replay/fraction",
            "replay/age_mean",
            "replay/age_max",
            "groups/zero_variance_frac",
        ],
    ),
    "agpo": (
        ["batch.updates_per_stage=2", "batch.update_epochs=2"],
        [
            "agpo/temperature_mean",
            "agpo/temperature_min",
            "agpo/temperature_max",
            "agpo/clip_eps_mean",
            "agpo/clip_eps_min",
            "agpo/clip_eps_max",
            "kl/ref",
        ],
    ),
}


@pytest.mark.parametrize("task", ["math", "code"])
@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_preset_trains_on_the_tiny_demo_and_logs_its_diagnostics(
    preset: str, task: str, tmp_path: Path
) -> None:
    extra, keys = PRESETS[preset]
    run_dir = tmp_path / "run"
    out = CliRunner().invoke(
        get_app(),
        ["train", "--task", task, "--config", f"tiny,{preset}", *SHORT, *extra, f"train.run_dir={run_dir}"],
    )
    assert out.exit_code == 0, out.output[-3000:]
    rows = [
        json.loads(line)
        for line in (run_dir / "metrics.jsonl").read_text().splitlines()
        if '"event"' not in line
    ]
    assert [r["update"] for r in rows] == [1, 2, 3, 4]
    for key in keys:
        assert all(key in r for r in rows), (key, rows[-1])
    if preset == "replay_grpo" and task == "math":  # (the tiny policy rarely solves a code task: flat groups)
        assert rows[-1]["replay/buffer_size"] > 0 and any(r["replay/replayed"] > 0 for r in rows)
    if preset == "agpo":  # each stage: a probe, then its prompts at their own temperatures, trained on twice
        stages = [
            json.loads(line)
            for line in (run_dir / "metrics.jsonl").read_text().splitlines()
            if '"event": "stage"' in line
        ]
        assert all(s["probe/responses"] == 2 * 4 for s in stages)
        assert all(0.5 <= r["agpo/temperature_min"] <= r["agpo/temperature_max"] <= 1.5 for r in rows)
        # behaviour log-probs were stored at each prompt's own temperature and the trainer used it: ρ = 1
        # at the first update of every stage, whatever the temperatures
        for first in (rows[0], rows[2]):
            assert first["stale/abs_log_ratio_mean"] < 1e-4, first
    plots = sorted(p.name for p in (run_dir / "plots").glob("*.png"))
    assert "methods.png" in plots, plots
