"""`mucode eval <benchmark>`: one command per registered benchmark kind, all with one body.

The commands come from the benchmark registry (`mucode.eval.benchmarks`: `livecodebench`, `math`,
`evalplus`, and plug-ins): each has the shared options (`mucode.cli.eval_options`) plus its kind's
own, and runs the same body: check, resolve the protocol, let the kind plan a job
(`mucode.cli.eval_jobs`), run it. The built-in kinds' options and planners are listed here
(`BUILTIN_COMMANDS`); a plug-in kind brings its own on its `Benchmark`. Settings come from a named protocol
(`--protocol`; default: the
kind's default protocol in the registry, the same one training-time evaluation uses);
`--temperature`, `--top-p`, `--max-tokens`, `-n`, `--prompt-style`, `--release` override single
fields. Responses come from a rollout engine (`--engine hf|vllm --model PATH`) or from a samples file
(`--samples FILE`: mucode's JSON Lines, LiveCodeBench's generation output, or evalplus's samples).
Generated samples and verdicts are cached under `--run-dir` (default `runs/eval/<model or samples
file>`), so an interrupted evaluation resumes where it stopped; `--no-cache` keeps nothing. The
table goes to stdout, progress to stderr, the JSON report (with a `meta` entry: model, sampling,
prompt, protocol, data revision, mucode version, date) to `--output`, the table to `--markdown`,
upstream-format files to `--upstream-dir`. The in-process verifier's sandbox backend defaults to
`docker` for every command. Mistakes are one line on stderr with exit code 2
(`mucode.cli.errors`).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import typer

from mucode.assets import resolve_model_path
from mucode.cli.errors import check_partial, fail, run_guarded, say
from mucode.cli.eval_jobs import prepare_evalplus, prepare_livecodebench, prepare_math, run_job
from mucode.cli.eval_options import (
    evalplus_options,
    livecodebench_options,
    math_options,
    shared_head,
    shared_tail,
)
from mucode.cli.usage import OneLineUsageErrors
from mucode.eval.benchmarks import BENCHMARKS, Benchmark, get_protocol
from mucode.eval.core import EngineSource
from mucode.eval.judge import VerifierOptions
from mucode.eval.report import format_table, write_report
from mucode.protocol import Connection
from mucode.train.export import CheckpointError, as_model_path
from mucode.train.preflight import check_verifiers

__all__ = ["BUILTIN_COMMANDS", "Common", "benchmark_command", "register", "resolve_protocol"]

CommandParts = tuple[Callable[[], Sequence[inspect.Parameter]], Callable[..., Any]]

BUILTIN_COMMANDS: dict[str, CommandParts] = {
    "math": (math_options, prepare_math),
    "livecodebench": (livecodebench_options, prepare_livecodebench),
    "evalplus": (evalplus_options, prepare_evalplus),
}
"""The built-in kinds' own options and planners (`(common, protocol, *, limit, n, **options) -> CliJob`)."""


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
        if self.verifier_url:  # before any generation: a dead verifier would verify nothing
            check_verifiers(self.verifier_url, fix=EVAL_FIX)

    def verifier(self) -> VerifierOptions:
        return VerifierOptions(
            urls=list(self.verifier_url or []), backend=self.backend, connection=Connection(token=self.token)
        )

    def cache_dir(self) -> Path | None:
        if self.no_cache:
            return None
        label = f"samples-{self.samples.stem}" if self.samples is not None else str(self.model)
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", label.rstrip("/").split("/")[-1]) or "run"
        return self.run_dir if self.run_dir is not None else Path("runs") / "eval" / slug

    def engine_source(self, protocol: Any) -> Any:
        """An `EngineSource` sampling with the protocol's settings (its stop strings included)."""
        from mucode.rollout import make_engine  # lazy: torch

        assert self.model is not None
        try:  # `tiny`, a model directory or Hub id, or a checkpoint / run directory (exported once to CKPT/hf)
            path = as_model_path(resolve_model_path(self.model))
        except CheckpointError as err:
            fail(str(err))
        s = protocol.sampling
        extra: dict[str, Any] = {}
        if self.engine == "vllm" and protocol.context_tokens:
            extra["max_model_len"] = protocol.context_tokens
        sampling = s.engine_params(self.seed)
        engine_settings: dict[str, Any] = {
            "batch_size": self.batch_size,
            "device": self.device,
            "tensor_parallel_size": self.tensor_parallel_size,
        }
        built = make_engine(self.engine, path, sampling, **engine_settings, **extra)
        settings = {  # what the run records (and its cache key): as before SamplingParams existed
            "temperature": s.temperature,
            "top_p": s.top_p,
            "max_new_tokens": s.max_new_tokens,
            "seed": self.seed,
            **engine_settings,
        }
        tokenizer = getattr(built, "tokenizer", None)
        if tokenizer is None:
            from transformers import AutoTokenizer  # lazy: transformers

            tokenizer = AutoTokenizer.from_pretrained(path)
        return EngineSource(
            built, tokenizer, {"engine": self.engine, "model": self.model, **settings}, stop=s.stop
        )

    def finish(self, report: dict[str, Any], title: str) -> None:
        table = format_table(report, title=title)
        typer.echo(table)
        if self.output is not None:
            say(f"report: {write_report(report, self.output)}")
        if self.markdown is not None:
            self.markdown.parent.mkdir(parents=True, exist_ok=True)
            self.markdown.write_text(table + "\n")
        errors = sum(v.get("charged", 0) for v in report.values() if isinstance(v, dict))
        if errors:
            say(
                f"warning: {errors} samples could not be verified (infrastructure errors after the retries); "
                "they count as failures (`charged` in the report): check the verifier and rerun to verify them again"
            )
        check_partial(report, self.allow_partial)


def resolve_protocol(kind: str, name: str | None, context: int | None, **overrides: Any) -> Any:
    """The kind's protocol with the command line's overrides applied (None: keep the protocol's value)."""
    protocol = get_protocol(kind, name, context_tokens=context)
    sampling = dataclasses.replace(protocol.sampling, **{k: v for k, v in overrides.items() if v is not None})
    return dataclasses.replace(protocol, sampling=sampling)


EVAL_FIX = "start it (`mucode serve`), fix --verifier-url, or leave it out for an in-process verifier"

_COMMON_FIELDS = tuple(f.name for f in dataclasses.fields(Common))


def command_parts(bench: Benchmark) -> CommandParts | None:
    """A kind's own options and planner: the built-in table's, else the plug-in's; None: no command."""
    if bench.name in BUILTIN_COMMANDS:
        return BUILTIN_COMMANDS[bench.name]
    if bench.cli_options is not None and bench.cli_prepare is not None:
        return bench.cli_options, bench.cli_prepare
    return None


def benchmark_command(bench: Benchmark, parts: CommandParts) -> Callable[..., None]:
    """The `mucode eval NAME` command of a registered benchmark: shared options + the kind's own, one body."""
    own_options, prepare = parts
    parameters = [*shared_head(bench.context_option), *own_options(), *shared_tail()]

    def command(**options: Any) -> None:
        common = Common(**{name: options.pop(name) for name in _COMMON_FIELDS})
        protocol, context = options.pop("protocol"), options.pop("context", None)
        sampling = {"temperature": options.pop("temperature"), "top_p": options.pop("top_p"),
                    "max_new_tokens": options.pop("max_tokens")}  # fmt: skip
        limit, n = options.pop("limit"), options.pop("samples_per_problem")

        def body() -> None:
            common.check()
            chosen = resolve_protocol(bench.name, protocol, context, **sampling)
            run_job(prepare(common, chosen, limit=limit, n=n, **options), common)

        run_guarded(body)

    command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in parameters}
    command.__doc__ = bench.summary
    command.__name__ = command.__qualname__ = bench.name
    return command


def register(app: typer.Typer) -> None:
    """Add the `eval` sub-app, one command per registered benchmark kind, to the mucode CLI."""
    eval_app = typer.Typer(
        help="Evaluate a model or a samples file: " + ", ".join(BENCHMARKS.names()) + ".",
        no_args_is_help=True,
        cls=OneLineUsageErrors,
    )
    for name, bench in BENCHMARKS.items():
        parts = command_parts(bench)
        if parts is not None:
            eval_app.command(name)(benchmark_command(bench, parts))
    app.add_typer(eval_app, name="eval")
