"""HumanEval+ and MBPP+ with evalplus's data, ground truth and comparison rules, judged in mucode's sandbox.

Data: evalplus's own loaders (`get_human_eval_plus`, `get_mbpp_plus`, including MBPP+'s input
deserialization), offline through evalplus's override variables `HUMANEVAL_OVERRIDE_PATH` /
`MBPP_OVERRIDE_PATH` (a local `HumanEvalPlus.jsonl` / `MbppPlus.jsonl`); without them evalplus
downloads its release into its cache. Ground truth: evalplus's `get_groundtruth`, which runs the
data set's canonical solutions in this process (trusted code that ships with the data) and caches
outputs and timings in evalplus's cache directory.

Prompts (as evalplus's `codegen`): for chat models the task prompt in a fenced block after
evalplus's instruction, with the assistant turn opened by its response prefix and a ```python
fence (`chat`); for base models the task prompt itself, continued by the model (`base`).
Code: evalplus's `sanitize` (the entry point and what it needs) of the response (`chat`) or of
prompt + response (`base`). A samples file may instead give evalplus's own `solution` (used as is)
or `completion` (appended to the prompt), or mix the two line by line, as evalplus reads them.

Judging: one sandboxed assert job per sample and test set (`mucode.eval.evalplus.driver`): the sample runs in
one process, evalplus's comparison rules and the ground truth in the sandbox's test harness, a
process of its own that calls the sample through a pipe with plain data. Base tests decide
`humaneval`/`mbpp`; base and plus tests both passing decide `humaneval+`/`mbpp+`, as in evalplus.
Per-input time limits are evalplus's max(1 s, 4 × ground-truth time), enforced (wall clock) by the
harness; the whole run gets evalplus's per-task budget, min(60 s, their sum) + 1 s, also enforced by
the harness. The item's sandbox limit (CPU seconds) is that budget plus 2 s to start, never above the
code program's cap (`mucode.rewards.code.MAX_TIME_LIMIT_S`, 60 s): a HumanEval+ task with 1,000
plus inputs sums to over 1,000 s of per-input limits, and gets a 61 s budget inside a 60 s CPU cap.
A task's test data (inputs, ground truth, limits) is in the item's test code, the same for every
sample of the task.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from mucode.data.files import json_lines
from mucode.eval.core import (
    Collected,
    EngineSource,
    EvalProblem,
    ResponseSource,
    SamplesSource,
    outcomes_for_part,
    run_task,
)
from mucode.eval.evalplus.driver import build_program, build_tests
from mucode.eval.judge import Part, VerifierOptions, verifier_session
from mucode.eval.protocols import EVALPLUS_PROTOCOLS, Protocol
from mucode.eval.report import summarize
from mucode.rewards.code import MAX_TIME_LIMIT_S

__all__ = [
    "EVALPLUS_DATASETS",
    "EvalPlusTask",
    "evalplus_hash",
    "evaluate_evalplus",
    "load_evalplus",
    "read_evalplus_samples",
]

Dataset = Literal["humaneval", "mbpp"]
EVALPLUS_DATASETS: dict[str, tuple[str, str]] = {
    "humaneval": ("evalplus.data.humaneval", "HUMANEVAL_OVERRIDE_PATH"),
    "mbpp": ("evalplus.data.mbpp", "MBPP_OVERRIDE_PATH"),
}
"""Data set → (evalplus module, its override variable)."""

INSTRUCTION_PREFIX = "Please provide a self-contained Python script that solves the following problem in a markdown code block:"  # noqa: E501
RESPONSE_PREFIX = "Below is a Python script with a self-contained function that solves the problem and passes corresponding tests:"  # noqa: E501
DEFAULT_MIN_TIME_LIMIT = 1.0
DEFAULT_GT_TIME_LIMIT_FACTOR = 4.0
EVALPLUS_TASK_TIMEOUT_S = 60.0
"""evalplus's per-task cap (`EVALPLUS_TIMEOUT_PER_TASK`), before its extra second."""
STARTUP_S = 2.0
"""Sandbox time allowed beyond the driver's budget (interpreter start, unpickling the payload)."""
EVALPLUS_MEMORY_LIMIT_MB = 4096
"""evalplus's address-space limit (`EVALPLUS_MAX_MEMORY_BYTES`, 4 GiB by default); None: the verifier's."""
EVALPLUS_BATCH_SIZE = 8
"""Items per verifier request (the client also cuts requests by bytes)."""


def task_time_limits(per_input_s: list[float]) -> tuple[float, float]:
    """(driver budget, sandbox limit) in seconds for a test set with these per-input limits.

    The budget is evalplus's per-task timeout, min(60, sum) + 1; the sandbox limit adds the start-up
    allowance and never exceeds the code program's cap, which the verifier enforces (a larger value
    is a rejected request, not a verdict).
    """
    budget = min(EVALPLUS_TASK_TIMEOUT_S, sum(per_input_s)) + 1.0
    return budget, min(MAX_TIME_LIMIT_S, budget + STARTUP_S)


def _dataset(name: str) -> tuple[str, str]:
    try:
        return EVALPLUS_DATASETS[name]
    except KeyError:
        raise ValueError(
            f"unknown evalplus data set {name!r}; valid: {', '.join(EVALPLUS_DATASETS)}"
        ) from None


def _evalplus_module(dataset: str, override_path: str | Path | None) -> Any:
    """evalplus's data module for `dataset`, reading `override_path` when given.

    evalplus 0.3.1 reads its override variable once, when the module is imported: the variable is
    set in this process's environment and the module reloaded when it was imported with another
    value. Drop the reload once evalplus reads the variable per call.
    """
    module_name, variable = _dataset(dataset)
    if override_path is not None:
        resolved = Path(override_path).resolve()
        if not resolved.is_file():
            raise FileNotFoundError(f"{override_path}: no such evalplus data file")
        os.environ[variable] = str(resolved)
    wanted = os.environ.get(variable)
    module = importlib.import_module(module_name)
    if getattr(module, variable) != wanted:  # the module constant has the variable's name
        module = importlib.reload(module)
    return module


def load_evalplus(
    dataset: str, *, override_path: str | Path | None = None, version: str = "default"
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """(problems, ground truth) through evalplus: its loader and its `get_groundtruth`."""
    module = _evalplus_module(dataset, override_path)
    from evalplus.eval._special_oracle import MBPP_OUTPUT_NOT_NONE_TASKS  # lazy: evalplus
    from evalplus.evaluate import get_groundtruth  # lazy: evalplus

    with contextlib.redirect_stdout(sys.stderr):  # evalplus prints progress on stdout
        if dataset == "humaneval":
            problems = module.get_human_eval_plus(version=version)
            digest = module.get_human_eval_plus_hash(version=version)
            expected = get_groundtruth(problems, digest, [])
        else:
            problems = module.get_mbpp_plus(version=version)
            digest = module.get_mbpp_plus_hash(version=version)
            expected = get_groundtruth(problems, digest, MBPP_OUTPUT_NOT_NONE_TASKS)
    return problems, expected


def evalplus_hash(dataset: str, *, override_path: str | Path | None = None, version: str = "default") -> str:
    """evalplus's hash of the data set release (the `hash` of its eval_results files)."""
    module = _evalplus_module(dataset, override_path)
    get = module.get_human_eval_plus_hash if dataset == "humaneval" else module.get_mbpp_plus_hash
    return str(get(version=version))


def _chat_prompt(task_prompt: str) -> list[dict[str, str]]:
    user = f"{INSTRUCTION_PREFIX}\n```\n{task_prompt.strip()}\n```\n"
    return [
        {"role": "user", "content": user},
        {"role": "assistant", "content": f"{RESPONSE_PREFIX}\n```python\n"},
    ]


SampleKind = Literal["response", "solution", "completion"]


@dataclass
class EvalPlusTask:
    """One evalplus data set as a `BenchmarkTask` with two parts per sample (base, plus)."""

    dataset: str
    evalplus_problems: dict[str, dict[str, Any]]
    expected: dict[str, dict[str, Any]]
    prompt_style: str = "chat"
    sample_kind: SampleKind = "response"
    min_time_limit: float = DEFAULT_MIN_TIME_LIMIT
    gt_time_limit_factor: float = DEFAULT_GT_TIME_LIMIT_FACTOR
    memory_limit_mb: int | None = EVALPLUS_MEMORY_LIMIT_MB
    problems: list[EvalProblem] = field(init=False)

    def __post_init__(self) -> None:
        if self.prompt_style not in ("chat", "base"):
            raise ValueError(f"unknown prompt style {self.prompt_style!r}; valid: chat, base")
        self.name = self.dataset
        self._tests_cache: dict[tuple[str, str], tuple[dict[str, Any], float]] = {}
        self.problems = [
            EvalProblem(
                tid, _chat_prompt(p["prompt"]) if self.prompt_style == "chat" else p["prompt"].strip() + "\n"
            )
            for tid, p in self.evalplus_problems.items()
        ]

    def fingerprint(self) -> dict[str, Any]:
        return {"prompt_style": self.prompt_style, "sample_kind": self.sample_kind}

    def solution(self, problem_id: str, response: str) -> str:
        """The code evalplus would evaluate for this response."""
        problem = self.evalplus_problems[problem_id]
        if self.sample_kind == "solution":
            return response
        if self.sample_kind == "completion":
            return problem["prompt"] + response
        from evalplus.sanitize import sanitize  # lazy: evalplus

        text = problem["prompt"].strip() + "\n" + response if self.prompt_style == "base" else response
        return sanitize(text, entrypoint=problem["entry_point"])

    def _tests(self, problem_id: str, which: str) -> tuple[dict[str, Any], float]:
        """The assert test (evalplus's rules and the task's data, run by the sandbox's harness) of
        one task's test set and its sandbox limit; built once and shared by every sample's item."""
        key = (problem_id, which)
        if key not in self._tests_cache:
            problem, truth = self.evalplus_problems[problem_id], self.expected[problem_id]
            times = [max(self.min_time_limit, self.gt_time_limit_factor * t) for t in truth[f"{which}_time"]]
            budget, limit = task_time_limits(times)
            code = build_tests(
                entry_point=problem["entry_point"],
                dataset=self.dataset,
                inputs=problem[f"{which}_input"],
                expected=truth[which],
                atol=problem["atol"],
                time_limits=times,
                budget_s=budget,
            )
            tests = {"format": "assert", "assert_code": code, "entry_point": problem["entry_point"]}
            self._tests_cache[key] = (tests, limit)
        return self._tests_cache[key]

    def _item(self, problem_id: str, code: str, which: str) -> dict[str, Any]:
        tests, limit = self._tests(problem_id, which)
        spec: dict[str, Any] = {
            "tests": tests,
            "checker": "livecodebench",
            "time_limit_s": limit,
            "extract": "none",
        }
        if self.memory_limit_mb is not None:
            spec["memory_limit_mb"] = self.memory_limit_mb
        entry = self.evalplus_problems[problem_id]["entry_point"]
        return {"program": "code", "response": build_program(code, entry), "spec": spec}

    def parts(self, problem_id: str, index: int, response: str) -> list[Part]:
        code = self.solution(problem_id, response)
        if not code.strip():
            return [Part(problem_id, index, w, None, "no_code") for w in ("base", "plus")]
        return [Part(problem_id, index, w, self._item(problem_id, code, w)) for w in ("base", "plus")]

    def summarize(
        self, responses: Mapping[str, list[str]], verdicts: dict[tuple[str, int, str], dict[str, Any]], n: int
    ) -> dict[str, dict[str, Any]]:
        base = outcomes_for_part(self.problems, responses, verdicts, "base")
        plus = outcomes_for_part(self.problems, responses, verdicts, "plus")
        for b, p in zip(
            base, plus, strict=True
        ):  # plus counts only when the base tests pass too, as in evalplus
            p.statuses = [
                ps if bs == "correct" else bs for bs, ps in zip(b.statuses, p.statuses, strict=True)
            ]
        return {self.dataset: summarize(base, n), f"{self.dataset}+": summarize(plus, n)}


def _read_samples_dir(root: Path) -> tuple[dict[str, list[str]], SampleKind]:
    """evalplus's folder layout: one sub-folder per task (`HumanEval_0`), complete solutions `0.py`, `1.py`, …"""
    samples: dict[str, list[str]] = {}
    for task_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        files = sorted(task_dir.glob("*.py"), key=lambda f: (len(f.stem), f.stem))
        if files:
            samples[task_dir.name.replace("_", "/")] = [f.read_text(encoding="utf-8") for f in files]
    if not samples:
        raise ValueError(f"{root}: no <task>/<n>.py solutions (evalplus's folder layout) in this directory")
    return samples, "solution"


def evalplus_prompts(dataset: str, *, override_path: str | Path | None = None) -> dict[str, str]:
    """The prompt of each task (what evalplus puts before a `completion`), without the ground truth."""
    module = _evalplus_module(dataset, override_path)
    with contextlib.redirect_stdout(sys.stderr):  # evalplus prints progress on stdout
        problems = module.get_human_eval_plus() if dataset == "humaneval" else module.get_mbpp_plus()
    return {tid: str(p["prompt"]) for tid, p in problems.items()}


def read_evalplus_samples(
    path: str | Path, prompts: Callable[[], Mapping[str, str]] | None = None
) -> tuple[dict[str, list[str]], SampleKind]:
    """Samples per task_id as evalplus reads them: JSON Lines with `task_id` and one of `solution`,
    `completion` (or mucode's `response`), or a folder of `<task>/<n>.py` complete solutions.

    evalplus decides per line (`solution` as is, else prompt + `completion`), so a file may mix the
    two: with `prompts` (task id → prompt, called only then) its completions become solutions. mucode's
    `response` (sanitized) cannot be mixed with either."""
    if Path(path).is_dir():
        return _read_samples_dir(Path(path))
    samples: dict[str, list[str]] = {}
    kinds: set[str] = set()
    rows: list[tuple[str, str, str]] = []

    for number, row in json_lines(path):
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{number}: expected a JSON object with task_id and solution/completion")
        kind = next((k for k in ("response", "solution", "completion") if isinstance(row.get(k), str)), None)
        key = "task_id" if "task_id" in row else "id"
        if kind is None or key not in row:
            raise ValueError(f"{path}:{number}: expected task_id and one of response/solution/completion")
        kinds.add(kind)
        rows.append((str(row[key]), kind, row[kind]))
    if kinds == {"solution", "completion"} and prompts is not None:
        known = prompts()
        for task_id, kind, text in rows:
            if kind == "completion" and task_id not in known:
                raise ValueError(
                    f"{path}: task {task_id!r} is not in the data set (its completion needs its prompt)"
                )
            samples.setdefault(task_id, []).append(known[task_id] + text if kind == "completion" else text)
        return samples, "solution"
    for task_id, _, text in rows:
        samples.setdefault(task_id, []).append(text)
    if len(kinds) != 1:
        raise ValueError(
            f"{path}: mixes sample kinds {sorted(kinds)}; use one of response, solution, completion"
        )
    return samples, cast(SampleKind, kinds.pop())


def evaluate_evalplus(
    source: ResponseSource | Any,
    datasets: tuple[str, ...] = ("humaneval", "mbpp"),
    *,
    tokenizer: Any = None,
    override_paths: Mapping[str, str | Path] | None = None,
    samples_per_problem: int | None = None,
    prompt_style: str | None = None,
    samples: Mapping[str, tuple[Mapping[str, list[str]], SampleKind]] | None = None,
    verifier: VerifierOptions | None = None,
    run_dir: str | Path | None = None,
    memory_limit_mb: int | None = EVALPLUS_MEMORY_LIMIT_MB,
    limit: int | None = None,
    progress: Callable[[str], None] | None = None,
    collect: dict[str, Collected] | None = None,
) -> dict[str, dict[str, Any]]:
    """Report entries `humaneval`, `humaneval+`, `mbpp`, `mbpp+` (those of the chosen data sets).

    `samples_per_problem` and `prompt_style` None: the evalplus default protocol's
    (`mucode.eval.protocols.EVALPLUS_PROTOCOLS`). `collect` receives each data set's task, responses and verdicts (for
    `write_evalplus_results`).
    """
    default = EVALPLUS_PROTOCOLS[0]
    samples_per_problem = samples_per_problem or default.samples_for(datasets[0] if datasets else "*")
    prompt_style = prompt_style or default.prompt
    report: dict[str, dict[str, Any]] = {}
    with verifier_session(verifier, ["code"]) as session:
        # an item carries all inputs and expected outputs of a task (up to megabytes for HumanEval+)
        small = dataclasses.replace(
            session.connection, batch_size=min(session.connection.batch_size, EVALPLUS_BATCH_SIZE)
        )
        session = dataclasses.replace(session, connection=small)
        for dataset in datasets:
            report.update(
                _evaluate_one(
                    dataset,
                    source,
                    tokenizer,
                    override_paths,
                    samples_per_problem,
                    prompt_style,
                    samples,
                    session,
                    run_dir,
                    memory_limit_mb,
                    limit,
                    progress,
                    collect,
                )
            )
    return report


def _evaluate_one(
    dataset: str,
    source: Any,
    tokenizer: Any,
    override_paths: Mapping[str, str | Path] | None,
    samples_per_problem: int,
    prompt_style: str,
    samples: Mapping[str, tuple[Mapping[str, list[str]], SampleKind]] | None,
    verifier: VerifierOptions,
    run_dir: str | Path | None,
    memory_limit_mb: int | None,
    limit: int | None,
    progress: Callable[[str], None] | None,
    collect: dict[str, Collected] | None = None,
) -> dict[str, dict[str, Any]]:
    if samples is not None and dataset not in samples:
        return {}
    problems, expected = load_evalplus(dataset, override_path=(override_paths or {}).get(dataset))
    if limit is not None:
        problems = dict(list(problems.items())[:limit])
    kind: SampleKind = "response"
    this_source: ResponseSource
    if samples is not None:
        file_samples, kind = samples[dataset]
        this_source = SamplesSource(file_samples)
    elif isinstance(source, EngineSource | SamplesSource):
        this_source = source
    else:
        this_source = EngineSource(source, tokenizer)
    task = EvalPlusTask(
        dataset,
        problems,
        expected,
        prompt_style=prompt_style,
        sample_kind=kind,
        memory_limit_mb=memory_limit_mb,
    )
    return run_task(
        task,
        this_source,
        samples_per_problem,
        verifier=verifier,
        run_dir=run_dir,
        progress=progress,
        collect=collect,
    )


def evaluate_evalplus_names(
    names: list[str],
    source: EngineSource,
    data_dir: Path | None,
    protocol: Protocol,
    n: int | None,
    **kw: Any,
) -> dict[str, Any]:
    """The benchmark registry's evaluator of evalplus names (`humaneval`, `mbpp`)."""
    files = {"humaneval": "HumanEvalPlus.jsonl", "mbpp": "MbppPlus.jsonl"}
    overrides = {
        d: data_dir / f for d, f in files.items() if data_dir is not None and (data_dir / f).is_file()
    }
    counts = {n or protocol.samples_for(name) for name in names}
    if len(counts) != 1:
        raise ValueError(f"evalplus data sets {names} need one sample count; pass samples_per_problem")
    return evaluate_evalplus(source, tuple(names), override_paths=overrides, samples_per_problem=counts.pop(),
                             prompt_style=protocol.prompt, **kw)  # fmt: skip
