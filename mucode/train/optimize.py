"""Phase 3 of a stage, one optimizer update: micro-batching by token budget, the objective by name,
gradient accumulation with the minibatch's explicit denominator, grad clipping, AdamW.

- The objective and its typed params come from the config (``algo.objective``, ``algo.params``:
  validated there against the objective's ``params_type``), plug-in objectives included.
- The minibatch is B_mini prompt groups. Responses whose verification failed (``masked``) are
  dropped before anything else: they count in no denominator and carry no gradient.
- Micro-batches are packed greedily (responses sorted by length) so that rows × padded length
  (prompt + response) stays within ``batch.micro_batch_tokens``; a single response longer than the
  budget gets a micro-batch of its own. The loss of every micro-batch uses the denominator of the
  whole minibatch (``mucode.algo.loss_denominator``), so the accumulated gradient does not depend on
  the budget (tested).
- Objectives that need a minibatch-wide pass (M2PO's masking) get it: a no-grad forward over the
  whole minibatch first, then ``objective.prepare`` and row slices per micro-batch.
- The batch composer (``compose``) makes each update's groups from the store's minibatch (replay);
  objectives that read groups get whole groups per micro-batch with their rewards and per-row data
  (:mod:`mucode.train.batch_inputs`), the reference policy's log-probs when ``kl_coef`` > 0
  (:mod:`mucode.train.reference`), the training progress, and the state they keep across updates.
- Mixed precision (``model.dtype`` narrower than ``model.master_dtype``): forwards and backwards run
  under ``torch.autocast`` unless FSDP's ``MixedPrecision`` already casts (``mucode.train.precision``);
  gradients, master weights and AdamW state stay float32.
- Under torchrun each rank takes groups ``rank::world``; gradients are summed across ranks (FSDP:
  loss × world before its averaging reduce-scatter; CPU: an explicit all-reduce), so the update
  equals the single-process one. Ranks pad to the same number of micro-batches (FSDP needs it).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from mucode.algo import get_objective
from mucode.algo.metrics import reduce_metrics
from mucode.config import AlgoConfig, MucodeConfig, OptimConfig
from mucode.config_methods import ComposeConfig, ReferenceConfig
from mucode.rollout.logprobs import response_logprobs
from mucode.train.batch_inputs import pack_group_micro_batches, row_inputs, temperatures
from mucode.train.distributed import DistInfo, is_fsdp, unwrap
from mucode.train.method_parts import build_method_parts
from mucode.train.precision import Precision
from mucode.train.store import StoredGroup, StoredSample

__all__ = ["UpdateSettings", "Updater", "make_optimizer", "pack_micro_batches"]


def make_optimizer(
    model: nn.Module, cfg: OptimConfig
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW (no weight decay on biases and norms) with a constant lr after optional linear warm-up."""
    decay: list[nn.Parameter] = []
    no_decay: list[nn.Parameter] = []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (no_decay if p.dim() < 2 or "norm" in name.lower() else decay).append(p)
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg.lr,
        betas=(cfg.betas[0], cfg.betas[1]),
        foreach=False,
    )
    warmup = cfg.warmup_updates
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup) if warmup > 0 else 1.0
    )
    return optimizer, scheduler


def pack_micro_batches(samples: Sequence[StoredSample], budget: int) -> list[list[int]]:
    """Indices of ``samples`` grouped so that rows × (longest prompt + longest response) ≤ budget.

    Ordered by length, then by content (the position only between identical samples), so the micro-batches
    and their rows do not depend on the order of the groups in the minibatch."""
    order = sorted(
        range(len(samples)),
        key=lambda i: (
            len(samples[i].prompt_tokens) + len(samples[i].response_tokens),
            samples[i].prompt_tokens,
            samples[i].response_tokens,
            i,
        ),
    )
    batches: list[list[int]] = []
    current: list[int] = []
    width_p = width_r = 0
    for i in order:
        p, r = len(samples[i].prompt_tokens), max(1, len(samples[i].response_tokens))
        new_p, new_r = max(width_p, p), max(width_r, r)
        if current and (len(current) + 1) * (new_p + new_r) > budget:
            batches.append(current)
            current, new_p, new_r = [], p, r
        current.append(i)
        width_p, width_r = new_p, new_r
    if current:
        batches.append(current)
    return batches


def _pad(rows: Sequence[Sequence[float]], width: int) -> torch.Tensor:
    out = torch.zeros((len(rows), width), dtype=torch.float32)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.as_tensor(list(row), dtype=torch.float32)
    return out


@dataclass(frozen=True)
class UpdateSettings:
    """What an optimizer update reads of the config: the objective's and composer's sections, and a few
    numbers of others (built once by :meth:`from_config`)."""

    algo: AlgoConfig
    """The objective by name and its typed params (``kl_coef`` > 0 builds the reference policy)."""
    compose: ComposeConfig
    """The batch composer."""
    reference: ReferenceConfig
    """When π_ref is reset."""
    precision: Precision
    """``model.master_dtype`` / ``model.dtype``."""
    temperature: float
    """``rollout.temperature``: the log-prob temperature of responses that stored none of their own."""
    micro_batch_tokens: int
    """``batch.micro_batch_tokens``."""
    grad_clip: float | None
    """``optim.grad_clip``."""
    log_entropy: bool
    """``train.log_entropy``."""
    seed: int
    """``train.seed``: the composer's random stream derives from it."""

    @classmethod
    def from_config(cls, cfg: MucodeConfig) -> UpdateSettings:
        return cls(
            algo=cfg.algo,
            compose=cfg.compose,
            reference=cfg.reference,
            precision=Precision.from_names(cfg.model.master_dtype, cfg.model.dtype),
            temperature=cfg.rollout.temperature,
            micro_batch_tokens=cfg.batch.micro_batch_tokens,
            grad_clip=cfg.optim.grad_clip,
            log_entropy=cfg.train.log_entropy,
            seed=cfg.train.seed,
        )


class Updater:
    """Makes one optimizer update from one minibatch of stored groups."""

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: Any,
        settings: UpdateSettings,
        info: DistInfo,
        *,
        pad_token_id: int,
    ) -> None:
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.info = info
        self.objective = get_objective(settings.algo.objective)
        self.params = settings.algo.params  # typed by the config: the objective's own params_type
        self.temperature = settings.temperature
        self.budget = settings.micro_batch_tokens
        self.grad_clip = settings.grad_clip
        self.log_entropy = settings.log_entropy
        self.pad_token_id = pad_token_id
        self.fsdp = is_fsdp(model)
        # FSDP's MixedPrecision casts the parameters itself; elsewhere autocast gives the same split
        self.precision = Precision() if self.fsdp else settings.precision
        self.composer, self.reference, self.state = build_method_parts(
            settings.algo,
            settings.compose,
            settings.reference,
            seed=settings.seed,
            model=model,
            info=info,
            precision=self.precision,
            pad_token_id=pad_token_id,
        )

    def _forward(
        self, samples: Sequence[StoredSample], with_entropy: bool, temps: Sequence[float] | None = None
    ) -> Any:
        with self.precision.autocast(self.info.device):
            return response_logprobs(
                self.model,
                [s.prompt_tokens for s in samples],
                [s.response_tokens for s in samples],
                self.temperature if temps is None else temps,
                pad_token_id=self.pad_token_id,
                with_entropy=with_entropy,
            )

    def begin_stage(self, stage: int) -> None:
        """Called once at the start of each stage's updates: resets π_ref when ``reference`` says so."""
        if self.reference is not None:
            self.reference.begin_stage(stage, self.model)

    def step(self, groups: list[StoredGroup], *, update: int = 0, progress: float = 0.0) -> dict[str, float]:
        """One update on the composed minibatch of ``groups`` (``update``: global update number before this
        one; ``progress``: update / total updates, for objectives with schedules)."""
        info = self.info
        groups, composed = self.composer.compose(groups, update)
        all_samples = [s for g in groups for s in g.samples]
        usable = [s for s in all_samples if not s.masked and s.response_tokens]
        group_of = [
            gi for gi, g in enumerate(groups) for s in g.samples if not s.masked and s.response_tokens
        ]
        mine_groups = [(gi, g) for gi, g in enumerate(groups)][info.rank :: info.world_size]
        mine_of = [gi for gi, g in mine_groups for s in g.samples if not s.masked and s.response_tokens]
        mine = [s for _, g in mine_groups for s in g.samples if not s.masked and s.response_tokens]
        lengths = [len(s.response_tokens) for s in usable]
        full_mask = torch.zeros((len(usable), max(lengths, default=1)), dtype=torch.bool)
        for i, n in enumerate(lengths):
            full_mask[i, :n] = True
        grouped = self.objective.needs_groups(self.params)
        extra = row_inputs(usable, group_of, self.temperature, "cpu") if grouped else {}
        denominator = (
            self.objective.denominator(
                full_mask,
                self.params,
                groups=extra.get("groups"),  # type: ignore[arg-type]
                rewards=extra.get("rewards"),  # type: ignore[arg-type]
            )
            if usable
            else 0.0
        )

        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        micro = (
            (
                pack_group_micro_batches(mine, mine_of, self.budget)
                if grouped
                else pack_micro_batches(mine, self.budget)
            )
            if mine
            else []
        )
        with self.reference.on_device() if self.reference is not None else contextlib.nullcontext():
            parts, n_micro_all = self._accumulate(mine, mine_of, micro, denominator, grouped, progress)
        grad_norm = self._clip()
        self.optimizer.step()
        self.scheduler.step()

        if info.enabled:
            gathered: list[list[dict[str, float]]] = [[] for _ in range(info.world_size)]
            dist.all_gather_object(gathered, parts)
            parts = [p for rank_parts in gathered for p in rank_parts]
        metrics = reduce_metrics(parts) if parts else {}
        if self.objective.state_fn is not None:
            self.state = self.objective.state_fn(self.state, metrics, self.params)
        fresh = [g for g in groups if not g.replayed]
        rewards = [s.reward for g in fresh for s in g.samples if not s.masked and s.response_tokens]
        metrics.update(composed)
        metrics.update(
            {
                "reward/mean": sum(rewards) / len(rewards) if rewards else math.nan,
                "reward/frac_groups_all_equal": sum(
                    len({s.reward for s in g.samples if not s.masked}) <= 1 for g in fresh
                )
                / max(1, len(fresh)),
                "batch/responses": len(usable),
                "batch/masked_responses": len(all_samples) - len(usable),
                "batch/micro_batches": n_micro_all,
                "batch/mean_response_tokens": sum(lengths) / max(1, len(lengths)),
                "optim/grad_norm": grad_norm,
                "optim/lr": self.scheduler.get_last_lr()[0],
            }
        )
        return metrics

    def _accumulate(
        self,
        mine: list[StoredSample],
        mine_of: list[int],
        micro: list[list[int]],
        denominator: float,
        grouped: bool,
        progress: float,
    ) -> tuple[list[dict[str, float]], int]:
        """Forward and backward of this rank's micro-batches (gradients accumulate); their metrics."""
        info = self.info
        n_micro = len(micro)
        if info.enabled:
            t = torch.tensor([n_micro], dtype=torch.long, device=info.device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            n_micro_all = int(t.item())
        else:
            n_micro_all = n_micro

        prepared_full = self._prepare(mine, micro) if self.objective.needs_minibatch_pass and mine else None

        scale = float(info.world_size) if self.fsdp else 1.0
        parts: list[dict[str, float]] = []
        for m in range(n_micro_all):
            if m >= n_micro or denominator <= 0:
                if (
                    m < n_micro and not self.fsdp
                ):  # nothing to learn from (ConSPO discarded every group): log why
                    # (not under FSDP: an extra forward on some ranks only would desynchronise its collectives)
                    with torch.no_grad():
                        parts.append(self._call(mine, mine_of, micro[m], None, grouped, progress, None)[1])
                self._dummy_backward()  # keeps FSDP's collectives in step across ranks
                continue
            loss, metrics = self._call(mine, mine_of, micro[m], denominator, grouped, progress, prepared_full)
            (loss * scale).backward()
            parts.append(metrics)

        if info.enabled and not self.fsdp:
            for p in self.model.parameters():
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
        return parts, n_micro_all

    def _call(
        self,
        mine: list[StoredSample],
        mine_of: list[int],
        index: list[int],
        denominator: float | None,
        grouped: bool,
        progress: float,
        prepared_full: dict[str, torch.Tensor] | None,
    ) -> tuple[Any, dict[str, float]]:
        """The objective on one micro-batch (rows ``index`` of this rank's responses): (loss, metrics)."""
        rows = [mine[i] for i in index]
        temps = temperatures(rows, self.temperature)
        out = self._forward(rows, self.log_entropy or self.objective.needs_entropy, temps)
        width = out.logprobs.shape[1]
        device = out.logprobs.device
        behaviour = _pad([s.behaviour_logprobs for s in rows], width).to(device)
        advantages = torch.tensor([s.advantage for s in rows], dtype=torch.float32, device=device)
        prepared = None
        if prepared_full is not None:
            picks = torch.tensor(index, dtype=torch.long)
            prepared = {
                k: (v[picks][:, :width] if v.dim() >= 2 else v[picks]).to(device)
                for k, v in prepared_full.items()
            }
        extra: dict[str, Any] = (
            row_inputs(rows, [mine_of[i] for i in index], self.temperature, device) if grouped else {}
        )
        if self.reference is not None:
            extra["ref_logprobs"] = self.reference.logprobs(
                [s.prompt_tokens for s in rows], [s.response_tokens for s in rows], temps
            ).to(device)
        return self.objective(
            out.logprobs,
            behaviour,
            advantages,
            out.mask,
            self.params,
            denominator=denominator,
            entropy=out.entropy,
            prepared=prepared,
            progress=min(1.0, max(0.0, progress)),
            state=self.state,
            **extra,
        )

    def _clip(self) -> float:
        max_norm = self.grad_clip if self.grad_clip is not None else math.inf
        if self.fsdp:
            norm = self.model.clip_grad_norm_(max_norm)  # type: ignore[operator]
        else:
            norm = torch.nn.utils.clip_grad_norm_(unwrap(self.model).parameters(), max_norm)
        return float(norm)

    def _dummy_backward(self) -> None:
        first = next(self.model.parameters())
        zero = torch.zeros((1, 1), dtype=torch.long, device=first.device)
        with self.precision.autocast(self.info.device):
            out = self.model(input_ids=zero, attention_mask=torch.ones_like(zero), use_cache=False)
        (out.logits.sum() * 0.0).backward()

    @torch.no_grad()
    def _full_logprobs(self, samples: list[StoredSample], micro: list[list[int]]) -> torch.Tensor:
        width = max(len(s.response_tokens) for s in samples)
        full = torch.zeros((len(samples), width), dtype=torch.float32)
        for rows in micro:
            out = self._forward([samples[i] for i in rows], False)
            for j, i in enumerate(rows):
                n = len(samples[i].response_tokens)
                full[i, :n] = out.logprobs[j, :n].float().cpu()
        return full

    def _prepare(self, samples: list[StoredSample], micro: list[list[int]]) -> dict[str, torch.Tensor]:
        """M2PO-style minibatch pass (this rank's responses; ranks prepare independently)."""
        logprobs = self._full_logprobs(samples, micro)
        width = logprobs.shape[1]
        behaviour = _pad([s.behaviour_logprobs for s in samples], width)
        mask = torch.zeros_like(logprobs, dtype=torch.bool)
        for i, s in enumerate(samples):
            mask[i, : len(s.response_tokens)] = True
        advantages = torch.tensor([s.advantage for s in samples], dtype=torch.float32)
        return {
            k: v.cpu()
            for k, v in self.objective.prepare(logprobs, behaviour, advantages, mask, self.params).items()
        }
