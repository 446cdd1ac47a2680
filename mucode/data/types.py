"""The record every task loader returns: one prompt, its reward program and its verifier spec."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

TaskKind = Literal["code", "math"]


@dataclass
class TaskRecord:
    """One prompt of a task.

    ``messages`` are the chat messages *before* the chat template (``render_prompt`` applies it);
    ``program`` names the reward program that scores responses (``"math"``, ``"code"`` or a
    plugin); ``spec`` is the spec of the verifier item, so a verifier item for a response
    is ``{"id": ..., "program": record.program, "response": text, "spec": record.spec}``.
    """

    prompt_id: str
    """Unique and stable within a data set (the source's own id where it has one)."""
    messages: list[dict[str, str]]
    """Chat messages, e.g. ``[{"role": "user", "content": "..."}]``."""
    program: str
    """Reward program name: ``"math"``, ``"code"`` or a plugin's entry-point name."""
    spec: dict[str, Any]
    """spec: math ``{"answer": ...}``; code ``{"tests": {...}, "checker": ..., ...}``."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Free-form provenance (source, difficulty, flags such as ``multiple_answers``)."""

    def verifier_item(self, response: str, item_id: str | None = None) -> dict[str, Any]:
        """The verifier item scoring ``response`` against this record."""
        return {"id": item_id, "program": self.program, "response": response, "spec": self.spec}
