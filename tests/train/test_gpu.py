"""GPU runs of the trainer (not run in CI): the tiny config with the hf engine in bf16 mixed precision,
FSDP with data-parallel generation, the trainer's state stepping aside on the device, and vLLM with
weights synced in memory for short stages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]


def _settings(run_dir: Path) -> list[str]:
    return [
        "--task",
        "math",
        "--config",
        str(REPO / "configs" / "tiny.yaml"),
        "--run-dir",
        str(run_dir),
        "--no-plot",
        "train.device=cuda",
        "model.dtype=bfloat16",
        "batch.num_stages=2",
        "batch.updates_per_stage=4",
        "train.progress=false",
    ]


def _rows(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if '"event"' not in x]


def test_tiny_config_on_gpu_in_bf16(tmp_path: Path) -> None:
    run_dir = tmp_path / "gpu"
    done = subprocess.run(
        [sys.executable, "-m", "mucode.cli", "train", *_settings(run_dir)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = _rows(run_dir)
    assert len(rows) == 8
    assert rows[0]["stale/abs_log_ratio_mean"] < 2e-2  # bf16: KV-cache decoding vs one full pass
    import torch
    from safetensors.torch import load_file

    latest = run_dir / "checkpoints" / (run_dir / "checkpoints" / "latest").read_text().strip()
    masters = torch.load(latest / "model.pt", weights_only=True)
    assert {v.dtype for v in masters.values() if v.is_floating_point()} == {torch.float32}
    exported = load_file(run_dir / "policy" / "stage-0001" / "model.safetensors")
    assert {v.dtype for v in exported.values() if v.is_floating_point()} == {torch.bfloat16}
    print(done.stdout[-2500:])


def test_fsdp_under_torchrun(tmp_path: Path) -> None:
    import torch

    nproc = max(1, torch.cuda.device_count())
    run_dir = tmp_path / "fsdp"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={nproc}",
        "-m",
        "mucode.cli",
        "train",
        *_settings(run_dir),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=os.environ.copy())
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(_rows(run_dir)) == 8
    assert (run_dir / "policy" / "stage-0001" / "model.safetensors").exists()
    if nproc > 1:  # every GPU generated its share of each stage
        manifest = json.loads((run_dir / "stages" / "stage-0000" / "manifest.json").read_text())
        assert {s["file"].split("/")[0] for s in manifest["shards"]} == {
            f"rank-{r:02d}" for r in range(nproc)
        }


def test_state_steps_aside_and_frees_the_device() -> None:
    import torch

    from mucode.train.aside import step_aside

    device = torch.device("cuda")
    model = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.Linear(4096, 4096)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(8, 4096, device=device)).sum().backward()
    optimizer.step()
    before_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    torch.cuda.synchronize()
    held = torch.cuda.memory_allocated()
    parked = step_aside(model, optimizer, params=True)
    away = torch.cuda.memory_allocated()
    assert held - away >= parked.parked_bytes  # params and AdamW state (and the gradients) left the device
    parked.restore()
    for k, v in model.state_dict().items():
        assert torch.equal(v, before_state[k])


def test_vllm_takes_weights_in_memory_for_short_stages(tmp_path: Path) -> None:
    run_dir = tmp_path / "vllm"
    args = [
        *_settings(run_dir)[:-4],
        "model.dtype=float32",
        "rollout.engine=vllm",
        "train.weight_sync=memory",
        "rollout.gpu_memory_utilization=0.3",
        "batch.num_stages=3",
        "batch.updates_per_stage=4",
        "train.progress=false",
        "train.final_rollout_prompts=0",
    ]
    done = subprocess.run(
        [sys.executable, "-m", "mucode.cli", "train", *args], capture_output=True, text=True, timeout=1200
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = _rows(run_dir)
    assert len(rows) == 12
    for first in (rows[0], rows[4], rows[8]):  # ρ ≈ 1 at each stage's first update: the engine had β_k
        assert first["stale/abs_log_ratio_mean"] < 5e-3
    assert sorted(p.name for p in (run_dir / "policy").iterdir()) == ["stage-0002"]
