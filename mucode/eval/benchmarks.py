"""The benchmark registry: each benchmark kind with its evaluator, its named protocols and its defaults.

One :class:`Benchmark` per kind (``math``, ``livecodebench``, ``evalplus``; plug-ins add theirs under
the ``mucode.benchmarks`` entry-point group) holds everything that used to be decided per entry point:

- its protocols (``mucode.eval.protocols``), the first being the default: sampling (temperature,
  top-p, response budget, stop strings), samples per problem, prompt, data release;
- which benchmark names belong to it (``eval.benchmarks`` of a training config mixes kinds);
- how to evaluate a list of its names with a response source (the trainer's periodic evaluation and
  ``evaluate_benchmarks``);
- for a plug-in kind, optionally its ``mucode eval NAME`` command: the options only it has and how
  it plans a run (the built-in kinds' commands live in the command line, ``mucode.cli.eval``).

``mucode eval …``, ``mucode train``'s evaluation, the Python evaluators (``evaluate_math`` … when no
sample count is given) and ``bench/eval.py`` all read the defaults from here. The sandbox backend of
an in-process verifier is one default for every command (``docker``); a math evaluation starts no
sandbox whatever the backend.

``evaluate_benchmarks`` runs a list of names of any kinds, each kind with its protocol.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mucode.eval.core import EngineSource
from mucode.eval.evalplus.evaluate import evaluate_evalplus_names
from mucode.eval.judge import VerifierOptions
from mucode.eval.livecodebench.evaluate import evaluate_livecodebench_names
from mucode.eval.math_bench import MATH_BENCHMARKS, evaluate_math_names
from mucode.eval.protocols import EVALPLUS_PROTOCOLS, LIVECODEBENCH_PROTOCOLS, MATH_PROTOCOLS, Protocol
from mucode.registry import Registry

__all__ = [
    "BENCHMARKS",
    "Benchmark",
    "benchmark_of",
    "evaluate_benchmarks",
    "get_protocol",
    "protocol_names",
    "protocols_for",
]

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Benchmark:
    """A benchmark kind: its protocols (the first is the default), its names and its evaluator."""

    name: str
    """The kind, and the `mucode eval` command (`math`, `livecodebench`, `evalplus`)."""
    summary: str
    """One line: the command's help."""
    protocols: tuple[Protocol, ...]
    """Named protocols of this kind; the first is the default."""
    claims: Callable[[str], bool]
    """Whether a benchmark name (as in `eval.benchmarks`) is of this kind."""
    names_hint: str
    """How this kind's benchmark names look, for error messages."""
    evaluate_names: Callable[..., dict[str, Any]]
    """`(names, source, data_dir, protocol, samples_per_problem, **evaluator options) -> report`."""
    cli_options: Callable[[], Sequence[inspect.Parameter]] | None = None
    """A plug-in kind's own `mucode eval` options (`mucode.cli.eval_options.option`); None: no command
    of its own (the built-in kinds' commands are the command line's, `mucode.cli.eval`)."""
    cli_prepare: Callable[..., Any] | None = None
    """A plug-in kind's `(common, protocol, *, limit, n, **its options) -> mucode.cli.eval_jobs.CliJob`."""
    context_option: bool = True
    """Whether the command takes `--context` (protocols whose response budget follows the context)."""

    def __post_init__(self) -> None:
        if not self.protocols:
            raise ValueError(
                f"benchmark {self.name!r} needs at least one protocol (the first is its default)"
            )
        if any(p.kind != self.name for p in self.protocols):
            raise ValueError(f"benchmark {self.name!r}: every protocol's kind must be {self.name!r}")

    @property
    def default_protocol(self) -> Protocol:
        return self.protocols[0]

    def protocol_names(self) -> list[str]:
        return [p.name for p in self.protocols]

    def protocol(self, name: str | None = None, *, context_tokens: int | None = None) -> Protocol:
        """The protocol `name` (None: the default), at `context_tokens` when given; the error lists the names."""
        chosen = (
            self.default_protocol
            if name is None
            else next((p for p in self.protocols if p.name == name), None)
        )
        if chosen is None:
            raise ValueError(
                f"unknown {self.name} protocol {name!r}; valid: {', '.join(self.protocol_names())}"
            )
        return chosen.with_context(context_tokens) if context_tokens is not None else chosen


def _is_math(name: str) -> bool:
    return name in MATH_BENCHMARKS


def _is_livecodebench(name: str) -> bool:
    return name == "livecodebench" or name.startswith("livecodebench_")


def _is_evalplus(name: str) -> bool:
    return name in ("humaneval", "mbpp")


BENCHMARKS: Registry[Benchmark] = Registry("benchmark", entry_point_group="mucode.benchmarks")
"""Benchmark kinds by name; plug-ins register a `Benchmark` under the `mucode.benchmarks` group."""

BENCHMARKS.register("math", Benchmark(
    "math", "Math pass@1 (AIME 16 samples, others 4) and the five-benchmark average (samples: id, response).",
    MATH_PROTOCOLS, _is_math, "math500, aime24, aime25, amc23, amc24",
    evaluate_math_names,
))  # fmt: skip
BENCHMARKS.register("livecodebench", Benchmark(
    "livecodebench", "LiveCodeBench code generation: pass@1 … pass@n, by difficulty and platform.",
    LIVECODEBENCH_PROTOCOLS, _is_livecodebench,
    "livecodebench[_<release>] (e.g. livecodebench_release_v5)",
    evaluate_livecodebench_names,
))  # fmt: skip
BENCHMARKS.register("evalplus", Benchmark(
    "evalplus", "HumanEval+ / MBPP+ (base and plus tests) judged in mucode's sandbox with evalplus's rules.",
    EVALPLUS_PROTOCOLS, _is_evalplus, "humaneval, mbpp",
    evaluate_evalplus_names, context_option=False,
))  # fmt: skip


def benchmark_of(name: str) -> Benchmark:
    """The kind a benchmark name (`math500`, `livecodebench_v5`, `humaneval`, a plug-in's) belongs to."""
    for _, bench in BENCHMARKS.items():
        if bench.claims(name):
            return bench
    valid = "; ".join(f"{b.name}: {b.names_hint}" for _, b in BENCHMARKS.items())
    raise ValueError(f"unknown benchmark {name!r}; valid: {valid}")


def get_protocol(kind: str, name: str | None = None, *, context_tokens: int | None = None) -> Protocol:
    """Protocol `name` (None: the kind's default) of a benchmark kind, at `context_tokens` when given.

    Raises ValueError naming the valid kinds, protocols or contexts.
    """
    return BENCHMARKS.get(kind).protocol(name, context_tokens=context_tokens)


def protocol_names(kind: str) -> list[str]:
    """The protocols of a benchmark kind (the default first)."""
    return BENCHMARKS.get(kind).protocol_names()


def protocols_for(
    names: Sequence[str], protocol: str | None = None, context_tokens: int | None = None, **sampling: Any
) -> list[tuple[Benchmark, Protocol, list[str]]]:
    """The names grouped by kind, each kind with its protocol: `protocol` where the kind defines one of
    that name, else the kind's default; at `context_tokens` when its response budget follows the context;
    with the `sampling` fields given (not None) replaced. An unknown name raises ValueError listing the
    valid ones; a context the protocol is not stated for raises too."""
    groups: dict[str, tuple[Benchmark, list[str]]] = {}
    for name in names:
        bench = benchmark_of(name)
        groups.setdefault(bench.name, (bench, []))[1].append(name)
    chosen = []
    for bench, members in groups.values():
        picked = bench.protocol(protocol if protocol in bench.protocol_names() else None)
        if context_tokens is not None and picked.context_tokens is not None:
            picked = picked.with_context(context_tokens)
        changes = {k: v for k, v in sampling.items() if v is not None}
        if changes:
            picked = dataclasses.replace(picked, sampling=dataclasses.replace(picked.sampling, **changes))
        chosen.append((bench, picked, members))
    return chosen


def evaluate_benchmarks(
    names: Sequence[str],
    engine: Any,
    tokenizer: Any,
    *,
    data_dir: str | Path | None = None,
    samples_per_problem: int | None = None,
    verifier: VerifierOptions | None = None,
    run_dir: str | Path | None = None,
    fingerprint: dict[str, Any] | None = None,
    progress: Progress | None = None,
    limit: int | None = None,
    protocol: str | None = None,
    context_tokens: int | None = None,
    sampling: dict[str, Any] | None = None,
    engine_for: Callable[[Protocol], Any] | None = None,
) -> dict[str, Any]:
    """One report over benchmarks of every kind.

    Each kind follows its protocol (`protocols_for(names, protocol, context_tokens, **sampling)`:
    `protocol` where the kind has one of that name, else its default): prompt, samples per problem
    (unless `samples_per_problem` is given), stop strings, LiveCodeBench release. Responses come from
    `engine_for(protocol)`, an engine sampling with that kind's protocol (closed when the kind is
    done), else from `engine` (whose sampling is its own: build it with the protocol's `sampling`).

    `run_dir` caches samples for resuming: give each policy (checkpoint) its own directory, since
    cached samples are reused whenever the `fingerprint` (model, sampling settings) matches.
    `metrics_from_report` flattens the result into `eval/<benchmark>/pass@k` keys for a logger.
    `limit` keeps the first problems of each benchmark (smoke runs; not comparable with papers).
    """
    if engine is None and engine_for is None:
        raise ValueError("evaluate_benchmarks needs an engine or engine_for (a protocol -> engine callable)")
    root = Path(data_dir) if data_dir is not None else None
    report: dict[str, Any] = {}
    for bench, chosen, members in protocols_for(names, protocol, context_tokens, **(sampling or {})):
        built = engine_for(chosen) if engine_for is not None else None
        tag: dict[str, Any] = {"protocol": chosen.name}
        if built is not None:
            tag["sampling"] = dataclasses.asdict(chosen.sampling)
        source = EngineSource(built if built is not None else engine, tokenizer, {**(fingerprint or {}), **tag},
                              stop=chosen.sampling.stop)  # fmt: skip
        try:
            report.update(
                bench.evaluate_names(
                    members,
                    source,
                    root,
                    chosen,
                    samples_per_problem,
                    verifier=verifier,
                    run_dir=run_dir,
                    progress=progress,
                    limit=limit,
                )
            )
        finally:
            if built is not None and hasattr(built, "close"):
                built.close()
    return report
