"""Finding reward programs: the ``mucode.rewards`` entry-point group, on the one :class:`Registry`.

mucode's own ``code`` and ``math`` are declared there too (pyproject.toml), so built-ins and
plug-ins load the same way. A plug-in package declares, in its pyproject.toml::

    [project.entry-points."mucode.rewards"]
    my_program = "my_package.module:MyReward"

and the service serves ``"program": "my_program"`` once the package is installed (see docs/plugins.md).
The entry point names a class (instantiated with no arguments) or an instance; either must have an
``async score(item, ctx)``. An unknown name raises :class:`UnknownNameError` (``UnknownProgramError``
is the same class) listing the programs there are.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable

from mucode.registry import Registry, UnknownNameError
from mucode.rewards.types import RewardProgram

__all__ = ["ENTRY_POINT_GROUP", "ProgramRegistry", "UnknownProgramError", "load_programs"]

ENTRY_POINT_GROUP = "mucode.rewards"

UnknownProgramError = UnknownNameError
"""The error of a lookup of a program no one registered (the registries' one error type)."""


def _as_program(loaded: object) -> RewardProgram:
    program = loaded() if isinstance(loaded, type) else loaded
    if not callable(getattr(program, "score", None)):
        raise TypeError(f"{type(program).__name__} has no async score(item, ctx)")
    return program  # type: ignore[return-value]  # checked structurally above


class ProgramRegistry(Registry[RewardProgram]):
    """Reward programs by name (duplicate names raise), plus the resources they need."""

    def __init__(
        self,
        programs: dict[str, RewardProgram] | None = None,
        *,
        entry_point_group: str | None = None,
        select: Iterable[str] | None = None,
    ) -> None:
        super().__init__(
            "reward program",
            entry_point_group=entry_point_group,
            adapt=_as_program,
            select=None if select is None else set(select),
        )
        for name, program in (programs or {}).items():
            self.add(name, program)

    def add(self, name: str, program: RewardProgram) -> None:
        """Register ``program``; raises TypeError if it has no ``score``, DuplicateNameError if taken."""
        try:
            self.register(name, _as_program(program))
        except TypeError as err:
            raise TypeError(f"reward program {name!r}: {err}") from None

    def needs(self) -> set[str]:
        """Union of the resources (``sandbox``, ``math``) the registered programs declare."""
        out: set[str] = set()
        for _, program in self.items():
            out |= set(getattr(program, "needs", ()))
        return out


def load_programs(only: Iterable[str] | None = None) -> ProgramRegistry:
    """Every program of the entry-point group (or only the named ones), loaded now.

    A plug-in that fails to import raises (:class:`mucode.registry.PluginLoadError`), naming its
    package: a verifier silently missing a program would only fail later, item by item. Limit the
    programs served with MUCODE_PROGRAMS to leave a broken package out.
    """
    wanted = None if only is None else sorted(set(only))
    registry = ProgramRegistry(entry_point_group=ENTRY_POINT_GROUP, select=wanted)
    for name in wanted or registry.names():
        if name not in registry:
            declared = {ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
            raise registry.unknown(name, declared)  # the installed ones, none of them imported
    return registry
