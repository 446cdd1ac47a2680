"""The reading layer (`mucode.data.files`): `datasets` streaming, and the standard-library fallback.

Every file is written here; nothing touches the network.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mucode.data.files import first_row, iter_rows, read_rows

FALLBACK = "with the standard library"


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _fallbacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name == "mucode.data.files" and FALLBACK in r.getMessage()
    ]


def test_parquet_rows_come_from_datasets_equal_to_pyarrow(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rows = [
        {"id": i, "tests": {"input": [f"{i}\n"], "output": [f"{2 * i}\n"]}, "name": f"p{i}"}
        for i in range(500)
    ]
    path = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=64)  # several row groups
    with caplog.at_level(logging.INFO, logger="mucode.data.files"):
        got = read_rows(path)
    assert got == pq.read_table(path).to_pylist() == rows
    assert _fallbacks(caplog) == []  # datasets read it all


def test_uniform_jsonl_is_read_by_datasets(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rows = [
        {"problem": f"{i}+1?", "answer": str(i + 1), "messages": [{"role": "user", "content": "hi"}]}
        for i in range(50)
    ]
    with caplog.at_level(logging.INFO, logger="mucode.data.files"):
        assert read_rows(_jsonl(tmp_path / "u.jsonl", rows)) == rows
    assert _fallbacks(caplog) == []


def test_mixed_type_columns_fall_back_and_keep_every_value_as_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # strings that look like JSON must stay strings ("4" is not 4, "null" is not None)
    rows = [{"answer": "4"}, {"answer": {"k": 1}}, {"answer": "null"}, {"answer": "[1, 2]"}, {"answer": 7}]
    path = _jsonl(tmp_path / "mixed.jsonl", rows)
    with caplog.at_level(logging.INFO, logger="mucode.data.files"):
        assert read_rows(path) == rows
    (message,) = _fallbacks(caplog)
    assert str(path) in message and "could not read" in message


def test_nested_objects_with_different_keys_are_not_padded_with_nulls(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rows = [
        {"prompt_id": "m", "prompt": "2+2?", "program": "math", "spec": {"answer": "4"}},
        {
            "prompt_id": "c",
            "prompt": "Add.",
            "program": "code",
            "spec": {"tests": {"format": "stdio", "inputs": ["1 2\n"], "outputs": ["3\n"]}},
        },
    ]
    with caplog.at_level(logging.INFO, logger="mucode.data.files"):
        assert read_rows(_jsonl(tmp_path / "specs.jsonl", rows)) == rows  # no "tests": None in the math spec
    assert any("differ in their keys" in m for m in _fallbacks(caplog))


def test_large_jsonl_is_streamed_then_read_on_past_a_late_mixed_row(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "big.jsonl"
    n = 100_000  # ~24 MB: several of datasets' 10 MB chunks
    with path.open("w") as handle:
        for i in range(n):
            handle.write(json.dumps({"id": i, "prompt": "x" * 200, "answer": str(i)}) + "\n")
        handle.write(json.dumps({"id": n, "prompt": "y", "answer": {"late": True}}) + "\n")
    assert first_row([path]) == {"id": 0, "prompt": "x" * 200, "answer": "0"}  # before the bad chunk is read
    with caplog.at_level(logging.INFO, logger="mucode.data.files"):
        ids = answers = 0
        for expected, row in enumerate(iter_rows([path])):
            assert row["id"] == expected
            ids += 1
            answers += isinstance(row["answer"], str)
    assert (ids, answers) == (n + 1, n)
    (message,) = _fallbacks(caplog)
    delivered = int(message.split("reading rows ")[1].split("…")[0])
    assert 0 < delivered < n  # datasets streamed the first chunks; the rest came from the fallback, in order


def test_json_shapes_and_malformed_lines(tmp_path: Path) -> None:
    rows = [{"a": 1}, {"a": 2}]
    (tmp_path / "array.json").write_text(json.dumps(rows))
    (tmp_path / "wrapped.json").write_text(json.dumps({"data": rows}))
    (tmp_path / "lines.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for name in ("array.json", "wrapped.json", "lines.json"):
        assert read_rows(tmp_path / name) == rows, name
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"a": 1}\n{"a": \n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2"):
        read_rows(bad)


_OFFLINE_SCRIPT = """
import json, sys
from mucode.data import load_task_set
for source in sys.argv[1:]:
    task_set = load_task_set(source, "math")
    print(json.dumps([source.rsplit("/", 1)[-1], len(task_set.records), task_set.records[0].spec]))
"""


def test_local_files_load_offline_with_no_network(tmp_path: Path) -> None:
    rows = [{"problem": f"{i}+{i}?", "answer": str(2 * i)} for i in range(5)]
    parquet = tmp_path / "m.parquet"
    pq.write_table(pa.Table.from_pylist(rows), parquet)
    jsonl = _jsonl(tmp_path / "m.jsonl", rows)
    env = {
        **os.environ,
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),
        "HTTP_PROXY": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "",
    }
    done = subprocess.run(
        [sys.executable, "-c", _OFFLINE_SCRIPT, str(parquet), str(jsonl)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines == [["m.parquet", 5, {"answer": "0"}], ["m.jsonl", 5, {"answer": "0"}]]


def test_rows_too_large_for_one_batch_read_back_the_same(tmp_path: Path) -> None:
    # 64 rows of ~0.6 MB exceed the layer's 32 MB batch budget: they are converted one at a time
    rows = [{"id": i, "tests": f"{i}:" + "x" * 600_000} for i in range(80)]
    path = tmp_path / "big_rows.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    assert [(r["id"], r["tests"][:4], len(r["tests"])) for r in iter_rows([path])] == [
        (r["id"], r["tests"][:4], len(r["tests"])) for r in rows
    ]


def test_mucode_rows_mixing_math_and_code_keep_their_specs_exact(tmp_path: Path) -> None:
    from mucode.data import load_tasks

    specs = [{"answer": "4"}, {"tests": {"format": "stdio", "inputs": ["1 2\n"], "outputs": ["3\n"]}},
             {"answer": "null"}]  # fmt: skip
    rows = [{"prompt_id": f"p{i}", "prompt": "Solve.", "program": "code" if "tests" in spec else "math", "spec": spec}
            for i, spec in enumerate(specs)]  # fmt: skip
    records = load_tasks(str(_jsonl(tmp_path / "mixed_specs.jsonl", rows)), "math")
    assert [(r.program, r.spec) for r in records] == [(row["program"], row["spec"]) for row in rows]
