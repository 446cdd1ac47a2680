"""What the executor-pool backends (local, docker, attach) share: turning a CodeJob into executor
requests over a pool of slots, checking outputs here (outside the sandbox), and building JobResults.

A job with a checker program (``checker_program.py``) is run, then checked in a second executor
request of its own. Subclasses provide the executors (``start``/``close``) and react to a failed executor
(``_executor_failed``): the job that was running there gets ``sandbox_error``, never a verdict.

The line between the program's failure and the backend's: whatever goes wrong while the host
decodes or judges what the program produced (a reply too large, a value nested too deeply, a judge
out of memory or CPU) is that program's verdict (``output_limit``, ``runtime_error``/``wrong_answer``,
``memory_limit``, ``time_limit``), never ``sandbox_error``, which is kept for what the program cannot
cause (an executor unreachable, a broken frame, a deadline of the executor itself). Replies larger
than ``judging.INLINE_BYTES`` are decoded and judged in the backend's ``JudgePool`` (worker processes
under CPU and memory limits), so no program holds the event loop; call results compare by
``judging.json_equal`` (canonical order, nothing hashed).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from mucode.protocol import SANDBOX_VERDICTS, Status
from mucode.sandbox import asserts
from mucode.sandbox.asserts import AssertPlan
from mucode.sandbox.checker_program import judge_with_checker
from mucode.sandbox.checkers import check, checker_program_of
from mucode.sandbox.client import Decode, Endpoint, ExecutorError, ExecutorRejected, SlotPool, decode_inline
from mucode.sandbox.executor.languages import ALIASES, LANGUAGES
from mucode.sandbox.judging import INLINE_BYTES, JudgeFault, JudgePool, cpu_count, json_equal, loads_pairs
from mucode.sandbox.testsets import PackedTests, TestSets
from mucode.sandbox.types import CodeJob, JobResult, RawRun, TestOutcome

logger = logging.getLogger(__name__)

_STATUS_TO_VERDICT = {v.value: v for v in SANDBOX_VERDICTS}


def build_request(job: CodeJob, plan: AssertPlan | None = None) -> dict[str, Any]:
    """The executor request for a job (inputs only; the expected outputs, and the expected values
    of literal asserts (``plan``, see asserts.py), stay here). Raises ValueError for a malformed job."""
    t = job.tests
    if t.format not in ("stdio", "call", "assert"):
        raise ValueError(f"tests.format must be stdio, call or assert, not {t.format!r}")
    if t.format == "assert":
        if not t.assert_code:
            raise ValueError("tests.format 'assert' needs assert_code")
        inputs: list[str] = []
    else:
        if not t.inputs:
            raise ValueError(f"tests.format {t.format!r} needs at least one input")
        if len(t.inputs) != len(t.outputs):
            raise ValueError(f"tests have {len(t.inputs)} inputs but {len(t.outputs)} outputs")
        if t.format == "call" and not t.fn_name:
            raise ValueError("tests.format 'call' needs fn_name")
        inputs = list(t.inputs)
    if not job.time_limit_s > 0 or job.memory_limit_mb < 16:
        raise ValueError("time_limit_s must be > 0 and memory_limit_mb >= 16")
    return {
        "op": "run",
        "language": job.language,
        "mode": t.format,
        "program": job.program,
        "inputs": inputs,
        "fn_name": t.fn_name,
        "assert_code": plan.source if plan is not None else t.assert_code,
        "entry_point": None if plan is not None else t.entry_point,
        "time_limit_s": job.time_limit_s,
        "memory_limit_mb": job.memory_limit_mb,
    }


def call_results_equal(expected: str, actual: str, checker: str) -> bool:
    """call format: the return value's JSON equals the expected JSON (``judging.json_equal``: objects
    by sorted keys, nothing hashed, too deep to decode is not equal); falls back to the checker on the raw
    strings when the expected output is not JSON."""
    try:
        exp = loads_pairs(expected)
    except ValueError:
        return check(checker, expected, actual)
    return json_equal(exp, actual)


def to_outcome(frame: dict[str, Any], verdict: Status) -> TestOutcome:
    return TestOutcome(
        verdict=verdict,
        stdout=frame.get("stdout", ""),
        stderr=frame.get("stderr", ""),
        truncated=bool(frame.get("truncated")),
        exit_code=frame.get("exit_code"),
        signal=frame.get("signal"),
        wall_s=float(frame.get("wall_s", 0.0)),
        cpu_s=float(frame.get("cpu_s", 0.0)),
        peak_memory_mb=float(frame.get("peak_memory_mb", 0.0)),
        limit_hit=frame.get("limit_hit"),
        compile=frame.get("compile") if isinstance(frame.get("compile"), dict) else None,
    )


_PROGRAM_DATA_ERRORS = (
    RecursionError,
    ValueError,
    TypeError,
    OverflowError,
    KeyError,
    IndexError,
    UnicodeError,
    ArithmeticError,
)


def judge_frame(job: CodeJob, frame: dict[str, Any], plan: AssertPlan | None = None) -> TestOutcome:
    """The test's outcome; a judge that fails on what the program produced is the program's verdict."""
    if "_outcome" in frame:  # judged already, in a worker (``judge_body``)
        return frame["_outcome"]  # type: ignore[no-any-return]
    try:
        return _judge_frame(job, frame, plan)
    except MemoryError:
        return _fault_outcome(frame, Status.memory_limit, "judging the program's output ran out of memory")
    except _PROGRAM_DATA_ERRORS as exc:
        return _fault_outcome(
            frame, Status.wrong_answer, f"the program's output could not be judged: {type(exc).__name__}"
        )


def _fault_outcome(frame: dict[str, Any], verdict: Status, why: str) -> TestOutcome:
    return to_outcome({**frame, "stdout": "", "stderr": why}, verdict)


_TEST_FRAME = re.compile(rb'\{"ev":"test","index":([0-9]{1,9})[,}]')
"""How the executor begins a test frame (``send_outcome``; the program writes none of it)."""


def job_for_frame(job: CodeJob, body: bytes) -> CodeJob:
    """What judging one reply needs of ``job``, for the trip to a judge worker: no inputs, and of
    the expected outputs only the one of the test the frame names (the others empty). A job's test
    set crossed the pipe whole, pickled, for every large reply: 12 MB of tests, once per test."""
    t = job.tests
    m = _TEST_FRAME.match(body)
    outputs = list(t.outputs)
    if m is not None and int(m[1]) < len(outputs):
        i = int(m[1])
        outputs = [""] * i + [outputs[i]]
    return dataclasses.replace(job, tests=dataclasses.replace(t, inputs=[], outputs=outputs))


def judge_body(job: CodeJob, plan: AssertPlan | None, body: bytes) -> dict[str, Any]:
    """In a judge worker: one reply's body decoded and, for a test, judged. Returns the frame without
    its bulky fields (``asserts``), the outcome under ``_outcome``."""
    frame = decode_inline(body)
    if frame.get("ev") == "test":
        frame["_outcome"] = judge_frame(job, frame, plan)
        frame.pop("asserts", None)
    return frame


def _judge_frame(job: CodeJob, frame: dict[str, Any], plan: AssertPlan | None) -> TestOutcome:
    status = frame.get("status")
    t = job.tests
    if t.format == "assert" and plan is not None and status in ("ok", "runtime_error"):
        why = asserts.judge(plan, frame.get("asserts"))  # a wrong value decides, whatever came next
        if why is not None and (status == "ok" or not why.startswith("missing:")):
            return to_outcome({**frame, "stderr": f"{frame.get('stderr', '')}\n{why}"}, Status.wrong_answer)
    if t.format == "assert" and status == "runtime_error" and frame.get("exception") == "AssertionError":
        return to_outcome(frame, Status.wrong_answer)  # a failed assertion is a wrong answer
    if status != "ok":
        return to_outcome(frame, _STATUS_TO_VERDICT.get(str(status), Status.sandbox_error))
    if t.format == "assert":
        ok = plan is not None
    else:
        expected = t.outputs[int(frame["index"])]
        actual = frame.get("stdout", "")
        ok = (
            call_results_equal(expected, actual, job.checker)
            if t.format == "call"
            else check(job.checker, expected, actual)
        )
    return to_outcome(frame, Status.correct if ok else Status.wrong_answer)


MIN_SPREAD_TESTS = 2
"""An idle slot takes half of a running job's tests not yet started when there are at least this many."""


def _compiles(language: str) -> bool:
    """Whether ``language`` has a compile step (or is unknown here: then it is not spread either)."""
    lang = LANGUAGES.get(ALIASES.get(language, language))
    return lang is None or lang.compile is not None


def _tests_view(job: CodeJob, start: int, stop: int) -> CodeJob:
    """``job`` with only its tests ``[start, stop)``: what judges the frames of a range, numbered from 0."""
    t = job.tests
    return dataclasses.replace(
        job, tests=dataclasses.replace(t, inputs=t.inputs[start:stop], outputs=t.outputs[start:stop])
    )


@dataclass(eq=False)
class _Part:
    """Tests ``[start, stop)`` of a job, run as one executor job; ``view`` judges their frames."""

    start: int
    stop: int
    view: CodeJob
    outcomes: list[TestOutcome] = field(default_factory=list)
    frames: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    done: bool = False


@dataclass(eq=False)
class _Spread:
    """One job being judged, its tests in parts over one or more slots (``PooledBackend.judge``)."""

    job: CodeJob
    plan: AssertPlan | None
    request: dict[str, Any]
    tests: PackedTests | None
    n: int
    spreadable: bool
    """Whether idle slots may take some of its tests: more than one test, and no compile step (one
    per part would cost more than it saves)."""
    parts: list[_Part] = field(default_factory=list)
    first_bad: float = math.inf
    """The first test (by index) found not correct, where the job stops at its first failure."""
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def result(self, wall: float) -> JobResult:
        """The verdict one slot running every test in order would give: the outcomes by index, up to
        the first failure (a job that stops there) or all of them; a test that no part ran (its part
        failed for infrastructure reasons, or ran short) before that is ``sandbox_error``."""
        job = self.job
        ran: dict[int, tuple[TestOutcome, dict[str, Any]]] = {}
        missing: dict[int, str | None] = {}
        for part in self.parts:
            for k in range(part.start, part.stop):
                if k - part.start < len(part.outcomes):
                    ran[k] = (part.outcomes[k - part.start], part.frames[k - part.start])
                else:
                    missing[k] = part.error
        outcomes: list[TestOutcome] = []
        infra: list[dict[str, Any]] = []
        for k in range(self.n):
            if k not in ran:
                error = missing.get(k) or f"executor ran {len(outcomes)} of {self.n} tests"
                return JobResult(Status.sandbox_error, outcomes, wall, error=error)
            outcome, frame = ran[k]
            outcomes.append(outcome)
            if frame.get("status") == "sandbox_error":
                infra.append(frame)
            if outcome.verdict is not Status.correct and job.stop_on_first_failure:
                break
        if infra:
            return JobResult(Status.sandbox_error, outcomes, wall, error=str(infra[0].get("message")))
        bad = [o for o in outcomes if o.verdict is not Status.correct]
        return JobResult(bad[0].verdict if bad else Status.correct, outcomes, wall)


class PooledBackend:
    """Shared judge/run_raw/health over a SlotPool; subclasses fill the pool."""

    name = "pooled"

    def __init__(
        self, *, acquire_timeout_s: float = 600.0, reply_slack_s: float = 90.0, judge: JudgePool | None = None
    ) -> None:
        """``reply_slack_s``: how long past a test's wall-clock limit (or a compile step's, up to
        60 s) the executor may take to answer before it counts as hung (``sandbox_error``).
        ``judge``: the worker pool for large replies (default: ``min(4, CPUs)`` workers, 20 s of CPU
        and 2 GiB per call; its 45 s watchdog stays inside the executor's reply deadline)."""
        self.acquire_timeout_s = acquire_timeout_s
        self.reply_slack_s = reply_slack_s
        self.judge_pool = judge if judge is not None else JudgePool(min(4, cpu_count()), cpu_s=20.0)
        self._pool: SlotPool | None = None
        self.test_sets = TestSets()
        """Large inputs packed once per problem and sent to each executor once (testsets.py)."""
        self._monitor: asyncio.Task[None] | None = None
        """Background health watcher of the pool (subclasses start it)."""
        self._tasks: set[asyncio.Task[None]] = set()
        """Background repairs (replacements, restarts) in flight."""
        self._spreads: set[_Spread] = set()
        """The jobs being judged, whose tests not yet started an idle slot may take."""
        self.spread_parts = 0
        """Parts of jobs that idle slots took (``_spread_to_idle``)."""

    def _start_monitor(self, interval_s: float, label: str, step: Callable[[], Awaitable[None]]) -> None:
        """Every ``interval_s``: check each executor of the pool (``_executor_failed``), then run the
        backend's own ``step`` (rescan, replace, restart). The monitor logs and survives any error."""

        async def watch() -> None:
            while True:
                await asyncio.sleep(interval_s)
                try:
                    for ep in list(self.pool.endpoints.values()):
                        await self._executor_failed(ep, RuntimeError("periodic health check"))
                    await step()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # keep monitoring whatever happened
                    logger.warning("%s sandbox monitor: %r", label, exc)

        self._monitor = asyncio.create_task(watch())

    async def _stop_background(self) -> None:
        """Cancel the monitor and every background repair, and wait for them to end."""
        if self._monitor is not None:
            self._monitor.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._monitor
            self._monitor = None
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.judge_pool.close()

    def _decoder(self, job: CodeJob | None, plan: AssertPlan | None) -> Decode:
        """Small replies decoded (and judged, for ``job``) here; large ones in the judge pool, where
        a judge that overruns or runs out of memory is the program's verdict."""

        async def decode(body: bytes) -> dict[str, Any]:
            if len(body) <= INLINE_BYTES:
                return judge_body(job, plan, body) if job is not None else decode_inline(body)
            try:
                if job is None:
                    return await self.judge_pool.call(__name__, "decode_inline", body)  # type: ignore[no-any-return]
                slim = job_for_frame(job, body)
                return await self.judge_pool.call(__name__, "judge_body", slim, plan, body)  # type: ignore[no-any-return]
            except JudgeFault as fault:
                status = fault.status if fault.status in _STATUS_TO_VERDICT else "runtime_error"
                frame: dict[str, Any] = {
                    "ev": "test",
                    "status": status,
                    "stdout": "",
                    "stderr": str(fault),
                    "message": str(fault),
                    "limit_hit": {"time_limit": "cpu_time", "memory_limit": "memory"}.get(status),
                }
                if job is not None:
                    frame["_outcome"] = to_outcome(frame, _STATUS_TO_VERDICT[status])
                return frame

        return decode

    @property
    def pool(self) -> SlotPool:
        if self._pool is None:
            raise RuntimeError(f"{self.name} sandbox backend not started: await backend.start() first")
        return self._pool

    async def _executor_failed(self, ep: Endpoint, exc: Exception) -> None:
        """Called when a job on ``ep`` failed for infrastructure reasons."""

    async def _probe(self, ep: Endpoint) -> str | None:
        """None when ``ep`` is healthy (or only has stuck slots, which its executor replaces), else
        why not. An executor must miss two pings in a row (a busy host can delay one) to count as gone."""
        try:
            info = await ep.ping_twice(timeout_s=3.0)
        except ExecutorError as exc:
            return str(exc)
        if not info.get("ok") and info.get("tampered", True):
            return (
                f"executor reports leftover processes {info.get('leftover_processes')} or writable "
                f"shared dirs {info.get('writable_shared_dirs')} or broken slots {info.get('broken_slots')}"
            )
        return None

    async def _run(
        self,
        request: dict[str, Any],
        keep_going: Any,
        time_limit_s: float,
        decode: Decode | None = None,
        tests: PackedTests | None = None,
    ) -> tuple[list[dict[str, Any]], str | None]:
        """Run on a free slot. An executor that fails mid-job (a handler or slot past its deadline
        is killed by the executor, which closes the connection) is reported to the backend, which
        replaces what is broken, and the job runs once more on a fresh slot."""
        error = "no attempt"
        for attempt in range(2):
            try:
                ep = await self.pool.acquire(self.acquire_timeout_s)
            except ExecutorError as exc:
                return [], str(exc)
            try:
                frames = await ep.run(
                    request,
                    keep_going,
                    timeout_s=2 * time_limit_s + self.reply_slack_s,
                    decode=decode or self._decoder(None, None),
                    tests=tests,
                )
                return frames, None
            except ExecutorRejected as exc:
                raise ValueError(f"the sandbox rejected the job: {exc}") from None
            except ExecutorError as exc:
                logger.warning(
                    "sandbox executor %s failed mid-job (attempt %d): %s", ep.name, attempt + 1, exc
                )
                error = str(exc)
                await self._executor_failed(ep, exc)
            finally:
                await self.pool.release(ep)
        return [], error

    async def judge(self, job: CodeJob) -> JobResult:
        checker = checker_program_of(job)
        if checker is not None:  # a checker program, in a sandbox run of its own (checker_program.py)
            return await judge_with_checker(job, checker, build_request(job), self._run, to_outcome)
        start = time.monotonic()
        plan = (
            asserts.prepare(job.tests.assert_code, job.tests.entry_point)
            if job.tests.format == "assert"
            else None
        )
        request = build_request(job, plan)
        tests = await self.test_sets.packed(request["inputs"]) if request["inputs"] else None
        n = 1 if job.tests.format == "assert" else len(job.tests.inputs)
        spread = _Spread(job, plan, request, tests, n, spreadable=n > 1 and not _compiles(job.language))
        self.pool.on_idle = self._spread_to_idle
        self._spreads.add(spread)
        try:
            await self._run_part(spread, _Part(0, n, job))
            while spread.tasks:  # the parts idle slots took (they may be split again meanwhile)
                await asyncio.gather(*list(spread.tasks))
        finally:
            self._spreads.discard(spread)
            for task in spread.tasks:  # judging stopped early (cancelled, refused): so do its parts
                task.cancel()
        return spread.result(time.monotonic() - start)

    async def _run_part(self, spread: _Spread, part: _Part) -> None:
        """Run the tests ``[part.start, part.stop)`` of ``spread``'s job (``stop`` may be lowered
        meanwhile, when an idle slot takes the rest) and keep what they gave."""
        spread.parts.append(part)
        job = spread.job

        def keep_going(frame: dict[str, Any]) -> bool:
            if frame.get("index") == 0:
                part.outcomes.clear()  # a re-run on a fresh slot starts over
                part.frames.clear()
            outcome = judge_frame(part.view, frame, spread.plan)
            part.outcomes.append(outcome)
            part.frames.append(frame)
            at = part.start + len(part.outcomes) - 1
            if outcome.verdict is not Status.correct and job.stop_on_first_failure:
                spread.first_bad = min(spread.first_bad, at)
                return False
            return at + 1 < min(part.stop, spread.first_bad)

        request = spread.request
        if (part.start, part.stop) != (0, spread.n):
            request = {**request, "test_range": [part.start, part.stop]}
        frames, part.error = await self._run(
            request, keep_going, job.time_limit_s, self._decoder(part.view, spread.plan), spread.tests
        )
        for frame in frames[len(part.outcomes) :]:  # the last frame is not passed to keep_going
            part.outcomes.append(judge_frame(part.view, frame, spread.plan))
            part.frames.append(frame)
        part.done = True

    def _spread_to_idle(self) -> None:
        """A slot is free and nobody waits for one: it takes the second half of the tests not yet
        started of the running part that has the most (two at least). The part stops before them;
        the verdicts are the same as one slot's, in order (``_Spread.result``)."""
        best: tuple[int, _Spread, _Part] | None = None
        for spread in self._spreads:
            for part in spread.parts if spread.spreadable else ():
                if part.done or spread.first_bad < part.stop:
                    continue  # over, or stopping at a failure
                unstarted = part.stop - (part.start + len(part.outcomes) + 1)  # one test is running
                if unstarted >= MIN_SPREAD_TESTS and (best is None or unstarted > best[0]):
                    best = (unstarted, spread, part)
        if best is None:
            return
        unstarted, spread, part = best
        mid = part.stop - unstarted // 2
        taken = _Part(mid, part.stop, _tests_view(spread.job, mid, part.stop))
        part.stop = mid
        self.spread_parts += 1
        task = asyncio.get_running_loop().create_task(self._run_part(spread, taken))
        spread.tasks.add(task)
        task.add_done_callback(spread.tasks.discard)

    async def run_raw(self, run: RawRun) -> TestOutcome:
        request = {
            "op": "run",
            "language": run.language,
            "mode": "stdio",
            "program": run.program,
            "inputs": [run.stdin],
            "time_limit_s": run.time_limit_s,
            "memory_limit_mb": run.memory_limit_mb,
        }
        if run.wall_limit_s is not None:
            request["wall_limit_s"] = run.wall_limit_s
        if run.files:
            request["files"] = dict(run.files)
        if run.compile_time_limit_s is not None:
            request["compile_time_limit_s"] = run.compile_time_limit_s
        frames, error = await self._run(
            request, lambda _: False, max(run.time_limit_s, run.wall_limit_s or 0.0)
        )
        if error is not None or not frames:
            return TestOutcome(
                Status.sandbox_error, "", error or "no result", False, None, None, 0.0, 0.0, 0.0, None
            )
        frame = frames[0]
        status = frame.get("status")
        verdict = (
            Status.correct if status == "ok" else _STATUS_TO_VERDICT.get(str(status), Status.sandbox_error)
        )
        return to_outcome(frame, verdict)

    async def health(self) -> dict[str, object]:
        if self._pool is None:
            return {"ok": False, "pool_size": 0, "idle": 0, "error": "not started"}
        executors = {}
        stuck = 0
        ok = bool(self._pool.endpoints)
        for ep in list(self._pool.endpoints.values()):
            try:
                info = await ep.ping()
                executors[ep.name] = {
                    "ok": bool(info.get("ok")),
                    "slots": ep.slots,
                    "free": ep.free,
                    "busy": info.get("busy"),
                    "stuck_slots": info.get("stuck_slots", []),
                    "broken_slots": info.get("broken_slots", []),
                    "seccomp": info.get("seccomp", False),
                }
                stuck += len(info.get("stuck_slots") or []) + len(info.get("broken_slots") or [])
                ok = ok and bool(info.get("ok"))
            except ExecutorError as exc:
                executors[ep.name] = {"ok": False, "error": str(exc)}
                ok = False
        # ok is False while any slot is busy past its deadline (the executor then kills and
        # replaces that slot's processes) or could not be cleaned (the backend replaces the executor)
        return {
            "ok": ok,
            "backend": self.name,
            "pool_size": self._pool.total_slots,
            "idle": self._pool.idle_slots,
            "stuck_slots": stuck,
            "spread_parts": self.spread_parts,
            "executors": executors,
        }
