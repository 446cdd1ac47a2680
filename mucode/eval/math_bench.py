"""Math evaluation: MATH500, AIME24, AIME25, AMC23, AMC24; pass@1 and the five-benchmark average.

Each benchmark loads from a local directory (`data_dir`), else from the copies shipped with mucode
(`mucode.eval.data.MATH_DATA_DIR`: MATH500, AIME24, AIME25, AMC23; provenance in its README), else from
its Hugging Face Hub data set (AMC24, which has no shipped copy). Field names differ between sources
and are mapped per source below.
A response is scored by the verifier's `math` reward program (math-verify on the last `\\boxed{}`),
never by string comparison (AMC answers such as `27.0` must equal `27`).

pass@1 is the mean over all samples (by default the default protocol's count: 16 per problem for AIME,
4 for the others); pass@k
for larger k is reported as well. The average is the unweighted mean of the benchmarks' pass@1,
as in the μ-GRPO paper; it is marked partial when some benchmark could not be evaluated.

Sample ids (samples-file mode) are the data set's own ids: `unique_id` for MATH500 (e.g.
`test/precalculus/807.json`), `id` for the others; a source without ids (AIME25 and AMC24 on the
Hub) uses the row's position, 0-based, in the order loaded.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mucode.data.files import download_dataset_file, list_dataset_files, read_rows, select_split_files
from mucode.eval.core import (
    EngineSource,
    EvalProblem,
    ResponseSource,
    SamplesSource,
    default_summary,
    run_task,
)
from mucode.eval.data import MATH_DATA_DIR
from mucode.eval.judge import Part, VerifierOptions, verifier_session
from mucode.eval.protocols import MATH_PROTOCOLS, MathTemplate, Protocol, math_template

__all__ = [
    "MATH_BENCHMARKS",
    "MATH_INSTRUCTION",
    "FieldMap",
    "MathBenchmark",
    "MathTask",
    "evaluate_math",
    "load_math_problems",
]

MATH_INSTRUCTION = "Let's think step by step and output the final answer within \\boxed{}."
SHIPPED_MATH_REVISION = "mlfoundations/evalchemy@6ed674159b37f740f2353a86f596f49f6ac13c19"
"""Where the copies in `eval/math` come from (see its README)."""


@dataclass(frozen=True)
class FieldMap:
    """Where a source keeps the problem, the answer and the id (None: the row's position)."""

    problem: str
    answer: str
    id: str | None


@dataclass(frozen=True)
class MathBenchmark:
    name: str
    hub_id: str
    hub_split: str
    hub_fields: FieldMap
    local_file: str | None
    """File name in a data directory (the layout of `eval/math`); None: no local copy known."""
    local_fields: FieldMap | None
    hub_files: tuple[str, ...] = ()
    """Hub files to read (in order) when the split is not named by the file names; empty: by split."""


MATH_BENCHMARKS: dict[str, MathBenchmark] = {
    b.name: b
    for b in [
        MathBenchmark(
            "math500",
            "HuggingFaceH4/MATH-500",
            "test",
            FieldMap("problem", "answer", "unique_id"),
            "math500.jsonl",
            FieldMap("problem", "answer", "unique_id"),
        ),
        MathBenchmark(
            "aime24",
            "HuggingFaceH4/aime_2024",
            "train",
            FieldMap("problem", "answer", "id"),
            "aime24.json",
            FieldMap("problem", "expected_answer", "id"),
        ),
        MathBenchmark(
            "aime25",
            "opencompass/AIME2025",
            "test",
            FieldMap("question", "answer", None),
            "aime25.json",
            FieldMap("problem", "answer", "id"),
            hub_files=("aime2025-I.jsonl", "aime2025-II.jsonl"),
        ),
        MathBenchmark(
            "amc23",
            "math-ai/amc23",
            "test",
            FieldMap("question", "answer", "id"),
            "amc23.json",
            FieldMap("question", "answer", "id"),
        ),
        MathBenchmark(
            "amc24",
            "rawsh/2024_AMC12",
            "train",
            FieldMap("problem", "answer", None),
            None,
            FieldMap("problem", "answer", None),
        ),
    ]
}
"""The five benchmarks of the μ-GRPO paper's math average, by name."""


@dataclass(frozen=True)
class MathProblem:
    id: str
    problem: str
    answer: str | int | float


def _benchmark(name: str) -> MathBenchmark:
    try:
        return MATH_BENCHMARKS[name]
    except KeyError:
        raise ValueError(f"unknown math benchmark {name!r}; valid: {', '.join(MATH_BENCHMARKS)}") from None


def _rows_to_problems(rows: Sequence[dict[str, Any]], fields: FieldMap, where: str) -> list[MathProblem]:
    problems = []
    for position, row in enumerate(rows):
        missing = [f for f in (fields.problem, fields.answer) if f not in row]
        if missing:
            raise ValueError(f"{where}: row {position} lacks {missing}; it has {sorted(row)}")
        answer = row[fields.answer]
        ident = row.get(fields.id) if fields.id else None
        problems.append(
            MathProblem(
                id=str(ident) if ident is not None else str(position),
                problem=str(row[fields.problem]),
                answer=answer if isinstance(answer, int | float) else str(answer),
            )
        )
    ids = [p.id for p in problems]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{where}: ids are not unique")
    return problems


def _local_file(bench: MathBenchmark, data_dir: Path) -> Path | None:
    names = [bench.local_file] if bench.local_file else []
    names += [f"{bench.name}{suffix}" for suffix in (".jsonl", ".json", ".parquet")]
    return next((data_dir / n for n in names if (data_dir / n).is_file()), None)


def _hub_rows(bench: MathBenchmark, revision: str | None) -> list[dict[str, Any]]:
    if bench.hub_files:
        names = list(bench.hub_files)
    else:
        names = select_split_files(list_dataset_files(bench.hub_id, revision=revision), bench.hub_split)
    rows: list[dict[str, Any]] = []
    for name in names:
        rows.extend(read_rows(download_dataset_file(bench.hub_id, name, revision=revision)))
    return rows


def math_data_file(name: str, data_dir: str | Path | None = None) -> Path | None:
    """The local file a benchmark is read from: `data_dir` first, then the copy shipped with mucode;
    None when neither holds it (then it comes from the Hub)."""
    bench = _benchmark(name)
    dirs = ([Path(data_dir)] if data_dir is not None else []) + [MATH_DATA_DIR]
    return next((p for p in (_local_file(bench, d) for d in dirs) if p is not None), None)


def math_data_source(name: str, data_dir: str | Path | None = None, revision: str | None = None) -> str:
    """Where a benchmark's problems come from, for the report (`data` field)."""
    path = math_data_file(name, data_dir)
    if path is None:
        return f"hf://datasets/{_benchmark(name).hub_id}@{revision or 'main'}"
    if path.parent == MATH_DATA_DIR:
        return f"eval/math/{path.name} ({SHIPPED_MATH_REVISION})"
    return str(path)


def load_math_problems(
    name: str, *, data_dir: str | Path | None = None, revision: str | None = None
) -> list[MathProblem]:
    """A benchmark's problems from `data_dir`, else from the copy shipped with mucode, else the Hub."""

    bench = _benchmark(name)
    path = math_data_file(name, data_dir)
    if path is not None:
        fields = bench.local_fields if path.name == bench.local_file else bench.hub_fields
        return _rows_to_problems(read_rows(path), fields or bench.hub_fields, str(path))
    return _rows_to_problems(_hub_rows(bench, revision), bench.hub_fields, f"Hub {bench.hub_id}")


def instruction_template(instruction: str) -> MathTemplate:
    """The template of an instruction appended after the problem and a space (empty: the problem alone)."""
    return MathTemplate("", f" {instruction}" if instruction else "", strip_problem=bool(instruction))


@dataclass
class MathTask:
    """One math benchmark as a `BenchmarkTask`."""

    name: str
    math_problems: list[MathProblem]
    template: MathTemplate = field(default_factory=lambda: instruction_template(MATH_INSTRUCTION))
    system_prompt: str | None = None
    problems: list[EvalProblem] = field(init=False)

    def __post_init__(self) -> None:
        self._answers = {p.id: p.answer for p in self.math_problems}
        self.problems = [EvalProblem(p.id, self._messages(p.problem)) for p in self.math_problems]

    def _messages(self, problem: str) -> list[dict[str, str]]:
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return [*system, {"role": "user", "content": self.template.render(problem)}]

    def fingerprint(self) -> dict[str, Any]:
        return {"template": dataclasses.asdict(self.template), "system_prompt": self.system_prompt}

    def parts(self, problem_id: str, index: int, response: str) -> list[Part]:
        item = {"program": "math", "response": response, "spec": {"answer": self._answers[problem_id]}}
        return [Part(problem_id, index, "main", item)]

    def summarize(
        self, responses: Mapping[str, list[str]], verdicts: dict[tuple[str, int, str], dict[str, Any]], n: int
    ) -> dict[str, dict[str, Any]]:
        return default_summary(self, responses, verdicts, n)


def average_entry(report: Mapping[str, Mapping[str, Any]], names: Sequence[str]) -> dict[str, Any]:
    """The unweighted mean pass@1 of the named benchmarks present in `report`."""
    present = [n for n in names if n in report and "pass@1" in report[n]]
    if not present:
        return {}
    entry: dict[str, Any] = {
        "pass@1": sum(report[n]["pass@1"] for n in present) / len(present),
        "benchmarks": present,
    }
    if len(present) < len(names):
        entry["partial"] = True
        entry["missing"] = [n for n in names if n not in present]
    return entry


def evaluate_math(
    source: ResponseSource | Any,
    benchmarks: Sequence[str] = tuple(MATH_BENCHMARKS),
    *,
    tokenizer: Any = None,
    data_dir: str | Path | None = None,
    samples_per_problem: int | Mapping[str, int] | None = None,
    verifier: VerifierOptions | None = None,
    run_dir: str | Path | None = None,
    instruction: str | None = None,
    template: MathTemplate | str | None = None,
    system_prompt: str | None = None,
    samples: Mapping[str, Mapping[str, list[str]]] | None = None,
    revision: str | None = None,
    limit: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Evaluate math benchmarks; the report is keyed by benchmark name, plus `average` for several.

    `source` is an `EngineSource`, a rollout engine (then pass `tokenizer`), or None with
    `samples={benchmark: {id: [responses]}}`. `samples_per_problem`: one number for all, a dict per
    benchmark, or None for the math default protocol's (`mucode.eval.protocols.MATH_PROTOCOLS`: AIME 16, others 4).
    A benchmark whose data cannot be loaded is skipped with a warning and recorded under `skipped`;
    the average is then marked partial. `limit` keeps the first problems of each benchmark (smoke
    runs; not comparable with papers). The user turn is `template` (a `MathTemplate` or a name in
    `mucode.eval.protocols.MATH_TEMPLATES`) applied to the problem, else the problem, a space and
    `instruction`, else the default protocol's template.
    """
    default = MATH_PROTOCOLS[0]
    if template is None:
        template = instruction_template(instruction) if instruction is not None else default.prompt
    if isinstance(template, str):
        template = math_template(template)
    report: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    with verifier_session(verifier, ["math"]) as session:
        for name in benchmarks:
            _benchmark(name)  # an unknown name raises, listing the valid ones
            if isinstance(samples_per_problem, Mapping):
                n = samples_per_problem.get(name) or default.samples_for(name)
            else:
                n = samples_per_problem or default.samples_for(name)
            if samples is not None and name not in samples:
                continue
            try:
                problems = load_math_problems(name, data_dir=data_dir, revision=revision)
            except Exception as err:  # offline Hub, missing file: skip this benchmark, keep the others
                warnings.warn(f"math benchmark {name} skipped: {err}", stacklevel=2)
                skipped[name] = str(err)
                continue
            task = MathTask(name, problems[:limit], template=template, system_prompt=system_prompt)
            this_source: ResponseSource
            if samples is not None:
                this_source = SamplesSource(samples[name])
            elif isinstance(source, EngineSource | SamplesSource):
                this_source = source
            else:
                this_source = EngineSource(source, tokenizer)
            report.update(
                run_task(task, this_source, n, verifier=session, run_dir=run_dir, progress=progress)
            )
    if len(benchmarks) > 1:
        average = average_entry(report, benchmarks)
        if average:
            report["average"] = average
    if skipped:
        report["skipped"] = skipped
    return report


def evaluate_math_names(
    names: list[str],
    source: EngineSource,
    data_dir: Path | None,
    protocol: Protocol,
    n: int | None,
    **kw: Any,
) -> dict[str, Any]:
    """The benchmark registry's evaluator of math names (each benchmark at the protocol's sample count)."""
    counts = {b: n or protocol.samples_for(b) for b in names}
    return evaluate_math(source, names, data_dir=data_dir, samples_per_problem=counts, template=protocol.prompt,
                         **kw)  # fmt: skip
