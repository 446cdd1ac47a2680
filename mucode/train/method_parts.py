"""The per-run pieces the optimizer builds from the config beside the objective: the batch composer
(``compose``), the reference policy (when the objective's ``kl_coef`` > 0) and the objective's state.

Combinations that cannot work are refused here, before any rollout: a composer that replays single
rollouts with an objective that reads whole groups (conspo, agpo).
"""

from __future__ import annotations

from typing import Any

from torch import nn

from mucode.algo import get_objective
from mucode.components import COMPOSERS
from mucode.config import MucodeConfig
from mucode.seeds import SeedPurpose, derive_seed
from mucode.train.compose import BatchComposer, FreshComposer
from mucode.train.distributed import DistInfo
from mucode.train.precision import Precision
from mucode.train.reference import ReferencePolicy

__all__ = ["build_method_parts"]


def build_method_parts(
    cfg: MucodeConfig, model: nn.Module, info: DistInfo, precision: Precision, pad_token_id: int
) -> tuple[BatchComposer, ReferencePolicy | None, dict[str, float]]:
    """(composer, reference policy or None, the objective's initial state)."""
    objective = get_objective(cfg.algo.objective)
    composer: Any = COMPOSERS.get(cfg.compose.composer).build(
        cfg.compose.params, derive_seed(cfg.train.seed, SeedPurpose.REPLAY)
    )
    if not isinstance(composer, FreshComposer) and objective.uses_groups:
        raise ValueError(
            f"compose.composer={cfg.compose.composer} trains on single replayed rollouts, but "
            f"algo.objective={cfg.algo.objective} reads whole groups; use compose.composer=fresh"
        )
    reference = None
    if cfg.algo.params.kl_coef > 0:
        reference = ReferencePolicy(
            model, info, precision, reset_every=cfg.reference.reset_every_stages, pad_token_id=pad_token_id
        )
    return composer, reference, {}
