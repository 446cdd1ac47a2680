"""Under torchrun (two gloo ranks on CPU), evaluation during training runs on rank 0 and is not refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mucode.eval.data import MATH_DATA_DIR
from train_helpers import run_overrides, write_tasks


@pytest.mark.slow
def test_eval_every_under_torchrun(small_policy: Path, plugins_on_path: Path, tmp_path: Path) -> None:
    data = write_tasks(tmp_path / "tasks.jsonl", "parity")
    run_dir = tmp_path / "run"
    overrides = run_overrides(small_policy, data, run_dir, batch__num_stages=1, train__eval_every=3)
    overrides += [
        "eval.benchmarks=[math500]",
        f"eval.data_dir={MATH_DATA_DIR}",
        "eval.limit=2",
        "eval.samples_per_problem=2",
        "train.device=cpu",
    ]
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=2",
        "-m",
        "mucode.cli",
        "train",
        "--no-plot",
        *overrides,
    ]
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"}
    )
    assert done.returncode == 0, done.stderr[-4000:]
    events = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if '"event"' in x]
    evals = [e for e in events if e["event"] == "eval"]
    assert [e["update"] for e in evals] == [3]  # once, by rank 0
    assert 0.0 <= evals[0]["eval/math500/pass@1"] <= 1.0
    assert json.loads((run_dir / "best.json").read_text())["update"] == 3
    assert (run_dir / "policy" / "best" / "model.safetensors").exists()
