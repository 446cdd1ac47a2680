"""``load_tasks``: a source (Hub id, local path, or ``"toy"``) to a list of ``TaskRecord``.

Records come in the source's order; ``limit`` counts kept records (after filtering). What a
schema drops is counted per reason, logged at INFO, and available on ``TaskSet.dropped``.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mucode.data.checker_table import load_checker_table
from mucode.data.files import first_row, hub_data_files, iter_rows, local_data_files
from mucode.data.schemas import Dropped, RowOptions, detect_schema, get_schema
from mucode.data.toy import toy_tasks
from mucode.data.types import TaskKind, TaskRecord

logger = logging.getLogger(__name__)

DEFAULT_SOURCES: dict[str, str] = {
    "code": "deepmind/code_contests",
    "math": "agentica-org/DeepScaleR-Preview-Dataset",
}
"""The paper's training sets, used when the source is ``"default"``."""

TOY_SOURCE = "toy"


@dataclass
class TaskSet:
    """The records of a source and what was dropped on the way."""

    records: list[TaskRecord]
    source: str
    schema: str
    dropped: Counter[str] = field(default_factory=Counter)
    files: list[Path] = field(default_factory=list)

    @property
    def num_dropped(self) -> int:
        return sum(self.dropped.values())


def _resolve_files(source: str, split: str, revision: str | None) -> list[Path]:
    path = Path(source).expanduser()
    if path.exists():
        return local_data_files(path, split)
    if source.count("/") == 1 and not source.startswith((".", "/", "~")):
        return hub_data_files(source, split, revision=revision)
    raise FileNotFoundError(
        f"data source {source!r} is neither an existing path nor a Hub id (owner/name); pass a jsonl/json/"
        f"parquet file or directory, a Hub data set id, 'default' or '{TOY_SOURCE}'"
    )


def load_task_set(
    source: str,
    task: TaskKind,
    *,
    split: str = "train",
    limit: int | None = None,
    instruction: str | None = None,
    schema: str = "auto",
    system_prompt: str | None = None,
    max_tests: int | None = None,
    drop_multiple_answers: bool = True,
    require_python3_solution: bool = False,
    revision: str | None = None,
    columns: dict[str, str] | None = None,
    checkers: str | Path | Mapping[str, Any] | None = None,
) -> TaskSet:
    """Like ``load_tasks`` but also returns the drop counts and the files read."""
    if task not in ("code", "math"):
        raise ValueError(f"task must be 'code' or 'math', not {task!r}")
    if source == "default":
        source = DEFAULT_SOURCES[task]
    if source == TOY_SOURCE:
        records = toy_tasks(task, split=split, instruction=instruction)
        return TaskSet(records=records[:limit] if limit is not None else records, source=source, schema="toy")
    files = _resolve_files(source, split, revision)
    rename = dict(columns or {})
    row = first_row(files)
    if row is not None and rename:
        row = _renamed(row, rename)
    if row is None:
        raise ValueError(f"data source {source!r} (split {split!r}) has no rows")
    schema_name = detect_schema(row, task) if schema == "auto" else schema
    mapper = get_schema(schema_name)
    options = RowOptions(
        task=task,
        instruction=instruction,
        system_prompt=system_prompt,
        max_tests=max_tests,
        drop_multiple_answers=drop_multiple_answers,
        require_python3_solution=require_python3_solution,
        source_name=Path(source).name if Path(source).exists() else source,
        checkers=load_checker_table(checkers) if checkers is not None else None,
    )
    task_set = TaskSet(records=[], source=source, schema=schema_name, files=files)
    seen: set[str] = set()
    for index, raw in enumerate(iter_rows(files)):
        if limit is not None and len(task_set.records) >= limit:
            break
        result = mapper(_renamed(raw, rename) if rename else raw, index, options)
        if isinstance(result, Dropped):
            task_set.dropped[result.reason] += 1
            continue
        if result.prompt_id in seen:
            result.prompt_id = f"{result.prompt_id}#{index}"
        seen.add(result.prompt_id)
        task_set.records.append(result)
    if task_set.dropped:
        summary = ", ".join(f"{reason}: {n}" for reason, n in sorted(task_set.dropped.items()))
        logger.info(
            "%s (%s, split %s): kept %d records, dropped %d (%s)",
            source,
            schema_name,
            split,
            len(task_set.records),
            task_set.num_dropped,
            summary,
        )
    if not task_set.records:
        raise ValueError(f"data source {source!r} gave no usable records (dropped: {dict(task_set.dropped)})")
    return task_set


def _renamed(row: dict[str, Any], rename: dict[str, str]) -> dict[str, Any]:
    """``row`` with its columns renamed (file name → schema name); a column not in the file is ignored."""
    return {rename.get(key, key): value for key, value in row.items()}


def load_tasks(
    source: str,
    task: TaskKind,
    *,
    split: str = "train",
    limit: int | None = None,
    instruction: str | None = None,
    **kw: Any,
) -> list[TaskRecord]:
    """Load the prompts of a task.

    Args:
        source: ``"default"`` (the paper's set for ``task``, see ``DEFAULT_SOURCES``), a Hub data set
            id, a local file or directory (jsonl/json/parquet), or ``"toy"`` (built-in toy task).
        task: ``"code"`` or ``"math"``.
        split: split name; for a directory or Hub repo, the files whose names carry it.
        limit: keep at most this many records (after filtering).
        instruction: text appended to the problem; None uses the schema's default.
        **kw: ``schema`` (auto|code_contests|math|verl|mucode|trl), ``columns`` (renames applied to
            every row first, file name → schema name), ``system_prompt``, ``max_tests``,
            ``drop_multiple_answers``, ``require_python3_solution``, ``revision``, ``checkers`` (a
            checker table, path or mapping: ``mucode.data.checker_table``; code_contests problems it
            names are judged by their checker, also those with several valid answers).
    """
    return load_task_set(source, task, split=split, limit=limit, instruction=instruction, **kw).records
