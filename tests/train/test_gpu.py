"""GPU runs of the trainer (not run in CI): the tiny config with the hf engine in bf16, and FSDP."""

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
    return ["--task", "math", "--config", str(REPO / "configs" / "tiny.yaml"), "--run-dir", str(run_dir), "--no-plot",
            "train.device=cuda", "model.dtype=bfloat16", "batch.num_stages=2", "batch.updates_per_stage=4",
            "train.progress=false"]


def _rows(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if '"event"' not in x]


def test_tiny_config_on_gpu_in_bf16(tmp_path: Path) -> None:
    run_dir = tmp_path / "gpu"
    done = subprocess.run([sys.executable, "-m", "mucode.cli", "train", *_settings(run_dir)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = _rows(run_dir)
    assert len(rows) == 8
    assert rows[0]["stale/abs_log_ratio_mean"] < 2e-2  # bf16: KV-cache decoding vs one full pass
    print(done.stdout[-2500:])


def test_fsdp_under_torchrun(tmp_path: Path) -> None:
    import torch

    nproc = max(1, torch.cuda.device_count())
    run_dir = tmp_path / "fsdp"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           "-m", "mucode.cli", "train", *_settings(run_dir)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=os.environ.copy())
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(_rows(run_dir)) == 8
    assert (run_dir / "policy" / "stage-0001" / "model.safetensors").exists()
