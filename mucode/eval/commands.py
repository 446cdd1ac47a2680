"""`mucode eval livecodebench | math | evalplus`: the evaluators on the command line.

Responses come from a rollout engine (`--engine hf|vllm --model PATH`) or from a samples file
(`--samples FILE`). Generated samples and verdicts are cached under `--run-dir` (default
`runs/eval/<model or samples file>`), so an interrupted evaluation resumes where it stopped;
`--no-cache` keeps nothing. The table goes to stdout (Markdown, aligned for terminals), progress to
stderr, the JSON report to `--output`, the table also to `--markdown`.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = ["register"]

eval_app = typer.Typer(
    help="Evaluate a model or a samples file: LiveCodeBench, math, EvalPlus.", no_args_is_help=True
)

Model = Annotated[str | None, typer.Option("--model", "-m", help="HF model directory, Hub id, or `tiny`.")]
Engine = Annotated[str, typer.Option("--engine", help="Rollout engine: hf (CPU/GPU) or vllm (GPU).")]
Samples = Annotated[
    Path | None,
    typer.Option("--samples", help="Score this JSON Lines file of samples instead of generating."),
]
N = Annotated[
    int | None,
    typer.Option("--samples-per-problem", "-n", help="Samples per problem (default: per benchmark)."),
]
Output = Annotated[Path | None, typer.Option("--output", "-o", help="Write the JSON report here.")]
Markdown = Annotated[Path | None, typer.Option("--markdown", help="Write the Markdown table here.")]
RunDir = Annotated[Path | None, typer.Option("--run-dir", help="Cache of samples and verdicts (resume).")]
NoCache = Annotated[bool, typer.Option("--no-cache", help="Keep no samples or verdicts on disk.")]
Urls = Annotated[
    list[str] | None,
    typer.Option("--verifier-url", help="Running verifier(s); default: start one in-process."),
]
Backend = Annotated[str, typer.Option("--backend", help="Sandbox backend of the in-process verifier.")]
Token = Annotated[
    str | None, typer.Option("--token", envvar="MUCODE_VERIFIER_TOKEN", help="Verifier bearer token.")
]
Temperature = Annotated[float, typer.Option("--temperature", help="Sampling temperature.")]
TopP = Annotated[float, typer.Option("--top-p", help="Nucleus sampling.")]
MaxTokens = Annotated[int, typer.Option("--max-tokens", help="Longest response, in tokens.")]
Seed = Annotated[int, typer.Option("--seed", help="Sampling seed.")]
BatchSize = Annotated[int, typer.Option("--batch-size", help="Prompts generated together.")]
Device = Annotated[str, typer.Option("--device", help="hf engine device: auto, cpu, cuda.")]
TensorParallel = Annotated[int, typer.Option("--tensor-parallel-size", help="vllm: GPUs per replica.")]


def _say(message: str) -> None:
    typer.echo(message, err=True)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text.rstrip("/").split("/")[-1]) or "run"


def _run_dir(run_dir: Path | None, no_cache: bool, label: str) -> Path | None:
    if no_cache:
        return None
    return run_dir if run_dir is not None else Path("runs") / "eval" / _slug(label)


def _verifier(urls: list[str] | None, backend: str, token: str | None) -> Any:
    from mucode.eval.judge import VerifierOptions

    return VerifierOptions(urls=list(urls or []), backend=backend, token=token)


def _engine_source(engine: str, model: str | None, **settings: Any) -> Any:
    from mucode.eval.core import EngineSource
    from mucode.rollout import make_engine

    if model is None:
        raise typer.BadParameter("give --model (to generate) or --samples FILE (to score existing responses)")
    path = model
    if model == "tiny":
        from mucode.assets import tiny_policy_path

        path = str(tiny_policy_path())
    built = make_engine(engine, path, **settings)
    tokenizer = getattr(built, "tokenizer", None)
    if tokenizer is None:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(path)
    return EngineSource(built, tokenizer, {"engine": engine, "model": model, **settings})


def _close(source: Any) -> None:
    close = getattr(getattr(source, "engine", None), "close", None)
    if close is not None:
        close()


@contextlib.contextmanager
def _warnings_to_stderr() -> Iterator[None]:
    """Library warnings (skipped benchmarks, problems without samples) as one plain line each."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            for warning in caught:
                _say(f"warning: {warning.message}")


def _finish(report: dict[str, Any], output: Path | None, markdown: Path | None, title: str) -> None:
    from mucode.eval.report import format_table, write_report

    table = format_table(report, title=title)
    typer.echo(table)
    if output is not None:
        _say(f"report: {write_report(report, output)}")
    if markdown is not None:
        markdown.parent.mkdir(parents=True, exist_ok=True)
        markdown.write_text(table + "\n")
    errors = sum(v.get("infra_errors", 0) for v in report.values() if isinstance(v, dict))
    if errors:
        _say(f"warning: {errors} samples could not be verified (infrastructure errors); they are not counted")


def _check_source(samples: Path | None, model: str | None) -> None:
    if samples is None and not model:
        raise typer.BadParameter("give --model (to generate) or --samples FILE (to score existing responses)")


@eval_app.command("livecodebench")
def livecodebench(
    model: Model = None,
    samples: Samples = None,
    release: Annotated[str, typer.Option("--release", help="Release tag v1…v6 (cumulative).")] = "v6",
    start_date: Annotated[
        str | None, typer.Option("--start-date", help="Keep contests on/after this date.")
    ] = None,
    end_date: Annotated[
        str | None, typer.Option("--end-date", help="Keep contests on/before this date.")
    ] = None,
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", help="Directory with the release's test*.jsonl.")
    ] = None,
    prompt_style: Annotated[str, typer.Option("--prompt-style", help="chat (official) or base.")] = "chat",
    limit: Annotated[int | None, typer.Option("--limit", help="Evaluate only the first N problems.")] = None,
    samples_per_problem: N = None,
    engine: Engine = "hf",
    temperature: Temperature = 0.2,
    top_p: TopP = 0.95,
    max_tokens: MaxTokens = 4096,
    seed: Seed = 0,
    batch_size: BatchSize = 64,
    device: Device = "auto",
    tensor_parallel_size: TensorParallel = 1,
    output: Output = None,
    markdown: Markdown = None,
    run_dir: RunDir = None,
    no_cache: NoCache = False,
    verifier_url: Urls = None,
    backend: Backend = "docker",
    token: Token = None,
) -> None:
    """LiveCodeBench code generation: pass@1 … pass@n, by difficulty and platform (samples: question_id, response)."""
    from mucode.eval.core import SamplesSource
    from mucode.eval.generate import read_samples_file
    from mucode.eval.livecodebench import evaluate_livecodebench

    _check_source(samples, model)
    source: Any
    if samples is not None:
        file_samples = read_samples_file(samples, id_key="question_id")
        source, label = SamplesSource(file_samples), f"samples-{samples.stem}"
    else:
        source = _engine_source(
            engine,
            model,
            temperature=temperature,
            top_p=top_p,
            max_new_tokens=max_tokens,
            seed=seed,
            batch_size=batch_size,
            device=device,
            tensor_parallel_size=tensor_parallel_size,
        )
        label = f"{model}"
    with _warnings_to_stderr():
        try:
            report = evaluate_livecodebench(
                source,
                release=release,
                start_date=start_date,
                end_date=end_date,
                data_dir=data_dir,
                samples_per_problem=samples_per_problem or 4,
                prompt_style=prompt_style,
                limit=limit,
                verifier=_verifier(verifier_url, backend, token),
                run_dir=_run_dir(run_dir, no_cache, label),
                progress=_say,
            )
        finally:
            _close(source)
    _finish(report, output, markdown, f"LiveCodeBench {release}")


@eval_app.command("math")
def math(
    model: Model = None,
    benchmarks: Annotated[
        str, typer.Option("--benchmarks", help="Comma-separated: math500,aime24,aime25,amc23,amc24.")
    ] = "math500,aime24,aime25,amc23,amc24",
    benchmark: Annotated[
        str | None, typer.Option("--benchmark", help="With --samples: the benchmark they answer.")
    ] = None,
    samples: Samples = None,
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", help="Local benchmark files (default: the copies shipped with mucode, else the Hub).")
    ] = None,
    instruction: Annotated[
        str | None, typer.Option("--instruction", help="Appended to each problem.")
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", help="Only the first N problems of each benchmark.")
    ] = None,
    samples_per_problem: N = None,
    engine: Engine = "hf",
    temperature: Temperature = 0.6,
    top_p: TopP = 0.95,
    max_tokens: MaxTokens = 4096,
    seed: Seed = 0,
    batch_size: BatchSize = 64,
    device: Device = "auto",
    tensor_parallel_size: TensorParallel = 1,
    output: Output = None,
    markdown: Markdown = None,
    run_dir: RunDir = None,
    no_cache: NoCache = False,
    verifier_url: Urls = None,
    backend: Backend = "local",
    token: Token = None,
) -> None:
    """Math pass@1 (AIME 16 samples, others 4) and the five-benchmark average (samples: id, response)."""
    from mucode.eval.generate import read_samples_file
    from mucode.eval.math_bench import MATH_BENCHMARKS, MATH_INSTRUCTION, evaluate_math

    _check_source(samples, model)
    names = [b.strip() for b in benchmarks.split(",") if b.strip()]
    file_samples = None
    source: Any = None
    if samples is not None:
        if benchmark is None:
            raise typer.BadParameter(f"--samples needs --benchmark (one of {', '.join(MATH_BENCHMARKS)})")
        names = [benchmark]
        file_samples = {benchmark: read_samples_file(samples, id_key=("unique_id", "id"))}
        label = f"samples-{samples.stem}"
    else:
        source = _engine_source(
            engine,
            model,
            temperature=temperature,
            top_p=top_p,
            max_new_tokens=max_tokens,
            seed=seed,
            batch_size=batch_size,
            device=device,
            tensor_parallel_size=tensor_parallel_size,
        )
        label = f"{model}"
    with _warnings_to_stderr():
        try:
            report = evaluate_math(
                source,
                names,
                data_dir=data_dir,
                samples_per_problem=samples_per_problem,
                samples=file_samples,
                instruction=MATH_INSTRUCTION if instruction is None else instruction,
                limit=limit,
                verifier=_verifier(verifier_url, backend, token),
                run_dir=_run_dir(run_dir, no_cache, label),
                progress=_say,
            )
        finally:
            _close(source)
    _finish(report, output, markdown, "Math pass@k")


@eval_app.command("evalplus")
def evalplus(
    model: Model = None,
    datasets: Annotated[
        str, typer.Option("--datasets", help="Comma-separated: humaneval,mbpp.")
    ] = "humaneval,mbpp",
    samples: Samples = None,
    humaneval_file: Annotated[
        Path | None,
        typer.Option("--humaneval-file", help="Local HumanEvalPlus.jsonl (HUMANEVAL_OVERRIDE_PATH)."),
    ] = None,
    mbpp_file: Annotated[
        Path | None, typer.Option("--mbpp-file", help="Local MbppPlus.jsonl (MBPP_OVERRIDE_PATH).")
    ] = None,
    prompt_style: Annotated[
        str, typer.Option("--prompt-style", help="chat (evalplus's instruction) or base.")
    ] = "chat",
    limit: Annotated[int | None, typer.Option("--limit", help="Evaluate only the first N problems.")] = None,
    samples_per_problem: N = None,
    engine: Engine = "hf",
    temperature: Temperature = 0.0001,
    top_p: TopP = 1.0,
    max_tokens: MaxTokens = 768,
    seed: Seed = 0,
    batch_size: BatchSize = 64,
    device: Device = "auto",
    tensor_parallel_size: TensorParallel = 1,
    output: Output = None,
    markdown: Markdown = None,
    run_dir: RunDir = None,
    no_cache: NoCache = False,
    verifier_url: Urls = None,
    backend: Backend = "docker",
    token: Token = None,
) -> None:
    """HumanEval+ / MBPP+ (base and plus tests) judged in mucode's sandbox with evalplus's rules."""
    from mucode.eval.evalplus_bench import evaluate_evalplus, read_evalplus_samples

    _check_source(samples, model)
    names = tuple(d.strip() for d in datasets.split(",") if d.strip())
    overrides = {k: v for k, v in (("humaneval", humaneval_file), ("mbpp", mbpp_file)) if v is not None}
    file_samples = None
    source: Any = None
    if samples is not None:
        if len(names) != 1:
            raise typer.BadParameter(
                "--samples scores one data set: pass --datasets humaneval or --datasets mbpp"
            )
        file_samples = {names[0]: read_evalplus_samples(samples)}
        label = f"samples-{samples.stem}"
    else:
        source = _engine_source(
            engine,
            model,
            temperature=temperature,
            top_p=top_p,
            max_new_tokens=max_tokens,
            seed=seed,
            batch_size=batch_size,
            device=device,
            tensor_parallel_size=tensor_parallel_size,
        )
        label = f"{model}"
    with _warnings_to_stderr():
        try:
            report = evaluate_evalplus(
                source,
                names,
                override_paths=overrides,
                samples_per_problem=samples_per_problem or 1,
                prompt_style=prompt_style,
                samples=file_samples,
                limit=limit,
                verifier=_verifier(verifier_url, backend, token),
                run_dir=_run_dir(run_dir, no_cache, label),
                progress=_say,
            )
        finally:
            _close(source)
    _finish(report, output, markdown, "EvalPlus")


def register(app: typer.Typer) -> None:
    """Add the `eval` sub-app to the mucode CLI."""
    app.add_typer(eval_app, name="eval")
