"""The options of the `mucode eval` commands, as typer parameters.

`shared_head` / `shared_tail` are the options every command has; each built-in benchmark kind adds its
own (`math_options`, `livecodebench_options`, `evalplus_options`, named by the benchmark registry). A
plug-in benchmark's `cli_options` returns parameters built with :func:`option` the same way.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

__all__ = [
    "evalplus_options",
    "livecodebench_options",
    "math_options",
    "option",
    "shared_head",
    "shared_tail",
]


def option(name: str, annotation: Any, default: Any) -> inspect.Parameter:
    """One command option: `name` is the Python name, `annotation` an `Annotated[type, typer.Option(...)]`."""
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


Model = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="HF model directory, Hub id, `tiny`, or a training checkpoint / run directory (exported once to CHECKPOINT/hf).",  # noqa: E501
    ),
]
Engine = Annotated[
    Literal["hf", "vllm"], typer.Option("--engine", help="Rollout engine: hf (CPU/GPU) or vllm (GPU).")
]
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
    Literal["docker", "local"],
    typer.Option("--backend", help="Sandbox backend of the in-process verifier (math runs no sandbox)."),
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


def shared_head(context: bool) -> list[inspect.Parameter]:
    """The options that open every command (`--context` where the kind's response budget follows it)."""
    head = [
        option("model", Model, None),
        option("samples", Samples, None),
        option("protocol", ProtocolOpt, None),
    ]
    return head + ([option("context", Context, None)] if context else [])


def shared_tail() -> list[inspect.Parameter]:
    """The options that close every command: sampling, engine, outputs, cache, verifier."""
    return [
        option("limit", Limit, None),
        option("samples_per_problem", N, None),
        option("engine", Engine, "hf"),
        option("temperature", Temperature, None),
        option("top_p", TopP, None),
        option("max_tokens", MaxTokens, None),
        option("seed", Seed, 0),
        option("batch_size", BatchSize, 64),
        option("device", Device, "auto"),
        option("tensor_parallel_size", TensorParallel, 1),
        option("output", Output, None),
        option("markdown", Markdown, None),
        option("run_dir", RunDir, None),
        option("no_cache", NoCache, False),
        option("verifier_url", Urls, None),
        option("backend", Backend, "docker"),
        option("token", Token, None),
        option("allow_partial", AllowPartial, False),
    ]


def livecodebench_options() -> list[inspect.Parameter]:
    return [
        option(
            "release",
            Annotated[
                str | None,
                typer.Option(
                    "--release",
                    help="LiveCodeBench release: release_vN (cumulative), vN (one file), vA_vB, release_latest.",
                ),
            ],
            None,
        ),
        option(
            "start_date",
            Annotated[str | None, typer.Option("--start-date", help="Keep contests on/after this date.")],
            None,
        ),
        option(
            "end_date",
            Annotated[str | None, typer.Option("--end-date", help="Keep contests on/before this date.")],
            None,
        ),
        option(
            "data_dir",
            Annotated[
                Path | None,
                typer.Option(
                    "--data-dir", help="Directory with the release's test*.jsonl (default: the Hub)."
                ),
            ],
            None,
        ),
        option(
            "revision",
            Annotated[
                str | None,
                typer.Option(
                    "--revision", help="Hub revision (commit or tag) of the data set (default: main)."
                ),
            ],
            None,
        ),
        option(
            "stop",
            Annotated[
                list[str] | None,
                typer.Option(
                    "--stop",
                    help="Stop string (repeatable; --stop '' for none). Default: the protocol's (###).",
                ),
            ],
            None,
        ),
        option(
            "prompt_style",
            Annotated[
                str | None,
                typer.Option(
                    "--prompt-style",
                    help="chat (OpenAIChat), codeqwen (CodeQwenInstruct), base (GenericBase).",
                ),
            ],
            None,
        ),
        option("upstream_dir", UpstreamDir, None),
    ]


def math_options() -> list[inspect.Parameter]:
    return [
        option(
            "benchmarks",
            Annotated[
                str, typer.Option("--benchmarks", help="Comma-separated: math500,aime24,aime25,amc23,amc24.")
            ],
            "math500,aime24,aime25,amc23,amc24",
        ),
        option(
            "benchmark",
            Annotated[
                str | None, typer.Option("--benchmark", help="With --samples: the benchmark they answer.")
            ],
            None,
        ),
        option(
            "data_dir",
            Annotated[
                Path | None,
                typer.Option(
                    "--data-dir",
                    help="Local benchmark files (default: the copies shipped with mucode, else the Hub).",
                ),
            ],
            None,
        ),
        option(
            "template",
            Annotated[
                str | None,
                typer.Option("--template", help="Prompt template: m2po, boxed (default: the protocol's)."),
            ],
            None,
        ),
        option(
            "instruction",
            Annotated[
                str | None,
                typer.Option(
                    "--instruction", help="Instead of a template: the problem, a space and this text."
                ),
            ],
            None,
        ),
    ]


def evalplus_options() -> list[inspect.Parameter]:
    return [
        option(
            "datasets",
            Annotated[str, typer.Option("--datasets", help="Comma-separated: humaneval,mbpp.")],
            "humaneval,mbpp",
        ),
        option(
            "humaneval_file",
            Annotated[
                Path | None,
                typer.Option("--humaneval-file", help="Local HumanEvalPlus.jsonl (HUMANEVAL_OVERRIDE_PATH)."),
            ],
            None,
        ),
        option(
            "mbpp_file",
            Annotated[
                Path | None, typer.Option("--mbpp-file", help="Local MbppPlus.jsonl (MBPP_OVERRIDE_PATH).")
            ],
            None,
        ),
        option(
            "prompt_style",
            Annotated[
                str | None, typer.Option("--prompt-style", help="chat (evalplus's instruction) or base.")
            ],
            None,
        ),
        option("upstream_dir", UpstreamDir, None),
    ]
