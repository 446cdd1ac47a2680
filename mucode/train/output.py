"""What a training run writes to its directory and its terminal, in one rank-aware object.

Under torchrun every rank runs the same loop, but only rank 0 speaks and writes the run's files:
:func:`run_output` gives rank 0 a :class:`RunOutput` and every other rank a :class:`SilentOutput`
(a null object with the same methods), so the loop calls them unconditionally instead of asking
which rank it is. Collectives (gathering the weights for a checkpoint) stay in the loop: every rank
must join them; only the writing is rank 0's.

Progress and stage lines go to stdout (they are the run's log, one line per event); warnings and
diagnostics go through :mod:`logging`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml

from mucode.config import MucodeConfig, TrainConfig
from mucode.train.checkpoint import Checkpointer, TrainerState
from mucode.train.evaluation import prune_policies
from mucode.train.logger import MetricsLogger
from mucode.train.summary import write_summary

__all__ = ["OutputSettings", "RunOutput", "SilentOutput", "run_output"]


class _NoMetrics:
    """The metrics sink before :meth:`RunOutput.open_metrics` (and on ranks other than 0)."""

    def log_update(self, metrics: dict[str, Any]) -> None:
        pass

    def log_event(self, event: str, payload: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class OutputSettings:
    """What a run's output reads of the config (built once by :meth:`from_config`)."""

    train: TrainConfig
    """Progress bars, checkpoints kept, policies kept, metrics sinks, the run's name."""
    config: Mapping[str, Any]
    """The whole resolved config as plain data: saved as ``config.yaml`` and with the metrics."""
    max_prompt_tokens: int
    """``data.max_prompt_tokens`` (named where prompts were dropped)."""
    updates_per_stage: int
    """``batch.updates_per_stage`` (which exported policy is the next stage's β)."""

    @classmethod
    def from_config(cls, cfg: MucodeConfig) -> OutputSettings:
        return cls(
            cfg.train, cfg.model_dump(mode="json"), cfg.data.max_prompt_tokens, cfg.batch.updates_per_stage
        )


class RunOutput:
    """Rank 0's output: printed lines, ``metrics.jsonl`` (and TensorBoard/wandb), checkpoints, run files."""

    show_progress: bool
    """Whether progress bars are drawn (``train.progress``)."""

    def __init__(self, settings: OutputSettings, run_dir: Path) -> None:
        self.settings = settings
        self.run_dir = run_dir
        self.show_progress = settings.train.progress
        self.checkpoints = Checkpointer(run_dir / "checkpoints", keep=settings.train.checkpoint_keep)
        self._metrics: MetricsLogger | _NoMetrics = _NoMetrics()

    def say(self, text: str) -> None:
        """One line (or block) of the run's log on stdout."""
        print(text, flush=True)

    def write_plan(self, plan: dict[str, int], data_counts: dict[str, int]) -> None:
        """Save and print the resolved config and the batch plan, before any work."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        text = yaml.safe_dump(dict(self.settings.config), sort_keys=False, allow_unicode=True)
        (self.run_dir / "config.yaml").write_text(text)
        (self.run_dir / "batch_plan.json").write_text(
            json.dumps({**plan, **data_counts}, indent=2, ensure_ascii=False)
        )
        width = max(map(len, plan))
        self.say(f"mucode train → {self.run_dir}\n{text}\nbatch plan:")
        self.say("\n".join(f"  {k:<{width}}  {v:>10,}" for k, v in plan.items()))
        self.say(
            f"data: {data_counts['data/prompts']:,} prompts ({data_counts['data/dropped_long_prompts']:,} "
            f"dropped: longer than data.max_prompt_tokens={self.settings.max_prompt_tokens})"
        )

    def open_metrics(self, resume_after_update: int | None) -> None:
        """Start ``metrics.jsonl`` (truncated back to ``resume_after_update`` when resuming)."""
        t = self.settings.train
        self._metrics = MetricsLogger(
            self.run_dir,
            tensorboard=t.tensorboard,
            wandb_project=t.wandb_project,
            run_name=t.run_name,
            config=dict(self.settings.config),
            resume_after_update=resume_after_update,
        )

    def log_update(self, metrics: dict[str, Any]) -> None:
        self._metrics.log_update(metrics)

    def log_event(self, event: str, payload: dict[str, Any]) -> None:
        self._metrics.log_event(event, payload)

    def save_checkpoint(
        self, state: TrainerState, model_state: dict[str, torch.Tensor], optim_state: dict[str, Any]
    ) -> None:
        self.checkpoints.save(state, model_state, optim_state)

    def prune_policies(self, best_update: int | None) -> None:
        """Keep ``train.keep_policies`` exported policies (never the best one nor the next stage's β)."""
        protect = {f"update-{best_update:07d}"} if best_update is not None else set()
        prune_policies(
            self.run_dir / "policy",
            self.settings.train.keep_policies,
            self.settings.updates_per_stage,
            protect,
        )

    def write_summary(self, stages: list[dict[str, Any]], totals: dict[str, Any]) -> dict[str, Any]:
        """Save and print the summary table; returns the summary (``{}`` on ranks other than 0)."""
        self.say("\n" + write_summary(self.run_dir, stages, totals))
        return {"stages": stages, "totals": totals}

    def close(self) -> None:
        self._metrics.close()


class SilentOutput(RunOutput):
    """The output of ranks other than 0: says, logs and writes nothing."""

    def __init__(self, settings: OutputSettings, run_dir: Path) -> None:
        super().__init__(settings, run_dir)
        self.show_progress = False

    def say(self, text: str) -> None:
        pass

    def write_plan(self, plan: dict[str, int], data_counts: dict[str, int]) -> None:
        pass

    def open_metrics(self, resume_after_update: int | None) -> None:
        pass

    def save_checkpoint(
        self, state: TrainerState, model_state: dict[str, torch.Tensor], optim_state: dict[str, Any]
    ) -> None:
        pass

    def prune_policies(self, best_update: int | None) -> None:
        pass

    def write_summary(self, stages: list[dict[str, Any]], totals: dict[str, Any]) -> dict[str, Any]:
        return {}


def run_output(cfg: MucodeConfig, run_dir: Path, *, is_main: bool) -> RunOutput:
    """Rank 0's :class:`RunOutput`, or a :class:`SilentOutput` for the other ranks."""
    settings = OutputSettings.from_config(cfg)
    return RunOutput(settings, run_dir) if is_main else SilentOutput(settings, run_dir)
