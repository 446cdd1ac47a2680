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
from mucode.config import AlgoConfig
from mucode.config_methods import ComposeConfig, ReferenceConfig
from mucode.seeds import SeedPurpose, derive_seed
from mucode.train.compose import BatchComposer, FreshComposer
from mucode.train.distributed import DistInfo
from mucode.train.precision import Precision
from mucode.train.reference import ReferencePolicy

__all__ = ["build_method_parts"]


def build_method_parts(
    algo: AlgoConfig,
    compose: ComposeConfig,
    reference_cfg: ReferenceConfig,
    *,
    seed: int,
    model: nn.Module,
    info: DistInfo,
    precision: Precision,
    pad_token_id: int,
) -> tuple[BatchComposer, ReferencePolicy | None, dict[str, float]]:
    """(composer, reference policy or None, the objective's initial state); ``seed``: ``train.seed``."""
    objective = get_objective(algo.objective)
    composer: Any = COMPOSERS.get(compose.composer).build(
        compose.params, derive_seed(seed, SeedPurpose.REPLAY)
    )
    if not isinstance(composer, FreshComposer) and objective.uses_groups:
        raise ValueError(
            f"compose.composer={compose.composer} trains on single replayed rollouts, but "
            f"algo.objective={algo.objective} reads whole groups; use compose.composer=fresh"
        )
    reference = None
    if algo.params.kl_coef > 0:
        reference = ReferencePolicy(
            model, info, precision, reset_every=reference_cfg.reset_every_stages, pad_token_id=pad_token_id
        )
    return composer, reference, {}
