"""Evaluation during training: the paper's protocol, the policies it scores, and the best one.

Every ``train.eval_every`` updates (and after the last update) the current weights are

1. exported in Hugging Face format to ``policy/update-NNNNNNN`` (kept, subject to ``train.keep_policies``);
2. evaluated on ``eval.benchmarks`` with the evaluators' own code (``mucode.eval.evaluate_benchmarks``)
   and each kind's protocol from the benchmark registry (``mucode.eval.benchmarks``: sampling, prompt,
   samples per problem): ``eval.protocol`` where the kind has it (its response budget at the run's
   context), else the kind's default protocol, the one ``mucode eval`` uses (with the run's
   ``rollout.max_response_tokens``); ``eval.temperature``/``eval.top_p`` override when set. Each kind
   samples with its own engine settings. Evaluation goes through the run's verifier; samples,
   verdicts and ``report.json`` go to ``eval/update-NNNNNNN`` (a resumed run reuses them);
3. compared with the best so far by the mean of ``eval.select_metric`` over the benchmarks: the best is
   recorded in ``best.json`` and ``policy/best`` (a relative symlink to its ``update-N`` directory).

Each eval event (``metrics.jsonl``) carries ``time/since_start`` (wall-clock seconds of training so far,
summed over invocations: finished stages plus the current one, evaluation included), ``time/eval_so_far``
and ``time/train_since_start`` (the difference: what a time-to-accuracy comparison uses). The time spent
evaluating is reported as ``time/eval``, apart from ``time/optimize``.

Under torchrun every rank joins the export (a collective), then rank 0 evaluates the exported policy
with the ``hf`` engine while the other ranks wait at a barrier (the process group's timeout must exceed
an evaluation). Single-process, the ``hf`` engine shares the trainer's weights (no copy).

Limits: time lost in a stage interrupted by a crash is not counted in ``time/since_start``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from mucode.config import EvalConfig, MucodeConfig
from mucode.eval import evaluate_benchmarks, metrics_from_report
from mucode.eval.benchmarks import protocols_for
from mucode.eval.judge import VerifierOptions
from mucode.protocol import Connection
from mucode.seeds import SeedPurpose, derive_seed
from mucode.train.checkpoint import TrainerState
from mucode.train.distributed import DistInfo, barrier, full_state_dict, unwrap

__all__ = [
    "EvalSettings",
    "Evaluator",
    "eval_options",
    "eval_plan",
    "eval_sampling",
    "prune_policies",
    "score",
]


def eval_options(cfg: MucodeConfig) -> dict[str, Any]:
    """How the benchmarks' protocols are resolved for this run (``protocols_for`` / ``evaluate_benchmarks``
    keywords): ``eval.protocol`` where a kind has it, else the kind's default protocol in the benchmark
    registry; with ``eval.protocol`` its response budget at the run's context, without it the run's
    ``rollout.max_response_tokens``; ``eval.temperature`` / ``eval.top_p`` when set."""
    e = cfg.eval
    explicit = e.protocol is not None
    return {
        "protocol": e.protocol,
        "context_tokens": cfg.data.max_prompt_tokens + cfg.rollout.max_response_tokens if explicit else None,
        "sampling": {
            "temperature": e.temperature,
            "top_p": e.top_p,
            "max_new_tokens": None if explicit else cfg.rollout.max_response_tokens,
        },
    }


def eval_plan(cfg: MucodeConfig) -> list[tuple[Any, Any, list[str]]]:
    """``(benchmark kind, protocol, names)`` per kind of ``eval.benchmarks``; raises ValueError for an
    unknown benchmark or a protocol not stated for the run's context."""

    return _plan(cfg.eval.benchmarks, eval_options(cfg))


def _plan(benchmarks: list[str], options: Mapping[str, Any]) -> list[tuple[Any, Any, list[str]]]:
    return protocols_for(benchmarks, options["protocol"], options["context_tokens"], **options["sampling"])


def eval_sampling(cfg: MucodeConfig) -> tuple[float, float, int, str | None]:
    """The first kind's (temperature, top_p, max_new_tokens, protocol name) (each kind samples with its
    own protocol); raises ValueError like :func:`eval_plan`."""
    plan = eval_plan(cfg)
    if not plan:
        e = cfg.eval
        return e.temperature or 1.0, e.top_p or 1.0, cfg.rollout.max_response_tokens, e.protocol
    _, protocol, _ = plan[0]
    s = protocol.sampling
    return s.temperature, s.top_p, s.max_new_tokens, protocol.name


def score(metrics: dict[str, float], benchmarks: list[str], metric: str) -> float:
    """Mean of ``eval/<benchmark>/<metric>`` over ``benchmarks`` (NaN when one is missing)."""
    values = [metrics.get(f"eval/{b}/{metric}", math.nan) for b in benchmarks]
    return sum(values) / len(values) if values else math.nan


def _update_of(path: Path, updates_per_stage: int) -> int:
    kind, _, number = path.name.partition("-")
    return int(number) if kind == "update" else (int(number) + 1) * updates_per_stage


def prune_policies(
    policy_root: Path, keep: int | None, updates_per_stage: int, protect: set[str]
) -> list[str]:
    """Delete all but the newest ``keep`` policies under ``policy_root`` (never those named in ``protect``
    nor the newest stage policy, β of the next stage); returns the names deleted."""
    if keep is None or not policy_root.is_dir():
        return []
    exported = [
        p
        for p in policy_root.iterdir()
        if p.is_dir()
        and not p.is_symlink()
        and p.name.partition("-")[0] in ("update", "stage")
        and not p.name.endswith(".tmp")
    ]
    exported.sort(key=lambda p: (_update_of(p, updates_per_stage), p.name))
    stages = [p for p in exported if p.name.startswith("stage-")]
    protected = set(protect) | ({stages[-1].name} if stages else set())
    deleted = []
    for path in exported[:-keep]:
        if path.name not in protected:
            shutil.rmtree(path)
            deleted.append(path.name)
    return deleted


@dataclass(frozen=True)
class EvalSettings:
    """What evaluation during training reads of the config (built once by :meth:`from_config`)."""

    eval: EvalConfig
    """The benchmarks, their protocol and sample counts, the selection metric."""
    options: Mapping[str, Any]
    """:func:`eval_options`: how each kind's protocol is resolved at the run's context."""
    connection: Connection
    """The verifier's connection settings (``verifier.connection()``)."""
    every: int
    """``train.eval_every`` (0: only after the last update)."""
    seed: int
    """``train.seed``: each evaluation's engine seed derives from it."""
    keep_policies: int | None
    """``train.keep_policies``."""
    updates_per_stage: int
    """``batch.updates_per_stage`` (which exported policy is the next stage's β)."""
    master_dtype: str
    """``model.master_dtype``."""
    dtype: str
    """``model.dtype``: the exported policy's and the engine's."""
    batch_size: int
    """``rollout.batch_size``: sequences the engine decodes together."""

    @classmethod
    def from_config(cls, cfg: MucodeConfig) -> EvalSettings:
        return cls(
            eval=cfg.eval,
            options=eval_options(cfg),
            connection=cfg.verifier.connection(),
            every=cfg.train.eval_every or 0,
            seed=cfg.train.seed,
            keep_policies=cfg.train.keep_policies,
            updates_per_stage=cfg.batch.updates_per_stage,
            master_dtype=cfg.model.master_dtype,
            dtype=cfg.model.dtype,
            batch_size=cfg.rollout.batch_size,
        )


class Evaluator:
    """Runs the evaluations of one training invocation and keeps their bookkeeping."""

    def __init__(
        self, settings: EvalSettings, run_dir: Path, info: DistInfo, resumed: TrainerState | None = None
    ) -> None:
        """``resumed``: the state a resumed run continues from. A ``best.json`` written after it (by
        an evaluation of the updates a resume replays) is set back to the state's best, with
        ``policy/best`` (rank 0); one written before it is kept (it is the state's, or the state
        was saved before checkpoints carried the best)."""
        self.settings = settings
        self.run_dir = run_dir
        self.info = info
        self.seconds = 0.0
        """Time spent evaluating in this invocation."""
        self.plan = _plan(settings.eval.benchmarks, settings.options)
        """(kind, protocol, names) per benchmark kind: each samples with its own protocol."""
        path = run_dir / "best.json"
        self.best: dict[str, Any] | None = json.loads(path.read_text()) if path.exists() else None
        if resumed is not None and self.best is not None and self.best["update"] > resumed.global_update:
            self.best = resumed.best
            if info.is_main:
                self._mark_best()

    def _mark_best(self) -> None:
        """``best.json`` and the ``policy/best`` link as ``self.best`` says (neither when it is None)."""
        path, link = self.run_dir / "best.json", self.run_dir / "policy" / "best"
        if self.best is None:
            path.unlink(missing_ok=True)
            if link.is_symlink():
                link.unlink()
            return
        _write_json(path, self.best)
        tmp = link.with_name("best.tmp")
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink()
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(f"update-{self.best['update']:07d}", tmp)
        os.replace(tmp, link)

    def due(self, update: int) -> bool:
        every = self.settings.every
        return bool(self.settings.eval.benchmarks) and every != 0 and update % every == 0

    def done(self, update: int) -> bool:
        return (self.run_dir / "eval" / f"update-{update:07d}" / "report.json").exists()

    def run(
        self,
        model: torch.nn.Module,
        tokenizer: Any,
        urls: list[str],
        update: int,
        logger: Any,
        since_start: float,
        eval_so_far: float,
    ) -> dict[str, float]:
        """Export, evaluate (rank 0), keep the best; every rank must call it. Returns the eval metrics."""
        start = time.perf_counter()
        policy_dir = self.run_dir / "policy" / f"update-{update:07d}"
        weights = full_state_dict(model)  # collective under torchrun
        metrics: dict[str, float] = {}
        if self.info.is_main:
            from mucode.train.policy import save_policy  # lazy: torch
            from mucode.train.precision import Precision  # lazy: torch

            precision = Precision.from_names(self.settings.master_dtype, self.settings.dtype)
            if not (policy_dir / "config.json").exists():  # in the engine's dtype, as the hand-over exports
                save_policy(
                    unwrap(model),
                    tokenizer,
                    weights,
                    policy_dir,
                    dtype=precision.compute if precision.mixed else None,
                )
            del weights
            metrics = self._evaluate(model, tokenizer, urls, update, policy_dir)
        else:
            del weights
        barrier(self.info)
        elapsed = time.perf_counter() - start
        self.seconds += elapsed
        if self.info.is_main:
            self._record(metrics, update, logger, since_start + elapsed, eval_so_far + elapsed)
        return metrics

    def _engine(
        self, model: torch.nn.Module, tokenizer: Any, update: int, policy_dir: Path, sampling: Any
    ) -> Any:
        """An ``hf`` engine sampling with a protocol's ``sampling`` (temperature, top_p, max_new_tokens)."""
        params = sampling.engine_params(derive_seed(self.settings.seed, SeedPurpose.EVAL, index=update))
        batch_size = self.settings.batch_size
        if not self.info.enabled:
            from mucode.rollout.hf import HFEngine  # lazy: torch

            return HFEngine(unwrap(model), tokenizer, params, batch_size=batch_size)
        from mucode.rollout.factory import make_engine  # lazy: torch

        return make_engine(
            "hf",
            str(policy_dir),
            params,
            dtype=self.settings.dtype,
            device=str(self.info.device),
            batch_size=batch_size,
        )

    def _evaluate(
        self, model: torch.nn.Module, tokenizer: Any, urls: list[str], update: int, policy_dir: Path
    ) -> dict[str, float]:
        e = self.settings.eval
        out_dir = self.run_dir / "eval" / f"update-{update:07d}"
        model.eval()
        try:
            report = evaluate_benchmarks(
                e.benchmarks,
                None,
                tokenizer,
                data_dir=e.data_dir,
                samples_per_problem=e.samples_per_problem,
                verifier=VerifierOptions(urls=list(urls), connection=self.settings.connection),
                run_dir=out_dir,
                limit=e.limit,
                fingerprint={"run": str(self.run_dir), "update": update},
                engine_for=lambda protocol: self._engine(
                    model, tokenizer, update, policy_dir, protocol.sampling
                ),
                **self.settings.options,
            )
        finally:
            model.train()
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "report.json").write_text(json.dumps(report, indent=2, default=str))
        return metrics_from_report(report)

    def _record(
        self, metrics: dict[str, float], update: int, logger: Any, since_start: float, eval_so_far: float
    ) -> None:
        e = self.settings.eval
        value = score(metrics, e.benchmarks, e.select_metric)
        times = {
            "time/since_start": since_start,
            "time/eval_so_far": eval_so_far,
            "time/train_since_start": since_start - eval_so_far,
        }
        is_best = not math.isnan(value) and (self.best is None or value > float(self.best["score"]))
        if is_best:
            self.best = {
                "update": update,
                "score": value,
                "metric": f"mean {e.select_metric} over " + ", ".join(e.benchmarks),
                "policy": f"policy/update-{update:07d}",
                **times,
                "metrics": metrics,
            }
            self._mark_best()
        if logger is not None:
            logger.log_event(
                "eval", {**metrics, "update": update, "eval/score": value, "eval/is_best": is_best, **times}
            )
        protect = {f"update-{self.best['update']:07d}"} if self.best else set()
        prune_policies(
            self.run_dir / "policy", self.settings.keep_policies, self.settings.updates_per_stage, protect
        )
        shown = ", ".join(
            f"{k.removeprefix('eval/')}={v:.3f}" for k, v in metrics.items() if k.endswith(e.select_metric)
        )
        print(
            f"eval at update {update}: {shown}; score {value:.4f}{' (best so far)' if is_best else ''}",
            flush=True,
        )


def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj, indent=2, default=str))
    os.replace(tmp, path)
