"""The bodies of the `mucode eval` commands: resolve the data and the source, evaluate, write the outputs.

Cheap checks (release name, prompt style, benchmark names, samples files) run before a model is
loaded, so a mistake costs no model load.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mucode.eval.cli_support import report_meta, say

__all__ = ["run_evalplus", "run_livecodebench", "run_math"]


def _source(common: Any, protocol: Any, samples: Any) -> Any:
    from mucode.eval.core import SamplesSource

    return SamplesSource(samples) if samples is not None else common.engine_source(protocol)


def run_livecodebench(
    common: Any,
    protocol: Any,
    *,
    revision: str | None = None,
    release: str | None,
    start_date: str | None,
    end_date: str | None,
    data_dir: Path | None,
    prompt_style: str | None,
    limit: int | None,
    n: int | None,
    upstream_dir: Path | None,
) -> None:
    from mucode.eval.core import Collected
    from mucode.eval.generate import read_samples_file
    from mucode.eval.lcb_data import LCB_HUB_ID, release_files
    from mucode.eval.lcb_prompts import prompt_style_name
    from mucode.eval.livecodebench import evaluate_livecodebench
    from mucode.eval.upstream import is_lcb_generations, read_lcb_generations, write_lcb_eval

    release = release or protocol.release or "release_latest"
    files = release_files(release)
    style = prompt_style_name(prompt_style or protocol.prompt)
    samples, kind = None, "response"
    if common.samples is not None:
        if is_lcb_generations(common.samples):
            samples, kind = read_lcb_generations(common.samples), "code"
        else:
            samples = read_samples_file(common.samples, id_key="question_id")
    source = _source(common, protocol, samples)
    collected: dict[str, Collected] = {}
    try:
        report: dict[str, Any] = evaluate_livecodebench(
            source,
            release=release,
            start_date=start_date,
            end_date=end_date,
            data_dir=data_dir,
            samples_per_problem=n or protocol.samples_for("livecodebench"),
            prompt_style=style,
            limit=limit,
            verifier=common.verifier(),
            run_dir=common.cache_dir(),
            progress=say,
            sample_kind=kind,  # type: ignore[arg-type]
            collect=collected,
            revision=revision,
        )
    finally:
        _close(source)
    data = {
        "livecodebench": {
            "source": str(data_dir)
            if data_dir is not None
            else f"hf://datasets/{LCB_HUB_ID}@{revision or 'main'}",
            "release": release,
            "files": files,
            "start_date": start_date,
            "end_date": end_date,
        }
    }
    report["meta"] = report_meta(protocol=protocol, sampling=protocol.sampling, prompt=style, data=data,
                                 model=common.model, samples=common.samples, engine=common.engine)  # fmt: skip
    if upstream_dir is not None and "livecodebench" in collected:
        for path in write_lcb_eval(collected["livecodebench"], upstream_dir):
            say(f"LiveCodeBench file: {path}")
    common.finish(report, f"LiveCodeBench {release}")


def run_math(
    common: Any,
    protocol: Any,
    *,
    names: Sequence[str],
    benchmark: str | None,
    data_dir: Path | None,
    template: str | None,
    instruction: str | None,
    limit: int | None,
    n: int | None,
) -> None:
    from mucode.eval.generate import read_samples_file
    from mucode.eval.math_bench import MATH_BENCHMARKS, evaluate_math, instruction_template, math_data_source
    from mucode.eval.protocols import math_template

    names = list(names)
    unknown = [b for b in [*names, *([benchmark] if benchmark else [])] if b not in MATH_BENCHMARKS]
    if unknown:
        raise ValueError(f"unknown math benchmark {unknown[0]!r}; valid: {', '.join(MATH_BENCHMARKS)}")
    if template is not None and instruction is not None:
        raise ValueError("give --template or --instruction, not both")
    chosen = (
        instruction_template(instruction)
        if instruction is not None
        else math_template(template or protocol.prompt)
    )
    file_samples = None
    if common.samples is not None:
        if benchmark is None:
            raise ValueError(f"--samples needs --benchmark (one of {', '.join(MATH_BENCHMARKS)})")
        names = [benchmark]
        file_samples = {benchmark: read_samples_file(common.samples, id_key=("unique_id", "id"))}
    counts = {b: n or protocol.samples_for(b) for b in names}
    source = None if file_samples is not None else common.engine_source(protocol)
    try:
        report: dict[str, Any] = evaluate_math(
            source,
            names,
            data_dir=data_dir,
            samples_per_problem=counts,
            samples=file_samples,
            template=chosen,
            limit=limit,
            verifier=common.verifier(),
            run_dir=common.cache_dir(),
            progress=say,
        )
    finally:
        _close(source)
    data = {b: math_data_source(b, data_dir) for b in names}
    label = "instruction" if instruction is not None else (template or protocol.prompt)
    prompt = f"{label}: {dataclasses.asdict(chosen)}"
    report["meta"] = report_meta(protocol=protocol, sampling=protocol.sampling, prompt=prompt, data=data,
                                 model=common.model, samples=common.samples, engine=common.engine)  # fmt: skip
    common.finish(report, "Math pass@k")


def run_evalplus(
    common: Any,
    protocol: Any,
    *,
    names: tuple[str, ...],
    override_paths: dict[str, Path],
    prompt_style: str | None,
    limit: int | None,
    n: int | None,
    upstream_dir: Path | None,
) -> None:
    from mucode.eval.core import Collected
    from mucode.eval.evalplus_bench import (
        EVALPLUS_DATASETS,
        evalplus_hash,
        evaluate_evalplus,
        read_evalplus_samples,
    )
    from mucode.eval.upstream import write_evalplus_results

    unknown = [d for d in names if d not in EVALPLUS_DATASETS]
    if unknown:
        raise ValueError(f"unknown evalplus data set {unknown[0]!r}; valid: {', '.join(EVALPLUS_DATASETS)}")
    style = prompt_style or protocol.prompt
    if style not in ("chat", "base"):
        raise ValueError(f"unknown prompt style {style!r}; valid: chat, base")
    file_samples = None
    if common.samples is not None:
        if len(names) != 1:
            raise ValueError("--samples scores one data set: pass --datasets humaneval or --datasets mbpp")
        file_samples = {names[0]: read_evalplus_samples(common.samples)}
    source = None if file_samples is not None else common.engine_source(protocol)
    collected: dict[str, Collected] = {}
    try:
        report: dict[str, Any] = evaluate_evalplus(
            source,
            names,
            override_paths=override_paths,
            samples_per_problem=n or protocol.samples_for("humaneval"),
            prompt_style=style,
            samples=file_samples,
            limit=limit,
            verifier=common.verifier(),
            run_dir=common.cache_dir(),
            progress=say,
            collect=collected,
        )
    finally:
        _close(source)
    hashes = {d: evalplus_hash(d, override_path=override_paths.get(d)) for d in names}
    data = {d: {"file": str(override_paths.get(d) or "evalplus release"), "hash": hashes[d]} for d in names}
    report["meta"] = report_meta(protocol=protocol, sampling=protocol.sampling, prompt=style, data=data,
                                 model=common.model, samples=common.samples, engine=common.engine)  # fmt: skip
    if upstream_dir is not None:
        for dataset, got in collected.items():
            path = write_evalplus_results(
                got, Path(upstream_dir) / f"{dataset}_eval_results.json", hashes[dataset]
            )
            say(f"evalplus file: {path}")
    common.finish(report, "EvalPlus")


def _close(source: Any) -> None:
    closer = getattr(getattr(source, "engine", None), "close", None)
    if closer is not None:
        closer()
