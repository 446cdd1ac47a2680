"""The benchmark registry: each benchmark kind with its evaluator, its named protocols and its defaults.

One :class:`Benchmark` per kind (``math``, ``livecodebench``, ``evalplus``; plug-ins add theirs under
the ``mucode.benchmarks`` entry-point group) holds everything that used to be decided per entry point:

- its protocols (``mucode.eval.protocols``), the first being the default: sampling (temperature,
  top-p, response budget, stop strings), samples per problem, prompt, data release;
- which benchmark names belong to it (``eval.benchmarks`` of a training config mixes kinds);
- how to evaluate a list of its names with a response source (the trainer's periodic evaluation and
  ``evaluate_benchmarks``);
- its ``mucode eval NAME`` command: the options only it has and how it turns them into a
  :class:`~mucode.eval.cli_runs.CliJob` (the command body itself is one, in ``mucode.eval.commands``).

``mucode eval …``, ``mucode train``'s evaluation, the Python evaluators (``evaluate_math`` … when no
sample count is given) and ``bench/eval.py`` all read the defaults from here. The sandbox backend of
an in-process verifier is one default for every command (``docker``); a math evaluation starts no
sandbox whatever the backend.

Built-in entries refer to their evaluator and command code by import path, imported on first use, so
looking up a default imports no evaluator.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mucode.eval.protocols import EVALPLUS_PROTOCOLS, LIVECODEBENCH_PROTOCOLS, MATH_PROTOCOLS, Protocol
from mucode.registry import Registry

__all__ = [
    "BENCHMARKS",
    "Benchmark",
    "benchmark_of",
    "get_protocol",
    "protocol_names",
]


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
    """The options only this kind's `mucode eval` command has (None: no command)."""
    cli_prepare: Callable[..., Any] | None = None
    """`(common, protocol, *, limit, n, **its options) -> CliJob`: checks and plans a command run."""
    context_option: bool = True
    """Whether the command takes `--context` (protocols whose response budget follows the context)."""

    def __post_init__(self) -> None:
        if not self.protocols:
            raise ValueError(f"benchmark {self.name!r} needs at least one protocol (the first is its default)")
        if any(p.kind != self.name for p in self.protocols):
            raise ValueError(f"benchmark {self.name!r}: every protocol's kind must be {self.name!r}")

    @property
    def default_protocol(self) -> Protocol:
        return self.protocols[0]

    def protocol_names(self) -> list[str]:
        return [p.name for p in self.protocols]

    def protocol(self, name: str | None = None, *, context_tokens: int | None = None) -> Protocol:
        """The protocol `name` (None: the default), at `context_tokens` when given; the error lists the names."""
        chosen = self.default_protocol if name is None else next((p for p in self.protocols if p.name == name), None)
        if chosen is None:
            raise ValueError(f"unknown {self.name} protocol {name!r}; valid: {', '.join(self.protocol_names())}")
        return chosen.with_context(context_tokens) if context_tokens is not None else chosen


def _lazy(target: str) -> Callable[..., Any]:
    """`module:function`, imported when first called (keeps the registry free of evaluator imports)."""
    module, _, attribute = target.partition(":")

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), attribute)(*args, **kwargs)

    call.__qualname__ = call.__name__ = attribute
    return call


def _is_math(name: str) -> bool:
    from mucode.eval.math_bench import MATH_BENCHMARKS

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
    _lazy("mucode.eval.dispatch:evaluate_math_names"),
    _lazy("mucode.eval.cli_options:math_options"), _lazy("mucode.eval.cli_runs:prepare_math"),
))  # fmt: skip
BENCHMARKS.register("livecodebench", Benchmark(
    "livecodebench", "LiveCodeBench code generation: pass@1 … pass@n, by difficulty and platform.",
    LIVECODEBENCH_PROTOCOLS, _is_livecodebench,
    "livecodebench[_<release>] (e.g. livecodebench_release_v5)",
    _lazy("mucode.eval.dispatch:evaluate_livecodebench_names"),
    _lazy("mucode.eval.cli_options:livecodebench_options"), _lazy("mucode.eval.cli_runs:prepare_livecodebench"),
))  # fmt: skip
BENCHMARKS.register("evalplus", Benchmark(
    "evalplus", "HumanEval+ / MBPP+ (base and plus tests) judged in mucode's sandbox with evalplus's rules.",
    EVALPLUS_PROTOCOLS, _is_evalplus, "humaneval, mbpp",
    _lazy("mucode.eval.dispatch:evaluate_evalplus_names"),
    _lazy("mucode.eval.cli_options:evalplus_options"), _lazy("mucode.eval.cli_runs:prepare_evalplus"),
    context_option=False,
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
