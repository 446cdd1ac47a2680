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
from pathlib import Path
from typing import Any

import torch
import yaml

from mucode.config import MucodeConfig
from mucode.train.checkpoint import Checkpointer, TrainerState
from mucode.train.evaluation import prune_policies
from mucode.train.logger import MetricsLogger
from mucode.train.summary import write_summary

__all__ = ["RunOutput", "SilentOutput", "run_output"]


class _NoMetrics:
    """The metrics sink before :meth:`RunOutput.open_metrics` (and on ranks other than 0)."""

    def log_update(self, metrics: dict[str, Any]) -> None:
        pass

    def log_event(self, event: str, payload: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass


class RunOutput:
    """Rank 0's output: printed lines, ``metrics.jsonl`` (and TensorBoard/wandb), checkpoints, run files."""

    show_progress: bool
    """Whether progress bars are drawn (``train.progress``)."""

    def __init__(self, cfg: MucodeConfig, run_dir: Path) -> None:
        self.cfg = cfg
        self.run_dir = run_dir
        self.show_progress = cfg.train.progress
        self.checkpoints = Checkpointer(run_dir / "checkpoints", keep=cfg.train.checkpoint_keep)
        self._metrics: MetricsLogger | _NoMetrics = _NoMetrics()

    def say(self, text: str) -> None:
        """One line (or block) of the run's log on stdout."""
        print(text, flush=True)

    def write_plan(self, plan: dict[str, int], data_counts: dict[str, int]) -> None:
        """Save and print the resolved config and the batch plan, before any work."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        text = yaml.safe_dump(self.cfg.model_dump(mode="json"), sort_keys=False, allow_unicode=True)
        (self.run_dir / "config.yaml").write_text(text)
        (self.run_dir / "batch_plan.json").write_text(
            json.dumps({**plan, **data_counts}, indent=2, ensure_ascii=False)
        )
        width = max(map(len, plan))
        self.say(f"mucode train → {self.run_dir}\n{text}\nbatch plan:")
        self.say("\n".join(f"  {k:<{width}}  {v:>10,}" for k, v in plan.items()))
        self.say(
            f"data: {data_counts['data/prompts']:,} prompts ({data_counts['data/dropped_long_prompts']:,} "
            f"dropped: longer than data.max_prompt_tokens={self.cfg.data.max_prompt_tokens})"
        )

    def open_metrics(self, resume_after_update: int | None) -> None:
        """Start ``metrics.jsonl`` (truncated back to ``resume_after_update`` when resuming)."""
        t = self.cfg.train
        self._metrics = MetricsLogger(
            self.run_dir,
            tensorboard=t.tensorboard,
            wandb_project=t.wandb_project,
            run_name=t.run_name,
            config=self.cfg.model_dump(mode="json"),
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
            self.run_dir / "policy", self.cfg.train.keep_policies, self.cfg.batch.updates_per_stage, protect
        )

    def write_summary(self, stages: list[dict[str, Any]], totals: dict[str, Any]) -> dict[str, Any]:
        """Save and print the summary table; returns the summary (``{}`` on ranks other than 0)."""
        self.say("\n" + write_summary(self.run_dir, stages, totals))
        return {"stages": stages, "totals": totals}

    def close(self) -> None:
        self._metrics.close()


class SilentOutput(RunOutput):
    """The output of ranks other than 0: says, logs and writes nothing."""

    def __init__(self, cfg: MucodeConfig, run_dir: Path) -> None:
        super().__init__(cfg, run_dir)
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
    return RunOutput(cfg, run_dir) if is_main else SilentOutput(cfg, run_dir)
