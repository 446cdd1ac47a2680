"""Data-parallel generation under torchrun (two gloo ranks, hf engine): every rank generates its share
into its own store, rank 0 completes the stage's manifest; a SIGKILL of every rank mid-stage resumes
per rank without regenerating finished shards."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from train_helpers import run_overrides, write_tasks

from mucode.train.store import StageStore
from proctree import descendants

G = 4
# 48-token responses: each group takes long enough that the kill lands inside stage 1 on a loaded machine
SETTINGS = dict(
    batch__updates_per_stage=4,
    batch__prompts_per_update=2,
    batch__num_stages=2,
    batch__samples_per_prompt=G,
    rollout__batch_size=G,
    rollout__max_response_tokens=48,
    train__groups_per_shard=1,
)


def _torchrun(args: list[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=2",
        "-m",
        "mucode.cli",
        "train",
        "--no-plot",
        *args,
    ]


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1"}


def _check_store(store_dir: Path, prompts: int) -> None:
    store = StageStore.open(store_dir)
    groups = list(store.iter_groups())
    assert sorted(g.group_id for g in groups) == list(range(prompts))  # every prompt exactly once
    assert all(
        len(g.samples) == G and sorted(s.sample_index for s in g.samples) == list(range(G)) for g in groups
    )
    files = [s.file for s in store.manifest.shards]
    assert {f.split("/")[0] for f in files} == {"rank-00", "rank-01"}  # both ranks generated
    for rank in (0, 1):
        part = StageStore.open(store_dir / f"rank-{rank:02d}")
        assert {g.group_id % 2 for g in part.iter_groups()} == {rank}


@pytest.mark.slow
def test_two_gloo_ranks_generate_data_parallel_and_resume_after_sigkill(
    small_policy: Path, plugins_on_path: Path, tmp_path: Path
) -> None:
    data = write_tasks(tmp_path / "tasks.jsonl", "parity")
    run_dir = tmp_path / "dp"
    args = run_overrides(small_policy, data, run_dir, **SETTINGS, train__device="cpu")
    log = tmp_path / "killed.log"
    stage1 = run_dir / "stages" / "stage-0001"
    with log.open("wb") as sink:
        proc = subprocess.Popen(_torchrun(args), stdout=sink, stderr=subprocess.STDOUT, env=_env())
        deadline = time.monotonic() + 400
        while (
            not list(stage1.glob("rank-*/shard-*.parquet"))
            and proc.poll() is None
            and time.monotonic() < deadline
        ):
            time.sleep(0.01)
        assert proc.poll() is None, f"the run ended before it could be killed: {log.read_text()[-3000:]}"
        for pid in [*descendants(proc.pid), proc.pid]:  # every rank, its verifier, and the launcher
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert StageStore.is_complete(run_dir / "stages" / "stage-0000")
    assert not StageStore.is_complete(stage1)
    _check_store(run_dir / "stages" / "stage-0000", 8)
    # shards the rank manifests list (a shard written but not yet listed when the kill landed is a
    # stray: the resume deletes and regenerates it, by design)
    listed = [
        rank / s["file"]
        for rank in stage1.glob("rank-*")
        if (rank / "manifest.json").exists()
        for s in json.loads((rank / "manifest.json").read_text())["shards"]
    ]
    kept = {p: p.stat().st_mtime_ns for p in listed}
    kept.update({p: p.stat().st_mtime_ns for p in (run_dir / "stages" / "stage-0000").rglob("*.parquet")})
    assert kept

    done = subprocess.run(
        _torchrun([*args, "--resume"]), capture_output=True, text=True, env=_env(), timeout=600
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    for path, mtime in kept.items():  # finished shards were kept, not regenerated
        assert path.exists() and path.stat().st_mtime_ns == mtime, path
    _check_store(stage1, 8)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["totals"]["updates"] == 8
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if '"event"' not in x]
    assert [r["update"] for r in rows] == list(range(1, 9))


def test_an_unfinished_stage_must_resume_with_the_same_number_of_ranks(tmp_path: Path) -> None:
    from mucode.train.rollout_runner import _check_layout
    from mucode.train.store import StageWriter, StoreError

    alone = tmp_path / "alone"
    StageWriter.create(alone, stage=0, expected_groups=4)
    _check_layout(alone, 1)
    with pytest.raises(StoreError, match="started by one process.*same number of ranks"):
        _check_layout(alone, 2)
    ranked = tmp_path / "ranked"
    for rank in (0, 1):
        StageWriter.create(ranked / f"rank-{rank:02d}", stage=0, expected_groups=2)
    _check_layout(ranked, 2)
    with pytest.raises(StoreError, match="torchrun with 2"):  # one process where two ranks started it
        _check_layout(ranked, 1)
