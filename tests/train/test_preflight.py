"""Config safety: checks before anything is written, long prompts dropped and counted, resumes that
would mismatch the stage stores refused, and the stage's prompt selection."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from train_helpers import run_overrides, write_tasks

from mucode.config import ConfigError, load_config
from mucode.data.types import TaskRecord
from mucode.train.loop import ResumeError, run_training, stage_prompts
from mucode.train.preflight import model_positions
from mucode.train.store import StageStore


def _records(n: int) -> list[TaskRecord]:
    return [
        TaskRecord(
            prompt_id=f"p{i}",
            messages=[{"role": "user", "content": str(i)}],
            program="math",
            spec={"answer": i},
        )
        for i in range(n)
    ]


def _stage_prompts_reference(
    records: list[TaskRecord], stage: int, per_stage: int, seed: int
) -> list[tuple[int, str]]:
    """The original definition: one shuffle per slot (quadratic), kept here as the specification."""
    out = []
    for slot in range(per_stage):
        epoch, index = divmod(stage * per_stage + slot, len(records))
        order = list(range(len(records)))
        random.Random(seed * 1_000_003 + epoch).shuffle(order)
        out.append((slot, records[order[index]].prompt_id))
    return out


@pytest.mark.parametrize(("n", "per_stage"), [(7, 3), (10, 10), (5, 12), (64, 128)])
def test_stage_prompts_equal_the_per_slot_definition(n: int, per_stage: int) -> None:
    records = _records(n)
    for stage in range(4):
        got = [(slot, r.prompt_id) for slot, r in stage_prompts(records, stage, per_stage, seed=3)]
        assert got == _stage_prompts_reference(records, stage, per_stage, seed=3)


def test_stage_prompts_at_the_paper_size_cover_the_data_set_once_per_pass() -> None:
    records = _records(40_315)  # DeepScaleR's size; B_train = 32,768 (the old code shuffled 32,768 times)
    first, second = stage_prompts(records, 0, 32_768, seed=0), stage_prompts(records, 1, 32_768, seed=0)
    ids = [r.prompt_id for _, r in first] + [r.prompt_id for _, r in second]
    assert len(set(ids[:40_315])) == 40_315  # the first pass visits every prompt exactly once
    assert [s for s, _ in second] == list(range(32_768))


def test_the_tiny_policy_context_is_read_from_its_config() -> None:
    assert model_positions("tiny") == 512


def test_a_context_longer_than_the_model_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    cfg = load_config(
        "tiny", [f"train.run_dir={run_dir}", "data.max_prompt_tokens=480", "rollout.max_response_tokens=64"]
    )
    with pytest.raises(ConfigError, match=r"480 \+ 64 = 544 tokens, but tiny has 512 positions"):
        run_training(cfg)
    assert not run_dir.exists()


def test_no_prompt_short_enough_is_refused_before_anything_is_written(
    small_policy: Path, tmp_path: Path
) -> None:
    data = write_tasks(tmp_path / "tasks.jsonl", "parity")
    run_dir = tmp_path / "run"
    with pytest.raises(ConfigError, match="all 12 prompts are longer than data.max_prompt_tokens=3"):
        run_training(load_config(None, run_overrides(small_policy, data, run_dir, data__max_prompt_tokens=3)))
    assert not (run_dir / "config.yaml").exists()
    # the corrected command is not refused as "already holds a run": its checks pass
    from mucode.train.preflight import check_run

    check_run(load_config(None, run_overrides(small_policy, data, run_dir)), run_dir, resume=False)


def test_long_prompts_are_dropped_and_counted_and_resumes_keep_store_keys(
    small_policy: Path, plugins_on_path: Path, tmp_path: Path
) -> None:
    data = write_tasks(tmp_path / "tasks.jsonl", "parity", n=8)
    with data.open("a") as f:  # one prompt far over the limit
        f.write(
            json.dumps(
                {
                    "id": "long",
                    "messages": [{"role": "user", "content": "What is 1 + 1? " * 200}],
                    "program": "parity",
                    "spec": {},
                }
            )
            + "\n"
        )
    run_dir = tmp_path / "run"
    settings = dict(batch__num_stages=1, batch__updates_per_stage=4)  # 8 prompts per stage: every short one
    result = run_training(load_config(None, run_overrides(small_policy, data, run_dir, **settings)))

    totals = result.summary["totals"]
    assert totals["data/dropped_long_prompts"] == 1 and totals["data/prompts"] == 8
    store = StageStore.open(run_dir / "stages" / "stage-0000")
    assert sorted({g.prompt_id for g in store.iter_groups()}) == sorted(f"t{i}" for i in range(8))
    assert json.loads((run_dir / "batch_plan.json").read_text())["data/dropped_long_prompts"] == 1
    assert (
        "prompts: 8 used, 1 dropped (longer than data.max_prompt_tokens)"
        in (run_dir / "summary.txt").read_text()
    )

    saved = (run_dir / "config.yaml").read_text()
    for changed, key in [
        (dict(batch__prompts_per_update=4, batch__updates_per_stage=2), "batch.prompts_per_update: 2 → 4"),
        (dict(batch__samples_per_prompt=8), "batch.samples_per_prompt: 4 → 8"),
        (dict(data__limit=5), "data.limit: None → 5"),
        (dict(train__seed=1), "train.seed: 0 → 1"),
    ]:
        cfg = load_config(None, run_overrides(small_policy, data, run_dir, **{**settings, **changed}))
        with pytest.raises(ResumeError, match="changes keys that shape the stage stores") as err:
            run_training(cfg, resume=True)
        assert key in str(err.value)
        assert (run_dir / "config.yaml").read_text() == saved
    # a key that does not shape the stores passes the check (and reaches "already finished")
    cfg = load_config(None, run_overrides(small_policy, data, run_dir, **settings, optim__lr=1e-3))
    with pytest.raises(ResumeError, match="already finished its 1 stages"):
        run_training(cfg, resume=True)
