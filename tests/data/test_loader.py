"""load_tasks on local files in every supported schema and format (fixtures written here)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from mucode.eval.data import MATH_DATA_DIR as SHARED_MATH  # the copies shipped with mucode

from mucode.data import CODE_INSTRUCTION, MATH_INSTRUCTION, load_task_set, load_tasks
from mucode.data.files import select_split_files
from mucode.data.schemas import reference_items


def _cc_row(name: str, description: str = "Print the sum.", **overrides: object) -> dict:
    row = {
        "name": name,
        "description": description,
        "public_tests": {"input": ["1 2\n"], "output": ["3\n"]},
        "private_tests": {"input": ["5 5\n", "0 0\n"], "output": ["10\n", "0\n"]},
        "generated_tests": {"input": ["7 1\n"], "output": ["8\n"]},
        "source": 2,
        "difficulty": 7,
        "solutions": {
            "language": [2, 3],
            "solution": ["int main(){}", "print(sum(map(int,input().split())))"],
        },
        "incorrect_solutions": {"language": [], "solution": []},
        "cf_contest_id": 1,
        "cf_index": "A",
        "cf_points": 500.0,
        "cf_rating": 800,
        "cf_tags": ["math"],
        "is_description_translated": False,
        "untranslated_description": "",
        "time_limit": {"seconds": 2, "nanos": 500_000_000},
        "memory_limit_bytes": 256 * 2**20,
        "input_file": "",
        "output_file": "",
    }
    row.update(overrides)
    return row


def _write_parquet(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_code_contests_keeps_all_tests_and_limits_and_counts_what_it_drops(tmp_path: Path) -> None:
    rows = [
        _cc_row("good"),
        _cc_row("py2", solutions={"language": [1, 1], "solution": ["print 1", "print 2"]}),
        _cc_row("fileio", input_file="input.txt", output_file="output.txt"),
        _cc_row("fileio2", description="Read the data from input.txt and write to output.txt."),
        _cc_row("interactive", description="This is an interactive problem. Flush after each query."),
        _cc_row("several", description="Print the array. If there are multiple answers, print any of them."),
        _cc_row(
            "notests",
            public_tests={"input": [], "output": []},
            private_tests={"input": [], "output": []},
            generated_tests={"input": [], "output": []},
        ),
        _cc_row("nolimits", time_limit=None, memory_limit_bytes=0),
    ]
    path = _write_parquet(tmp_path / "cc" / "train-00000-of-00001.parquet", rows)
    task_set = load_task_set(str(path), "code")
    assert task_set.schema == "code_contests"
    assert [r.prompt_id for r in task_set.records] == ["good", "nolimits"]
    assert dict(task_set.dropped) == {
        "python2_only": 1,
        "file_io": 2,
        "interactive": 1,
        "multiple_answers": 1,
        "no_tests": 1,
    }
    good = task_set.records[0]
    assert good.program == "code"
    assert good.spec["tests"] == {
        "format": "stdio",
        "inputs": ["1 2\n", "5 5\n", "0 0\n", "7 1\n"],
        "outputs": ["3\n", "10\n", "0\n", "8\n"],
    }
    assert good.spec["time_limit_s"] == pytest.approx(2.5)
    assert good.spec["memory_limit_mb"] == 256
    assert good.spec["checker"] == "code_contests"
    assert good.messages[-1]["content"] == f"Print the sum.\n\n{CODE_INSTRUCTION}"
    nolimits = task_set.records[1].spec
    assert "time_limit_s" not in nolimits and "memory_limit_mb" not in nolimits


def test_code_contests_options(tmp_path: Path) -> None:
    rows = [
        _cc_row("several", description="If there are several answers, output any of them."),
        _cc_row("cpp_only", solutions={"language": [2], "solution": ["int main(){}"]}),
    ]
    path = _write_parquet(tmp_path / "cc.parquet", rows)
    kept = load_tasks(
        str(path),
        "code",
        drop_multiple_answers=False,
        max_tests=2,
        instruction="Go.",
        system_prompt="You code.",
    )
    assert [r.prompt_id for r in kept] == ["several", "cpp_only"]
    assert kept[0].meta["multiple_answers"] is True
    assert kept[0].spec["tests"]["inputs"] == ["1 2\n", "5 5\n"]
    assert kept[0].messages == [
        {"role": "system", "content": "You code."},
        {"role": "user", "content": "If there are several answers, output any of them.\n\nGo."},
    ]
    strict = load_task_set(str(path), "code", drop_multiple_answers=False, require_python3_solution=True)
    assert [r.prompt_id for r in strict.records] == ["several"]
    assert strict.dropped == {"no_python3_solution": 1}


def test_directory_splits_and_limit(tmp_path: Path) -> None:
    _write_parquet(tmp_path / "data" / "train-00000-of-00002.parquet", [_cc_row(f"t{i}") for i in range(3)])
    _write_parquet(tmp_path / "data" / "train-00001-of-00002.parquet", [_cc_row(f"u{i}") for i in range(3)])
    _write_parquet(tmp_path / "data" / "valid-00000-of-00001.parquet", [_cc_row("v0")])
    assert [r.prompt_id for r in load_tasks(str(tmp_path), "code")] == ["t0", "t1", "t2", "u0", "u1", "u2"]
    assert [r.prompt_id for r in load_tasks(str(tmp_path), "code", split="valid")] == ["v0"]
    assert [r.prompt_id for r in load_tasks(str(tmp_path), "code", split="validation")] == ["v0"]
    assert len(load_tasks(str(tmp_path), "code", limit=4)) == 4
    with pytest.raises(FileNotFoundError, match="split 'test'"):
        load_tasks(str(tmp_path), "code", split="test")


def test_split_file_selection() -> None:
    files = ["README.md", "data/train-0.parquet", "data/test-0.parquet"]
    assert select_split_files(files, "train") == ["data/train-0.parquet"]
    assert select_split_files(["deepscaler.json", "README.md"], "train") == ["deepscaler.json"]


def test_deepscaler_style_json_array(tmp_path: Path) -> None:
    rows = [
        {"problem": "What is $1+1$?", "answer": "2", "solution": "..."},
        {"problem": "Compute $3^2$.", "answer": "9", "solution": "..."},
    ]
    (tmp_path / "deepscaler.json").write_text(json.dumps(rows))
    records = load_tasks(str(tmp_path), "math")
    assert [r.spec for r in records] == [{"answer": "2"}, {"answer": "9"}]
    assert records[0].program == "math"
    assert records[0].messages == [{"role": "user", "content": f"What is $1+1$? {MATH_INSTRUCTION}"}]
    assert len({r.prompt_id for r in records}) == 2


@pytest.mark.parametrize(
    ("name", "rows", "first_answer"),
    [
        ("math500.jsonl", 500, "\\left( 3, \\frac{\\pi}{2} \\right)"),
        ("aime24.json", 30, None),
        ("aime25.json", 30, None),
        ("amc23.json", 40, None),
    ],
)
def test_shared_math_copies_load(name: str, rows: int, first_answer: str | None) -> None:
    path = SHARED_MATH / name
    if not path.exists():
        pytest.skip(f"{path} is not on this machine")  # the shared data lives outside the repository
    records = load_tasks(str(path), "math")
    assert len(records) == rows
    assert all(r.spec["answer"] not in (None, "") for r in records)
    if first_answer is not None:
        assert records[0].spec["answer"] == first_answer


def test_verl_parquet_math_and_code(tmp_path: Path) -> None:
    math_rows = [
        {
            "data_source": "DigitalLearningGmbH/MATH-lighteval",
            "prompt": [{"role": "user", "content": "What is 2+3? Let's think step by step."}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": "5"},
            "extra_info": {"split": "train", "index": 7},
        }
    ]
    path = _write_parquet(tmp_path / "math.parquet", math_rows)
    (record,) = load_tasks(str(path), "math")
    assert record.prompt_id == "DigitalLearningGmbH/MATH-lighteval-7"
    assert record.messages == math_rows[0]["prompt"]
    assert record.spec == {"answer": "5"}

    truth_stdio = json.dumps({"inputs": ["1\n"], "outputs": ["2\n"]})
    truth_call = json.dumps({"fn_name": "add", "inputs": [[1, 2]], "outputs": [3]})
    code_rows = [
        {
            "data_source": "codecontests",
            "prompt": [{"role": "user", "content": "Add one."}],
            "ability": "code",
            "reward_model": {"style": "rule", "ground_truth": truth_stdio},
            "extra_info": {"index": 0},
        },
        {
            "data_source": "leetcode",
            "prompt": [{"role": "user", "content": "def add(a, b)"}],
            "ability": "code",
            "reward_model": {"style": "rule", "ground_truth": truth_call},
            "extra_info": {"index": 1},
        },
    ]
    path = _write_parquet(tmp_path / "code.parquet", code_rows)
    stdio, call = load_tasks(str(path), "code")
    assert stdio.spec["tests"] == {"format": "stdio", "inputs": ["1\n"], "outputs": ["2\n"]}
    assert call.spec["tests"] == {"format": "call", "fn_name": "add", "inputs": ["1\n2"], "outputs": ["3"]}


def test_mucode_native_jsonl(tmp_path: Path) -> None:
    spec = {"tests": {"format": "assert", "assert_code": "assert f() == 1", "entry_point": "f"}}
    rows = [
        {"prompt_id": "p1", "prompt": "Write f.", "program": "code", "spec": spec},
        {"messages": [{"role": "user", "content": "2+2?"}], "spec": {"answer": 4}, "program": "math"},
    ]
    path = tmp_path / "mine.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    first, second = load_tasks(str(path), "code")
    assert (first.prompt_id, first.spec, first.messages) == (
        "p1",
        spec,
        [{"role": "user", "content": "Write f."}],
    )
    assert second.program == "math" and second.spec == {"answer": 4}


def test_bad_sources_say_how_to_fix(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="neither an existing path nor a Hub id"):
        load_tasks("./nowhere/at/all", "math")
    path = tmp_path / "odd.jsonl"
    path.write_text(json.dumps({"text": "hello"}) + "\n")
    with pytest.raises(ValueError, match="pass schema="):
        load_tasks(str(path), "math")
    with pytest.raises(ValueError, match="unknown data schema"):
        load_tasks(str(path), "math", schema="nope")
    with pytest.raises(ValueError, match="task must be"):
        load_tasks(str(path), "poetry")  # type: ignore[arg-type]


def test_code_contests_keeps_reference_programs_per_language(tmp_path: Path) -> None:
    solutions = {
        "language": [1, 2, 2, 2, 4, 3, 9],
        "solution": ["print 1", "c1", "c2", "c3", "j1", "p1", "?"],
    }
    path = _write_parquet(
        tmp_path / "cc" / "train-00000-of-00001.parquet", [_cc_row("refs", solutions=solutions)]
    )
    record = load_task_set(str(path), "code").records[0]
    assert record.meta["references"] == [
        {"language": "cpp", "program": "c1"},
        {"language": "cpp", "program": "c2"},  # at most two per language
        {"language": "java", "program": "j1"},
        {"language": "python", "program": "p1"},  # Python 2 (1) and unknown ids are left out
    ]
    items = reference_items(record)
    assert [i["spec"]["language"] for i in items] == ["cpp", "cpp", "java", "python"]
    assert all(i["spec"]["extract"] == "none" and i["spec"]["tests"] == record.spec["tests"] for i in items)
    assert [i["response"] for i in items] == ["c1", "c2", "j1", "p1"]
