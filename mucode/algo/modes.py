"""The enumerated modes of the algorithm core, and one parser that turns strings into them.

Modes are ``str`` enums (not bare strings) so a typo fails where the parameters are built, with a
message that lists the valid values, instead of deep inside a loss function.
"""

from __future__ import annotations

from enum import Enum
from typing import TypeVar

__all__ = ["KLEstimator", "LossAggregation", "M2POMode", "StdEstimator", "VetoScope", "parse_mode"]


class LossAggregation(str, Enum):
    """How per-token losses become one scalar (see :mod:`mucode.algo.aggregation`)."""

    SEQ_MEAN_TOKEN_MEAN = "seq-mean-token-mean"
    """(1/|B|) Σ_i (1/T_i) Σ_t ℓ_it; |B| counts every response of the minibatch, vetoed ones too."""
    TOKEN_MEAN = "token-mean"
    """(1/Σ_i T_i) Σ_i Σ_t ℓ_it over all valid tokens of the minibatch (DAPO style; M2PO's default)."""
    SEQ_MEAN_TOKEN_SUM_NORM = "seq-mean-token-sum-norm"
    """(1/(|B|·L)) Σ_i Σ_t ℓ_it with a constant length L (Dr.GRPO)."""


class VetoScope(str, Enum):
    """Which tokens of a negative-advantage response the μ-GRPO veto masks."""

    NONE = "none"
    """Mask nothing (the paper: collapses mid-training)."""
    TRIGGER = "trigger"
    """Mask the trigger tokens only (A<0 and ρ<τ_c)."""
    SUFFIX = "suffix"
    """Mask every token strictly after the first trigger κ."""
    NONTRIGGER_SUFFIX = "nontrigger_suffix"
    """Mask tokens strictly after κ whose own ratio is ≥ τ_c."""
    SEQUENCE = "sequence"
    """Mask the whole response when it has any trigger (the default)."""


class StdEstimator(str, Enum):
    """The group standard deviation used to scale GRPO advantages."""

    UNBIASED = "unbiased"
    """Sample std with Bessel's correction (n−1), as verl computes it."""
    POPULATION = "population"
    """Population std (n), as TRL computes it."""
    NONE = "none"
    """No scaling: A = R − mean(R) (Dr.GRPO)."""


class M2POMode(str, Enum):
    """How M2PO bounds the second moment of the log-ratios."""

    GREEDY_MASK = "greedy_mask"
    """The paper's rule: mask the largest-M2 candidate tokens until their mean M2 ≤ τ_M2."""
    WATER_FILL = "water_fill"
    """The authors' code: one cap τ on |log ρ| with mean min(M2, τ²) = τ_M2, then PPO-clip ρ to [e^−τ, e^τ]."""


class KLEstimator(str, Enum):
    """How the per-token KL(π_θ ‖ π_ref) of the reference term is estimated from sampled tokens."""

    K3 = "k3"
    """exp(d) − d − 1 with d = log π_ref − log π_θ: ≥ 0, low variance (verl's ``low_var_kl``)."""
    K1 = "k1"
    """log π_θ − log π_ref, the plain estimate (AGPO's official code)."""


E = TypeVar("E", bound=Enum)


def parse_mode(enum_type: type[E], value: E | str, field: str) -> E:
    """``value`` as a member of ``enum_type``; raises ValueError naming ``field`` and the valid values."""
    if isinstance(value, enum_type):
        return value
    try:
        return enum_type(value)
    except ValueError:
        valid = ", ".join(repr(member.value) for member in enum_type)
        raise ValueError(f"{field}={value!r} is not valid; choose one of {valid}") from None
