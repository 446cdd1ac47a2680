"""Helpers of the trainer tests (data files, small run settings)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from mucode.train.store import StoredGroup, StoredSample


def write_tasks(path: Path, program: str, n: int = 12) -> Path:
    """A mucode-schema jsonl of ``n`` short prompts scored by ``program``."""
    with path.open("w") as f:
        for i in range(n):
            f.write(
                json.dumps(
                    {
                        "id": f"t{i}",
                        "messages": [{"role": "user", "content": f"What is {i} + {i}?"}],
                        "program": program,
                        "spec": {},
                    }
                )
                + "\n"
            )
    return path


def run_overrides(policy: Path, data: Path, run_dir: Path, **extra: Any) -> list[str]:
    """Small, fast settings for a CPU test run; ``extra`` are dotted keys with __ for dots."""
    values: dict[str, Any] = {
        "model.path": policy,
        "data.task": "math",
        "data.source": data,
        "rollout.max_response_tokens": 8,
        "data.max_prompt_tokens": 256,  # the test policy has 512 positions
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
        "verifier.retries": 1,
    }
    values.update({k.replace("__", "."): v for k, v in extra.items()})
    return [f"{k}={v}" for k, v in values.items()]


def synthetic_groups(vocab: int, n_groups: int = 4, g: int = 4, seed: int = 0) -> list[StoredGroup]:
    """Groups of random token ids with off-policy behaviour log-probs and mixed advantages."""
    rng = random.Random(seed)
    groups = []
    for gid in range(n_groups):
        samples = []
        for i in range(g):
            length = rng.randint(1, 12)
            samples.append(
                StoredSample(
                    prompt_id=f"p{gid}",
                    sample_index=i,
                    prompt_tokens=[rng.randrange(vocab) for _ in range(rng.randint(3, 9))],
                    response_tokens=[rng.randrange(vocab) for _ in range(length)],
                    behaviour_logprobs=[-rng.uniform(3.0, 9.0) for _ in range(length)],  # off-policy data
                    reward=float(i % 2),
                    status="correct" if i % 2 else "wrong_answer",
                    masked=False,
                    advantage=rng.choice([-1.2, -0.4, 0.5, 1.1]),
                )
            )
        groups.append(StoredGroup(group_id=gid, prompt_id=f"p{gid}", samples=samples))
    return groups
