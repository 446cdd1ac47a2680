"""A small typed name → item registry.

Registering a name twice raises (two plugins silently shadowing each other is a bug, not a feature);
looking up an unknown name raises :class:`UnknownNameError` with the valid names in the message.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")

__all__ = ["DuplicateNameError", "Registry", "UnknownNameError"]


class DuplicateNameError(ValueError):
    """A name was registered twice in the same registry."""


class UnknownNameError(LookupError):
    """A lookup asked for a name that no one registered."""


class Registry(Generic[T]):
    """Maps names to items of one type; ``kind`` names the items in error messages."""

    def __init__(self, kind: str) -> None:
        self._kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str, item: T) -> T:
        """Add ``item`` under ``name``; raises :class:`DuplicateNameError` if the name is taken."""
        if not name or not isinstance(name, str):
            raise ValueError(f"{self._kind} names must be non-empty strings, got {name!r}")
        if name in self._items:
            raise DuplicateNameError(
                f"{self._kind} {name!r} is already registered ({self._items[name]!r}); "
                f"choose another name. Registered: {', '.join(self.names())}"
            )
        self._items[name] = item
        return item

    def get(self, name: str) -> T:
        """The item registered under ``name``; raises :class:`UnknownNameError` listing valid names."""
        try:
            return self._items[name]
        except KeyError:
            raise UnknownNameError(
                f"unknown {self._kind} {name!r}; valid names: {', '.join(self.names()) or '(none registered)'}"
            ) from None

    def names(self) -> tuple[str, ...]:
        """Registered names, sorted."""
        return tuple(sorted(self._items))

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._items)
