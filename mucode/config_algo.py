"""The ``algo`` section of the config: the objective by name, and that objective's own typed params.

``algo.objective`` is validated against :data:`mucode.algo.OBJECTIVES` (built-ins and plug-ins of the
``mucode.objectives`` entry-point group); ``algo.params`` becomes the objective's ``params_type`` (a
frozen dataclass of :mod:`mucode.algo`), so a key the objective does not have is an error naming the
valid ones — nothing is silently ignored. A key of ``algo`` that is not one of its own fields is
shorthand for a parameter (``algo.veto_scope`` is ``algo.params.veto_scope``). How layers (files,
overrides) compose is :mod:`mucode.config`'s job: a layer that selects another objective starts from
that objective's defaults.

Objectives are looked up lazily (inside validators): importing this module does not import torch.
"""

from __future__ import annotations

import ast
import inspect
import typing
from collections.abc import Mapping
from dataclasses import MISSING, fields
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    FieldSerializationInfo,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)

from mucode.algo.modes import StdEstimator

__all__ = [
    "SECTION_CONFIG",
    "AlgoConfig",
    "ObjectiveParamError",
    "nest_params",
    "objective_param_keys",
    "objective_params",
]

SECTION_CONFIG = ConfigDict(extra="forbid", validate_assignment=True, use_attribute_docstrings=True)
"""Every config section: unknown keys are errors, assignments are validated, field docstrings are docs."""


class AlgoConfig(BaseModel):
    """The algorithm: which objective, its parameters, and the advantage estimate.

    ``params`` is the selected objective's own typed parameters (``objective.params_type`` of
    :mod:`mucode.algo`), so a key the objective does not have is an error, never ignored. Any key of
    this section that is not one of its fields is shorthand for a parameter: ``algo.veto_scope=suffix``
    is ``algo.params.veto_scope=suffix``.
    """

    model_config = SECTION_CONFIG

    objective: str = "mu_grpo"
    """Policy objective, by name in `mucode.algo`'s registry: grpo, mu_grpo, m2po, or a plug-in of the
    `mucode.objectives` entry-point group."""
    params: Any = Field(default_factory=dict, validate_default=True)
    """The objective's parameters (unset ones take its defaults, the papers'), e.g. mu_grpo:
    ratio_upper, veto_scope, veto_threshold; grpo: clip_low, clip_high, dual_clip; m2po: m2_threshold,
    mode; all: aggregation, norm_length, max_abs_log_ratio. `mucode config keys algo` lists them."""
    adv_std: StdEstimator = StdEstimator.UNBIASED
    """Std of the group advantage: unbiased (verl), population (TRL), none (Dr.GRPO)."""
    adv_eps: float = Field(1e-6, ge=0)
    """Added to the group std before dividing."""
    recompute_behaviour_logprobs: bool = False
    """Recompute behaviour log-probs with the trainer instead of using the engine's stored ones."""

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return nest_params(data) if isinstance(data, dict) else data

    @field_validator("objective")
    @classmethod
    def _registered(cls, name: str) -> str:
        from mucode.algo.catalog import OBJECTIVES  # lazy: torch

        return OBJECTIVES.validate(name)

    @field_validator("params", mode="plain")
    @classmethod
    def _typed(cls, value: Any, info: ValidationInfo) -> Any:
        name = info.data.get("objective")
        if name is None:  # the objective itself was invalid; that error is reported
            return value
        return objective_params(name, value)

    @field_serializer("params")
    def _dump_params(self, value: Any, info: FieldSerializationInfo) -> Any:
        return TypeAdapter(type(value)).dump_python(value, mode="json" if info.mode_is_json() else "python")

    @model_validator(mode="after")
    def _params_match(self) -> AlgoConfig:
        from mucode.algo.catalog import get_objective  # lazy: torch

        expected = get_objective(self.objective).params_type
        if type(self.params) is not expected:  # e.g. `cfg.algo.objective = ...` assigned alone
            raise ValueError(
                f"algo.params is a {type(self.params).__name__}, but algo.objective="
                f"{self.objective} takes {expected.__name__}; set both together"
            )
        return self


def objective_params(name: str, values: Any) -> Any:
    """The typed params of objective ``name`` from a mapping of its parameters (or such params).

    A key the objective does not have raises ValueError naming the valid ones; values are checked
    against the params type's annotations and its own range checks."""
    from mucode.algo.catalog import get_objective  # lazy: torch

    objective = get_objective(name)
    if isinstance(values, objective.params_type):
        return values
    if not isinstance(values, Mapping):
        raise ValueError(f"algo.params must be a mapping of {name}'s parameters, got {values!r}")
    unknown = sorted(set(values) - set(objective.param_names()))
    if unknown:
        own = ", ".join(k for k in AlgoConfig.model_fields if k != "params")
        raise ObjectiveParamError(
            ", ".join(unknown),
            f"not a parameter of algo.objective={name} ({objective.params_type.__name__}); "
            f"its parameters: {', '.join(objective.param_names())} (other algo keys: {own})",
        )
    try:
        return TypeAdapter(objective.params_type).validate_python(dict(values))
    except ValidationError as err:
        first = err.errors()[0]
        key = ".".join(str(p) for p in first["loc"]) or None  # None: a check across parameters
        raise ObjectiveParamError(key, first["msg"].removeprefix("Value error, ")) from None


class ObjectiveParamError(ValueError):
    """An objective parameter that is unknown or invalid; ``key`` names it (None: several at once)."""

    def __init__(self, key: str | None, detail: str) -> None:
        super().__init__(f"{key}: {detail}" if key else detail)
        self.key, self.detail = key, detail


def nest_params(algo: dict[str, Any]) -> dict[str, Any]:
    """``algo`` with each key that is not an AlgoConfig field moved under ``params`` (the shorthand)."""
    own = AlgoConfig.model_fields
    short = {k: v for k, v in algo.items() if k not in own}
    params = algo.get("params")
    if not short or not isinstance(params, dict | None):
        return algo
    both = sorted(set(short) & set(params or {}))
    if both:
        raise ValueError(f"algo.{both[0]} and algo.params.{both[0]} are both set; keep one")
    return {**{k: v for k, v in algo.items() if k in own}, "params": {**(params or {}), **short}}


def objective_param_keys() -> list[tuple[str, str, Any, Any, str]]:
    """(objective, key, default, annotation, meaning) of every registered objective's parameters."""

    from mucode.algo.catalog import OBJECTIVES  # lazy: torch

    rows = []
    for name, objective in OBJECTIVES.items():
        params_type = objective.params_type
        hints, docs = typing.get_type_hints(params_type), _attribute_docs(params_type)
        for f in fields(params_type):
            factory = f.default_factory
            default = f.default if f.default is not MISSING else factory() if factory is not MISSING else None
            rows.append((name, f.name, default, hints[f.name], docs.get(f.name, "")))
    return rows


def _attribute_docs(cls: type) -> dict[str, str]:
    """The docstrings written under a class's annotated fields (bases first, overridden by subclasses)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        try:
            body = ast.parse(inspect.getsource(klass)).body[0]
        except (OSError, TypeError, SyntaxError, IndexError):
            continue
        statements = getattr(body, "body", [])
        for stmt, nxt in zip(statements, statements[1:], strict=False):
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)
            ):
                docs[stmt.target.id] = " ".join(nxt.value.value.split())
    return docs
