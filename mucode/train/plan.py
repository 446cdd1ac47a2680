"""The trainer's arithmetic on a config: the batch plan, the run directory, the store-shaping keys.

``batch_plan`` (the derived sizes printed and saved before a run), ``run_path`` (where a run's
outputs go), ``STORE_KEYS`` and ``store_key_changes`` (what a resume must keep). They live with the
trainer, not in the config tree, which only declares and validates settings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mucode.config import BatchConfig, MucodeConfig, TrainConfig

__all__ = ["STORE_KEYS", "batch_plan", "run_path", "store_key_changes"]


def run_path(train: TrainConfig) -> Path:
    """Directory of a run's outputs: ``train.run_dir``, else ``runs/<train.run_name>``."""
    return Path(train.run_dir) if train.run_dir else Path("runs") / train.run_name


STORE_KEYS: tuple[str, ...] = (
    "model.path",
    "data",
    "batch.samples_per_prompt",
    "batch.prompts_per_update",
    "batch.updates_per_stage",
    "rollout.temperature",
    "rollout.top_p",
    "rollout.top_k",
    "rollout.max_response_tokens",
    "rollout.seed",
    "algo.adv_std",
    "algo.adv_eps",
    "algo.recompute_behaviour_logprobs",
    "train.seed",
    "train.groups_per_shard",
    "batch.update_epochs",
    "sampling",
)
"""Keys that shape a run's stage stores or their reading order (a section name covers all its keys):
a resume must keep them (`batch.num_stages` may grow; everything else may change)."""


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


def store_key_changes(saved: dict[str, Any], cfg: MucodeConfig) -> list[str]:
    """`key: saved → now` for every store-shaping key (`STORE_KEYS`) whose value differs from ``saved``
    (a run's config.yaml as a mapping). Empty: the stores on disk match ``cfg``."""
    old, new = _flatten(saved), _flatten(cfg.model_dump(mode="json"))
    changes = []
    for key in sorted(set(old) | set(new)):
        if not any(key == k or key.startswith(k + ".") for k in STORE_KEYS):
            continue
        a, b = old.get(key), new.get(key)
        if isinstance(a, list) or isinstance(b, list):
            a, b = list(a or []) if a is not None else a, list(b or []) if b is not None else b
        if a != b:
            changes.append(f"{key}: {a!r} → {b!r}")
    return changes


def batch_plan(b: BatchConfig) -> dict[str, int]:
    """Derived sizes of a run (its ``batch`` section), computed in one place and printed before any work."""
    prompts_per_stage = b.prompts_per_update * b.updates_per_stage
    return {
        "samples_per_prompt (G)": b.samples_per_prompt,
        "prompts_per_update (B_mini)": b.prompts_per_update,
        "responses_per_update": b.prompts_per_update * b.samples_per_prompt,
        "updates_per_stage (μ)": b.updates_per_stage,
        "prompts_per_stage (B_train)": prompts_per_stage,
        "responses_per_stage": prompts_per_stage * b.samples_per_prompt,
        "num_stages": b.num_stages,
        "total_updates": b.updates_per_stage * b.num_stages,
        "total_responses": prompts_per_stage * b.samples_per_prompt * b.num_stages,
        "engine_switches": 2 * b.num_stages,
    }
