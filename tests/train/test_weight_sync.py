"""Short stages (GRPO μ = 4) keep the engine and sync weights in memory: no per-stage HF export and
no per-stage checkpoint; checkpoints hold float32 master weights while the hand-over is bfloat16."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file
from train_helpers import run_overrides, write_tasks

from mucode.config import load_config
from mucode.train.loop import run_training

GRPO_MU4 = dict(
    algo__objective="grpo",
    algo__clip_low=0.2,
    algo__clip_high=0.2,
    batch__updates_per_stage=4,
    batch__num_stages=3,
)


def test_grpo_mu4_makes_no_export_and_no_checkpoint_per_stage(
    small_policy: Path, plugins_on_path: Path, tmp_path: Path
) -> None:
    data = write_tasks(tmp_path / "tasks.jsonl", "parity")
    run_dir = tmp_path / "grpo"
    cfg = load_config(
        None,
        run_overrides(
            small_policy,
            data,
            run_dir,
            **GRPO_MU4,
            train__checkpoint_every=8,
            train__checkpoint_keep=10,
            model__dtype="bfloat16",
        ),
    )
    assert cfg.train.weight_sync == "auto"
    result = run_training(cfg)

    assert result.summary["totals"]["updates"] == 12
    assert result.summary["totals"]["engine_switches"] == 6
    # in memory: only the last stage's policy is exported, checkpoints follow checkpoint_every (8) and the end
    assert sorted(p.name for p in (run_dir / "policy").iterdir()) == ["stage-0002"]
    assert sorted(p.name for p in (run_dir / "checkpoints").glob("update-*")) == [
        "update-00000008",
        "update-00000012",
    ]
    # mixed precision: float32 masters and optimizer state in the checkpoint, bfloat16 hand-over
    latest = run_dir / "checkpoints" / "update-00000012"
    model_state = torch.load(latest / "model.pt", weights_only=True)
    assert {v.dtype for v in model_state.values() if v.is_floating_point()} == {torch.float32}
    optim_state = torch.load(latest / "optimizer.pt", weights_only=True)["state"]
    assert {v.dtype for s in optim_state.values() for k, v in s.items() if k != "step"} == {torch.float32}
    exported = load_file(run_dir / "policy" / "stage-0002" / "model.safetensors")
    assert {v.dtype for v in exported.values() if v.is_floating_point()} == {torch.bfloat16}
    assert json.loads((run_dir / "policy" / "stage-0002" / "config.json").read_text())["dtype"] == "bfloat16"
    for name, tensor in exported.items():  # the export is the masters, rounded once
        torch.testing.assert_close(tensor, model_state[name].to(torch.bfloat16), rtol=0, atol=0)
    # while the engine ran, the trainer's optimizer state was away (the hf engine shares the parameters)
    events = [
        json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if '"event": "stage"' in x
    ]
    assert len(events) == 3
    assert all(e["memory/optimizer_bytes_in_rollout"] == 0 for e in events)
    assert events[0]["memory/parked_bytes"] == 0  # AdamW makes its state at the first update
    assert all(e["memory/parked_bytes"] > 0 for e in events[1:])


def test_long_stages_export_and_checkpoint_every_stage(
    small_policy: Path, plugins_on_path: Path, tmp_path: Path
) -> None:
    data = write_tasks(tmp_path / "tasks.jsonl", "parity")
    run_dir = tmp_path / "disk"
    cfg = load_config(
        None,
        run_overrides(
            small_policy,
            data,
            run_dir,
            **GRPO_MU4,
            train__checkpoint_every=8,
            train__checkpoint_keep=10,
            train__weight_sync="disk",
        ),
    )
    run_training(cfg)
    assert sorted(p.name for p in (run_dir / "policy").iterdir()) == [
        "stage-0000",
        "stage-0001",
        "stage-0002",
    ]
    assert sorted(p.name for p in (run_dir / "checkpoints").glob("update-*")) == [
        "update-00000004",
        "update-00000008",
        "update-00000012",
    ]


def test_memory_mode_resume_replays_from_the_last_checkpoint_to_the_same_weights(
    small_policy: Path, plugins_on_path: Path, tmp_path: Path
) -> None:
    import shutil

    data = write_tasks(tmp_path / "tasks.jsonl", "parity")
    settings = dict(GRPO_MU4, batch__num_stages=4, train__checkpoint_every=8, train__checkpoint_keep=10)
    ref_dir = tmp_path / "reference"
    run_training(load_config(None, run_overrides(small_policy, data, ref_dir, **settings)))
    assert sorted(p.name for p in (ref_dir / "checkpoints").glob("update-*")) == [
        "update-00000008",
        "update-00000016",
    ]
    # the state a crash during stage 3 leaves: stores 0-3 complete, the newest checkpoint at update 8
    run_dir = tmp_path / "crashed"
    shutil.copytree(ref_dir, run_dir)
    shutil.rmtree(run_dir / "checkpoints" / "update-00000016")
    (run_dir / "checkpoints" / "latest").write_text("update-00000008")
    shutil.rmtree(run_dir / "policy" / "stage-0003")
    stores = {p: p.stat().st_mtime_ns for p in (run_dir / "stages").rglob("*.parquet")}

    run_training(load_config(None, run_overrides(small_policy, data, run_dir, **settings)), resume=True)
    assert all(
        p.stat().st_mtime_ns == t for p, t in stores.items()
    )  # replayed from the stores, not regenerated
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if '"event"' not in x]
    assert [r["update"] for r in rows] == list(range(1, 17))
    ref = load_file(ref_dir / "policy" / "stage-0003" / "model.safetensors")
    got = load_file(run_dir / "policy" / "stage-0003" / "model.safetensors")
    for name in ref:
        torch.testing.assert_close(got[name], ref[name], rtol=0, atol=0)
