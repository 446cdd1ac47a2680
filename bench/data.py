"""Reading speed of the data layer (`mucode.data.files`): `datasets` streaming next to the plain readers.

    python bench/data.py [--rows 50000]

Writes code_contests-shaped rows (a statement, nested test lists, solutions) as Parquet and as JSON
Lines, plus a JSON Lines file whose `tests` column mixes objects and strings (the fallback path), into
a temporary directory, then prints rows per second of:
- `iter_rows` (what the trainer and the evaluators use: `datasets` streaming, the fallback when Arrow
  cannot type a file),
- the plain readers alone (pyarrow record batches for Parquet, `json` line by line),
and the time to the first row (`first_row`, schema detection) in a fresh process, which includes
`datasets`' one-off start (import and first `load_dataset`, ~2-3 s; the rates are measured after it). The
machine may be shared: rerun before trusting a small difference.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _row(i: int, rng: random.Random) -> dict[str, Any]:
    tests = {"input": [f"{rng.randrange(10**6)} {rng.randrange(10**6)}\n" for _ in range(8)],
             "output": [f"{rng.randrange(10**6)}\n" for _ in range(8)]}  # fmt: skip
    return {"name": f"problem-{i}", "description": "Print the sum of two integers. " * 20,
            "public_tests": tests, "private_tests": tests,
            "solutions": {"language": [3, 2], "solution": ["print(sum(map(int, input().split())))", "int main(){}"]},
            "difficulty": rng.randrange(1, 12), "cf_rating": rng.randrange(800, 3500)}  # fmt: skip


def write_files(directory: Path, rows: int) -> dict[str, Path]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(0)
    data = [_row(i, rng) for i in range(rows)]
    paths = {
        "parquet": directory / "cc.parquet",
        "jsonl": directory / "cc.jsonl",
        "mixed": directory / "mixed.jsonl",
    }
    pq.write_table(pa.Table.from_pylist(data), paths["parquet"], row_group_size=1024)
    paths["jsonl"].write_text("".join(json.dumps(r) + "\n" for r in data))
    mixed = [{**r, "public_tests": json.dumps(r["public_tests"]) if i % 2 else r["public_tests"]}
             for i, r in enumerate(data)]  # fmt: skip
    paths["mixed"].write_text("".join(json.dumps(r) + "\n" for r in mixed))
    return paths


def rate(read: Any) -> tuple[float, int]:
    t0 = time.perf_counter()
    count = sum(1 for _ in read())
    return count / (time.perf_counter() - t0), count


def first_row_seconds(path: Path) -> float:
    script = ("import sys, time; t0 = time.perf_counter(); from pathlib import Path; "
              "from mucode.data.files import first_row; first_row([Path(sys.argv[1])]); "
              "print(time.perf_counter() - t0)")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True,
                          cwd=ROOT)  # fmt: skip
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=50_000)
    args = ap.parse_args()

    from mucode.data.files import _plain_rows, iter_rows

    with tempfile.TemporaryDirectory() as tmp:
        paths = write_files(Path(tmp), args.rows)
        warm = Path(tmp) / "warm.jsonl"
        warm.write_text('{"a": 1}\n')
        for builder_file in (warm, paths["parquet"]):  # datasets' one-off start (~2-3 s) is not a rate
            next(iter_rows([builder_file]))
        print(f"\n{args.rows} code_contests-shaped rows\n")
        print("| file | MB | reader | rows/s | first row, fresh process (s) |\n|---|---:|---|---:|---:|")
        for label, path in paths.items():
            megabytes = path.stat().st_size / 1e6
            ours, n = rate(lambda path=path: iter_rows([path]))
            plain, m = rate(lambda path=path: _plain_rows(path))
            assert n == m == args.rows, (n, m)
            first = first_row_seconds(path)
            print(f"| {label} | {megabytes:.0f} | iter_rows (datasets{', then fallback' if label == 'mixed' else ''}) "
                  f"| {ours:,.0f} | {first:.2f} |")  # fmt: skip
            print(
                f"| {label} | {megabytes:.0f} | plain ({'pyarrow' if label == 'parquet' else 'json'}) | {plain:,.0f} | – |"  # noqa: E501
            )


if __name__ == "__main__":
    main()
