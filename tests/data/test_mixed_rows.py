"""One data file mixing math and code: TRL's shape, verl's shape (per-row task), and column renames."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from mucode.data import load_tasks
from mucode.data.loader import load_task_set

ADD = {"tests": {"format": "stdio", "inputs": ["1 2\n"], "outputs": ["3\n"]}}


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_trl_rows_with_messages_solutions_and_tests(tmp_path: Path) -> None:
    rows = [
        {"prompt": [{"role": "user", "content": "What is 2+2?"}], "solution": "4"},
        {"prompt": "Add two numbers.", "tests": json.dumps(ADD)},
        {"prompt": "Call me.", "tests": {"inputs": ["[1, 2]"], "outputs": ["3"], "fn_name": "add"}},
        {"prompt": "No reference."},
    ]
    task_set = load_task_set(str(_jsonl(tmp_path / "trl.jsonl", rows)), "math")
    assert task_set.schema == "trl"  # detected from the first row
    math, code, call = task_set.records
    assert (math.program, math.spec) == ("math", {"answer": "4"})
    assert math.messages == [{"role": "user", "content": "What is 2+2?"}]
    assert code.program == "code" and code.spec == ADD
    assert call.spec["tests"]["format"] == "call" and call.spec["tests"]["fn_name"] == "add"
    assert dict(task_set.dropped) == {"no_solution": 1}


def test_columns_rename_a_sources_fields(tmp_path: Path) -> None:
    rows = [{"question": "What is 3+3?", "final": "6"}]
    records = load_tasks(
        str(_jsonl(tmp_path / "q.jsonl", rows)),
        "math",
        schema="trl",
        columns={"question": "prompt", "final": "solution"},
    )
    assert records[0].spec == {"answer": "6"} and records[0].messages[-1]["content"] == "What is 3+3?"


def test_verl_rows_choose_their_task_per_row(tmp_path: Path) -> None:
    rows = [
        {
            "data_source": "m",
            "prompt": [{"role": "user", "content": "1+1?"}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": "2"},
            "extra_info": {"index": 0},
        },
        {
            "data_source": "c",
            "prompt": [{"role": "user", "content": "Add."}],
            "ability": "code",
            "reward_model": {
                "style": "rule",
                "ground_truth": json.dumps({"inputs": ["1 2\n"], "outputs": ["3\n"]}),
            },
            "extra_info": {"index": 1},
        },
    ]
    path = tmp_path / "mixed.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    math, code = load_tasks(str(path), "math")  # data.task=math is only the default
    assert (math.program, math.spec) == ("math", {"answer": "2"})
    assert code.program == "code" and code.spec["tests"]["inputs"] == ["1 2\n"]


def test_verl_config_parquet_reads_back_as_the_same_records(tmp_path: Path) -> None:
    from mucode.integrations.verl.config import write_verl_parquet

    records = load_tasks("toy", "math", limit=2) + load_tasks("toy", "code", limit=2)
    write_verl_parquet(records, tmp_path / "train.parquet")
    back = load_tasks(str(tmp_path / "train.parquet"), "math")
    assert [(r.program, r.spec, r.messages) for r in back] == [
        (r.program, r.spec, r.messages) for r in records
    ]
