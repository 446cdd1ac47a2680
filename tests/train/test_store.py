"""The stage store: round trip, streaming order, and refusal of incomplete or corrupt stores."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mucode.train.store import StageStore, StageWriter, StoredGroup, StoredSample, StoreError


def _group(gid: int, g: int = 4) -> StoredGroup:
    return StoredGroup(
        group_id=gid,
        prompt_id=f"p{gid}",
        samples=[
            StoredSample(
                prompt_id=f"p{gid}",
                sample_index=i,
                prompt_tokens=[1, 2, gid],
                response_tokens=list(range(i + 1)),
                behaviour_logprobs=[-0.5] * (i + 1),
                reward=float(i % 2),
                status="correct" if i % 2 else "wrong_answer",
                masked=False,
                advantage=0.25 * i,
            )
            for i in range(g)
        ],
    )


def _write(path: Path, n: int = 10, per_shard: int = 3) -> StageStore:
    writer = StageWriter.create(path, stage=0, expected_groups=n, groups_per_shard=per_shard)
    for i in range(n):
        writer.add(_group(i))
    return writer.finish()


def test_round_trip_and_every_group_visited_once_per_pass(tmp_path: Path) -> None:
    store = _write(tmp_path / "s", n=10, per_shard=3)
    assert store.num_groups == 10 and store.num_rows == 40
    assert len(store.manifest.shards) == 4
    batches = list(store.minibatches(2, seed=7))
    assert len(batches) == 5
    seen = [g.group_id for b in batches for g in b]
    assert sorted(seen) == list(range(10))
    g3 = next(g for b in batches for g in b if g.group_id == 3)
    assert [s.response_tokens for s in g3.samples] == [[0], [0, 1], [0, 1, 2], [0, 1, 2, 3]]
    assert g3.samples[2].advantage == pytest.approx(0.5)
    # Starting at minibatch 3 resumes the same order; a different seed gives another order.
    assert [[g.group_id for g in b] for b in store.minibatches(2, seed=7, start=3)] == [
        [g.group_id for g in b] for b in batches[3:]
    ]
    other = [g.group_id for b in store.minibatches(2, seed=8) for g in b]
    assert other != seen


def test_shards_are_written_as_groups_arrive(tmp_path: Path) -> None:
    writer = StageWriter.create(tmp_path / "s", stage=0, expected_groups=5, groups_per_shard=2)
    for i in range(3):
        writer.add(_group(i))
    writer.wait()  # shards are written on the writer thread
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    assert manifest["groups"] == 2 and not manifest["complete"]
    with pytest.raises(StoreError, match="incomplete .*2 of 5.*--resume"):
        StageStore.open(tmp_path / "s")


def test_incomplete_store_resumes_with_only_missing_prompts(tmp_path: Path) -> None:
    writer = StageWriter.create(tmp_path / "s", stage=0, expected_groups=5, groups_per_shard=2)
    for i in range(3):
        writer.add(_group(i))  # group 2 pending in memory, lost in the "crash"
    writer.wait()
    (tmp_path / "s" / "shard-00001.parquet.tmp").write_bytes(b"half-written")
    resumed = StageWriter.resume(tmp_path / "s", groups_per_shard=2)
    assert resumed.done_group_ids == {0, 1}
    assert not (tmp_path / "s" / "shard-00001.parquet.tmp").exists()
    for i in range(2, 5):
        resumed.add(_group(i))
    store = resumed.finish()
    assert sorted(g.group_id for g in store.iter_groups()) == [0, 1, 2, 3, 4]


def test_corrupted_shard_is_detected_with_a_clear_error(tmp_path: Path) -> None:
    _write(tmp_path / "s")
    shard = tmp_path / "s" / "shard-00001.parquet"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(StoreError, match=r"shard-00001.parquet is corrupt .*Delete .* to regenerate"):
        StageStore.open(tmp_path / "s")


def test_missing_shard_and_missing_manifest_are_detected(tmp_path: Path) -> None:
    _write(tmp_path / "s")
    (tmp_path / "s" / "shard-00002.parquet").unlink()
    with pytest.raises(StoreError, match="shard-00002.parquet listed in the manifest is missing"):
        StageStore.open(tmp_path / "s")
    with pytest.raises(StoreError, match="no manifest.json"):
        StageStore.open(tmp_path / "nothing")


def test_minibatch_larger_than_store_is_refused(tmp_path: Path) -> None:
    store = _write(tmp_path / "s", n=3)
    with pytest.raises(StoreError, match="fewer than the 4 prompts"):
        next(store.minibatches(4, seed=0))


def test_the_manifest_is_typed_and_changed_only_through_the_store(tmp_path: Path) -> None:
    from mucode.train.store import ShardEntry, StoreManifest, merge_stores

    writer = StageWriter.create(
        tmp_path / "s", stage=2, expected_groups=2, groups_per_shard=1, meta={"engine_starts": 1}
    )
    writer.add(_group(0))
    writer.update_meta({"engine_starts": 2})  # written at once: a crash now keeps the count
    manifest = StoreManifest.read(tmp_path / "s")
    assert manifest.stage == 2 and manifest.groups == 1 and not manifest.complete
    assert manifest.meta == {"engine_starts": 2} and isinstance(manifest.shards[0], ShardEntry)
    writer.add(_group(1))
    store = writer.finish(extra_meta={"rollout": {"reward/rollout_mean": 0.5}})
    assert store.manifest == StoreManifest.read(tmp_path / "s") and store.manifest.group_ids == [0, 1]
    assert (
        json.loads((tmp_path / "s" / "manifest.json").read_text())["shards"][1]["file"]
        == "shard-00001.parquet"
    )

    # parts (one per rank) merge into one store whose shards are re-verified when it is opened
    parts = [tmp_path / "m" / "rank-00", tmp_path / "m" / "rank-01"]
    for rank, part in enumerate(parts):
        w = StageWriter.create(part, stage=0, expected_groups=1)
        w.add(_group(rank))
        w.finish()
    merged = merge_stores(
        tmp_path / "m", parts, stage=0, expected_groups=2, meta=lambda ms: {"parts": len(ms)}
    )
    assert [s.file for s in merged.shards] == ["rank-00/shard-00000.parquet", "rank-01/shard-00000.parquet"]
    assert StageStore.open(tmp_path / "m").meta == {"parts": 2}
    with pytest.raises(StoreError, match="2 groups .*3 expected"):
        merge_stores(tmp_path / "m", parts, stage=0, expected_groups=3, meta=lambda ms: {})


def test_a_failed_shard_write_is_raised_by_the_writer(tmp_path: Path) -> None:
    writer = StageWriter.create(tmp_path / "s", stage=0, expected_groups=4, groups_per_shard=2)
    shutil.rmtree(tmp_path / "s")  # the writer thread's write of the first shard fails
    writer.add(_group(0))
    writer.add(_group(1))
    with pytest.raises(OSError):
        writer.wait()
