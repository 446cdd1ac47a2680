"""The built-in studies: each a list of variants (a preset plus config overrides) on the chain task.

Every run of a study shares :data:`COMMON` (the task's sizes: G = 8, 16 prompts per update, AdamW lr
6e-4, an 18-token response budget, 1 CPU thread) and its ``updates`` in total; a variant sets its μ
(``updates_per_stage``) and the objective. ``methods`` is read at run time from the objective
registry and the presets, so a method added later (a preset in ``configs/`` or a plug-in objective)
appears without an edit here. Deviations from the paper's tables are stated per study in
docs/study.md (the scale, and ``U = ∞`` as ``ratio_upper = 1e12``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml

from mucode.algo.catalog import objective_names
from mucode.config import preset_names
from mucode.configs import CONFIG_DIR

__all__ = ["COMMON", "STUDIES", "TASKS", "Study", "Variant", "get_study", "study_names"]

TASKS = {"chain": "plain", "chain-code": "code"}
"""A study's task (``--task``) → the chain task's answer form (``mucode.data.chain.FORMS``): ``chain``
scored in-process by the ``chain`` program, ``chain-code`` judged by the ``code`` program in the sandbox
(a local verifier over loopback HTTP with the ``local`` backend, started by the trainer per run)."""

COMMON = [
    "batch.samples_per_prompt=8",
    "batch.prompts_per_update=16",
    "batch.micro_batch_tokens=8192",
    "optim.lr=6.0e-4",
    "optim.warmup_updates=0",
    "rollout.engine=hf",
    "rollout.temperature=1.0",
    "rollout.batch_size=4096",  # fewer decode loops: the tiny model's time is per forward call
    "train.groups_per_shard=512",  # 8 store shards (8 fsyncs) per stage of 4096 groups, not 64
    "data.max_prompt_tokens=8",
    "train.device=cpu",
    "train.cpu_threads=1",
    "train.tensorboard=false",
    "train.progress=false",
    "train.log_entropy=false",
    "train.final_rollout_prompts=0",
    "train.checkpoint_keep=1",
    "eval.benchmarks=[]",
]
"""Overrides every study run takes (after its variant's preset)."""


@dataclass(frozen=True)
class Variant:
    name: str
    preset: str
    overrides: tuple[str, ...] = ()
    mu: int | None = None
    """Updates per stage (None: the study's)."""


@dataclass(frozen=True)
class Study:
    name: str
    about: str
    variants: tuple[Variant, ...]
    updates: int = 1024
    mu: int = 256
    findings: tuple[str, ...] = field(default=())
    """Which of the report's checks apply (see ``mucode.study.report.FINDINGS``)."""


def _scope(scope: str) -> Variant:
    return Variant(f"veto={scope}", "mu_grpo", (f"algo.params.veto_scope={scope}",))


VETO_SCOPES = Study(
    "veto-scopes",
    "GRPO μ=4, GRPO clip 0.2 at μ=256, clip [0,5] with each veto scope (paper findings a, c, d)",
    (
        Variant("GRPO mu=4", "grpo_mu4", mu=4),
        Variant("GRPO clip=0.2", "grpo_mu1024"),
        *(_scope(s) for s in ("none", "trigger", "suffix", "nontrigger_suffix", "sequence")),
    ),
    findings=("a", "c", "d"),
)
TAU = Study(
    "tau",
    "μ-GRPO (sequence veto) with τ_c ∈ {1e-1, 1e-2, 1e-4, 1e-6} (paper Table 7)",
    tuple(
        Variant(f"tau={t}", "mu_grpo", (f"algo.params.veto_threshold={t}",))
        for t in ("1e-1", "1e-2", "1e-4", "1e-6")
    ),
)
UPPER_CLIP = Study(
    "upper-clip",
    "μ-GRPO (sequence veto) with the ratio's upper clip U ∈ {3, 5, 10, ∞} (paper Table 8)",
    tuple(
        Variant(f"U={name}", "mu_grpo", (f"algo.params.ratio_upper={value}",))
        for name, value in (("3", "3.0"), ("5", "5.0"), ("10", "10.0"), ("inf", "1.0e12"))
    ),
)
STALENESS = Study(
    "staleness",
    "μ-GRPO (sequence veto) at μ ∈ {64, 256, 1024, 4096}, 4096 updates each (paper Table 4)",
    tuple(Variant(f"mu={m}", "mu_grpo", mu=m) for m in (64, 256, 1024, 4096)),
    updates=4096,
)

STUDIES = {s.name: s for s in (VETO_SCOPES, TAU, UPPER_CLIP, STALENESS)}


def _preset_objective(name: str) -> str | None:
    """The objective a preset selects (following its ``defaults`` chain), without validating it."""
    data = yaml.safe_load((CONFIG_DIR / f"{name}.yaml").read_text()) or {}
    objective = (data.get("algo") or {}).get("objective")
    if objective is None and data.get("defaults"):
        return _preset_objective(str(data["defaults"]))
    return objective if isinstance(objective, str) else None


def methods_study() -> Study:
    """One variant per registered objective: the preset named like it, else the first preset selecting it,
    else ``mu_grpo`` with ``algo.objective`` set (its default parameters). Read at call time."""
    presets = {p: _preset_objective(p) for p in preset_names()}
    variants = []
    for objective in objective_names():
        chosen = objective if presets.get(objective) == objective else None
        chosen = chosen or next((p for p, o in sorted(presets.items()) if o == objective), None)
        if chosen is None:
            variants.append(Variant(objective, "mu_grpo", (f"algo.objective={objective}", "algo.params={}")))
        else:
            variants.append(Variant(f"{objective} ({chosen})", chosen))
    return Study(
        "methods", "every registered objective's preset on the chain task (paper Table 1)", tuple(variants)
    )


def study_names() -> list[str]:
    return sorted([*STUDIES, "methods"])


def get_study(name: str) -> Study:
    """The built-in study ``name``; raises KeyError naming the studies there are."""
    if name == "methods":
        return methods_study()
    if name not in STUDIES:
        raise KeyError(f"unknown study {name!r}; built-in studies: {', '.join(study_names())}")
    return STUDIES[name]
