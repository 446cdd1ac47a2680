"""Row schemas: how one row of a source becomes a ``TaskRecord`` (or a reason to drop it).

Registered schemas (``schema=`` of ``load_tasks``; ``"auto"`` picks one from the first row):

- ``code_contests``: deepmind/code_contests. Public, private and generated tests all become
  stdio tests (a program is correct only if it passes all of them); the time limit
  (``Duration{seconds, nanos}``) and ``memory_limit_bytes`` are kept. Dropped, with a count per
  reason: problems whose Python solutions are all Python 2 (language id 1), that read or write
  files (``input_file``/``output_file`` set, or ``input.txt``/``output.txt`` in the statement),
  that are interactive, that have no tests, and (``drop_multiple_answers=True``, the default)
  whose statement accepts any of several answers and that the checker table (``checkers=``,
  ``mucode.data.checker_table``) gives no checker -- the token checker would score a correct
  program 0. A problem the table names (by ``name`` or ``cf_contest_id/cf_index``) is judged by
  that checker, whatever its statement says. The detection of the last three reads the statement
  and is a heuristic. The
  problem's correct solutions in Python 3, C++ and Java (``solutions``, language ids 3, 2, 4) are
  kept as reference programs: ``meta["references"]``, a list of ``{"language": "python"|"cpp"|"java",
  "program": ...}``, at most ``max_references`` per language (2), to check the tests with
  (``reference_items``) in the sandbox's languages.
- ``math``: DeepScaleR-style rows (``problem``/``question`` and ``answer``/``expected_answer``).
- ``verl``: verl's RL Parquet schema as-is (``data_source``, ``prompt`` = chat messages,
  ``ability``, ``reward_model{ground_truth, style}``, ``extra_info``). The prompt is used as it is
  (verl data sets carry their instruction); ``instruction=`` appends one if given. Code ground
  truth is verl/PRIME's JSON ``{"inputs", "outputs", "fn_name"?}``.
- ``mucode``: rows already in mucode's shape (``spec`` plus ``messages`` or ``prompt``).
- ``trl``: TRL's shape: ``prompt`` (text, or chat messages) and ``solution`` (a math answer) or
  ``tests`` (a code spec ``{"tests": ...}`` or verl's ``{"inputs", "outputs", "fn_name"?}``, dict or
  JSON), decided per row.

One file may mix math and code with ``verl`` (per row: ``extra_info.mucode`` as written by ``mucode
verl-config``, else ``ability``), ``mucode`` (``program``) and ``trl`` (``tests``); ``task`` is the
default where a row does not say. ``columns=`` renames a source's columns first.

The default code instruction is mucode's own: the paper does not print its code prompt. The math
instruction is the paper's (and DeepScaleR's/verl's) ``Let's think step by step ...``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mucode.data.checker_table import CheckerTable, checker_for
from mucode.data.types import TaskKind, TaskRecord
from mucode.registry import Registry

MATH_INSTRUCTION = "Let's think step by step and output the final answer within \\boxed{}."
CODE_INSTRUCTION = (
    "Solve the problem above in Python 3. The program reads the input from standard input and "
    "writes the answer to standard output. Put the complete program in one ```python code block "
    "at the end of your response."
)
DEFAULT_INSTRUCTIONS: dict[str, str] = {"math": MATH_INSTRUCTION, "code": CODE_INSTRUCTION}

# code_contests language ids.
PYTHON2, CPP, PYTHON3, JAVA = 1, 2, 3, 4
REFERENCE_LANGUAGES = {PYTHON3: "python", CPP: "cpp", JAVA: "java"}
"""code_contests language id -> the sandbox language its reference solutions run as."""


@dataclass(frozen=True)
class RowOptions:
    """Options every schema receives (from ``load_tasks`` keywords)."""

    task: TaskKind
    instruction: str | None
    """None: the schema's default (for ``verl`` and ``mucode``: leave the prompt as it is)."""
    system_prompt: str | None = None
    max_tests: int | None = None
    """code: keep at most this many tests per problem (public first). None keeps all."""
    drop_multiple_answers: bool = True
    require_python3_solution: bool = False
    """code_contests: also drop problems without any Python 3 reference solution."""
    source_name: str = ""
    checkers: CheckerTable | None = None
    """code_contests: checkers by problem (``mucode.data.checker_table``)."""
    max_references: int = 2
    """code_contests: reference solutions kept per language (``meta["references"]``)."""


@dataclass(frozen=True)
class Dropped:
    """A row the schema refuses, and why (the reasons are counted and logged)."""

    reason: str


RowMapper = Callable[[dict[str, Any], int, RowOptions], "TaskRecord | Dropped"]
SCHEMAS: Registry[RowMapper] = Registry("data schema")
"""Row mappers by name (``data.format`` is validated against it, plus ``auto``)."""


def register_schema(name: str) -> Callable[[RowMapper], RowMapper]:
    """Register a row mapper under ``name``; duplicate names raise DuplicateNameError."""

    def decorate(fn: RowMapper) -> RowMapper:
        return SCHEMAS.register(name, fn)

    return decorate


def get_schema(name: str) -> RowMapper:
    """The row mapper ``name``; raises UnknownNameError (a ValueError) listing the valid names."""
    return SCHEMAS.get(name)


def detect_schema(row: dict[str, Any], task: TaskKind) -> str:
    """Pick a schema from one row's keys."""
    if "reward_model" in row and "prompt" in row:
        return "verl"
    if "spec" in row and ("messages" in row or "prompt" in row):
        return "mucode"
    if "public_tests" in row or "private_tests" in row:
        return "code_contests"
    if "prompt" in row and ("solution" in row or "tests" in row):
        return "trl"
    if task == "math" and any(k in row for k in _MATH_PROBLEM_KEYS):
        return "math"
    raise ValueError(
        f"cannot tell the schema of rows with keys {sorted(row)} for task {task!r}; "
        f"pass schema=<one of {', '.join(SCHEMAS.names())}>"
    )


def _messages(content: str, options: RowOptions) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": options.system_prompt}] if options.system_prompt else []
    return [*messages, {"role": "user", "content": content}]


def _with_instruction(text: str, instruction: str | None, sep: str) -> str:
    return f"{text.rstrip()}{sep}{instruction}" if instruction else text


# ----------------------------------------------------------------------------- code_contests

_FILE_IO = re.compile(r"\b(input|output)\.txt\b", re.IGNORECASE)
_INTERACTIVE = re.compile(r"this is an interactive problem|^\s*interaction\s*$|\binteractor\b", re.I | re.M)
_MULTIPLE = re.compile(
    r"(if there are (several|multiple|many) (possible |correct |valid )?(answers|solutions)"
    r"|(print|output) any (of them|one of them|such))",
    re.IGNORECASE,
)


def _tests_of(row: dict[str, Any], key: str) -> tuple[list[str], list[str]]:
    tests = row.get(key) or {}
    inputs, outputs = list(tests.get("input") or []), list(tests.get("output") or [])
    return inputs[: len(outputs)], outputs[: len(inputs)]


def _seconds(duration: Any) -> float | None:
    if not duration:
        return None
    if isinstance(duration, dict):
        seconds = float(duration.get("seconds") or 0) + float(duration.get("nanos") or 0) / 1e9
    else:
        seconds = float(duration)
    return seconds or None


def _references(solutions: dict[str, Any], per_language: int) -> list[dict[str, str]]:
    """The first ``per_language`` solutions of each language the sandbox runs, in row order."""
    kept: list[dict[str, str]] = []
    counts: dict[str, int] = {}
    for lang_id, program in zip(
        solutions.get("language") or [], solutions.get("solution") or [], strict=False
    ):
        language = REFERENCE_LANGUAGES.get(int(lang_id))
        if language is None or not isinstance(program, str) or counts.get(language, 0) >= per_language:
            continue
        counts[language] = counts.get(language, 0) + 1
        kept.append({"language": language, "program": program})
    return kept


def reference_items(record: TaskRecord) -> list[dict[str, Any]]:
    """Verifier items that run a code_contests record's reference programs on its tests (each
    should come back ``correct``; one that does not points at a bad test or a wrong limit)."""
    items = []
    for i, ref in enumerate(record.meta.get("references") or []):
        spec = {**record.spec, "language": ref["language"], "extract": "none"}
        item_id = f"{record.prompt_id}/ref{i}-{ref['language']}"
        items.append({"id": item_id, "program": record.program, "response": ref["program"], "spec": spec})
    return items


@register_schema("code_contests")
def code_contests_row(row: dict[str, Any], index: int, options: RowOptions) -> TaskRecord | Dropped:
    description = row.get("description") or ""
    languages = list((row.get("solutions") or {}).get("language") or [])
    if PYTHON2 in languages and PYTHON3 not in languages:
        return Dropped("python2_only")
    if options.require_python3_solution and PYTHON3 not in languages:
        return Dropped("no_python3_solution")
    if row.get("input_file") or row.get("output_file") or _FILE_IO.search(description):
        return Dropped("file_io")
    if _INTERACTIVE.search(description):
        return Dropped("interactive")
    multiple = bool(_MULTIPLE.search(description))
    checker = checker_for(row, options.checkers)
    if multiple and checker is None and options.drop_multiple_answers:
        return Dropped("multiple_answers")
    inputs: list[str] = []
    outputs: list[str] = []
    for key in ("public_tests", "private_tests", "generated_tests"):
        more_in, more_out = _tests_of(row, key)
        inputs += more_in
        outputs += more_out
    if not inputs:
        return Dropped("no_tests")
    if options.max_tests is not None:
        inputs, outputs = inputs[: options.max_tests], outputs[: options.max_tests]
    spec: dict[str, Any] = {
        "tests": {"format": "stdio", "inputs": inputs, "outputs": outputs},
        "checker": "code_contests",
        "extract": "last_fence",
        **(checker or {}),
    }
    time_limit = _seconds(row.get("time_limit"))
    if time_limit:
        spec["time_limit_s"] = time_limit
    memory = int(row.get("memory_limit_bytes") or 0)
    if memory > 0:
        spec["memory_limit_mb"] = max(1, memory // 2**20)
    instruction = CODE_INSTRUCTION if options.instruction is None else options.instruction
    name = row.get("name") or f"{options.source_name or 'code'}-{index}"
    meta = {
        "source": options.source_name,
        "name": name,
        "difficulty": row.get("difficulty"),
        "cf_rating": row.get("cf_rating"),
        "multiple_answers": multiple,
        "checker": "program" if checker and "checker_program" in checker else spec["checker"],
        "has_python3_solution": PYTHON3 in languages,
        "num_tests": len(inputs),
        "references": _references(row.get("solutions") or {}, options.max_references),
    }
    return TaskRecord(
        prompt_id=str(name),
        messages=_messages(_with_instruction(description, instruction, "\n\n"), options),
        program="code",
        spec=spec,
        meta=meta,
    )


# ----------------------------------------------------------------------------- math

_MATH_PROBLEM_KEYS = ("problem", "question", "Problem", "Question")
_MATH_ANSWER_KEYS = ("answer", "expected_answer", "final_answer", "Answer", "ground_truth")
_ID_KEYS = ("prompt_id", "id", "unique_id", "problem_id", "uid", "ID")


def _first(row: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if row.get(key) is not None and row.get(key) != "":
            return row[key]
    return None


@register_schema("math")
def math_row(row: dict[str, Any], index: int, options: RowOptions) -> TaskRecord | Dropped:
    problem = _first(row, _MATH_PROBLEM_KEYS)
    answer = _first(row, _MATH_ANSWER_KEYS)
    if problem is None:
        return Dropped("no_problem")
    if answer is None:
        return Dropped("no_answer")
    instruction = MATH_INSTRUCTION if options.instruction is None else options.instruction
    row_id = _first(row, _ID_KEYS)
    prompt_id = str(row_id) if row_id is not None else f"{options.source_name or 'math'}-{index}"
    return TaskRecord(
        prompt_id=prompt_id,
        messages=_messages(_with_instruction(str(problem), instruction, " "), options),
        program="math",
        spec={"answer": answer if isinstance(answer, int | float) else str(answer)},
        meta={"source": options.source_name, **{k: row[k] for k in ("level", "subject") if k in row}},
    )


# ----------------------------------------------------------------------------- verl


def _json_arg_lines(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(json.dumps(arg) for arg in value)
    return json.dumps(value)


def _verl_code_spec(ground_truth: Any) -> dict[str, Any]:
    truth = json.loads(ground_truth) if isinstance(ground_truth, str) else dict(ground_truth)
    if isinstance(truth.get("tests"), dict):  # already a mucode code spec
        return truth
    inputs, outputs = list(truth.get("inputs") or []), list(truth.get("outputs") or [])
    fn_name = truth.get("fn_name")
    if fn_name:
        tests = {
            "format": "call",
            "fn_name": fn_name,
            "inputs": [_json_arg_lines(i) for i in inputs],
            "outputs": [o if isinstance(o, str) else json.dumps(o) for o in outputs],
        }
    else:
        tests = {"format": "stdio", "inputs": [str(i) for i in inputs], "outputs": [str(o) for o in outputs]}
    return {"tests": tests, "checker": "code_contests", "extract": "last_fence"}


@register_schema("verl")
def verl_row(row: dict[str, Any], index: int, options: RowOptions) -> TaskRecord | Dropped:
    messages = [dict(m) for m in (row.get("prompt") or [])]
    if not messages:
        return Dropped("no_prompt")
    if options.instruction:
        messages[-1]["content"] = _with_instruction(messages[-1]["content"], options.instruction, " ")
    extra = row.get("extra_info") or {}
    carried = extra.get("mucode")
    carried = json.loads(carried) if isinstance(carried, str) else carried
    if isinstance(carried, dict) and "program" in carried:  # written by `mucode verl-config`
        program, spec = str(carried["program"]), dict(carried.get("spec") or {})
    else:
        ground_truth = (row.get("reward_model") or {}).get("ground_truth")
        if ground_truth is None:
            return Dropped("no_ground_truth")
        program = _row_task(row.get("ability"), options.task)
        if program == "code":
            try:
                spec = _verl_code_spec(ground_truth)
            except (ValueError, TypeError, AttributeError):
                return Dropped("bad_code_ground_truth")
            if not spec["tests"].get("inputs") and spec["tests"].get("format") != "assert":
                return Dropped("no_tests")
        else:
            spec = {"answer": ground_truth}
    row_id = extra.get("index", extra.get("id"))
    data_source = row.get("data_source") or options.source_name
    prompt_id = f"{data_source}-{row_id if row_id is not None else index}"
    return TaskRecord(
        prompt_id=prompt_id,
        messages=messages,
        program=program,
        spec=spec,
        meta={"source": data_source, "ability": row.get("ability"), "extra_info": extra},
    )


_CODE_ABILITIES = frozenset({"code", "coding", "codegen", "programming"})
_MATH_ABILITIES = frozenset({"math", "mathematics"})


def _row_task(ability: Any, default: TaskKind) -> TaskKind:
    """A row's own task where its ``ability`` says it (so one file may mix math and code), else ``default``."""
    name = str(ability or "").strip().lower()
    return "code" if name in _CODE_ABILITIES else "math" if name in _MATH_ABILITIES else default


# ----------------------------------------------------------------------------- trl


@register_schema("trl")
def trl_row(row: dict[str, Any], index: int, options: RowOptions) -> TaskRecord | Dropped:
    prompt = row.get("prompt")
    if not prompt:
        return Dropped("no_prompt")
    messages = [dict(m) for m in prompt] if isinstance(prompt, list) else _messages(str(prompt), options)
    if options.instruction:
        messages[-1]["content"] = _with_instruction(messages[-1]["content"], options.instruction, " ")
    tests = row.get("tests")
    if tests not in (None, ""):
        try:
            program, spec = "code", _verl_code_spec(tests)
        except (ValueError, TypeError, AttributeError):
            return Dropped("bad_tests")
    else:
        answer = row.get("solution")
        if answer is None or answer == "":
            return Dropped("no_solution")
        program, spec = "math", {"answer": answer if isinstance(answer, int | float) else str(answer)}
    row_id = _first(row, _ID_KEYS)
    return TaskRecord(
        prompt_id=str(row_id) if row_id is not None else f"{options.source_name or 'trl'}-{index}",
        messages=messages,
        program=program,
        spec=spec,
        meta={"source": options.source_name},
    )


# ----------------------------------------------------------------------------- mucode


@register_schema("mucode")
def mucode_row(row: dict[str, Any], index: int, options: RowOptions) -> TaskRecord | Dropped:
    messages = (
        [dict(m) for m in row["messages"]] if row.get("messages") else _messages(str(row["prompt"]), options)
    )
    if options.instruction:
        messages[-1]["content"] = _with_instruction(messages[-1]["content"], options.instruction, "\n\n")
    spec = row["spec"]
    spec = json.loads(spec) if isinstance(spec, str) else dict(spec)
    row_id = _first(row, _ID_KEYS)
    return TaskRecord(
        prompt_id=str(row_id) if row_id is not None else f"{options.source_name or 'row'}-{index}",
        messages=messages,
        program=str(row.get("program") or options.task),
        spec=spec,
        meta=dict(row.get("meta") or {}),
    )
