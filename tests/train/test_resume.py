"""Kill-and-resume: a training process killed with SIGKILL mid-optimization (at a chosen update, through
the trainer's update hook, so the test does not race the run), resumed with --resume, ends with the same
weights as an uninterrupted run and never regenerates a finished stage store."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from train_helpers import run_overrides, write_tasks

from mucode.config import load_config
from mucode.train.loop import run_training
from mucode.train.store import StageStore, StoreError


def _updates(run_dir: Path) -> int:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return 0
    return sum(1 for line in path.read_text().splitlines() if line.strip() and '"event"' not in line)


def _content(store: StageStore) -> list[tuple]:
    return sorted(
        (g.group_id, s.sample_index, tuple(s.response_tokens), s.reward, s.advantage)
        for g in store.iter_groups()
        for s in g.samples
    )


KILL_AFTER = """
import os, signal, sys
from mucode.config import load_config
from mucode.train.loop import run_training

def die(state):
    if state.global_update == int(sys.argv[1]):
        os.kill(os.getpid(), signal.SIGKILL)

run_training(load_config(None, sys.argv[2:]), on_update=die)
"""
"""A training process that SIGKILLs itself right after update ``argv[1]`` (no cleanup runs, as in a crash)."""


def _cli(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "mucode.cli", "train", "--no-plot", *args]


def test_killed_run_resumes_to_the_same_weights_without_regenerating(
    small_policy: Path, plugins_on_path: Path, tmp_path: Path
) -> None:
    data = write_tasks(tmp_path / "tasks.jsonl", "parity")
    settings = dict(batch__updates_per_stage=6, batch__num_stages=2)

    # Reference: the same run, uninterrupted (in this process).
    ref_dir = tmp_path / "reference"
    run_training(load_config(None, run_overrides(small_policy, data, ref_dir, **settings)))

    # The run under test: a real process that SIGKILLs itself right after update 9 (stage 1's third of 6
    # updates; the last checkpoint is update 8's), from the trainer's own per-update hook: where the kill
    # lands does not depend on timing.
    run_dir = tmp_path / "killed"
    args = run_overrides(small_policy, data, run_dir, **settings)
    killed = subprocess.run(
        [sys.executable, "-c", KILL_AFTER, "9", *args],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=300,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stdout[-2000:] + killed.stderr[-3000:]
    assert _updates(run_dir) == 9  # every finished update is logged before the kill
    assert (run_dir / "checkpoints" / "latest").read_text() == "update-00000008"  # update 9 must be replayed
    stores = sorted((run_dir / "stages").glob("stage-*/manifest.json"))
    assert len(stores) == 2
    before = {p: (p.stat().st_mtime_ns, p.read_text()) for p in stores}

    # A corrupted shard is detected on resume with a clear error (on a copy of the killed run).
    broken = tmp_path / "broken"
    shutil.copytree(run_dir, broken)
    shard = next((broken / "stages" / "stage-0001").glob("shard-*.parquet"))
    data_bytes = bytearray(shard.read_bytes())
    data_bytes[len(data_bytes) // 3] ^= 0x5A
    shard.write_bytes(bytes(data_bytes))
    with pytest.raises(StoreError, match="is corrupt .*Delete .*stage-0001 to regenerate"):
        run_training(load_config(None, run_overrides(small_policy, data, broken, **settings)), resume=True)

    # Resume through the CLI, as a user would.
    done = subprocess.run(
        _cli([*args, "--resume"]), capture_output=True, text=True, env=os.environ.copy(), timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resuming at stage 1, update 2/6 (global 8)" in done.stdout

    # The finished stage stores were reused as they were, not regenerated.
    for path, (mtime, text) in before.items():
        assert path.stat().st_mtime_ns == mtime and path.read_text() == text
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["totals"]["engine_switches"] == 4 and summary["totals"]["updates"] == 12
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if '"event"' not in x]
    assert [r["update"] for r in rows] == list(range(1, 13))  # replayed updates are not logged twice

    # Same data (timings aside), same weights as the uninterrupted run.
    for k in (0, 1):
        ref_store = StageStore.open(ref_dir / "stages" / f"stage-{k:04d}")
        got_store = StageStore.open(run_dir / "stages" / f"stage-{k:04d}")
        assert _content(got_store) == _content(ref_store)
    ref = load_file(ref_dir / "policy" / "stage-0001" / "model.safetensors")
    got = load_file(run_dir / "policy" / "stage-0001" / "model.safetensors")
    start = load_file(run_dir / "policy" / "stage-0000" / "model.safetensors")
    assert ref.keys() == got.keys()
    moved = max(float((ref[k] - start[k]).abs().max()) for k in ref)
    assert moved > 1e-4  # training changed the weights, so equality below is not trivial
    for name in ref:
        torch.testing.assert_close(got[name], ref[name], rtol=1e-5, atol=1e-6)


KILL_IN_HOOK = """
import json, os, signal, sys
from pathlib import Path
from mucode.config import load_config
from mucode.train.loop import run_training

run_dir = Path(sys.argv[2])
seen = run_dir.parent / (run_dir.name + "-hook.jsonl")

def hook(state):
    u = state.global_update
    events = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    with seen.open("a") as f:  # at this update: is its checkpoint already there, is its eval logged
        f.write(json.dumps({"update": u,
                            "checkpoint": (run_dir / "checkpoints" / f"update-{u:08d}").exists(),
                            "eval": [e["update"] for e in events if e.get("event") == "eval"]}) + "\\n")
    if u == int(sys.argv[1]):
        os.kill(os.getpid(), signal.SIGKILL)

run_training(load_config(None, sys.argv[3:]), on_update=hook)
"""
"""A training process that records what is on disk at each update hook and SIGKILLs itself in the hook
of update ``argv[1]``: after that update's evaluation was logged, before its checkpoint."""


def test_a_checkpoint_holds_every_evaluation_of_its_update_and_a_resume_redoes_a_lost_one(
    small_policy: Path, plugins_on_path: Path, tmp_path: Path
) -> None:
    from mucode.eval.data import MATH_DATA_DIR

    data = write_tasks(tmp_path / "tasks.jsonl", "parity")
    run_dir = tmp_path / "run"
    args = run_overrides(small_policy, data, run_dir, batch__updates_per_stage=6, batch__num_stages=1,
                         train__eval_every=2, train__checkpoint_every=2)  # fmt: skip
    args += ["eval.benchmarks=[math500]", f"eval.data_dir={MATH_DATA_DIR}", "eval.limit=1",
             "eval.samples_per_problem=1"]  # fmt: skip
    killed = subprocess.run(
        [sys.executable, "-c", KILL_IN_HOOK, "4", str(run_dir), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stdout[-2000:] + killed.stderr[-3000:]
    seen = [json.loads(x) for x in (tmp_path / "run-hook.jsonl").read_text().splitlines()]
    # A hook runs after its update's evaluation and before its checkpoint: a checkpoint at N is only
    # written once everything due at N is logged, so a kill can never leave a checkpoint without them.
    assert [(s["update"], s["checkpoint"], s["update"] in s["eval"]) for s in seen] == [
        (1, False, False), (2, False, True), (3, False, False), (4, False, True)
    ]  # fmt: skip
    assert (run_dir / "checkpoints" / "latest").read_text() == "update-00000002"
    # The killed run's best may be update 4's; the resumed run forgets it with the rest of update 4.
    (run_dir / "best.json").write_text(json.dumps({"update": 4, "score": 2.0}))

    done = subprocess.run(_cli([*args, "--resume"]), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resuming at stage 0, update 2/6 (global 2)" in done.stdout
    events = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    evals = [e for e in events if e.get("event") == "eval"]
    assert [e["update"] for e in evals] == [2, 4, 6]  # update 4's evaluation is redone, and logged once
    best = json.loads((run_dir / "best.json").read_text())
    assert best["update"] == max(e["update"] for e in evals if e["eval/is_best"])  # not the forged 4
    assert os.readlink(run_dir / "policy" / "best") == f"update-{best['update']:07d}"
