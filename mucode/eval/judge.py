"""Verifying samples through the verifier service (SPEC §6: evaluators never run code themselves).

Every sample becomes one or more verifier items ("parts": LiveCodeBench and math have one, EvalPlus
two, its base and its plus tests). A part whose item is None was decided without the verifier
(e.g. a response with no code block: status `no_code`). Items go to the service in chunks; each
chunk's verdicts are appended to the run store before the next is sent, so an interrupted run loses
at most one chunk. Items the verifier could not judge (infrastructure statuses) are sent again up
to `infra_retries` times, then reported as such, never as a score.

With no URL, a verifier is started in-process on loopback (`mucode.verifier.local.local_verifier`)
for the duration of the call.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from mucode.eval.store import INFRA_STATUSES, RunStore, item_sha

__all__ = ["Part", "VerifierOptions", "judge_parts", "verifier_base_urls", "verifier_session"]

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Part:
    """One verifier item of one sample."""

    problem_id: str
    index: int
    part: str
    item: dict[str, Any] | None
    """The SPEC §3 item, or None when the verdict is `decided` without running anything."""
    decided: str = "no_code"


@dataclass
class VerifierOptions:
    """How to reach the verifier."""

    urls: list[str] = field(default_factory=list)
    """Base URLs of running verifiers; empty: start one in-process on loopback."""
    backend: str = "local"
    """Sandbox backend of the in-process verifier (`local` or `docker`)."""
    token: str | None = None
    timeout_s: float = 300.0
    max_retries: int = 3
    max_concurrency: int = 8
    batch_size: int = 64
    """Items per HTTP request (lower it for large items: the service caps request bytes)."""
    chunk_size: int = 256
    """Items per chunk between two saves of the verdict cache."""
    infra_retries: int = 2
    """Extra rounds for items that came back with an infrastructure status."""
    local_options: dict[str, Any] = field(default_factory=dict)
    """Settings of the in-process verifier (mucode.verifier.settings), e.g. {"math_workers": 2}."""


@contextlib.contextmanager
def verifier_base_urls(settings: VerifierOptions, programs: Sequence[str] = ()) -> Iterator[list[str]]:
    """The configured URLs, or the URL of a verifier started here for the duration of the block.

    A verifier started here serves only `programs` (when given and not set in `local_options`) and
    not SandboxFusion's /run_code, so a math evaluation does not start code sandboxes.
    """
    if settings.urls:
        yield list(settings.urls)
        return
    from mucode.verifier.local import local_verifier

    options = dict(settings.local_options)
    if programs:
        options.setdefault("programs", sorted(set(programs)))
    options.setdefault("run_code", False)  # evaluators use /v1/verify only
    with local_verifier(backend=settings.backend, **options) as url:
        yield [url]


@contextlib.contextmanager
def verifier_session(options: VerifierOptions | None, programs: Sequence[str]) -> Iterator[VerifierOptions]:
    """Options whose `urls` reach a verifier for the whole block (one started here if none is given),
    so an evaluation of several benchmarks starts at most one verifier."""
    options = options or VerifierOptions()
    if options.urls:
        yield options
        return
    with verifier_base_urls(options, programs) as urls:
        yield dataclasses.replace(options, urls=urls)


async def _verify_all(
    urls: list[str],
    settings: VerifierOptions,
    todo: list[tuple[Part, str]],
    store: RunStore,
    progress: Progress,
) -> dict[tuple[str, int, str], dict[str, Any]]:
    from mucode.verifier.client import VerifierClient, VerifierRequestError

    client = VerifierClient(
        urls,
        token=settings.token,
        timeout_s=settings.timeout_s,
        max_retries=settings.max_retries,
        max_concurrency=settings.max_concurrency,
        batch_size=settings.batch_size,
    )
    out: dict[tuple[str, int, str], dict[str, Any]] = {}
    try:
        pending = todo
        for round_ in range(settings.infra_retries + 1):
            failed: list[tuple[Part, str]] = []
            for start in range(0, len(pending), settings.chunk_size):
                chunk = pending[start : start + settings.chunk_size]
                items = [
                    {**(part.item or {}), "id": f"{part.problem_id}#{part.index}#{part.part}"}
                    for part, _ in chunk
                ]
                try:
                    results = await client.verify(items)
                except VerifierRequestError:
                    raise  # the service rejected the items (4xx): a bug or a limit to raise, not a score
                except Exception as err:  # anything else the client raises is infrastructure
                    results = [
                        {"reward": float("nan"), "status": "verifier_error", "details": {"error": repr(err)}}
                    ] * len(chunk)
                rows = []
                for (part, sha), result in zip(chunk, results, strict=True):
                    status = str(result.get("status", "verifier_error"))
                    row = {
                        "id": part.problem_id,
                        "index": part.index,
                        "part": part.part,
                        "sha": sha,
                        "reward": float(result.get("reward", 0.0)) if status not in INFRA_STATUSES else None,
                        "status": status,
                    }
                    out[(part.problem_id, part.index, part.part)] = row
                    rows.append(row)
                    if status in INFRA_STATUSES:
                        failed.append((part, sha))
                store.add_verdicts(rows)
                done = min(start + settings.chunk_size, len(pending))
                progress(
                    f"verified {done}/{len(pending)} items" + (f" (retry round {round_})" if round_ else "")
                )
            if not failed:
                break
            pending = failed
    finally:
        await client.aclose()
    return out


def judge_parts(
    parts: Sequence[Part],
    store: RunStore,
    settings: VerifierOptions,
    *,
    progress: Progress | None = None,
) -> dict[tuple[str, int, str], dict[str, Any]]:
    """Verdicts `{"reward", "status"}` of every part, keyed by (problem id, sample index, part).

    Cached verdicts of identical items are reused; the rest go to the verifier. Runs its own event
    loop: call it from synchronous code.
    """
    say = progress or (lambda _msg: None)
    verdicts: dict[tuple[str, int, str], dict[str, Any]] = {}
    waiting: dict[str, list[Part]] = {}  # identical items are verified once
    for part in parts:
        key = (part.problem_id, part.index, part.part)
        if part.item is None:
            verdicts[key] = {"reward": 0.0, "status": part.decided}
            continue
        sha = item_sha(part.item)
        cached = store.verdict(sha)
        if cached is not None:
            verdicts[key] = cached
        else:
            waiting.setdefault(sha, []).append(part)
    if waiting:
        todo = [(group[0], sha) for sha, group in waiting.items()]
        say(f"{len(verdicts)} verdicts cached or decided, {len(todo)} distinct items to verify")
        with verifier_base_urls(settings, [part.item["program"] for part, _ in todo if part.item]) as urls:
            fresh = asyncio.run(_verify_all(urls, settings, todo, store, say))
        for first, sha in todo:
            verdict = fresh[(first.problem_id, first.index, first.part)]
            for part in waiting[sha]:
                verdicts[(part.problem_id, part.index, part.part)] = verdict
    return verdicts
