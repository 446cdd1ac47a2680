"""The config sections of the pipeline's extension points: ``compose``, ``sampling``, ``reference``.

``compose.composer`` and ``sampling.controller`` name components of :mod:`mucode.components`
(built-ins and plug-ins); their ``params`` become the component's own typed params, so an unknown
key is an error naming the valid ones. A key of the section that is not one of its fields is
shorthand for a parameter (``compose.replay_ratio`` is ``compose.params.replay_ratio``), as in
``algo``. ``reference`` says when the reference policy of a KL term (``algo.kl_coef`` > 0) is reset.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import MISSING, fields
from typing import Any

from pydantic import (
    BaseModel,
    Field,
    FieldSerializationInfo,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)

from mucode import components
from mucode.components import COMPOSERS, SAMPLERS
from mucode.config_algo import SECTION_CONFIG, _attribute_docs

__all__ = ["ComposeConfig", "ReferenceConfig", "SamplingConfig", "component_param_keys", "component_params"]


def component_params(registry_name: str, name: str, values: Any) -> Any:
    """The typed params of component ``name`` of ``registry_name`` (``COMPOSERS``/``SAMPLERS``)."""

    component = getattr(components, registry_name).get(name)
    if isinstance(values, component.params_type):
        return values
    if not isinstance(values, Mapping):
        raise ValueError(f"params must be a mapping of {name}'s parameters, got {values!r}")
    unknown = sorted(set(values) - set(component.param_names()))
    if unknown:
        raise ValueError(
            f"{', '.join(unknown)}: not a parameter of {name} ({component.params_type.__name__}); "
            f"its parameters: {', '.join(component.param_names()) or '(none)'}"
        )
    try:
        return TypeAdapter(component.params_type).validate_python(dict(values))
    except ValidationError as err:
        first = err.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"{key}: {first['msg'].removeprefix('Value error, ')}") from None


def component_param_keys(registry_name: str) -> list[tuple[str, str, Any, Any, str]]:
    """(component, key, default, annotation, meaning) of every parameter of ``COMPOSERS``/``SAMPLERS``."""

    rows = []
    for name, component in getattr(components, registry_name).items():
        hints, docs = typing.get_type_hints(component.params_type), _attribute_docs(component.params_type)
        for f in fields(component.params_type):
            rows.append(
                (
                    name,
                    f.name,
                    None if f.default is MISSING else f.default,
                    hints[f.name],
                    docs.get(f.name, ""),
                )
            )
    return rows


def _nest(data: Any, own: Mapping[str, Any]) -> Any:
    if not isinstance(data, dict):
        return data
    short = {k: v for k, v in data.items() if k not in own}
    params = data.get("params")
    if not short or not isinstance(params, dict | None):
        return data
    return {**{k: v for k, v in data.items() if k in own}, "params": {**(params or {}), **short}}


class _ComponentSection(BaseModel):
    model_config = SECTION_CONFIG

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return _nest(data, cls.model_fields)

    @field_serializer("params", check_fields=False)
    def _dump_params(self, value: Any, info: FieldSerializationInfo) -> Any:
        return TypeAdapter(type(value)).dump_python(value, mode="json" if info.mode_is_json() else "python")


class ComposeConfig(_ComponentSection):
    """The batch composer between the stage store and the optimizer."""

    composer: str = "fresh"
    """`fresh` (each update's minibatch as the store gives it), `replay` (fresh rollouts plus replayed
    ones from a per-rollout buffer, rollout replay), or a plug-in of the `mucode.composers` group."""
    params: Any = Field(default_factory=dict, validate_default=True)
    """The composer's parameters, e.g. replay: replay_ratio, max_age, priority_alpha, warmup_updates, capacity."""

    @field_validator("composer")
    @classmethod
    def _registered(cls, name: str) -> str:
        return COMPOSERS.validate(name)

    @field_validator("params", mode="plain")
    @classmethod
    def _typed(cls, value: Any, info: ValidationInfo) -> Any:
        name = info.data.get("composer")
        return value if name is None else component_params("COMPOSERS", name, value)


class SamplingConfig(_ComponentSection):
    """The sampling controller: the temperature of each prompt, and an optional probe generation."""

    controller: str = "fixed"
    """`fixed` (every prompt at rollout.temperature), `agpo` (a probe of G samples per prompt at
    rollout.temperature, then an adaptive temperature per prompt), or a plug-in of `mucode.samplers`."""
    params: Any = Field(default_factory=dict, validate_default=True)
    """The controller's parameters, e.g. agpo: gain, min_temperature, max_temperature, dispersion."""

    @field_validator("controller")
    @classmethod
    def _registered(cls, name: str) -> str:
        return SAMPLERS.validate(name)

    @field_validator("params", mode="plain")
    @classmethod
    def _typed(cls, value: Any, info: ValidationInfo) -> Any:
        name = info.data.get("controller")
        return value if name is None else component_params("SAMPLERS", name, value)


class ReferenceConfig(BaseModel):
    """The reference policy π_ref of a KL term (used only when the objective's `kl_coef` > 0)."""

    model_config = SECTION_CONFIG

    reset_every_stages: int | None = Field(None, ge=1)
    """Reset π_ref to the current policy at the start of every this-many stages (off-policy GRPO's outer
    loops); None: π_ref is the initial policy for the whole run."""
