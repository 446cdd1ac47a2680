"""The sampling controller: each prompt's temperature, and an optional probe generation.

A :class:`SamplingController` is asked once per stage (per rank) for a plan: for each prompt slot,
the statistics to store with its group, whose key ``temperature`` (if present) is the temperature
the prompt's training group is sampled at. A controller with ``probes = True`` first gets a probe:
``probe_samples`` responses per prompt (None: G) sampled at ``rollout.temperature`` by the stage's
policy and scored by the verifier. Probe responses only feed the plan: they are never stored and
never trained on (they are counted: ``probe/responses``, ``time/probe``).

Each stored response records the temperature it was sampled at (``StoredSample.temperature``), and
its behaviour log-probs are the engine's at that temperature; the trainer computes π_θ at the same
temperature, so ρ compares like with like. The group's statistics are stored as JSON
(``StoredSample.sampling``) and reach the objective as ``row_data``.

Built-ins: ``fixed`` (every prompt at ``rollout.temperature``, no probe) and ``agpo``
(:mod:`mucode.algo.agpo`: probe statistics σ_p, H_vote, κ; the adaptive temperature).

Limits: a per-prompt temperature needs an engine whose temperature can be set per call; the trainer
makes one engine per distinct temperature, which is cheap for the ``hf`` engine that shares the
trainer's weights and is refused for other engines. The agpo EMA of U lives in the controller: it
is not checkpointed (a resumed run starts it again) and under torchrun each rank keeps its own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from mucode.algo.agpo import TemperatureEMA, dispersion, skewness, uncertainty, vote_entropy
from mucode.components import SAMPLERS, Component

__all__ = ["AGPOController", "AGPOSamplingParams", "FixedController", "Probe", "SamplingController"]


@dataclass(frozen=True)
class Probe:
    """One prompt's probe: its responses' rewards (NaN where verification failed) and texts."""

    rewards: Sequence[float]
    texts: Sequence[str]


class SamplingController(Protocol):
    probes: bool
    """Whether :meth:`plan` needs a probe generation."""
    probe_samples: int | None
    """Responses per prompt in the probe (None: G)."""

    def plan(
        self, slots: Sequence[int], probes: Mapping[int, Probe], base_temperature: float
    ) -> dict[int, dict[str, float]]:
        """Slot → the numbers to store with its group (``temperature``: its sampling temperature)."""
        ...


@dataclass(frozen=True)
class FixedParams:
    """``fixed`` has no parameters."""


class FixedController:
    probes = False
    probe_samples = None

    def plan(
        self, slots: Sequence[int], probes: Mapping[int, Probe], base_temperature: float
    ) -> dict[int, dict[str, float]]:
        return {}


@dataclass(frozen=True)
class AGPOSamplingParams:
    """Parameters of the ``agpo`` controller (official code's defaults); τ_base is rollout.temperature."""

    gain: float = 0.15
    """λ of τ = τ_base·(1 + λ·c)."""
    min_temperature: float = 0.5
    max_temperature: float = 1.5
    ema_momentum: float = 0.1
    """EMA_U ← momentum·U + (1 − momentum)·EMA_U, once per prompt."""
    weight_dispersion: float = 1.0
    """w_r."""
    weight_vote_entropy: float = 1.0
    """w_e."""
    weight_skewness: float = 0.0
    """w_k."""
    dispersion: Literal["std", "mad", "iqr"] = "std"
    """σ_p: Bessel std, MAD·1.4826 or IQR/1.349."""
    probe_samples: int | None = None
    """Probe responses per prompt; None: G (batch.samples_per_prompt), as the official code."""

    def __post_init__(self) -> None:
        if not 0 < self.min_temperature <= self.max_temperature:
            raise ValueError(
                f"need 0 < min_temperature <= max_temperature, got {self.min_temperature}, "
                f"{self.max_temperature}"
            )
        if not 0 < self.ema_momentum <= 1:
            raise ValueError(f"ema_momentum must be in (0, 1], got {self.ema_momentum}")
        if self.probe_samples is not None and self.probe_samples < 2:
            raise ValueError(
                f"probe_samples must be >= 2 (a dispersion needs two rewards), got {self.probe_samples}"
            )


class AGPOController:
    probes = True

    def __init__(self, params: AGPOSamplingParams) -> None:
        self.params = params
        self.probe_samples = params.probe_samples
        self.ema: TemperatureEMA | None = None

    def plan(
        self, slots: Sequence[int], probes: Mapping[int, Probe], base_temperature: float
    ) -> dict[int, dict[str, float]]:
        p = self.params
        if self.ema is None:
            self.ema = TemperatureEMA(
                base=base_temperature,
                gain=p.gain,
                low=p.min_temperature,
                high=p.max_temperature,
                momentum=p.ema_momentum,
            )
        out: dict[int, dict[str, float]] = {}
        for slot in slots:
            probe = probes.get(slot, Probe((), ()))
            rewards = [r for r in probe.rewards if not math.isnan(r)]
            sigma = dispersion(rewards, p.dispersion)
            h_vote = vote_entropy(probe.texts)
            kappa = skewness(rewards)
            u = uncertainty(
                sigma, h_vote, kappa, (p.weight_dispersion, p.weight_vote_entropy, p.weight_skewness)
            )
            out[slot] = {
                "temperature": self.ema.temperature(u),
                "probe_sigma": sigma,
                "probe_vote_entropy": h_vote,
                "probe_skewness": kappa,
                "probe_uncertainty": u,
                "probe_reward_mean": sum(rewards) / len(rewards) if rewards else math.nan,
            }
        return out


SAMPLERS.register(
    "fixed",
    Component(
        "fixed", FixedParams, lambda params, seed: FixedController(), "every prompt at rollout.temperature"
    ),
)
SAMPLERS.register(
    "agpo",
    Component(
        "agpo",
        AGPOSamplingParams,
        lambda params, seed: AGPOController(params),
        "AGPO: probe statistics, adaptive per-prompt temperature",
    ),
)
