"""`mucode eval livecodebench | math | evalplus`: the evaluators on the command line.

Settings come from a named protocol (`--protocol`, `mucode.eval.protocols`; default `paper` for math
and LiveCodeBench, `evalplus` for EvalPlus); `--temperature`, `--top-p`, `--max-tokens`, `-n`,
`--prompt-style`, `--release` override single fields. Responses come from a rollout engine
(`--engine hf|vllm --model PATH`) or from a samples file (`--samples FILE`: mucode's JSON Lines,
LiveCodeBench's generation output, or evalplus's samples). Generated samples and verdicts are cached
under `--run-dir` (default `runs/eval/<model or samples file>`), so an interrupted evaluation
resumes where it stopped; `--no-cache` keeps nothing. The table goes to stdout, progress to stderr,
the JSON report (with a `meta` entry: model, sampling, prompt, protocol, data revision, mucode
version, date) to `--output`, the table to `--markdown`, upstream-format files to `--upstream-dir`.
Mistakes are one line on stderr with exit code 2 (`mucode.eval.cli_support`).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from mucode.cli import OneLineUsageErrors
from mucode.eval.cli_support import check_partial, fail, run_guarded, say

__all__ = ["register"]


eval_app = typer.Typer(
    help="Evaluate a model or a samples file: LiveCodeBench, math, EvalPlus.",
    no_args_is_help=True,
    cls=OneLineUsageErrors,
)

Model = Annotated[str | None, typer.Option("--model", "-m", help="HF model directory, Hub id, `tiny`, or a training checkpoint / run directory (exported once to CHECKPOINT/hf).")]
Engine = Annotated[Literal["hf", "vllm"], typer.Option("--engine", help="Rollout engine: hf (CPU/GPU) or vllm (GPU).")]
Samples = Annotated[
    Path | None, typer.Option("--samples", help="Score this samples file instead of generating.")
]
N = Annotated[
    int | None,
    typer.Option("--samples-per-problem", "-n", help="Samples per problem (default: the protocol's)."),
]
Output = Annotated[Path | None, typer.Option("--output", "-o", help="Write the JSON report here.")]
Markdown = Annotated[Path | None, typer.Option("--markdown", help="Write the Markdown table here.")]
RunDir = Annotated[Path | None, typer.Option("--run-dir", help="Cache of samples and verdicts (resume).")]
NoCache = Annotated[bool, typer.Option("--no-cache", help="Keep no samples or verdicts on disk.")]
Urls = Annotated[
    list[str] | None,
    typer.Option("--verifier-url", help="Running verifier(s); default: start one in-process."),
]
Backend = Annotated[
    Literal["docker", "local"], typer.Option("--backend", help="Sandbox backend of the in-process verifier.")
]
Token = Annotated[
    str | None, typer.Option("--token", envvar="MUCODE_VERIFIER_TOKEN", help="Verifier bearer token.")
]
ProtocolOpt = Annotated[
    str | None, typer.Option("--protocol", help="Named evaluation protocol (see docs/eval.md).")
]
Context = Annotated[
    int | None, typer.Option("--context", help="Context in tokens (4096, 8192): the response budget follows.")
]
Temperature = Annotated[
    float | None, typer.Option("--temperature", help="Sampling temperature (default: protocol).")
]
TopP = Annotated[float | None, typer.Option("--top-p", help="Nucleus sampling (default: protocol).")]
MaxTokens = Annotated[
    int | None, typer.Option("--max-tokens", help="Longest response in tokens (default: protocol).")
]
Seed = Annotated[int, typer.Option("--seed", help="Sampling seed.")]
BatchSize = Annotated[int, typer.Option("--batch-size", help="Prompts generated together.")]
Device = Annotated[str, typer.Option("--device", help="hf engine device: auto, cpu, cuda.")]
TensorParallel = Annotated[int, typer.Option("--tensor-parallel-size", help="vllm: GPUs per replica.")]
Limit = Annotated[int | None, typer.Option("--limit", help="Only the first N problems (smoke runs).")]
AllowPartial = Annotated[
    bool,
    typer.Option(
        "--allow-partial", help="Report even when a benchmark was skipped or problems lack samples."
    ),
]
UpstreamDir = Annotated[
    Path | None,
    typer.Option("--upstream-dir", help="Also write the upstream harness's own result files here."),
]


@dataclasses.dataclass
class Common:
    """Options every command shares."""

    model: str | None
    samples: Path | None
    engine: str
    seed: int
    batch_size: int
    device: str
    tensor_parallel_size: int
    output: Path | None
    markdown: Path | None
    run_dir: Path | None
    no_cache: bool
    verifier_url: list[str] | None
    backend: str
    token: str | None
    allow_partial: bool

    def check(self) -> None:
        if self.samples is None and not self.model:
            fail(
                "nothing to evaluate — give --model (to generate) or --samples FILE (to score existing responses)"
            )
        if self.samples is not None and not self.samples.exists():
            fail(f"{self.samples}: no such samples file — check the path given to --samples")

    def verifier(self) -> Any:
        from mucode.eval.judge import VerifierOptions

        return VerifierOptions(urls=list(self.verifier_url or []), backend=self.backend, token=self.token)

    def cache_dir(self) -> Path | None:
        if self.no_cache:
            return None
        label = f"samples-{self.samples.stem}" if self.samples is not None else str(self.model)
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", label.rstrip("/").split("/")[-1]) or "run"
        return self.run_dir if self.run_dir is not None else Path("runs") / "eval" / slug

    def engine_source(self, protocol: Any) -> Any:
        """An `EngineSource` sampling with the protocol's settings (its stop strings included)."""
        from mucode.eval.core import EngineSource
        from mucode.rollout import make_engine

        assert self.model is not None
        path = self.model
        if path == "tiny":
            from mucode.assets import tiny_policy_path

            path = str(tiny_policy_path())
        else:  # a training checkpoint or run directory is exported once to <checkpoint>/hf (CLI glue only)
            from mucode.train.export import CheckpointError, as_model_path

            try:
                path = as_model_path(path)
            except CheckpointError as err:
                fail(str(err))
        s = protocol.sampling
        extra: dict[str, Any] = {}
        if self.engine == "vllm" and protocol.context_tokens:
            extra["max_model_len"] = protocol.context_tokens
        settings = dict(
            temperature=s.temperature,
            top_p=s.top_p,
            max_new_tokens=s.max_new_tokens,
            seed=self.seed,
            batch_size=self.batch_size,
            device=self.device,
            tensor_parallel_size=self.tensor_parallel_size,
        )
        built = make_engine(self.engine, path, **settings, **extra)
        tokenizer = getattr(built, "tokenizer", None)
        if tokenizer is None:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(path)
        return EngineSource(
            built, tokenizer, {"engine": self.engine, "model": self.model, **settings}, stop=s.stop
        )

    def finish(self, report: dict[str, Any], title: str) -> None:
        from mucode.eval.report import format_table, write_report

        table = format_table(report, title=title)
        typer.echo(table)
        if self.output is not None:
            say(f"report: {write_report(report, self.output)}")
        if self.markdown is not None:
            self.markdown.parent.mkdir(parents=True, exist_ok=True)
            self.markdown.write_text(table + "\n")
        errors = sum(v.get("infra_errors", 0) for v in report.values() if isinstance(v, dict))
        if errors:
            say(
                f"warning: {errors} samples could not be verified (infrastructure errors); they are not counted"
            )
        check_partial(report, self.allow_partial)


def resolve_protocol(kind: str, name: str | None, context: int | None, **overrides: Any) -> Any:
    """The protocol with the command line's overrides applied (None: keep the protocol's value)."""
    from mucode.eval.protocols import get_protocol

    protocol = get_protocol(kind, name, context_tokens=context)
    sampling = dataclasses.replace(protocol.sampling, **{k: v for k, v in overrides.items() if v is not None})
    return dataclasses.replace(protocol, sampling=sampling)


@eval_app.command("livecodebench")
def livecodebench(
    model: Model = None,
    samples: Samples = None,
    protocol: ProtocolOpt = None,
    context: Context = None,
    release: Annotated[
        str | None,
        typer.Option(
            "--release",
            help="LiveCodeBench release: release_vN (cumulative), vN (one file), vA_vB, release_latest.",
        ),
    ] = None,
    start_date: Annotated[
        str | None, typer.Option("--start-date", help="Keep contests on/after this date.")
    ] = None,
    end_date: Annotated[
        str | None, typer.Option("--end-date", help="Keep contests on/before this date.")
    ] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option("--data-dir", help="Directory with the release's test*.jsonl (default: the Hub)."),
    ] = None,
    revision: Annotated[
        str | None,
        typer.Option("--revision", help="Hub revision (commit or tag) of the data set (default: main)."),
    ] = None,
    stop: Annotated[
        list[str] | None,
        typer.Option(
            "--stop", help="Stop string (repeatable; --stop '' for none). Default: the protocol's (###)."
        ),
    ] = None,
    prompt_style: Annotated[
        str | None,
        typer.Option(
            "--prompt-style", help="chat (OpenAIChat), codeqwen (CodeQwenInstruct), base (GenericBase)."
        ),
    ] = None,
    limit: Limit = None,
    samples_per_problem: N = None,
    engine: Engine = "hf",
    temperature: Temperature = None,
    top_p: TopP = None,
    max_tokens: MaxTokens = None,
    seed: Seed = 0,
    batch_size: BatchSize = 64,
    device: Device = "auto",
    tensor_parallel_size: TensorParallel = 1,
    output: Output = None,
    markdown: Markdown = None,
    upstream_dir: UpstreamDir = None,
    run_dir: RunDir = None,
    no_cache: NoCache = False,
    verifier_url: Urls = None,
    backend: Backend = "docker",
    token: Token = None,
    allow_partial: AllowPartial = False,
) -> None:
    """LiveCodeBench code generation: pass@1 … pass@n, by difficulty and platform."""
    common = Common(model, samples, engine, seed, batch_size, device, tensor_parallel_size, output, markdown,
                    run_dir, no_cache, verifier_url, backend, token, allow_partial)  # fmt: skip

    def body() -> None:
        from mucode.eval.cli_runs import run_livecodebench

        common.check()
        chosen = resolve_protocol(
            "livecodebench",
            protocol,
            context,
            temperature=temperature,
            top_p=top_p,
            max_new_tokens=max_tokens,
            stop=tuple(s for s in stop if s) if stop is not None else None,
        )
        run_livecodebench(
            common, chosen, revision=revision, release=release, start_date=start_date, end_date=end_date, data_dir=data_dir,
            prompt_style=prompt_style, limit=limit, n=samples_per_problem, upstream_dir=upstream_dir,
        )  # fmt: skip

    run_guarded(body)


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
    protocol: ProtocolOpt = None,
    context: Context = None,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            "--data-dir",
            help="Local benchmark files (default: the copies shipped with mucode, else the Hub).",
        ),
    ] = None,
    template: Annotated[
        str | None, typer.Option("--template", help="Prompt template: m2po, boxed (default: the protocol's).")
    ] = None,
    instruction: Annotated[
        str | None,
        typer.Option("--instruction", help="Instead of a template: the problem, a space and this text."),
    ] = None,
    limit: Limit = None,
    samples_per_problem: N = None,
    engine: Engine = "hf",
    temperature: Temperature = None,
    top_p: TopP = None,
    max_tokens: MaxTokens = None,
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
    allow_partial: AllowPartial = False,
) -> None:
    """Math pass@1 (AIME 16 samples, others 4) and the five-benchmark average (samples: id, response)."""
    common = Common(model, samples, engine, seed, batch_size, device, tensor_parallel_size, output, markdown,
                    run_dir, no_cache, verifier_url, backend, token, allow_partial)  # fmt: skip

    def body() -> None:
        from mucode.eval.cli_runs import run_math

        common.check()
        chosen = resolve_protocol(
            "math", protocol, context, temperature=temperature, top_p=top_p, max_new_tokens=max_tokens
        )
        names = [b.strip() for b in benchmarks.split(",") if b.strip()]
        run_math(
            common, chosen, names=names, benchmark=benchmark, data_dir=data_dir, template=template,
            instruction=instruction, limit=limit, n=samples_per_problem,
        )  # fmt: skip

    run_guarded(body)


@eval_app.command("evalplus")
def evalplus(
    model: Model = None,
    datasets: Annotated[
        str, typer.Option("--datasets", help="Comma-separated: humaneval,mbpp.")
    ] = "humaneval,mbpp",
    samples: Samples = None,
    protocol: ProtocolOpt = None,
    humaneval_file: Annotated[
        Path | None,
        typer.Option("--humaneval-file", help="Local HumanEvalPlus.jsonl (HUMANEVAL_OVERRIDE_PATH)."),
    ] = None,
    mbpp_file: Annotated[
        Path | None, typer.Option("--mbpp-file", help="Local MbppPlus.jsonl (MBPP_OVERRIDE_PATH).")
    ] = None,
    prompt_style: Annotated[
        str | None, typer.Option("--prompt-style", help="chat (evalplus's instruction) or base.")
    ] = None,
    limit: Limit = None,
    samples_per_problem: N = None,
    engine: Engine = "hf",
    temperature: Temperature = None,
    top_p: TopP = None,
    max_tokens: MaxTokens = None,
    seed: Seed = 0,
    batch_size: BatchSize = 64,
    device: Device = "auto",
    tensor_parallel_size: TensorParallel = 1,
    output: Output = None,
    markdown: Markdown = None,
    upstream_dir: UpstreamDir = None,
    run_dir: RunDir = None,
    no_cache: NoCache = False,
    verifier_url: Urls = None,
    backend: Backend = "docker",
    token: Token = None,
    allow_partial: AllowPartial = False,
) -> None:
    """HumanEval+ / MBPP+ (base and plus tests) judged in mucode's sandbox with evalplus's rules."""
    common = Common(model, samples, engine, seed, batch_size, device, tensor_parallel_size, output, markdown,
                    run_dir, no_cache, verifier_url, backend, token, allow_partial)  # fmt: skip

    def body() -> None:
        from mucode.eval.cli_runs import run_evalplus

        common.check()
        chosen = resolve_protocol("evalplus", protocol, None, temperature=temperature, top_p=top_p,
                                  max_new_tokens=max_tokens)  # fmt: skip
        names = tuple(d.strip() for d in datasets.split(",") if d.strip())
        files = {k: v for k, v in (("humaneval", humaneval_file), ("mbpp", mbpp_file)) if v is not None}
        run_evalplus(
            common, chosen, names=names, override_paths=files, prompt_style=prompt_style, limit=limit,
            n=samples_per_problem, upstream_dir=upstream_dir,
        )  # fmt: skip

    run_guarded(body)


def register(app: typer.Typer) -> None:
    """Add the `eval` sub-app to the mucode CLI."""
    app.add_typer(eval_app, name="eval")
