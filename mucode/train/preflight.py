"""Checks that run before anything is written to a run directory, and the prompt-length filter.

A run that cannot work is refused at once, with a message naming the fix, and leaves the run
directory as it found it (so the corrected command is not refused as "already holds a run"):

- the run directory: a fresh run refuses one that already holds a run; ``--resume`` refuses one
  that holds none;
- a resume refuses any change to a key that shapes the stage stores (``mucode.train.plan.STORE_KEYS``:
  batch sizes, ``data.*``, seeds, sampling settings), naming every changed key;
- the context: ``data.max_prompt_tokens + rollout.max_response_tokens`` must fit the model's
  positions (``max_position_embeddings`` of its ``config.json``; a Hub model not in the local cache
  is not checked, and a note says so);
- evaluation: the benchmarks exist and ``eval.protocol`` is defined for them at the run's context;
- the verifier: each ``verifier.url`` answers ``/readyz`` (``check_verifiers``; the
  in-process verifier is checked when it starts);
- prompts longer than ``data.max_prompt_tokens`` are dropped before the first stage and counted
  (never an error mid-run); a data set with no prompt left is refused.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import yaml

from mucode.assets import resolve_model_path
from mucode.config import ConfigError, MucodeConfig
from mucode.data.prompts import prompt_lengths
from mucode.data.types import TaskRecord
from mucode.train.plan import store_key_changes

__all__ = [
    "READY_WAIT_S",
    "PreflightError",
    "ResumeError",
    "check_run",
    "check_verifiers",
    "drop_long_prompts",
    "model_positions",
]


class PreflightError(ConfigError):
    """The run cannot start as configured; nothing was written."""


class ResumeError(RuntimeError):
    """The run directory does not match the request (nothing to resume, a run already there, or a
    resume that changes the keys its stage stores were made with); nothing was written."""


def _read_model_config(path: str) -> dict[str, Any] | None:
    local = Path(resolve_model_path(path)) / "config.json"
    if local.is_file():
        return dict(json.loads(local.read_text()))
    try:
        from huggingface_hub import try_to_load_from_cache  # lazy: huggingface_hub

        cached = try_to_load_from_cache(path, "config.json")
    except Exception:  # noqa: BLE001 - not a Hub id, or no cache: the check is skipped
        return None
    return dict(json.loads(Path(cached).read_text())) if isinstance(cached, str) else None


def model_positions(path: str) -> int | None:
    """``max_position_embeddings`` of the model at ``path`` (local dir, ``tiny``, or a cached Hub id); None if unknown."""  # noqa: E501
    config = _read_model_config(path)
    if config is None:
        return None
    for section in (config, config.get("text_config") or {}):
        value = section.get("max_position_embeddings")
        if isinstance(value, int):
            return value
    return None


def _check_context(cfg: MucodeConfig) -> None:
    context = cfg.data.max_prompt_tokens + cfg.rollout.max_response_tokens
    positions = model_positions(cfg.model.path)
    if positions is None:
        print(
            f"note: the context of {cfg.model.path} is unknown here (no local config.json); "
            f"prompt + response = {context} tokens is not checked against it",
            flush=True,
        )
        return
    if context > positions:
        raise PreflightError(
            f"data.max_prompt_tokens + rollout.max_response_tokens = {cfg.data.max_prompt_tokens} + "
            f"{cfg.rollout.max_response_tokens} = {context} tokens, but {cfg.model.path} has {positions} positions; "
            f"lower them so they sum to at most {positions}"
        )


def _check_run_dir(cfg: MucodeConfig, run_dir: Path, resume: bool) -> None:
    saved = run_dir / "config.yaml"
    if resume:
        if not saved.exists():
            raise ResumeError(
                f"--resume: {run_dir} holds no run (no config.yaml). Start it without --resume, "
                f"or point --run-dir at the run to continue."
            )
        previous = yaml.safe_load(saved.read_text()) or {}
        changes = store_key_changes(previous, cfg)
        if changes:
            raise ResumeError(
                f"--resume changes keys that shape the stage stores of {run_dir}: "
                + "; ".join(changes)
                + ". Resume with the run's values (its config.yaml), or start a new run in another --run-dir."
            )
        return
    if saved.exists() or (run_dir / "stages").exists():
        raise ResumeError(
            f"{run_dir} already holds a run. Continue it with --resume, or choose another "
            f"--run-dir / train.run_name (or delete the directory)."
        )


def _check_eval(cfg: MucodeConfig) -> None:
    from mucode.train.evaluation import eval_sampling  # lazy: torch

    try:
        eval_sampling(cfg)
    except ValueError as err:
        raise PreflightError(
            f"eval: {err} (eval.benchmarks={cfg.eval.benchmarks}, eval.protocol={cfg.eval.protocol}, "
            f"context {cfg.data.max_prompt_tokens + cfg.rollout.max_response_tokens})"
        ) from None


def check_run(cfg: MucodeConfig, run_dir: Path, resume: bool) -> None:
    """Every check on the config and the run directory that needs no model or data; writes nothing."""
    _check_run_dir(cfg, run_dir, resume)
    _check_context(cfg)
    _check_eval(cfg)
    if cfg.verifier.url:
        check_verifiers(cfg.verifier.url)


def drop_long_prompts(
    records: list[TaskRecord], tokenizer: Any, max_prompt_tokens: int
) -> tuple[list[TaskRecord], int]:
    """(records whose rendered prompt fits ``max_prompt_tokens``, how many were dropped)."""

    kept = [
        r for r, n in zip(records, prompt_lengths(tokenizer, records), strict=True) if n <= max_prompt_tokens
    ]
    if not kept:
        raise PreflightError(
            f"all {len(records)} prompts are longer than data.max_prompt_tokens={max_prompt_tokens} tokens; "
            f"raise data.max_prompt_tokens (and lower rollout.max_response_tokens to stay within the model's context)"
        )
    return kept, len(records) - len(kept)


READY_WAIT_S = 15.0
"""How long a verifier may take to become ready (connection refused or 503) before the run stops."""


def _probe(url: str) -> str | None:
    """None when ``url`` is ready; else why not, in a few words."""
    try:
        response = httpx.get(f"{url.rstrip('/')}/readyz", timeout=5.0)
    except httpx.HTTPError as err:
        return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
    if response.status_code == 200:
        return None
    return f"/readyz answered {response.status_code}: {response.text[:200]}"


TRAIN_FIX = "start it (`mucode serve`), fix verifier.url, or leave verifier.url empty for an in-process one"


def check_verifiers(urls: Sequence[str], wait_s: float | None = None, fix: str = TRAIN_FIX) -> None:
    """Returns once every URL is ready; raises ``PreflightError`` naming the first that stays unready.

    ``fix`` ends the message: what the caller's user changes (a config key, a command-line option).
    ``wait_s`` defaults to ``READY_WAIT_S``, read at call time."""
    wait_s = READY_WAIT_S if wait_s is None else wait_s
    for url in urls:
        deadline = time.monotonic() + wait_s
        while (reason := _probe(url)) is not None:
            if time.monotonic() >= deadline:
                raise PreflightError(
                    f"the verifier at {url} is not ready after {wait_s:.0f} s ({reason}); {fix}"
                )
            time.sleep(1.0)
