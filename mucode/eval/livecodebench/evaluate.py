"""LiveCodeBench code generation: pass@1 and pass@k with LiveCodeBench's prompts and judging rules.

Judging, as LiveCodeBench's `lcb_runner/evaluation/testing_util.py` does it, but in mucode's sandbox
through the verifier:
- code is the last fenced block of the response (no block: `no_code`, a failure);
- LiveCodeBench's import header (`from typing import *`, `from collections import *`, …, and
  `sys.setrecursionlimit(50000)`) is put before the code, so starter-code annotations such as
  `List[int]` resolve as they do there;
- the sandbox program re-creates how LiveCodeBench's `run_test` runs the code (wrapped in a
  function for stdin problems, `SystemExit` as a normal end, patched stdin, int-to-str limit 50,000,
  a 6 s wall-clock alarm per test; the executor's `lcbrun`, called by `mucode.eval.livecodebench.driver`);
- stdin problems compare stdout with LiveCodeBench's rule (stripped lines, equal line counts, a
  line equal as text or as a sequence of decimals); functional problems call `func_name` (a
  method of `Solution` when the code contains `class Solution`) with each input line as a JSON
  argument and compare the return value with Python's `==` semantics (a top-level tuple counts as a
  list);
- a sample passes only if it passes every public and private test; 6 s per test, as there.

Deviations (tests in tests/eval/test_lcb_agreement.py): each test runs as a fresh process in the
sandbox (LiveCodeBench runs all tests of a sample in one process); LiveCodeBench's
`reliability_guard` is not reproduced; memory: 4 GiB of address space per test (LiveCodeBench sets
no limit), within the sandbox slot's memory.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any, Literal

from mucode.eval.core import (
    Collected,
    EngineSource,
    EvalProblem,
    ResponseSource,
    SamplesSource,
    default_summary,
    run_task,
)
from mucode.eval.extract import last_fenced_block
from mucode.eval.judge import Part, VerifierOptions, verifier_session
from mucode.eval.livecodebench.data import LCBProblem, load_livecodebench
from mucode.eval.livecodebench.driver import CALL_ENTRY, LCB_IMPORT_HEADER, call_driver, stdio_driver
from mucode.eval.livecodebench.prompts import build_prompt, prompt_style_name
from mucode.eval.protocols import LIVECODEBENCH_PROTOCOLS, Protocol

__all__ = ["LCB_IMPORT_HEADER", "LiveCodeBenchTask", "evaluate_livecodebench", "lcb_item"]


LCB_TIME_LIMIT_S = 6.0
"""LiveCodeBench's default per-test timeout."""
LCB_MEMORY_LIMIT_MB = 4096
"""Address space per test. LiveCodeBench sets none; 4 GiB (evalplus's default) lets what runs there
run here, within the sandbox slot's own memory."""


def lcb_tests(problem: LCBProblem) -> dict[str, Any]:
    """The item's `tests` for a problem: every public and private test (build it once per problem and
    share it between samples: the verifier client then sends it once per request)."""
    tests: dict[str, Any] = {
        "format": "call" if problem.is_functional else "stdio",
        "inputs": [t.input for t in problem.tests],
        "outputs": [t.output for t in problem.tests],
    }
    if problem.is_functional:
        tests["fn_name"] = CALL_ENTRY
    return tests


def lcb_item(
    problem: LCBProblem,
    code: str,
    *,
    time_limit_s: float = LCB_TIME_LIMIT_S,
    tests: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The verifier item that judges `code` on every test of `problem` as LiveCodeBench's grader does
    (`mucode.eval.livecodebench.driver`); `tests`: the problem's shared `lcb_tests`."""
    if problem.is_functional:
        program = call_driver(code, LCB_IMPORT_HEADER, problem.func_name or "", time_limit_s)
    else:
        program = stdio_driver(code, LCB_IMPORT_HEADER, time_limit_s)
    return {
        "program": "code",
        "response": program,
        "spec": {
            "tests": tests if tests is not None else lcb_tests(problem),
            "checker": "livecodebench",
            "time_limit_s": time_limit_s,
            "memory_limit_mb": LCB_MEMORY_LIMIT_MB,
            "extract": "none",
        },
    }


@dataclass
class LiveCodeBenchTask:
    """LiveCodeBench problems as a `BenchmarkTask` (breakdowns by difficulty and platform)."""

    lcb_problems: list[LCBProblem]
    prompt_style: str = "chat"
    time_limit_s: float = LCB_TIME_LIMIT_S
    sample_kind: Literal["response", "code"] = "response"
    """`response`: code is the last fenced block; `code`: the sample is the code (LiveCodeBench's code_list)."""
    name: str = "livecodebench"
    problems: list[EvalProblem] = field(init=False)

    def __post_init__(self) -> None:
        self._by_id = {p.question_id: p for p in self.lcb_problems}
        self._tests: dict[str, dict[str, Any]] = {}
        self.problems = [
            EvalProblem(
                p.question_id,
                build_prompt(p, self.prompt_style),
                {"difficulty": p.difficulty, "platform": p.platform},
            )
            for p in self.lcb_problems
        ]

    def fingerprint(self) -> dict[str, Any]:
        return {"prompt_style": self.prompt_style, "time_limit_s": self.time_limit_s}

    def code(self, response: str) -> str | None:
        """The code judged for a sample (None: no code)."""
        return response if self.sample_kind == "code" else last_fenced_block(response)

    def parts(self, problem_id: str, index: int, response: str) -> list[Part]:
        code = self.code(response)
        if code is None or not code.strip():
            return [Part(problem_id, index, "main", None, "no_code")]
        problem = self._by_id[problem_id]
        if problem_id not in self._tests:
            self._tests[problem_id] = lcb_tests(problem)
        return [
            Part(
                problem_id,
                index,
                "main",
                lcb_item(problem, code, time_limit_s=self.time_limit_s, tests=self._tests[problem_id]),
            )
        ]

    def summarize(
        self, responses: Mapping[str, list[str]], verdicts: dict[tuple[str, int, str], dict[str, Any]], n: int
    ) -> dict[str, dict[str, Any]]:
        return default_summary(self, responses, verdicts, n, breakdowns=("difficulty", "platform"))


def evaluate_livecodebench(
    source: ResponseSource | Any,
    *,
    tokenizer: Any = None,
    release: str = "release_latest",
    start_date: str | date | datetime | None = None,
    end_date: str | date | datetime | None = None,
    data_dir: str | Path | None = None,
    problems: Sequence[LCBProblem] | None = None,
    samples_per_problem: int | None = None,
    prompt_style: str | None = None,
    verifier: VerifierOptions | None = None,
    run_dir: str | Path | None = None,
    limit: int | None = None,
    progress: Callable[[str], None] | None = None,
    sample_kind: Literal["response", "code"] = "response",
    time_limit_s: float = LCB_TIME_LIMIT_S,
    collect: dict[str, Collected] | None = None,
    revision: str | None = None,
) -> dict[str, dict[str, Any]]:
    """LiveCodeBench report `{"livecodebench": {"pass@1": …, …, "by_difficulty": …, "by_platform": …}}`.

    `source`: an `EngineSource`, a rollout engine (then pass `tokenizer`), or a `SamplesSource`
    (question_id → responses). Problems come from `problems`, else from the release files in
    `data_dir`, else from the Hub. `samples_per_problem` and `prompt_style` None: the LiveCodeBench
    default protocol's (`mucode.eval.protocols.LIVECODEBENCH_PROTOCOLS`).
    """
    default = LIVECODEBENCH_PROTOCOLS[0]
    chosen = (
        list(problems)
        if problems is not None
        else load_livecodebench(
            release, source=data_dir, start_date=start_date, end_date=end_date, limit=limit, revision=revision
        )
    )
    if not chosen:
        raise ValueError(
            f"no LiveCodeBench problems in release {release} between {start_date} and {end_date}"
        )
    task = LiveCodeBenchTask(
        chosen,
        prompt_style=prompt_style_name(prompt_style or default.prompt),
        time_limit_s=time_limit_s,
        sample_kind=sample_kind,
    )
    if not isinstance(source, EngineSource | SamplesSource):
        source = EngineSource(source, tokenizer)
    with verifier_session(verifier, ["code"]) as session:
        return run_task(
            task,
            source,
            samples_per_problem or default.samples_for("livecodebench"),
            verifier=session,
            run_dir=run_dir,
            progress=progress,
            collect=collect,
        )


def evaluate_livecodebench_names(
    names: list[str],
    source: EngineSource,
    data_dir: Path | None,
    protocol: Protocol,
    n: int | None,
    **kw: Any,
) -> dict[str, Any]:
    """The benchmark registry's evaluator of LiveCodeBench names (`livecodebench[_<release>]`)."""
    local = None
    if data_dir is not None:
        local = next(
            (d for d in (data_dir / "livecodebench", data_dir) if (d / "test.jsonl").is_file()), None
        )
    report: dict[str, Any] = {}
    for name in names:
        release = name.removeprefix("livecodebench").removeprefix("_") or protocol.release or "release_latest"
        entries = evaluate_livecodebench(source, release=release, data_dir=local, prompt_style=protocol.prompt,
                                         samples_per_problem=n or protocol.samples_for(name), **kw)  # fmt: skip
        report[name] = next(iter(entries.values()))
    return report
