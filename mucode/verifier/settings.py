"""Settings of the verifier service, read from ``MUCODE_*`` environment variables.

Every field maps to ``MUCODE_<FIELD>`` (e.g. ``MUCODE_BACKEND=local``, ``MUCODE_TOKEN=...``,
``MUCODE_BACKEND_OPTIONS='{"containers": 8}'``). ``mucode serve`` flags override them.
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from mucode.sandbox.base import SANDBOX_BACKENDS
from mucode.verifier.wire import DEFAULT_MAX_REQUEST_BYTES

__all__ = ["VerifierSettings"]


class VerifierSettings(BaseSettings):
    """How the verifier service runs."""

    model_config = SettingsConfigDict(env_prefix="MUCODE_", extra="ignore")

    host: str = "127.0.0.1"
    """Address to bind. Loopback by default: set 0.0.0.0 only behind a firewall or with a token."""
    port: int = Field(default=8000, ge=0, le=65535)
    """TCP port (0: any free port)."""
    backend: str = "docker"
    """Sandbox backend for code, a name in ``mucode.sandbox.SANDBOX_BACKENDS``: ``docker`` (a managed
    pool of containers), ``attach`` (executors started elsewhere, e.g. compose: needs ``socket_dir``),
    ``local`` (namespaces on this host, root), or a plug-in's."""
    backend_options: dict[str, Any] = Field(default_factory=dict)
    """Keyword options for the backend (JSON in the environment), e.g. pool size, image, socket dir."""

    @field_validator("backend")
    @classmethod
    def _registered_backend(cls, value: str) -> str:
        return SANDBOX_BACKENDS.validate(value)

    token: SecretStr | None = None
    """If set, /v1/verify, /run_code and /metrics need ``Authorization: Bearer <token>``."""
    programs: list[str] | None = None
    """Serve only these reward programs (JSON list); None: every installed one."""
    run_code: bool = True
    """Serve the SandboxFusion-compatible /run_code endpoint (needs the sandbox backend)."""

    max_request_bytes: int = Field(default=DEFAULT_MAX_REQUEST_BYTES, gt=0)
    """Largest accepted request body; larger is a 413. ``VerifierClient`` cuts its batches below the same
    default (and reads ``MUCODE_MAX_REQUEST_BYTES`` too): raise both together."""
    max_items_per_request: int = Field(default=4096, gt=0)
    """Most items in one /v1/verify request; more is a 413 (the client splits batches for you)."""
    max_concurrent_items: int = Field(default=64, gt=0)
    """Items scored at once over all requests; the rest wait in a queue (see verifier_queue_depth)."""
    max_queued_items: int = Field(default=8192, gt=0)
    """Items accepted but waiting for a scoring slot (/v1/verify items and /run_code runs together); a
    request that would take the queue past it is a 429 with ``Retry-After``. At least max_items_per_request."""
    retry_after_s: int = Field(default=2, ge=1)
    """The ``Retry-After`` (seconds) of a 429 (queue full) or of a /run_code 504 (outer limit passed)."""
    item_timeout_s: float = Field(default=600.0, gt=0)
    """Outer limit on one item's scoring, queueing excluded; past it the item is a verifier_error."""
    request_timeout_s: float = Field(default=900.0, gt=0)
    """Outer limit on one request, queueing included. /v1/verify: items not scored by then come back
    ``verifier_error`` (the client re-sends them); /run_code: a 504 with ``Retry-After``."""

    math_workers: int = Field(default_factory=lambda: max(1, os.cpu_count() or 1), gt=0)
    """math-verify worker processes."""
    math_timeout_s: float = Field(default=10.0, gt=0)
    """Per-item math-verify limit (then ``time_limit``); a worker that overruns it by 2 s is killed."""
    math_memory_limit_mb: int = Field(default=2048, ge=0)
    """Address-space limit of each math worker (0: none)."""

    run_code_max_timeout_s: float = Field(default=60.0, gt=0)
    """Largest run_timeout accepted by /run_code."""
    plugin_options: dict[str, Any] = Field(default_factory=dict)
    """Free-form options handed to plug-in reward programs (``RewardContext.options``)."""

    @model_validator(mode="after")
    def _queue_holds_a_request(self) -> VerifierSettings:
        if self.max_queued_items < self.max_items_per_request:
            raise ValueError(
                f"max_queued_items={self.max_queued_items} is below max_items_per_request="
                f"{self.max_items_per_request}: a full-size request could never be queued; raise "
                "MUCODE_MAX_QUEUED_ITEMS or lower MUCODE_MAX_ITEMS_PER_REQUEST"
            )
        return self

    @field_validator("token", mode="before")
    @classmethod
    def _empty_token_is_none(cls, value: object) -> object:
        """``MUCODE_TOKEN=`` (empty, as compose passes an unset variable) means no token."""
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        return value
