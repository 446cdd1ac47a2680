"""One typed name → item registry for everything mucode looks up by name.

Objectives, rollout engines, reward programs, sandbox backends, output checkers, data schemas and
benchmarks are all ``Registry`` instances, so they behave the same way:

- registering a name twice raises :class:`DuplicateNameError` (two plug-ins silently shadowing each
  other is a bug, not a feature);
- looking up an unknown name raises :class:`UnknownNameError`, whose message lists the valid names;
- a registry built with ``entry_point_group`` also holds what installed packages declare under that
  group (``[project.entry-points."GROUP"]``), loaded on first use. An entry point names the item
  itself or a class, instantiated with no arguments. A plug-in that fails to import raises, naming
  its package (at every lookup until fixed): a registry silently missing a name would only fail
  later. Two packages declaring the same name raise :class:`DuplicateNameError` naming both;
  mucode's own metadata may declare its built-ins too. :meth:`Registry.refresh` forgets loaded
  plug-ins so the entry points are read again.

Config fields that name registered things are checked with :meth:`Registry.validate` at load time.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")

__all__ = ["DuplicateNameError", "PluginLoadError", "Registry", "UnknownNameError"]


class DuplicateNameError(ValueError):
    """A name was registered twice in the same registry."""


class UnknownNameError(LookupError, ValueError):
    """A lookup asked for a name that no one registered (a ValueError too, so pydantic reports it)."""

    def __str__(self) -> str:  # LookupError would repr() the message
        return str(self.args[0]) if self.args else ""


class PluginLoadError(RuntimeError):
    """An entry point of a plug-in package could not be imported or built."""


class Registry(Generic[T]):
    """Maps names to items of one type; ``kind`` names the items in error messages.

    ``entry_point_group`` adds the items installed packages declare under that group; ``adapt``
    turns a loaded entry-point object into an item (default: call a class with no arguments);
    ``select`` loads only the entry points of those names (the others are never imported).
    """

    def __init__(
        self,
        kind: str,
        *,
        entry_point_group: str | None = None,
        adapt: Callable[[object], T] | None = None,
        select: Collection[str] | None = None,
    ) -> None:
        self.kind = kind
        self.entry_point_group = entry_point_group
        self._adapt = adapt
        self._select = None if select is None else frozenset(select)
        self._items: dict[str, T] = {}
        self._plugin_dists: dict[str, str] = {}  # plug-in name → the package that declared it
        self._plugins_loaded = entry_point_group is None

    def register(self, name: str, item: T) -> T:
        """Add ``item`` under ``name``; raises :class:`DuplicateNameError` if the name is taken."""
        if not name or not isinstance(name, str):
            raise ValueError(f"{self.kind} names must be non-empty strings, got {name!r}")
        if name in self._items:
            raise DuplicateNameError(
                f"{self.kind} {name!r} is already registered ({self._items[name]!r}); "
                f"choose another name. Registered: {', '.join(sorted(self._items))}"
            )
        self._items[name] = item
        return item

    def get(self, name: str) -> T:
        """The item registered under ``name``; raises :class:`UnknownNameError` listing valid names."""
        self._load_plugins()
        try:
            return self._items[name]
        except KeyError:
            raise self.unknown(name) from None

    def validate(self, name: str) -> str:
        """``name`` itself if registered (for config validators); raises :class:`UnknownNameError`."""
        self.get(name)
        return name

    def names(self) -> tuple[str, ...]:
        """Registered names (built-ins and installed plug-ins), sorted."""
        self._load_plugins()
        return tuple(sorted(self._items))

    def items(self) -> list[tuple[str, T]]:
        """``(name, item)`` pairs, sorted by name."""
        self._load_plugins()
        return sorted(self._items.items())

    def refresh(self) -> None:
        """Forget the plug-ins loaded so far; the next lookup reads the entry points again (after a
        package was installed or removed in a running process)."""
        for name in self._plugin_dists:
            self._items.pop(name, None)
        self._plugin_dists.clear()
        self._plugins_loaded = self.entry_point_group is None

    def __contains__(self, name: object) -> bool:
        self._load_plugins()
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        self._load_plugins()
        return len(self._items)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {len(self._items)} items)"

    def unknown(self, name: str, valid: Iterable[str] | None = None) -> UnknownNameError:
        """The error for a lookup of ``name``, listing ``valid`` (default: the registered names)."""
        listed = ", ".join(sorted(self._items if valid is None else valid)) or "(none registered)"
        hint = (
            f" (plug-ins register under the {self.entry_point_group!r} entry-point group)"
            if self.entry_point_group
            else ""
        )
        return UnknownNameError(f"unknown {self.kind} {name!r}; valid names: {listed}{hint}")

    def _load_plugins(self) -> None:
        if self._plugins_loaded:
            return
        self._plugins_loaded = True  # set first: a plug-in importing mucode must not recurse
        assert self.entry_point_group is not None
        for ep in importlib.metadata.entry_points(group=self.entry_point_group):
            if self._select is not None and ep.name not in self._select:
                continue
            dist = getattr(ep.dist, "name", "?")
            if ep.name in self._items:
                if dist == "mucode" or self._plugin_dists.get(ep.name) == dist:
                    continue  # a built-in declared in mucode's own metadata too, or seen on a retry
                self._plugins_loaded = False
                raise DuplicateNameError(
                    f"{self.kind} {ep.name!r} of package {dist!r} is already registered "
                    f"(by {self._plugin_dists.get(ep.name, 'mucode')!r}); uninstall one of them"
                )
            try:
                loaded = ep.load()
                item = (
                    self._adapt(loaded) if self._adapt else (loaded() if isinstance(loaded, type) else loaded)
                )
            except Exception as exc:
                self._plugins_loaded = False  # every lookup raises until the package is fixed
                raise PluginLoadError(
                    f"could not load {self.kind} {ep.name!r} ({ep.value}) from package {dist!r}: {exc!r}; "
                    f"fix or uninstall that package"
                ) from exc
            self._items[ep.name] = item
            self._plugin_dists[ep.name] = dist
