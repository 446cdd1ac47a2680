"""The loop's seams: an engine and a verifier passed in by the caller, the rank-aware output (silent
off rank 0), the typed checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from train_helpers import run_overrides, write_tasks
from transformers import AutoTokenizer

from mucode.config import load_config
from mucode.rollout.dummy import DummyEngine, fixed_distribution
from mucode.rollout.types import SamplingParams
from mucode.seeds import SeedPurpose, derive_seed
from mucode.train.checkpoint import Checkpoint, TrainerState
from mucode.train.loop import run_training
from mucode.train.output import RunOutput, SilentOutput, run_output
from mucode.train.prepare import open_verifier
from mucode.train.store import StageStore


def test_run_training_uses_the_engine_and_the_verifier_it_is_given(
    small_policy: Path, plugins_on_path: Path, tmp_path: Path
) -> None:
    data = write_tasks(tmp_path / "tasks.jsonl", "parity")
    run_dir = tmp_path / "run"
    cfg = load_config(None, run_overrides(small_policy, data, run_dir, rollout__engine="dummy"))
    tokenizer = AutoTokenizer.from_pretrained(small_policy)
    calls: list[tuple[int, Path, int]] = []
    logp = fixed_distribution(len(tokenizer), tokenizer.eos_token_id, 1.5)

    def short(stage: int, policy_path: Path, seed: int) -> DummyEngine:
        calls.append((stage, policy_path, seed))  # responses of at most 2 tokens, drawn from ``logp``
        return DummyEngine(tokenizer, SamplingParams(max_new_tokens=2, seed=seed), mean_response_tokens=1.5)

    with open_verifier(cfg) as verifier:
        result = run_training(cfg, verifier=verifier, engine_factory=short)
        assert verifier.pipeline.busy_s > 0  # the groups were scored through the caller's verifier

    assert [(s, str(p)) for s, p, _ in calls] == [
        (0, str(small_policy)),
        (1, str(run_dir / "policy" / "stage-0000")),
    ]
    assert [seed for *_, seed in calls] == [
        derive_seed(cfg.rollout.seed, SeedPurpose.ROLLOUT_ENGINE, stage=k) for k in (0, 1)
    ]
    for k in (0, 1):  # the stored data is that engine's: its lengths and its exact log-probs
        samples = [
            s for g in StageStore.open(run_dir / "stages" / f"stage-{k:04d}").iter_groups() for s in g.samples
        ]
        assert len(samples) == 24 and all(1 <= len(s.response_tokens) <= 2 for s in samples)
        for s in samples:
            assert s.behaviour_logprobs == pytest.approx(
                [float(logp[t]) for t in s.response_tokens], abs=1e-5
            )
    assert result.state.global_update == 6 and result.summary["totals"]["updates"] == 6


def test_ranks_other_than_0_say_and_write_nothing(
    small_policy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_tasks(tmp_path / "tasks.jsonl", "parity")
    cfg = load_config(None, run_overrides(small_policy, data, tmp_path / "run"))
    weights = {"w": torch.ones(2)}

    def use(output: RunOutput, run_dir: Path) -> dict:
        output.write_plan({"prompts_per_stage": 6}, {"data/prompts": 12, "data/dropped_long_prompts": 0})
        output.open_metrics(None)
        output.log_update({"stage": 0, "update": 1, "reward/mean": 0.5})
        output.log_event("stage", {"stage": 0, "update": 1})
        output.save_checkpoint(TrainerState(global_update=1), weights, {})
        output.say("stage 0 done")
        summary = output.write_summary([{"stage": 0, "updates": 1}], {"updates": 1})
        output.close()
        return summary

    silent_dir = tmp_path / "silent"
    silent = run_output(cfg, silent_dir, is_main=False)
    assert isinstance(silent, SilentOutput) and not silent.show_progress
    assert use(silent, silent_dir) == {}
    assert not silent_dir.exists() and capsys.readouterr().out == ""

    main_dir = tmp_path / "main"
    assert use(run_output(cfg, main_dir, is_main=True), main_dir)["totals"] == {"updates": 1}
    assert "stage 0 done" in capsys.readouterr().out
    assert {p.name for p in main_dir.iterdir()} >= {
        "config.yaml",
        "batch_plan.json",
        "metrics.jsonl",
        "checkpoints",
        "summary.json",
        "summary.txt",
    }
    saved = run_output(cfg, main_dir, is_main=True).checkpoints
    latest = saved.latest()
    assert latest is not None
    checkpoint = saved.load(latest)
    assert isinstance(checkpoint, Checkpoint) and checkpoint.path == latest
    assert checkpoint.state.global_update == 1 and torch.equal(checkpoint.model["w"], weights["w"])
    assert checkpoint.optimizer == {} and set(checkpoint.rng) == {
        "format",
        "python",
        "numpy",
        "torch",
        "cuda",
    }
