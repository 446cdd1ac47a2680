"""One TRL-shaped file mixing math and code rows trains in a tiny run: each row is scored by its own program."""

from __future__ import annotations

import json
from pathlib import Path

from train_helpers import run_overrides

from mucode.config import load_config
from mucode.train.loop import run_training
from mucode.train.store import StageStore

CODE_STATUSES = {
    "correct",
    "wrong_answer",
    "runtime_error",
    "time_limit",
    "memory_limit",
    "compile_error",
    "no_code",
}
MATH_STATUSES = {"correct", "wrong_answer", "no_answer"}


def test_mixed_math_and_code_file_trains(small_policy: Path, tmp_path: Path) -> None:
    rows = []
    for i in range(4):
        rows.append({"id": f"m{i}", "prompt": f"What is {i} + {i}?", "solution": str(2 * i)})
        rows.append(
            {
                "id": f"c{i}",
                "prompt": [{"role": "user", "content": f"Print {i}."}],
                "tests": {"tests": {"format": "stdio", "inputs": ["\n"], "outputs": [f"{i}\n"]}},
            }
        )
    data = tmp_path / "mixed.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run_dir = tmp_path / "run"
    overrides = run_overrides(
        small_policy,
        data,
        run_dir,
        batch__num_stages=1,
        batch__updates_per_stage=2,
        batch__prompts_per_update=4,
        data__format="trl",
    )
    result = run_training(load_config(None, overrides))
    assert result.run_dir == run_dir

    store = StageStore.open(run_dir / "stages" / "stage-0000")
    by_kind: dict[str, set[str]] = {"m": set(), "c": set()}
    for group in store.iter_groups():
        for sample in group.samples:
            by_kind[sample.prompt_id[0]].add(sample.status)
    assert by_kind["m"] and by_kind["c"], by_kind  # both kinds were in the stage
    assert by_kind["m"] <= MATH_STATUSES, by_kind  # math rows went to math-verify
    assert by_kind["c"] <= CODE_STATUSES and by_kind["c"] - MATH_STATUSES, by_kind  # code rows to the sandbox
