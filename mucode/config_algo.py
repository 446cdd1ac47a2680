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
from typing import Any, ClassVar

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
    "ComponentSection",
    "ObjectiveParamError",
    "nest_params",
    "objective_param_keys",
    "objective_params",
]

SECTION_CONFIG = ConfigDict(extra="forbid", validate_assignment=True, use_attribute_docstrings=True)
"""Every config section: unknown keys are errors, assignments are validated, field docstrings are docs."""


class ComponentSection(BaseModel):
    """A section that names a registered component and holds that component's own typed ``params``.

    A subclass declares the naming field (``NAME_FIELD``) and then ``params`` (in that order: ``params`` is
    typed by the name already validated), and says where its components are registered (:meth:`registry`).
    The rest is shared: the name is checked against the registry (an unknown one lists the valid names);
    ``params`` becomes the component's ``params_type``, an unknown key being an error naming the valid ones;
    a key of the section that is not one of its fields is shorthand for a parameter; ``params`` dumps as
    plain data.
    """

    model_config = SECTION_CONFIG

    NAME_FIELD: ClassVar[str]
    """The field naming the component (``objective``, ``composer``, ``controller``)."""
    SECTION: ClassVar[str]
    """The section's key in the config (``algo``, ``compose``, ``sampling``)."""
    REFUSE_BOTH: ClassVar[bool] = False
    """Whether a parameter set both as ``KEY`` and as ``params.KEY`` is an error (``algo``: its layers are
    nested one by one before they merge, so both in one section is one layer's mistake); otherwise the
    shorthand wins (a later layer's ``compose.KEY`` over an earlier layer's ``compose.params.KEY``)."""

    @classmethod
    def registry(cls) -> Any:
        """The :class:`~mucode.registry.Registry` of this section's components."""
        raise NotImplementedError

    @classmethod
    def describe(cls, name: str) -> str:
        """How an error names component ``name``."""
        return name

    @classmethod
    def param_error(cls, key: str | None, detail: str) -> ValueError:
        """The error for parameter ``key`` (None: a check across parameters)."""
        return ValueError(f"{key}: {detail}" if key else detail)

    @classmethod
    def other_keys(cls) -> str:
        """Appended to an unknown parameter's message (the section's own keys, where that helps)."""
        return ""

    @classmethod
    def typed_params(cls, name: str, values: Any) -> Any:
        """The typed params of component ``name`` from a mapping of its parameters (or such params).

        A key the component does not have raises naming the valid ones; values are checked against the
        params type's annotations and its own range checks."""
        component = cls.registry().get(name)
        params_type, names = component.params_type, component.param_names()
        if isinstance(values, params_type):
            return values
        if not isinstance(values, Mapping):
            where = "params" if cls.SECTION != "algo" else "algo.params"
            raise ValueError(f"{where} must be a mapping of {name}'s parameters, got {values!r}")
        unknown = sorted(set(values) - set(names))
        if unknown:
            raise cls.param_error(
                ", ".join(unknown),
                f"not a parameter of {cls.describe(name)} ({params_type.__name__}); "
                f"its parameters: {', '.join(names) or '(none)'}{cls.other_keys()}",
            )
        try:
            return TypeAdapter(params_type).validate_python(dict(values))
        except ValidationError as err:
            first = err.errors()[0]
            key = ".".join(str(p) for p in first["loc"]) or None  # None: a check across parameters
            raise cls.param_error(key, first["msg"].removeprefix("Value error, ")) from None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        return nest_shorthand(data, cls.model_fields, cls.SECTION, refuse_both=cls.REFUSE_BOTH)

    @field_validator("*")
    @classmethod
    def _registered(cls, value: Any, info: ValidationInfo) -> Any:
        return cls.registry().validate(value) if info.field_name == cls.NAME_FIELD else value

    @field_validator("params", mode="plain", check_fields=False)
    @classmethod
    def _typed(cls, value: Any, info: ValidationInfo) -> Any:
        name = info.data.get(cls.NAME_FIELD)
        if name is None:  # the name itself was invalid; that error is reported
            return value
        return cls.typed_params(name, value)

    @field_serializer("params", check_fields=False)
    def _dump_params(self, value: Any, info: FieldSerializationInfo) -> Any:
        return TypeAdapter(type(value)).dump_python(value, mode="json" if info.mode_is_json() else "python")


class AlgoConfig(ComponentSection):
    """The algorithm: which objective, its parameters, and the advantage estimate.

    ``params`` is the selected objective's own typed parameters (``objective.params_type`` of
    :mod:`mucode.algo`), so a key the objective does not have is an error, never ignored. Any key of
    this section that is not one of its fields is shorthand for a parameter: ``algo.veto_scope=suffix``
    is ``algo.params.veto_scope=suffix``.
    """

    NAME_FIELD: ClassVar[str] = "objective"
    SECTION: ClassVar[str] = "algo"
    REFUSE_BOTH: ClassVar[bool] = True

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

    @classmethod
    def registry(cls) -> Any:
        from mucode.algo.catalog import OBJECTIVES  # lazy: torch

        return OBJECTIVES

    @classmethod
    def describe(cls, name: str) -> str:
        return f"algo.objective={name}"

    @classmethod
    def param_error(cls, key: str | None, detail: str) -> ValueError:
        return ObjectiveParamError(key, detail)

    @classmethod
    def other_keys(cls) -> str:
        return f" (other algo keys: {', '.join(k for k in cls.model_fields if k != 'params')})"

    @model_validator(mode="after")
    def _params_match(self) -> AlgoConfig:
        expected = self.registry().get(self.objective).params_type
        if type(self.params) is not expected:  # e.g. `cfg.algo.objective = ...` assigned alone
            raise ValueError(
                f"algo.params is a {type(self.params).__name__}, but algo.objective="
                f"{self.objective} takes {expected.__name__}; set both together"
            )
        return self


def objective_params(name: str, values: Any) -> Any:
    """The typed params of objective ``name`` from a mapping of its parameters (or such params).

    A key the objective does not have raises :class:`ObjectiveParamError` naming the valid ones; values are
    checked against the params type's annotations and its own range checks."""
    return AlgoConfig.typed_params(name, values)


class ObjectiveParamError(ValueError):
    """An objective parameter that is unknown or invalid; ``key`` names it (None: several at once)."""

    def __init__(self, key: str | None, detail: str) -> None:
        super().__init__(f"{key}: {detail}" if key else detail)
        self.key, self.detail = key, detail


def nest_shorthand(
    data: dict[str, Any], own: Mapping[str, Any], section: str, *, refuse_both: bool
) -> dict[str, Any]:
    """``data`` (a section) with each key that is not one of its fields ``own`` moved under ``params``
    (``refuse_both``: a key also under ``params`` is an error; else the shorthand's value wins)."""
    short = {k: v for k, v in data.items() if k not in own}
    params = data.get("params")
    if not short or not isinstance(params, dict | None):
        return data
    both = sorted(set(short) & set(params or {}))
    if both and refuse_both:
        raise ValueError(f"{section}.{both[0]} and {section}.params.{both[0]} are both set; keep one")
    return {**{k: v for k, v in data.items() if k in own}, "params": {**(params or {}), **short}}


def nest_params(algo: dict[str, Any]) -> dict[str, Any]:
    """``algo`` with each key that is not an AlgoConfig field moved under ``params`` (the shorthand)."""
    return nest_shorthand(algo, AlgoConfig.model_fields, "algo", refuse_both=True)


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
