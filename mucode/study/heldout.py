"""The current policy's reward inside a stage: every ``every`` updates, fresh samples on the task.

The stage's own rollouts are the stage-start policy's (stale), so their reward cannot show a collapse
that starts mid-stage; this hook samples the *current* weights (``samples`` responses per prompt of
the task, temperature 1, a seeded generator that leaves the trainer's RNG alone) and logs a
``heldout`` event to ``metrics.jsonl``: ``study/heldout_reward``, ``study/heldout_failing_format``
(share of answers in the failing format ``B``), ``study/heldout_steps_right`` (mean right leading
steps) and ``study/heldout_stopped`` (share that drew the stop token within the trainer's response
budget: answers have a fixed length, so a stop is a mistake). The base is measured once at
update 0 of a fresh run. The code form is judged by its strict pure reading
(:func:`mucode.data.chain.code_answer_words`), not in the sandbox (a sandbox per sample every N
updates would cost more than the training). Imports torch (at import).
"""

from __future__ import annotations

from collections.abc import Callable

from mucode.seeds import SeedPurpose, derive_seed
from mucode.study.base import sample_reward
from mucode.train.checkpoint import TrainerState
from mucode.train.prepare import TrainingRun

__all__ = ["heldout_hook"]


def heldout_hook(
    every: int, samples: int, form: str = "plain"
) -> Callable[[TrainingRun], Callable[[TrainerState], None]]:
    """``run_training(update_hook=...)``: evaluate ``run.model`` every ``every`` updates."""

    def build(run: TrainingRun) -> Callable[[TrainerState], None]:
        def evaluate(update: int) -> None:
            seed = derive_seed(run.cfg.train.seed, SeedPurpose.EVAL, index=update)
            figures = sample_reward(run.model, run.tokenizer, samples=samples, seed=seed, form=form)
            run.output.log_event(
                "heldout",
                {"update": update, **{f"study/heldout_{k}": v for k, v in figures.items()}},
            )

        if run.state.global_update == 0:
            evaluate(0)

        def on_update(state: TrainerState) -> None:
            if state.global_update % every == 0:
                evaluate(state.global_update)

        return on_update

    return build
