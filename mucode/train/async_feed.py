"""What the trainer and the generators of asynchronous μ-GRPO agree on: which generator samples which
group, when it may, where it writes, and how the trainer reads groups while they are still arriving.

- **Slots.** A stage is bookkeeping as in the staged trainer: its B_train = μ·B_mini prompts are the
  data order's stage prompts (``mucode.train.loop.stage_prompts``) and a group's id is its slot.
  The update ``u = k·μ + j`` (stage ``k``, ``j``-th of the stage) trains on exactly the slots
  ``j·B_mini … (j+1)·B_mini − 1``, in slot order; slot ``s`` is sampled by generator ``s mod G``. So
  which groups an update trains on never depends on timing, a resumed trainer knows from its update
  count which groups it has used (each exactly once), and ``max_lag_updates`` can be checked before
  sampling.
- **Admission control.** A generator may sample the groups of update ``u`` with version ``v`` (the
  trainer's update count at publish) only if ``u − v ≤ max_lag_updates`` (:func:`admitted`); it waits
  for a newer version otherwise. Staleness ``u − v`` is recorded per row (``policy_version``).
- **Stores.** Generator ``g`` writes stage ``k``'s groups to ``stages/stage-K/gen-GG/``, a stage
  store of its own (one group per shard, so a group is on disk, fsynced and checksummed, as soon as it
  is verified). When the stage's updates are done the trainer writes ``stages/stage-K/manifest.json``
  listing every generator's shards: the stage is then an ordinary complete stage store.
- :class:`GroupFeed` reads the groups of one update from the generators' stores while they grow: it
  follows their manifests and checks each shard's SHA-256 before reading it.

Deviation from "consume groups as they arrive": the trainer waits for its update's own slots, not
for any B_mini groups; generators sample slots in order, so it waits for at most the slowest one.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from mucode.train.store import SCHEMA, StoredGroup, StoredSample, StoreError, StoreManifest, write_json_atomic

__all__ = [
    "GeneratorStats",
    "GroupFeed",
    "admitted",
    "gen_store",
    "generator_of",
    "stats_path",
    "update_slots",
]

_SAMPLE_FIELDS = [f.name for f in fields(StoredSample)]


def gen_store(stage_dir: Path, generator: int) -> Path:
    return stage_dir / f"gen-{generator:02d}"


def update_slots(update_in_stage: int, prompts_per_update: int) -> range:
    """The slots (group ids) the ``update_in_stage``-th update of a stage trains on."""
    return range(update_in_stage * prompts_per_update, (update_in_stage + 1) * prompts_per_update)


def generator_of(slot: int, generators: int) -> int:
    return slot % generators


def admitted(update: int, version: int, max_lag_updates: int) -> bool:
    """May the groups of global update ``update`` be sampled with policy ``version``?"""
    return update - version <= max_lag_updates


def stats_path(run_dir: Path, generator: int) -> Path:
    return run_dir / "async" / f"gen-{generator:02d}.json"


@dataclass
class GeneratorStats:
    """A generator's running totals (``async/gen-GG.json``, rewritten atomically after every chunk)."""

    groups: int = 0
    wait_s: float = 0.0
    """Waiting for a policy version the lag bound admits (admission control)."""
    busy_s: float = 0.0
    """Generating and verifying."""
    load_s: float = 0.0
    """Loading published policies into the engine."""
    loads: int = 0
    """Policy versions loaded into the running engine."""
    builds: int = 0
    """Engines built (one per process start, unless an engine cannot be loaded in place)."""
    starts: int = 0
    """Process starts (1 + restarts after a crash)."""
    startup_s: float = 0.0
    """The last start's seconds from the trainer's spawn to the engine ready on the base policy (Python,
    imports, tokenizer, data, engine build): hidden where the trainer's own preparation takes longer."""

    @property
    def idle_ratio(self) -> float:
        total = self.wait_s + self.busy_s + self.load_s
        return self.wait_s / total if total > 0 else 0.0

    @classmethod
    def read(cls, path: Path) -> GeneratorStats:
        try:
            return cls(**json.loads(path.read_text()))
        except (FileNotFoundError, json.JSONDecodeError, TypeError):
            return cls()

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, asdict(self))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class GroupFeed:
    """The groups of one stage's updates, read from the generators' stores as they are written."""

    def __init__(self, stage_dir: Path, generators: int) -> None:
        self.stage_dir = stage_dir
        self.generators = generators
        self._read: set[tuple[int, str]] = set()
        self._groups: dict[int, StoredGroup] = {}

    def _refresh(self, generator: int) -> None:
        path = gen_store(self.stage_dir, generator)
        if not (path / "manifest.json").exists():
            return
        manifest = StoreManifest.read(path)
        for shard in manifest.shards:
            if (generator, shard.file) in self._read:
                continue
            file = path / shard.file
            if not file.exists() or _sha256(file) != shard.sha256:
                raise StoreError(
                    f"{file}: missing or not matching the manifest's checksum; the generator's store is "
                    f"corrupt. Delete {path} to regenerate its groups (or the run's stage directory)."
                )
            for row in pq.read_table(file, schema=SCHEMA).to_pylist():
                group = self._groups.setdefault(
                    row["group_id"], StoredGroup(group_id=row["group_id"], prompt_id=row["prompt_id"])
                )
                group.samples.append(StoredSample(**{name: row[name] for name in _SAMPLE_FIELDS}))
            self._read.add((generator, shard.file))

    def take(self, slots: range) -> list[StoredGroup] | None:
        """The groups of ``slots`` in slot order once every one is stored; None while some are missing.
        A group is handed out once: it leaves the feed's memory when taken."""
        missing = {generator_of(s, self.generators) for s in slots if s not in self._groups}
        for generator in sorted(missing):
            self._refresh(generator)
        if any(s not in self._groups for s in slots):
            return None
        return [self._groups.pop(s) for s in slots]

    def complete(self) -> bool:
        """Every generator's store of the stage is marked complete."""
        for generator in range(self.generators):
            try:
                if not StoreManifest.read(gen_store(self.stage_dir, generator)).complete:
                    return False
            except StoreError:
                return False
        return True


def process_alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a generator checks its trainer with it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def merged_rollout(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Rollout metrics of a stage sampled by several generators: counts add, reward is re-averaged."""
    out: dict[str, Any] = {}
    scored = 0.0
    reward = 0.0
    for part in parts:
        n = float(part.get("rollout/responses", 0)) - float(part.get("verifier/masked", 0))
        if isinstance(part.get("reward/rollout_mean"), int | float) and n > 0:
            reward += float(part["reward/rollout_mean"]) * n
            scored += n
        for key, value in part.items():
            if isinstance(value, int | float) and not key.endswith(("_frac", "mean", "mean_response_tokens")):
                out[key] = out.get(key, 0) + value
    out["reward/rollout_mean"] = reward / scored if scored else None
    return out
