"""The config sections of the pipeline's extension points: ``compose``, ``sampling``, ``reference``.

``compose.composer`` and ``sampling.controller`` name components of :mod:`mucode.components`
(built-ins and plug-ins); their ``params`` become the component's own typed params, so an unknown
key is an error naming the valid ones (the validators are ``config_algo.ComponentSection``'s, shared
with ``algo``). A key of the section that is not one of its fields is
shorthand for a parameter (``compose.replay_ratio`` is ``compose.params.replay_ratio``), as in
``algo``. ``reference`` says when the reference policy of a KL term (``algo.kl_coef`` > 0) is reset.
"""

from __future__ import annotations

import typing
from dataclasses import MISSING, fields
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from mucode import components
from mucode.components import COMPOSERS, SAMPLERS
from mucode.config_algo import SECTION_CONFIG, ComponentSection, _attribute_docs

__all__ = ["ComposeConfig", "ReferenceConfig", "SamplingConfig", "component_param_keys", "component_params"]


def component_params(registry_name: str, name: str, values: Any) -> Any:
    """The typed params of component ``name`` of ``registry_name`` (``COMPOSERS``/``SAMPLERS``)."""
    section = {"COMPOSERS": ComposeConfig, "SAMPLERS": SamplingConfig}[registry_name]
    return section.typed_params(name, values)


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


class ComposeConfig(ComponentSection):
    """The batch composer between the stage store and the optimizer."""

    NAME_FIELD: ClassVar[str] = "composer"
    SECTION: ClassVar[str] = "compose"

    composer: str = "fresh"
    """`fresh` (each update's minibatch as the store gives it), `replay` (fresh rollouts plus replayed
    ones from a per-rollout buffer, rollout replay), or a plug-in of the `mucode.composers` group."""
    params: Any = Field(default_factory=dict, validate_default=True)
    """The composer's parameters, e.g. replay: replay_ratio, max_age, priority_alpha, warmup_updates, capacity."""

    @classmethod
    def registry(cls) -> Any:
        return COMPOSERS


class SamplingConfig(ComponentSection):
    """The sampling controller: the temperature of each prompt, and an optional probe generation."""

    NAME_FIELD: ClassVar[str] = "controller"
    SECTION: ClassVar[str] = "sampling"

    controller: str = "fixed"
    """`fixed` (every prompt at rollout.temperature), `agpo` (a probe of G samples per prompt at
    rollout.temperature, then an adaptive temperature per prompt), or a plug-in of `mucode.samplers`."""
    params: Any = Field(default_factory=dict, validate_default=True)
    """The controller's parameters, e.g. agpo: gain, min_temperature, max_temperature, dispersion."""

    @classmethod
    def registry(cls) -> Any:
        return SAMPLERS


class ReferenceConfig(BaseModel):
    """The reference policy π_ref of a KL term (used only when the objective's `kl_coef` > 0)."""

    model_config = SECTION_CONFIG

    reset_every_stages: int | None = Field(None, ge=1)
    """Reset π_ref to the current policy at the start of every this-many stages (off-policy GRPO's outer
    loops); None: π_ref is the initial policy for the whole run."""
