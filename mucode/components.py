"""Named pipeline components with typed params: batch composers and sampling controllers.

Both work like objectives: a registry of built-ins plus plug-ins of an entry-point group, each
entry a :class:`Component` whose ``params_type`` (a frozen dataclass) decides which config keys it
accepts and whose ``build(params, seed)`` makes the stateful object the trainer uses::

    [project.entry-points."mucode.composers"]
    my_buffer = "my_package.replay:MY_COMPOSER"      # a Component whose name is "my_buffer"

    [project.entry-points."mucode.samplers"]
    my_sampler = "my_package.sampling:MY_SAMPLER"

The interfaces the built objects implement are :class:`mucode.train.compose.BatchComposer` and
:class:`mucode.train.sampling.SamplingController`. Built-ins register themselves when
:mod:`mucode.train.compose` / :mod:`mucode.train.sampling` are imported (the registries import them
on first lookup), so importing this module imports neither torch nor the trainer.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Generic, TypeVar

from mucode.registry import Registry

__all__ = ["COMPOSERS", "SAMPLERS", "Component"]

P = TypeVar("P")


@dataclass(frozen=True)
class Component(Generic[P]):
    """A registered composer or sampling controller."""

    name: str
    params_type: type[P]
    build: Callable[[P, int], Any] = field(repr=False)
    """(params, seed) → the object the trainer calls."""
    summary: str = ""

    def param_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in fields(self.params_type))  # type: ignore[arg-type]


def _as_component(loaded: object) -> Component[Any]:
    item = loaded() if callable(loaded) and not isinstance(loaded, Component) else loaded
    if not isinstance(item, Component):
        raise TypeError(f"expected a mucode.components.Component, got {type(item).__name__}")
    return item


class _LazyRegistry(Registry[Component[Any]]):
    """A registry whose built-ins come from a module imported on first lookup."""

    def __init__(self, kind: str, group: str, builtins_module: str) -> None:
        super().__init__(kind, entry_point_group=group, adapt=_as_component)
        self._builtins_module = builtins_module
        self._builtins_loaded = False

    def _load_plugins(self) -> None:
        if not self._builtins_loaded:
            self._builtins_loaded = True
            importlib.import_module(self._builtins_module)
        super()._load_plugins()


COMPOSERS: Registry[Component[Any]] = _LazyRegistry(
    "batch composer", "mucode.composers", "mucode.train.compose"
)
"""Batch composers by name: ``fresh`` (the store's minibatch as it is), ``replay`` and plug-ins."""
SAMPLERS: Registry[Component[Any]] = _LazyRegistry(
    "sampling controller", "mucode.samplers", "mucode.train.sampling"
)
"""Sampling controllers by name: ``fixed`` (one temperature), ``agpo`` and plug-ins."""
