"""`evaluate_benchmarks`: run benchmarks by name, for the trainer's periodic evaluation.

Names: the math benchmarks (`math500`, `aime24`, `aime25`, `amc23`, `amc24`), `livecodebench`
(LiveCodeBench's `release_latest` unless a release named as LiveCodeBench names it is appended:
`livecodebench_release_v5` cumulative, `livecodebench_v5` its fifth file only, `livecodebench_v1_v3`), and the evalplus data sets
(`humaneval`, `mbpp`). `data_dir` is searched for each benchmark's local files (math files by name,
LiveCodeBench's `test*.jsonl` under `data_dir/livecodebench` or `data_dir`, evalplus's
`HumanEvalPlus.jsonl` / `MbppPlus.jsonl`); anything else comes from the Hub.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mucode.eval.core import EngineSource
from mucode.eval.judge import VerifierOptions
from mucode.eval.protocols import Protocol, get_protocol, protocol_names

__all__ = ["BENCHMARK_KINDS", "evaluate_benchmarks"]

Progress = Callable[[str], None]


def _math(
    names: list[str],
    source: EngineSource,
    data_dir: Path | None,
    n: int | None,
    protocol: Protocol | None,
    **kw: Any,
) -> dict[str, Any]:
    from mucode.eval.math_bench import evaluate_math

    if protocol is not None:
        kw["template"] = protocol.prompt
        if n is None:
            return evaluate_math(
                source,
                names,
                data_dir=data_dir,
                samples_per_problem={b: protocol.samples_for(b) for b in names},
                **kw,
            )
    return evaluate_math(source, names, data_dir=data_dir, samples_per_problem=n, **kw)


def _lcb(
    names: list[str],
    source: EngineSource,
    data_dir: Path | None,
    n: int | None,
    protocol: Protocol | None,
    **kw: Any,
) -> dict[str, Any]:
    from mucode.eval.livecodebench import evaluate_livecodebench

    report: dict[str, Any] = {}
    if protocol is not None:
        kw["prompt_style"] = protocol.prompt
        n = n or protocol.samples_for("livecodebench")
    for name in names:
        default = protocol.release if protocol is not None and protocol.release else "release_latest"
        release = name.removeprefix("livecodebench").removeprefix("_") or default
        local = None
        if data_dir is not None:
            local = next(
                (d for d in (data_dir / "livecodebench", data_dir) if (d / "test.jsonl").is_file()), None
            )
        entries = evaluate_livecodebench(
            source, release=release, data_dir=local, samples_per_problem=n or 4, **kw
        )
        report[name] = next(iter(entries.values()))
    return report


def _evalplus(
    names: list[str],
    source: EngineSource,
    data_dir: Path | None,
    n: int | None,
    protocol: Protocol | None,
    **kw: Any,
) -> dict[str, Any]:
    from mucode.eval.evalplus_bench import evaluate_evalplus

    if protocol is not None:
        kw["prompt_style"] = protocol.prompt
        n = n or protocol.samples_for("humaneval")
    files = {"humaneval": "HumanEvalPlus.jsonl", "mbpp": "MbppPlus.jsonl"}
    overrides = {
        d: data_dir / f for d, f in files.items() if data_dir is not None and (data_dir / f).is_file()
    }
    return evaluate_evalplus(source, tuple(names), override_paths=overrides, samples_per_problem=n or 1, **kw)


BENCHMARK_KINDS: dict[str, Callable[..., dict[str, Any]]] = {
    "math": _math,
    "livecodebench": _lcb,
    "evalplus": _evalplus,
}


def _kind(name: str) -> str:
    from mucode.eval.math_bench import MATH_BENCHMARKS

    if name in MATH_BENCHMARKS:
        return "math"
    if name == "livecodebench" or name.startswith("livecodebench_"):
        return "livecodebench"
    if name in ("humaneval", "mbpp"):
        return "evalplus"
    raise ValueError(
        f"unknown benchmark {name!r}; valid: {', '.join(MATH_BENCHMARKS)}, livecodebench[_<release>] (e.g. livecodebench_release_v5), humaneval, mbpp"
    )


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
) -> dict[str, Any]:
    """One report over benchmarks of every kind, sampled with `engine`.

    `protocol` (a name in `mucode.eval.protocols`): each kind uses that protocol's prompt, samples per
    problem (unless `samples_per_problem` is given), stop strings and LiveCodeBench release, or its
    own default protocol where it has none of that name. Sampling is the engine's: build it with
    `get_protocol(kind, protocol).sampling` (temperature, top_p, max_new_tokens) to follow the
    protocol. None: the evaluators' Python defaults (the instruction-suffix math prompt, …).

    `samples_per_problem` None: each benchmark's default. `run_dir` caches samples for resuming:
    give each policy (checkpoint) its own directory, since cached samples are reused whenever the
    `fingerprint` (model, sampling settings) matches. `metrics_from_report` flattens the result into
    `eval/<benchmark>/pass@k` keys for a logger. `limit` keeps the first problems of each benchmark
    (smoke runs; such figures are not comparable with published ones).
    """
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(_kind(name), []).append(name)
    root = Path(data_dir) if data_dir is not None else None
    report: dict[str, Any] = {}
    for kind, members in groups.items():
        chosen = None
        if protocol is not None:
            chosen = get_protocol(kind, protocol if protocol in protocol_names(kind) else None)
        stop = chosen.sampling.stop if chosen is not None else ()
        tag = {"protocol": protocol} if protocol is not None else {}
        source = EngineSource(engine, tokenizer, {**(fingerprint or {}), **tag}, stop=stop)
        report.update(
            BENCHMARK_KINDS[kind](
                members,
                source,
                root,
                samples_per_problem,
                chosen,
                verifier=verifier,
                run_dir=run_dir,
                progress=progress,
                limit=limit,
            )
        )
    return report
