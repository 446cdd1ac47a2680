"""Finding reward programs: the ``mucode.rewards`` entry-point group.

mucode's own ``code`` and ``math`` are declared there too (pyproject.toml), so built-ins and
plug-ins load the same way. A plug-in package declares, in its pyproject.toml::

    [project.entry-points."mucode.rewards"]
    my_program = "my_package.module:MyReward"

and the service serves ``"program": "my_program"`` once the package is installed (see docs/plugins.md).
The entry point names a class (instantiated with no arguments) or an instance.
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Iterable

from mucode.rewards.types import RewardProgram

__all__ = ["ENTRY_POINT_GROUP", "ProgramRegistry", "UnknownProgramError", "load_programs"]

ENTRY_POINT_GROUP = "mucode.rewards"
logger = logging.getLogger(__name__)


class UnknownProgramError(KeyError):
    def __init__(self, name: str, available: Iterable[str]) -> None:
        self.name = name
        self.available = sorted(available)
        super().__init__(name)

    def __str__(self) -> str:
        return (f"unknown reward program {self.name!r}; available: {', '.join(self.available) or 'none'} "
                f"(plug-ins register under the {ENTRY_POINT_GROUP!r} entry-point group)")


class ProgramRegistry:
    """Reward programs by name. Duplicate names raise."""

    def __init__(self, programs: dict[str, RewardProgram] | None = None) -> None:
        self._programs: dict[str, RewardProgram] = {}
        for name, program in (programs or {}).items():
            self.add(name, program)

    def add(self, name: str, program: RewardProgram) -> None:
        if name in self._programs:
            raise ValueError(f"reward program {name!r} is registered twice")
        if not callable(getattr(program, "score", None)):
            raise TypeError(f"reward program {name!r} ({type(program).__name__}) has no async score(item, ctx)")
        self._programs[name] = program

    def get(self, name: str) -> RewardProgram:
        try:
            return self._programs[name]
        except KeyError:
            raise UnknownProgramError(name, self._programs) from None

    def names(self) -> list[str]:
        return sorted(self._programs)

    def needs(self) -> set[str]:
        """Union of the resources (``sandbox``, ``math``) the registered programs declare."""
        out: set[str] = set()
        for program in self._programs.values():
            out |= set(getattr(program, "needs", ()))
        return out

    def __contains__(self, name: object) -> bool:
        return name in self._programs


def load_programs(only: Iterable[str] | None = None) -> ProgramRegistry:
    """Loads every program of the entry-point group (or only the named ones).

    A plug-in that fails to import raises, naming its package: a verifier silently missing a
    program would only fail later, item by item.
    """
    wanted = None if only is None else set(only)
    registry = ProgramRegistry()
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if wanted is not None and ep.name not in wanted:
            continue
        if ep.name in registry:
            dist = getattr(ep.dist, "name", "?")
            raise ValueError(f"reward program {ep.name!r} is declared twice (again by package {dist!r})")
        try:
            obj = ep.load()
            program = obj() if isinstance(obj, type) else obj
        except Exception as exc:
            dist = getattr(ep.dist, "name", "?")
            raise RuntimeError(
                f"could not load reward program {ep.name!r} ({ep.value}) from package {dist!r}: {exc!r}; "
                f"fix or uninstall that package, or limit the programs served (MUCODE_PROGRAMS)"
            ) from exc
        registry.add(ep.name, program)
    if wanted is not None and (missing := wanted - set(registry.names())):
        raise UnknownProgramError(sorted(missing)[0], [ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)])
    return registry
