"""`evaluate_benchmarks`: run benchmarks by name, for the trainer's periodic evaluation.

Names: the math benchmarks (`math500`, `aime24`, `aime25`, `amc23`, `amc24`), `livecodebench`
(LiveCodeBench's `release_latest` unless a release named as LiveCodeBench names it is appended:
`livecodebench_release_v5` cumulative, `livecodebench_v5` its fifth file only, `livecodebench_v1_v3`),
the evalplus data sets (`humaneval`, `mbpp`), and those of plug-in kinds. Each name's kind comes from
the benchmark registry (`mucode.eval.benchmarks`), which also holds the kind's protocols; the
`*_names` functions below are the built-in kinds' `Benchmark.evaluate_names`. `data_dir` is searched
for each benchmark's local files (math files by name, LiveCodeBench's `test*.jsonl` under
`data_dir/livecodebench` or `data_dir`, evalplus's `HumanEvalPlus.jsonl` / `MbppPlus.jsonl`); anything
else comes from the Hub.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mucode.eval.benchmarks import Benchmark, benchmark_of
from mucode.eval.core import EngineSource
from mucode.eval.judge import VerifierOptions
from mucode.eval.protocols import Protocol

__all__ = [
    "evaluate_benchmarks",
    "evaluate_evalplus_names",
    "evaluate_livecodebench_names",
    "evaluate_math_names",
    "protocols_for",
]

Progress = Callable[[str], None]


def evaluate_math_names(names: list[str], source: EngineSource, data_dir: Path | None, protocol: Protocol,
                        n: int | None, **kw: Any) -> dict[str, Any]:
    from mucode.eval.math_bench import evaluate_math

    counts = {b: n or protocol.samples_for(b) for b in names}
    return evaluate_math(source, names, data_dir=data_dir, samples_per_problem=counts, template=protocol.prompt,
                         **kw)  # fmt: skip


def evaluate_livecodebench_names(names: list[str], source: EngineSource, data_dir: Path | None,
                                 protocol: Protocol, n: int | None, **kw: Any) -> dict[str, Any]:
    from mucode.eval.livecodebench import evaluate_livecodebench

    local = None
    if data_dir is not None:
        local = next((d for d in (data_dir / "livecodebench", data_dir) if (d / "test.jsonl").is_file()), None)
    report: dict[str, Any] = {}
    for name in names:
        release = name.removeprefix("livecodebench").removeprefix("_") or protocol.release or "release_latest"
        entries = evaluate_livecodebench(source, release=release, data_dir=local, prompt_style=protocol.prompt,
                                         samples_per_problem=n or protocol.samples_for(name), **kw)  # fmt: skip
        report[name] = next(iter(entries.values()))
    return report


def evaluate_evalplus_names(names: list[str], source: EngineSource, data_dir: Path | None, protocol: Protocol,
                            n: int | None, **kw: Any) -> dict[str, Any]:
    from mucode.eval.evalplus_bench import evaluate_evalplus

    files = {"humaneval": "HumanEvalPlus.jsonl", "mbpp": "MbppPlus.jsonl"}
    overrides = {d: data_dir / f for d, f in files.items() if data_dir is not None and (data_dir / f).is_file()}
    counts = {n or protocol.samples_for(name) for name in names}
    if len(counts) != 1:
        raise ValueError(f"evalplus data sets {names} need one sample count; pass samples_per_problem")
    return evaluate_evalplus(source, tuple(names), override_paths=overrides, samples_per_problem=counts.pop(),
                             prompt_style=protocol.prompt, **kw)  # fmt: skip


def protocols_for(names: Sequence[str], protocol: str | None = None, context_tokens: int | None = None,
                  **sampling: Any) -> list[tuple[Benchmark, Protocol, list[str]]]:
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
            report.update(bench.evaluate_names(members, source, root, chosen, samples_per_problem,
                                               verifier=verifier, run_dir=run_dir, progress=progress, limit=limit))
        finally:
            if built is not None and hasattr(built, "close"):
                built.close()
    return report
