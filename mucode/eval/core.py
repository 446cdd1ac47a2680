"""The loop every evaluator shares: responses → verifier items → verdicts → report entries.

Verification overlaps generation: each group of samples is sent to the verifier as soon as the
engine finishes it.

An evaluator describes its benchmark as a `BenchmarkTask` (its problems with prompts and breakdown
labels, how a response becomes verifier items, how verdicts become report entries); `run_task`
does the rest: responses from an engine (`EngineSource`, cached and resumable) or from a samples
file (`SamplesSource`), verification through the verifier client with the run store's cache, and
the report entries.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from mucode.eval.generate import Prompt, generate_responses
from mucode.eval.judge import Part, StreamingJudge, VerifierOptions
from mucode.eval.report import ProblemOutcome, summarize
from mucode.eval.store import RunStore

__all__ = [
    "BenchmarkTask",
    "Collected",
    "EngineSource",
    "EvalProblem",
    "ResponseSource",
    "SamplesSource",
    "outcomes_for_part",
    "run_task",
]

Progress = Callable[[str], None]
Verdicts = dict[tuple[str, int, str], dict[str, Any]]


@dataclass(frozen=True)
class EvalProblem:
    id: str
    prompt: Prompt
    labels: dict[str, str] = field(default_factory=dict)


class BenchmarkTask(Protocol):
    """What `run_task` needs to know about a benchmark."""

    @property
    def name(self) -> str:
        """Its key in the report and its directory in the run cache."""
        ...

    @property
    def problems(self) -> Sequence[EvalProblem]:
        """Problems in report order, with prompts and breakdown labels."""
        ...

    def fingerprint(self) -> dict[str, Any]:
        """Settings that change the prompts (kept in the run manifest)."""
        ...

    def parts(self, problem_id: str, index: int, response: str) -> list[Part]:
        """The verifier items of one sample."""
        ...

    def summarize(
        self, responses: Mapping[str, list[str]], verdicts: Verdicts, samples_per_problem: int
    ) -> dict[str, dict[str, Any]]:
        """Report entries keyed by benchmark name (usually one)."""
        ...


@dataclass
class EngineSource:
    """Sample responses with a rollout engine (`mucode.rollout`): engine plus its tokenizer."""

    engine: Any
    tokenizer: Any
    fingerprint: dict[str, Any] = field(default_factory=dict)
    """Model and sampling settings; a run directory made with others is not resumed."""
    stop: tuple[str, ...] = ()
    """Stop strings: each response ends before the first of them (the engines stop on tokens only)."""


@dataclass
class SamplesSource:
    """Responses made elsewhere: problem id → list of responses."""

    samples: Mapping[str, list[str]]


@dataclass
class Collected:
    """What `run_task` saw, for writers of upstream file formats: the task, every response, every verdict."""

    task: BenchmarkTask
    responses: dict[str, list[str]]
    verdicts: Verdicts


ResponseSource = EngineSource | SamplesSource


def outcomes_for_part(
    problems: Sequence[EvalProblem], responses: Mapping[str, list[str]], verdicts: Verdicts, part: str
) -> list[ProblemOutcome]:
    """One ProblemOutcome per problem that has responses, from the verdicts of one part."""
    return [
        ProblemOutcome(
            problem.id,
            [verdicts[(problem.id, i, part)]["status"] for i in range(len(responses[problem.id]))],
            problem.labels,
        )
        for problem in problems
        if responses.get(problem.id)
    ]


def default_summary(
    task: BenchmarkTask,
    responses: Mapping[str, list[str]],
    verdicts: Verdicts,
    n: int,
    breakdowns: Sequence[str] = (),
) -> dict[str, dict[str, Any]]:
    entry = summarize(outcomes_for_part(task.problems, responses, verdicts, "main"), n, breakdowns)
    return {task.name: entry}


def _responses_from_file(
    task: BenchmarkTask, samples: Mapping[str, list[str]]
) -> tuple[dict[str, list[str]], int]:
    known = {p.id for p in task.problems}
    unknown = sorted(set(samples) - known)
    if unknown:
        raise ValueError(
            f"{task.name}: {len(unknown)} sample ids are not problems of the benchmark "
            f"(e.g. {', '.join(unknown[:3])}); ids must be the data set's own ids"
        )
    missing = len(known - set(samples))
    if missing:
        warnings.warn(
            f"{task.name}: {missing} of {len(known)} problems have no samples; they are left out of the figures",
            stacklevel=3,
        )
    responses = {pid: list(samples[pid]) for pid in (p.id for p in task.problems) if pid in samples}
    return responses, max(len(r) for r in responses.values())


def run_task(
    task: BenchmarkTask,
    source: ResponseSource,
    samples_per_problem: int,
    *,
    verifier: VerifierOptions | None = None,
    run_dir: str | Path | None = None,
    progress: Progress | None = None,
    collect: dict[str, Collected] | None = None,
) -> dict[str, dict[str, Any]]:
    """Evaluate one benchmark; returns its report entries (keyed by benchmark name).

    `collect`, when given, receives the task's responses and verdicts under the task's name.
    """
    say = progress or (lambda _msg: None)
    manifest: dict[str, Any] = {"benchmark": task.name, **task.fingerprint()}
    if isinstance(source, EngineSource):
        manifest["generation"] = {
            **source.fingerprint,
            **({"stop": list(source.stop)} if source.stop else {}),
        }
    else:
        manifest["generation"] = "samples file"
    store = RunStore(Path(run_dir) / task.name if run_dir is not None else None, manifest)
    tell = lambda m: say(f"{task.name}: {m}")  # noqa: E731

    def parts_of(problem_id: str, first_index: int, texts: Sequence[str]) -> list[Part]:
        return [part for i, text in enumerate(texts, first_index) for part in task.parts(problem_id, i, text)]

    with StreamingJudge(store, verifier or VerifierOptions(), tell) as judge:
        if isinstance(source, EngineSource):
            prompts = {p.id: p.prompt for p in task.problems}
            responses = generate_responses(
                source.engine,
                source.tokenizer,
                prompts,
                samples_per_problem,
                store,
                progress=tell,
                on_group=lambda pid, first, texts: judge.submit(parts_of(pid, first, texts)),
                stop=source.stop,
            )
            n = samples_per_problem
        else:
            responses, n = _responses_from_file(task, source.samples)
        for problem_id, texts in responses.items():  # cached samples, and anything not yet submitted
            judge.submit(parts_of(problem_id, 0, texts))
        verdicts = judge.finish()
    if collect is not None:
        collect[task.name] = Collected(task, dict(responses), verdicts)
    entries = task.summarize(responses, verdicts, n)
    missing = len(task.problems) - len(responses)
    for entry in entries.values():
        if missing:
            entry["problems_without_samples"] = missing
    return entries
