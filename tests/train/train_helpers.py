"""Helpers of the trainer tests (data files, small run settings)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_tasks(path: Path, program: str, n: int = 12) -> Path:
    """A mucode-schema jsonl of ``n`` short prompts scored by ``program``."""
    with path.open("w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"t{i}", "messages": [{"role": "user", "content": f"What is {i} + {i}?"}],
                                "program": program, "spec": {}}) + "\n")
    return path


def run_overrides(policy: Path, data: Path, run_dir: Path, **extra: Any) -> list[str]:
    """Small, fast settings for a CPU test run; ``extra`` are dotted keys with __ for dots."""
    values: dict[str, Any] = {
        "model.path": policy,
        "data.task": "math",
        "data.source": data,
        "rollout.max_response_tokens": 8,
        "rollout.temperature": 1.0,
        "rollout.batch_size": 64,
        "batch.samples_per_prompt": 4,
        "batch.prompts_per_update": 2,
        "batch.updates_per_stage": 3,
        "batch.num_stages": 2,
        "batch.micro_batch_tokens": 4096,
        "optim.lr": 3e-3,
        "train.run_dir": run_dir,
        "train.checkpoint_every": 2,
        "train.tensorboard": False,
        "train.progress": False,
        "train.cpu_threads": 1,
        "verifier.max_retries": 1,
    }
    values.update({k.replace("__", "."): v for k, v in extra.items()})
    return [f"{k}={v}" for k, v in values.items()]
