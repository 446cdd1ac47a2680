"""What a `mucode eval` command runs: each kind plans a :class:`CliJob`, one body runs every job.

A kind's `prepare_*` (named by the benchmark registry, `mucode.eval.benchmarks`) does the cheap
checks (release name, prompt style, benchmark names, samples files) before any model is loaded, so a
mistake costs no model load, and returns the job: how to evaluate, the prompt and data it reports,
the upstream files it can write. :func:`run_job` then builds the response source (an engine sampling
with the job's protocol, or the samples file), evaluates, and writes the report, the table and the
upstream files.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from mucode.cli.errors import report_meta, say
from mucode.eval.core import SamplesSource
from mucode.eval.evalplus.evaluate import (
    EVALPLUS_DATASETS,
    evalplus_hash,
    evalplus_prompts,
    evaluate_evalplus,
    read_evalplus_samples,
)
from mucode.eval.generate import read_samples_file
from mucode.eval.livecodebench.data import LCB_HUB_ID, release_files
from mucode.eval.livecodebench.evaluate import evaluate_livecodebench
from mucode.eval.livecodebench.prompts import prompt_style_name
from mucode.eval.math_bench import MATH_BENCHMARKS, evaluate_math, instruction_template, math_data_source
from mucode.eval.protocols import Protocol, math_template
from mucode.eval.upstream import (
    is_lcb_generations,
    read_lcb_generations,
    write_evalplus_upstream,
    write_lcb_eval,
)

__all__ = ["CliJob", "prepare_evalplus", "prepare_livecodebench", "prepare_math", "run_job"]

Evaluate = Callable[..., dict[str, Any]]
"""`(source, *, verifier, run_dir, progress, collect) -> report`."""


@dataclasses.dataclass
class CliJob:
    """One planned `mucode eval` run."""

    protocol: Protocol
    """The protocol with the command line's overrides (an engine samples with its `sampling`)."""
    evaluate: Evaluate
    title: str
    """The table's title."""
    prompt: str
    """The prompt, as the report's `meta` names it."""
    data: Callable[[], dict[str, Any]]
    """Where the problems came from, for `meta` (called after the evaluation)."""
    source: Any = None
    """Responses from a samples file, or None: an engine from `--model` (unless `needs_engine` is False)."""
    needs_engine: bool = True
    upstream: Callable[[dict[str, Any], Path], list[Path]] | None = None
    """Writes the upstream harness's result files from the collected tasks and verdicts."""
    upstream_dir: Path | None = None
    upstream_label: str = ""


def run_job(job: CliJob, common: Any) -> None:
    """Evaluate, then write the report (with `meta`), the table and the upstream files."""
    source = common.engine_source(job.protocol) if job.needs_engine and job.source is None else job.source
    collected: dict[str, Any] = {}
    try:
        report = job.evaluate(source, verifier=common.verifier(), run_dir=common.cache_dir(), progress=say,
                              collect=collected)  # fmt: skip
    finally:
        closer = getattr(getattr(source, "engine", None), "close", None)
        if closer is not None:
            closer()
    report["meta"] = report_meta(protocol=job.protocol, sampling=job.protocol.sampling, prompt=job.prompt,
                                 data=job.data(), model=common.model, samples=common.samples,
                                 engine=common.engine)  # fmt: skip
    if job.upstream is not None and job.upstream_dir is not None:
        for path in job.upstream(collected, job.upstream_dir):
            say(f"{job.upstream_label} file: {path}")
    common.finish(report, job.title)


def prepare_livecodebench(common: Any, protocol: Protocol, *, limit: int | None, n: int | None,
                          release: str | None = None, start_date: str | None = None, end_date: str | None = None,
                          data_dir: Path | None = None, revision: str | None = None, stop: list[str] | None = None,
                          prompt_style: str | None = None, upstream_dir: Path | None = None) -> CliJob:  # fmt: skip

    if stop is not None:
        protocol = dataclasses.replace(
            protocol, sampling=dataclasses.replace(protocol.sampling, stop=tuple(s for s in stop if s))
        )
    release = release or protocol.release or "release_latest"
    files = release_files(release)
    style = prompt_style_name(prompt_style or protocol.prompt)
    source: Any = None
    kind: Literal["response", "code"] = "response"
    if common.samples is not None:
        if is_lcb_generations(common.samples):
            source, kind = SamplesSource(read_lcb_generations(common.samples)), "code"
        else:
            source = SamplesSource(read_samples_file(common.samples, id_key="question_id"))

    def evaluate(source: Any, **kw: Any) -> dict[str, Any]:
        return evaluate_livecodebench(source, release=release, start_date=start_date, end_date=end_date,
                                      data_dir=data_dir, samples_per_problem=n or protocol.samples_for("livecodebench"),
                                      prompt_style=style, limit=limit, sample_kind=kind, revision=revision,
                                      **kw)  # fmt: skip

    where = str(data_dir) if data_dir is not None else f"hf://datasets/{LCB_HUB_ID}@{revision or 'main'}"
    data = {"livecodebench": {"source": where, "release": release, "files": files, "start_date": start_date,
                              "end_date": end_date}}  # fmt: skip
    return CliJob(protocol, evaluate, f"LiveCodeBench {release}", style, lambda: data, source=source,
                  upstream=lambda got, out: list(write_lcb_eval(got["livecodebench"], out)) if "livecodebench" in got else [],  # noqa: E501
                  upstream_dir=upstream_dir, upstream_label="LiveCodeBench")  # fmt: skip


def prepare_math(common: Any, protocol: Protocol, *, limit: int | None, n: int | None,
                 benchmarks: str = "", benchmark: str | None = None, data_dir: Path | None = None,
                 template: str | None = None, instruction: str | None = None) -> CliJob:  # fmt: skip

    names = [b.strip() for b in benchmarks.split(",") if b.strip()]
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

    def evaluate(source: Any, *, collect: Any, **kw: Any) -> dict[str, Any]:
        return evaluate_math(source, names, data_dir=data_dir, samples_per_problem=counts, samples=file_samples,
                             template=chosen, limit=limit, **kw)  # fmt: skip

    label = "instruction" if instruction is not None else (template or protocol.prompt)
    return CliJob(protocol, evaluate, "Math pass@1", f"{label}: {dataclasses.asdict(chosen)}",
                  lambda: {b: math_data_source(b, data_dir) for b in names},
                  needs_engine=file_samples is None)  # fmt: skip


def prepare_evalplus(common: Any, protocol: Protocol, *, limit: int | None, n: int | None,
                     datasets: str = "", humaneval_file: Path | None = None, mbpp_file: Path | None = None,
                     prompt_style: str | None = None, upstream_dir: Path | None = None) -> CliJob:  # fmt: skip

    names = tuple(d.strip() for d in datasets.split(",") if d.strip())
    if not names:
        raise ValueError(f"--datasets names no data set; valid: {', '.join(EVALPLUS_DATASETS)}")
    paths = {k: v for k, v in (("humaneval", humaneval_file), ("mbpp", mbpp_file)) if v is not None}
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
        file_samples = {
            names[0]: read_evalplus_samples(
                common.samples, prompts=lambda: evalplus_prompts(names[0], override_path=paths.get(names[0]))
            )
        }
    hashes: dict[str, str] = {}

    def evaluate(source: Any, **kw: Any) -> dict[str, Any]:
        return evaluate_evalplus(source, names, override_paths=paths, samples_per_problem=n or protocol.samples_for(names[0]),  # noqa: E501
                                 prompt_style=style, samples=file_samples, limit=limit, **kw)  # fmt: skip

    def data() -> dict[str, Any]:
        hashes.update({d: evalplus_hash(d, override_path=paths.get(d)) for d in names})
        return {d: {"file": str(paths.get(d) or "evalplus release"), "hash": hashes[d]} for d in names}

    def upstream(got: dict[str, Any], out: Path) -> list[Path]:
        return [write_evalplus_upstream(got[d], out, hashes[d], d, common.samples) for d in got]

    return CliJob(protocol, evaluate, "EvalPlus", style, data, needs_engine=file_samples is None,
                  upstream=upstream, upstream_dir=upstream_dir, upstream_label="evalplus")  # fmt: skip
