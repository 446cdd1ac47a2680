"""code_contests problems with several valid answers: judged by the checker a table gives them (by name
or Codeforces id), dropped only when the table has none; the table's mistakes name the entry."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mucode.data import load_task_set
from mucode.data.checker_table import load_checker_table

SEVERAL = "Print a permutation. If there are multiple answers, print any of them."
PERMUTATION = (
    "import sys\nn = int(open(sys.argv[1]).read())\nout = open(sys.argv[2]).read().split()\n"
    "sys.exit(0 if sorted(out, key=int) == [str(i) for i in range(1, n + 1)] else 1)\n"
)


def _row(name: str, description: str, contest: int, index: str) -> dict[str, object]:
    return {
        "name": name,
        "description": description,
        "public_tests": {"input": ["3\n"], "output": ["1 2 3\n"]},
        "private_tests": {"input": [], "output": []},
        "generated_tests": {"input": [], "output": []},
        "solutions": {"language": [3], "solution": ["print(1)"]},
        "cf_contest_id": contest,
        "cf_index": index,
        "time_limit": {"seconds": 1, "nanos": 0},
        "memory_limit_bytes": 256 * 2**20,
        "input_file": "",
        "output_file": "",
    }


@pytest.fixture()
def source(tmp_path: Path) -> Path:
    rows = [
        _row("1_A. By name", SEVERAL, 1, "A"),
        _row("2_B. By id", SEVERAL, 2, "B"),
        _row("3_C. No checker", SEVERAL, 3, "C"),
        _row("4_D. Unique", "Print the sum.", 4, "D"),
        _row("5_E. Named checker", SEVERAL, 5, "E"),
    ]
    path = tmp_path / "cc.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_a_checker_table_judges_problems_with_several_answers(source: Path, tmp_path: Path) -> None:
    table = tmp_path / "checkers.jsonl"
    table.write_text(
        "\n".join(
            json.dumps(row)
            for row in [
                {"name": "1_A. By name", "source": PERMUTATION},
                {"contest_id": 2, "index": "B", "source": PERMUTATION, "time_limit_s": 2},
                {"name": "5_E. Named checker", "checker": "livecodebench"},
            ]
        )
    )
    task_set = load_task_set(str(source), "code", checkers=str(table))
    kept = {r.prompt_id: r for r in task_set.records}
    assert sorted(kept) == ["1_A. By name", "2_B. By id", "4_D. Unique", "5_E. Named checker"]
    assert dict(task_set.dropped) == {"multiple_answers": 1}  # 3_C: no checker for it
    assert kept["1_A. By name"].spec["checker_program"] == {"source": PERMUTATION}
    assert kept["2_B. By id"].spec["checker_program"] == {"source": PERMUTATION, "time_limit_s": 2}
    assert kept["1_A. By name"].meta["checker"] == "program"
    assert kept["5_E. Named checker"].spec["checker"] == "livecodebench"
    assert "checker_program" not in kept["4_D. Unique"].spec
    assert kept["4_D. Unique"].spec["checker"] == "code_contests"
    without = load_task_set(str(source), "code")
    assert dict(without.dropped) == {"multiple_answers": 4}


def test_a_json_object_table_and_its_mistakes() -> None:
    table = load_checker_table({"7/A": {"source": "pass", "language": "python"}})
    assert table == {"7/A": {"checker_program": {"source": "pass", "language": "python"}}}
    with pytest.raises(ValueError, match="entry '7/A' needs 'source'.*unknown fields: \\['sauce'\\]"):
        load_checker_table({"7/A": {"sauce": "pass"}})
    with pytest.raises(ValueError, match="two entries for 'x'"):
        load_checker_table([{"name": "x", "source": "a"}, {"name": "x", "source": "b"}])
    with pytest.raises(ValueError, match="takes no other field"):
        load_checker_table({"x": {"checker": "exact", "source": "a"}})
