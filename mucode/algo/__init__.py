"""mucode's algorithm core: pure tensor functions for GRPO-family policy objectives (imports only torch).

Objectives
==========
``get_objective(name)`` returns a registered :class:`Objective`: ``grpo`` (PPO-clip baseline),
``mu_grpo`` (clip [0, 5] + negative-advantage veto; the method), ``m2po`` (second-moment trust
region baseline), ``offpolicy_grpo`` (PPO-clip + zero-variance masking + reference KL), ``conspo``
(group-wise InfoNCE with a margin schedule) and ``agpo`` (per-prompt adaptive clip). The extension
points every objective shares (reference KL, zero-variance masking, groups, rewards, progress,
per-row data, trainer-held state) are described in :mod:`mucode.algo.objective`. Each has a frozen, typed
params dataclass (``objective.params_type``:
:class:`GRPOParams`, :class:`MuGRPOParams`, :class:`M2POParams`) whose defaults are the papers'.
``register_objective`` adds a new one (a name registered twice raises; an unknown name lists the
valid ones).

Calling an objective::

    objective = get_objective("mu_grpo")
    params = MuGRPOParams(veto_scope="sequence", veto_threshold=1e-4)   # or objective.default_params()
    loss, metrics = objective(
        logprobs,             # [B, T] log π_θ of the sampled tokens (requires grad)
        behaviour_logprobs,   # [B, T] b: the rollout engine's log-probs stored at sampling time
        advantages,           # [B]    one advantage per response (see group_advantages)
        response_mask,        # [B, T] bool/0-1: valid response tokens (padding and prompt are 0)
        params,
        denominator=D,        # float: the MINIBATCH denominator (below); None = this batch's own
        entropy=None,         # optional [B, T] entropy of π_θ → metric policy/entropy
        prepared=None,        # M2PO only: row slice of objective.prepare(...) on the minibatch
        metrics=True,         # False skips all diagnostics (returns {}), for the leanest step
    )
    loss.backward()           # loss is to be MINIMIZED (it is −J)

``metrics`` is a flat ``dict[str, float]`` of namespaced keys (``loss/policy``, ``stale/…``,
``policy/entropy``), each defined in :data:`METRICS` (:mod:`mucode.algo.metrics` is the glossary).
All values come back with one device→host copy.

Micro-batching with gradient accumulation
=========================================
A minibatch of responses is split into micro-batches by rows. To get exactly the minibatch's loss
and gradient (and metrics):

1. ``D = loss_denominator(minibatch_response_mask, params.aggregation, norm_length=params.norm_length)``
   once per minibatch (number of responses, or of tokens, or responses × L — see
   :mod:`mucode.algo.aggregation`). Vetoed responses count in D.
2. If ``objective.needs_minibatch_pass`` (only ``m2po``): run the policy without grad over the whole
   minibatch to get its current log-probs, then ``state = objective.prepare(logprobs_all, b_all,
   adv_all, mask_all, params)``; it returns ``dict[str, Tensor]`` whose tensors have leading dim B
   (``m2po_keep`` [B, T] bool in greedy mode; ``m2po_ratio_low``/``m2po_ratio_high`` [B] in water-fill).
   Skipping this makes M2PO select within each micro-batch instead (what the authors' code does).
3. For each micro-batch rows ``idx``::

       loss, m = objective(lp[idx], b[idx], adv[idx], mask[idx], params, denominator=D,
                           prepared={k: v[idx] for k, v in state.items()})

   (a micro-batch may also drop trailing padding columns; prepared tensors are trimmed to match)
       loss.backward()          # do NOT divide by the number of micro-batches: D already does
       parts.append(m)

4. ``reduce_metrics(parts)`` gives the minibatch metrics (sums, count-weighted means, min, max).

Micro-batches may be padded to different lengths T; for ``seq-mean-token-sum-norm`` set
``params.norm_length`` so L does not depend on padding.

Other pieces
============
- ``group_advantages(rewards[N], group_index[N], std=..., eps=..., valid=...) -> [N]``
- ``log_ratio(logprobs, behaviour_logprobs)``, ``ratio(log_rho, max_abs_log_ratio)``
- ``veto_mask(log_rho, mask, advantages, scope, threshold)``; ``m2po_greedy_keep``, ``m2po_water_level``
- Modes are str enums: :class:`LossAggregation`, :class:`VetoScope`, :class:`StdEstimator`,
  :class:`M2POMode`; params accept their string values too.
- Plug-in objectives: an installed package declares ``[project.entry-points."mucode.objectives"]
  NAME = "pkg.module:OBJECTIVE"`` (an :class:`Objective` whose ``name`` is NAME); ``get_objective``
  and the config's ``algo.objective`` find it (:data:`OBJECTIVES` is the registry).

The names below are imported on first use (PEP 562), so ``import mucode.algo.modes`` (the config
does) does not import torch.

Known limits: advantages are per response (token-level advantages are rejected); log ρ is clamped
to ±20 before ``exp`` (exact inside, zero gradient outside; the veto reads the unclamped value);
padding positions may hold any *finite* log-probs (they are multiplied by 0, so NaN would spread).
The engine-vs-trainer log-prob caveat of (top-p = 1, top-k off, same temperature) is the
caller's to check: this package never sees sampling settings.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mucode.algo.advantages import group_advantages
    from mucode.algo.aggregation import loss_denominator
    from mucode.algo.agpo import AGPO, AGPOParams
    from mucode.algo.catalog import OBJECTIVES, get_objective, objective_names, register_objective
    from mucode.algo.conspo import CONSPO, ConSPOParams, conspo_margin
    from mucode.algo.groups import group_token_scale, zero_variance_rows
    from mucode.algo.grpo import GRPO, GRPOParams
    from mucode.algo.m2po import M2PO, M2POParams, m2po_candidates, m2po_greedy_keep, m2po_water_level
    from mucode.algo.metrics import METRICS, MetricSpec, Reduce, reduce_metrics
    from mucode.algo.modes import KLEstimator, LossAggregation, M2POMode, StdEstimator, VetoScope
    from mucode.algo.mu_grpo import MU_GRPO, MuGRPOParams, veto_mask
    from mucode.algo.objective import LossInputs, Objective, ObjectiveParams
    from mucode.algo.offpolicy_grpo import OFFPOLICY_GRPO, OffPolicyGRPOParams
    from mucode.algo.ratios import log_ratio, ratio
    from mucode.registry import DuplicateNameError, Registry, UnknownNameError

_EXPORTS: dict[str, str] = {
    "group_advantages": "mucode.algo.advantages",
    **dict.fromkeys(("AGPO", "AGPOParams"), "mucode.algo.agpo"),
    **dict.fromkeys(("CONSPO", "ConSPOParams", "conspo_margin"), "mucode.algo.conspo"),
    **dict.fromkeys(("group_token_scale", "zero_variance_rows"), "mucode.algo.groups"),
    **dict.fromkeys(("OFFPOLICY_GRPO", "OffPolicyGRPOParams"), "mucode.algo.offpolicy_grpo"),
    "loss_denominator": "mucode.algo.aggregation",
    **dict.fromkeys(
        ("OBJECTIVES", "get_objective", "objective_names", "register_objective"), "mucode.algo.catalog"
    ),
    **dict.fromkeys(("GRPO", "GRPOParams"), "mucode.algo.grpo"),
    **dict.fromkeys(
        ("M2PO", "M2POParams", "m2po_candidates", "m2po_greedy_keep", "m2po_water_level"), "mucode.algo.m2po"
    ),
    **dict.fromkeys(("METRICS", "MetricSpec", "Reduce", "reduce_metrics"), "mucode.algo.metrics"),
    **dict.fromkeys(
        ("KLEstimator", "LossAggregation", "M2POMode", "StdEstimator", "VetoScope"), "mucode.algo.modes"
    ),
    **dict.fromkeys(("MU_GRPO", "MuGRPOParams", "veto_mask"), "mucode.algo.mu_grpo"),
    **dict.fromkeys(("LossInputs", "Objective", "ObjectiveParams"), "mucode.algo.objective"),
    **dict.fromkeys(("log_ratio", "ratio"), "mucode.algo.ratios"),
    **dict.fromkeys(("DuplicateNameError", "Registry", "UnknownNameError"), "mucode.registry"),
}

__all__ = [
    "AGPO",
    "AGPOParams",
    "CONSPO",
    "ConSPOParams",
    "GRPO",
    "KLEstimator",
    "OFFPOLICY_GRPO",
    "OffPolicyGRPOParams",
    "conspo_margin",
    "group_token_scale",
    "zero_variance_rows",
    "M2PO",
    "METRICS",
    "MU_GRPO",
    "OBJECTIVES",
    "DuplicateNameError",
    "GRPOParams",
    "LossAggregation",
    "LossInputs",
    "M2POMode",
    "M2POParams",
    "MetricSpec",
    "MuGRPOParams",
    "Objective",
    "ObjectiveParams",
    "Reduce",
    "Registry",
    "StdEstimator",
    "UnknownNameError",
    "VetoScope",
    "get_objective",
    "group_advantages",
    "log_ratio",
    "loss_denominator",
    "m2po_candidates",
    "m2po_greedy_keep",
    "m2po_water_level",
    "objective_names",
    "ratio",
    "reduce_metrics",
    "register_objective",
    "veto_mask",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mucode.algo' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
