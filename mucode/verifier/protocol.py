"""Moved. The vocabulary is on the ground floor now: ``Status``, ``Item``, ``Result``,
``INFRA_STATUSES`` and ``is_infra`` in :mod:`mucode.protocol`; the HTTP bodies ``VerifyRequest``,
``VerifyResponse`` and ``ErrorResponse`` in :mod:`mucode.verifier.schemas`. Any name looked up here
fails with one line saying so."""

from __future__ import annotations

from typing import NoReturn

__all__: list[str] = []

_BODIES = {"VerifyRequest", "VerifyResponse", "ErrorResponse"}


def __getattr__(name: str) -> NoReturn:
    if name.startswith("__"):
        raise AttributeError(name)
    where = "mucode.verifier.schemas" if name in _BODIES else "mucode.protocol"
    raise ImportError(f"mucode.protocol.{name} has moved: import it from {where}")
