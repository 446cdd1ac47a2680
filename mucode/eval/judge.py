"""Verifying samples through the verifier service (evaluators never run model code themselves).

Every sample becomes one or more verifier items ("parts": LiveCodeBench and math have one, EvalPlus
two, its base and its plus tests). A part whose item is None was decided without the verifier
(e.g. a response with no code block: status `no_code`). Items go to the service in chunks; each
chunk's verdicts are appended to the run store as soon as they come back, so an interrupted run loses
at most the chunks in flight. Items the verifier could not judge (infrastructure statuses) are
re-sent by the session's one retry layer (`VerifierOptions.connection.retries`: re-sends per item, counted
once per item, across HTTP and service-side failures), then charged: reward 0.0 with their status
kept, counted as failures and reported (`charged` in the report), never left out.

`StreamingJudge` does this on a `VerifierSession` (a background event loop), so the evaluators send
each group of samples as soon as the engine finishes it and verification overlaps generation. With no URL, a
verifier is started in-process on loopback (`mucode.verifier.local.local_verifier`) at the first
item that needs it; a fully cached rerun starts none.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import functools
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from mucode.eval.store import RunStore, item_sha
from mucode.protocol import Connection, Item
from mucode.verifier.client import Scored
from mucode.verifier.local import local_verifier
from mucode.verifier.session import VerifierSession

__all__ = [
    "Part",
    "StreamingJudge",
    "VerifierOptions",
    "judge_parts",
    "verifier_base_urls",
    "verifier_session",
]

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Part:
    """One verifier item of one sample."""

    problem_id: str
    index: int
    part: str
    item: dict[str, Any] | None
    """The verifier item (program, response, spec), or None when the verdict is `decided` without running anything."""
    decided: str = "no_code"


@dataclass
class VerifierOptions:
    """How to reach the verifier."""

    urls: list[str] = field(default_factory=list)
    """Base URLs of running verifiers; empty: start one in-process on loopback."""
    backend: str = "local"
    """Sandbox backend of the in-process verifier (`local` or `docker`)."""
    connection: Connection = field(default_factory=Connection)
    """Token, timeouts, retries (re-sends of an item after an infrastructure failure) and batching."""
    chunk_size: int = 256
    """Items per chunk between two saves of the verdict cache."""
    local_options: dict[str, Any] = field(default_factory=dict)
    """Settings of the in-process verifier (mucode.verifier.settings), e.g. {"math_workers": 2}."""
    shared: SharedLocalVerifier | None = field(default=None, repr=False, compare=False)
    """Set by `verifier_session`: the local verifier its evaluations share."""


@contextlib.contextmanager
def _local_verifier(settings: VerifierOptions, programs: Sequence[str]) -> Iterator[list[str]]:
    options = dict(settings.local_options)
    if programs:
        options.setdefault("programs", sorted(set(programs)))
    options.setdefault("run_code", False)  # evaluators use /v1/verify only
    with local_verifier(backend=settings.backend, **options) as url:
        yield [url]


class SharedLocalVerifier:
    """A local verifier started at the first request and kept until `close` (see `verifier_session`)."""

    def __init__(self, settings: VerifierOptions, programs: Sequence[str]) -> None:
        self._settings, self._programs = settings, list(programs)
        self._stack = contextlib.ExitStack()
        self._urls: list[str] | None = None

    def urls(self) -> list[str]:
        if self._urls is None:
            self._urls = self._stack.enter_context(_local_verifier(self._settings, self._programs))
        return self._urls

    def close(self) -> None:
        self._stack.close()
        self._urls = None


@contextlib.contextmanager
def verifier_base_urls(settings: VerifierOptions, programs: Sequence[str] = ()) -> Iterator[list[str]]:
    """The configured URLs, the session's shared verifier, or one started for the duration of the block.

    A verifier started here serves only `programs` (when given and not set in `local_options`) and
    not SandboxFusion's /run_code, so a math evaluation does not start code sandboxes.
    """
    if settings.urls:
        yield list(settings.urls)
    elif settings.shared is not None:
        yield settings.shared.urls()
    else:
        with _local_verifier(settings, programs) as urls:
            yield urls


@contextlib.contextmanager
def verifier_session(options: VerifierOptions | None, programs: Sequence[str]) -> Iterator[VerifierOptions]:
    """Options that reach one verifier for the whole block, so an evaluation of several benchmarks
    starts at most one. Without URLs, a local verifier serving `programs` starts at the first item
    that needs verifying (a fully cached run starts none) and stops at the end of the block."""
    options = options or VerifierOptions()
    if options.urls or options.shared is not None:
        yield options
        return
    shared = SharedLocalVerifier(options, programs)
    try:
        yield dataclasses.replace(options, shared=shared)
    finally:
        shared.close()


class StreamingJudge:
    """Judges parts on a ``VerifierSession`` (a background thread) while the caller keeps working.

    `submit(parts)` returns at once (cached and decided verdicts are filled in directly; identical
    items already in flight are not sent twice); `finish()` waits for every submitted part and
    returns all verdicts. The verifier (a local one when no URL is configured) and the session start
    at the first item that needs verifying, so a fully cached run starts nothing. Use it as a
    context manager: leaving the block stops everything (cancelling what is in flight on an error;
    the verdicts of finished chunks are already in the store).
    """

    def __init__(self, store: RunStore, settings: VerifierOptions, progress: Progress | None = None) -> None:
        self.store = store
        self.settings = settings
        self.say: Progress = progress or (lambda _msg: None)
        self.verdicts: dict[tuple[str, int, str], dict[str, Any]] = {}
        self._in_flight: dict[str, list[Part]] = {}
        self._lock = threading.Lock()
        self._futures: list[concurrent.futures.Future[None]] = []
        self._stack = contextlib.ExitStack()
        self._session: VerifierSession | None = None
        self._sent = 0
        self._done = 0
        self._unverified = 0
        self._first_error = ""

    def __enter__(self) -> StreamingJudge:
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        self.close(cancel=exc_type is not None)

    def submit(self, parts: Sequence[Part]) -> None:
        """Queue parts for verification and return at once."""
        fresh: list[tuple[Part, str]] = []
        settled = 0
        with self._lock:
            for part in parts:
                key = (part.problem_id, part.index, part.part)
                if part.item is None:
                    self.verdicts[key] = {"reward": 0.0, "status": part.decided}
                    settled += 1
                    continue
                sha = item_sha(part.item)
                cached = self.store.verdict(sha)
                if cached is not None:
                    self.verdicts[key] = cached
                    settled += 1
                elif sha in self._in_flight:
                    self._in_flight[sha].append(part)
                else:
                    self._in_flight[sha] = [part]
                    fresh.append((part, sha))
        if not fresh:
            return
        self.say(f"{settled} verdicts cached or decided, {len(fresh)} distinct items to verify")
        session = self._start([part.item["program"] for part, _ in fresh if part.item])
        self._sent += len(fresh)
        for start in range(0, len(fresh), self.settings.chunk_size):
            chunk = fresh[start : start + self.settings.chunk_size]
            items = [
                Item.model_validate(
                    {**(part.item or {}), "id": f"{part.problem_id}#{part.index}#{part.part}"}
                )
                for part, _ in chunk
            ]
            self._futures.append(session.submit(items, functools.partial(self._record, chunk)))

    def finish(self) -> dict[tuple[str, int, str], dict[str, Any]]:
        """Wait for every submitted part; re-raises what a verification raised (a 4xx: the service
        rejected the items, a bug or a limit to raise, never a score)."""
        for future in self._futures:
            future.result()
        return self.verdicts

    def close(self, *, cancel: bool = False) -> None:
        """Stop the session and a verifier started here (idempotent)."""
        if self._session is not None:
            if cancel:
                for future in self._futures:
                    future.cancel()
            concurrent.futures.wait(self._futures, timeout=None if not cancel else 60)
            with contextlib.suppress(Exception):
                self._session.close()
            self._session = None
        self._stack.close()

    def _start(self, programs: Sequence[str]) -> VerifierSession:
        if self._session is None:
            urls = self._stack.enter_context(verifier_base_urls(self.settings, programs))
            self._session = VerifierSession(urls, self.settings.connection, name="mucode-eval-judge")
        return self._session

    def _record(self, chunk: list[tuple[Part, str]], scored: Scored) -> None:
        """Stores one chunk's verdicts (on the session's thread, as soon as they come back)."""
        rows = []
        for (part, sha), result in zip(chunk, scored.results, strict=True):
            row: dict[str, Any] = {
                "id": part.problem_id,
                "index": part.index,
                "part": part.part,
                "sha": sha,
                "reward": 0.0 if result.infra else float(result.reward),  # charged
                "status": result.status.value,
            }
            head = _last_stdout_head(result.details)
            if head:
                row["stdout_head"] = head
            rows.append(row)
            with self._lock:
                for waiting in self._in_flight.pop(sha, [part]):
                    self.verdicts[(waiting.problem_id, waiting.index, waiting.part)] = row
                if result.infra:  # no verdict: never counted as verified
                    self._unverified += 1
                    self._first_error = (
                        self._first_error or f"{result.status.value}: {(result.error or '')[:200]}"
                    )
                else:
                    self._done += 1
        self.store.add_verdicts(rows)
        self.say(self._progress_line(scored.resends))

    def _progress_line(self, resends: int) -> str:
        line = f"verified {self._done}/{self._sent} items"
        if self._unverified:
            line += f", {self._unverified} could not be verified (first: {self._first_error})"
        return line + (f" ({resends} re-sends)" if resends else "")


def _last_stdout_head(details: dict[str, Any]) -> str:
    """One line (≤ 200 characters) saying how the last test failed, kept with the verdict: enough to
    say which input failed, small enough for the cache. The assert harness appends a failed check's
    traceback to stderr after a ``--- tests ---`` line (after anything the program wrote), so the
    message of its last ``AssertionError:`` line (EvalPlus's check raises `FAIL <i>`); else the first
    line of stdout."""
    tests = details.get("tests") or []
    last = tests[-1] if tests and isinstance(tests[-1], dict) else {}
    stderr, stdout = last.get("stderr"), last.get("stdout")
    if isinstance(stderr, str) and "--- tests ---" in stderr:
        harness = stderr.rsplit("--- tests ---", 1)[1].splitlines()
        failed = [line for line in harness if line.startswith("AssertionError: ")]
        if failed:
            return failed[-1].removeprefix("AssertionError: ")[:200]
    return stdout.split("\n", 1)[0][:200] if isinstance(stdout, str) else ""


def judge_parts(
    parts: Sequence[Part],
    store: RunStore,
    settings: VerifierOptions,
    *,
    progress: Progress | None = None,
) -> dict[tuple[str, int, str], dict[str, Any]]:
    """Verdicts `{"reward", "status"}` of every part, keyed by (problem id, sample index, part).

    Cached verdicts of identical items are reused; the rest go to the verifier. Call it from
    synchronous code (the verification runs on its own event loop thread).
    """
    with StreamingJudge(store, settings, progress) as judge:
        judge.submit(parts)
        return judge.finish()
