"""The stage store: one stage's rollout dataset on disk (Parquet shards plus a manifest).

Layout of a store directory::

    stage-0003/
      manifest.json            # written atomically after every shard; "complete" set last
      shard-00000.parquet      # one row per response; a group's rows never straddle shards
      shard-00001.parquet
      ...

Rows are written as finished groups arrive from the verifier, a shard at a time, so memory does
not grow with the stage size; the reader loads at most the shards a minibatch touches.

The manifest records, for every shard, its row and group counts, its size and its SHA-256. Opening
a store for optimization (:meth:`StageStore.open`) re-hashes every shard and refuses a store that is
incomplete, has a missing/extra/altered shard, or whose rows disagree with the manifest, with an
error that says what to do. An incomplete store can be re-opened for writing
(:meth:`StageWriter.resume`): its finished shards are kept and only the prompts they lack are
generated again.

Each row records the temperature its response was sampled at (``temperature``) and the sampling
controller's statistics of its prompt (``sampling``, JSON); stores written before these columns
existed read them as null (the run's ``rollout.temperature``, no statistics).

A group's id is its prompt's slot in the stage (0 … B_train−1), so a prompt drawn twice in a
stage (a data set smaller than B_train) is two groups.

Minibatch order (a deviation from a uniform shuffle, chosen to keep memory flat): shards are visited
in a seeded random order and the groups inside each shard in a seeded random order. Groups arrive
in completion order, which is already mixed, so this is close to a full shuffle in practice.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from mucode.seeds import SeedPurpose, derive_seed

__all__ = [
    "STORE_FORMAT",
    "SCHEMA",
    "ShardEntry",
    "StoreManifest",
    "StoreError",
    "merge_stores",
    "StoredSample",
    "StoredGroup",
    "StageWriter",
    "StageStore",
]

STORE_FORMAT = "mucode-stage-store/1"
MANIFEST = "manifest.json"

SCHEMA = pa.schema(
    [
        pa.field("group_id", pa.int64()),
        pa.field("prompt_id", pa.string()),
        pa.field("sample_index", pa.int32()),
        pa.field("prompt_tokens", pa.list_(pa.int32())),
        pa.field("response_tokens", pa.list_(pa.int32())),
        pa.field("behaviour_logprobs", pa.list_(pa.float32())),
        pa.field("response_text", pa.string()),
        pa.field("reward", pa.float32()),
        pa.field("status", pa.string()),
        pa.field("masked", pa.bool_()),
        pa.field("advantage", pa.float32()),
        pa.field("prompt_length", pa.int32()),
        pa.field("response_length", pa.int32()),
        pa.field("truncated", pa.bool_()),
        pa.field("generate_s", pa.float32()),
        pa.field("verify_s", pa.float32()),
        pa.field("temperature", pa.float32()),
        pa.field("sampling", pa.string()),
        pa.field("policy_version", pa.int64()),
    ]
)


class StoreError(RuntimeError):
    """A stage store is incomplete, corrupt, or does not match its manifest."""


@dataclass
class StoredSample:
    """One response with everything the optimizer needs (one Parquet row)."""

    prompt_id: str
    sample_index: int
    prompt_tokens: list[int]
    response_tokens: list[int]
    behaviour_logprobs: list[float]
    reward: float
    status: str
    masked: bool
    """True for infrastructure failures (verifier_error/sandbox_error): no reward, no loss."""
    advantage: float = 0.0
    response_text: str = ""
    truncated: bool = False
    generate_s: float = 0.0
    verify_s: float = 0.0
    temperature: float | None = None
    """The temperature this response was sampled (and its behaviour log-probs taken) at; None: rollout.temperature."""
    sampling: str | None = None
    """The sampling controller's statistics of the response's prompt, as JSON (e.g. AGPO's probe statistics)."""
    policy_version: int = 0
    """The update count of the policy that sampled it (staged: the stage's first update, k·μ)."""


@dataclass
class StoredGroup:
    """The G responses to one prompt."""

    group_id: int
    prompt_id: str
    samples: list[StoredSample] = field(default_factory=list)
    replayed: bool = False
    """A replayed rollout from the batch composer's buffer (not stored; never written)."""


_SAMPLE_FIELDS = [f.name for f in fields(StoredSample)]
"""Every field of a sample is a column of :data:`SCHEMA` of the same name."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_json_atomic(path: Path, obj: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w") as f:
        json.dump(obj, f, indent=2)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


@dataclass
class ShardEntry:
    """One shard as the manifest records it."""

    file: str
    """Path relative to the store directory (``shard-00003.parquet``, or ``rank-01/shard-…`` in a merged store)."""
    rows: int
    groups: int
    bytes: int
    sha256: str


@dataclass
class StoreManifest:
    """A store's ``manifest.json``: what it holds and the checksums that vouch for it.

    Only the store's own methods change it (:class:`StageWriter`, :func:`merge_stores`), and they
    write it atomically; readers take it from :meth:`read` (the manifest only: the shards are checked
    by :meth:`StageStore.open`)."""

    stage: int
    expected_groups: int
    complete: bool = False
    groups: int = 0
    rows: int = 0
    shards: list[ShardEntry] = field(default_factory=list)
    group_ids: list[int] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    """Who made the stage and how (``policy``, ``engine_starts``, ``rollout`` metrics …)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "format": STORE_FORMAT,
            "stage": self.stage,
            "complete": self.complete,
            "expected_groups": self.expected_groups,
            "groups": self.groups,
            "rows": self.rows,
            "shards": [asdict(s) for s in self.shards],
            "group_ids": list(self.group_ids),
            "meta": self.meta,
        }

    @classmethod
    def read(cls, path: str | Path) -> StoreManifest:
        """The manifest of the store in ``path``; a missing, unreadable or foreign one raises :class:`StoreError`."""
        path = Path(path)
        manifest_path = path / MANIFEST
        if not manifest_path.exists():
            raise StoreError(
                f"stage store {path} has no {MANIFEST}: it was never started or its directory was "
                f"copied partially. Delete {path} to regenerate the stage."
            )
        try:
            obj = json.loads(manifest_path.read_text())
        except json.JSONDecodeError as e:
            raise StoreError(f"{manifest_path} is not valid JSON ({e}). Delete {path} to regenerate.") from e
        if obj.get("format") != STORE_FORMAT:
            raise StoreError(
                f"{manifest_path} has format {obj.get('format')!r}, expected {STORE_FORMAT!r}. "
                f"Delete {path} to regenerate the stage with this version of mucode."
            )
        try:
            return cls(
                stage=int(obj["stage"]),
                expected_groups=int(obj["expected_groups"]),
                complete=bool(obj["complete"]),
                groups=int(obj["groups"]),
                rows=int(obj["rows"]),
                shards=[ShardEntry(**s) for s in obj["shards"]],
                group_ids=[int(g) for g in obj["group_ids"]],
                meta=dict(obj.get("meta") or {}),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise StoreError(
                f"{manifest_path} lacks a field or has a wrong one ({e!r}). "
                f"Delete {path} to regenerate the stage."
            ) from e

    def _write(self, path: Path) -> None:
        write_json_atomic(path / MANIFEST, self.to_json())


def _rows(group: StoredGroup) -> list[dict[str, Any]]:
    return [
        {
            "group_id": group.group_id,
            "prompt_id": group.prompt_id,
            "sample_index": s.sample_index,
            "prompt_tokens": s.prompt_tokens,
            "response_tokens": s.response_tokens,
            "behaviour_logprobs": s.behaviour_logprobs,
            "response_text": s.response_text,
            "reward": s.reward,
            "status": s.status,
            "masked": s.masked,
            "advantage": s.advantage,
            "prompt_length": len(s.prompt_tokens),
            "response_length": len(s.response_tokens),
            "truncated": s.truncated,
            "generate_s": s.generate_s,
            "verify_s": s.verify_s,
            "temperature": s.temperature,
            "sampling": s.sampling,
            "policy_version": s.policy_version,
        }
        for s in group.samples
    ]


class StageWriter:
    """Appends finished groups to a stage store, one shard every ``groups_per_shard`` groups.

    Use :meth:`create` for a new store and :meth:`resume` to continue an incomplete one; call
    :meth:`finish` once every expected group is written (it flushes and marks the store complete).
    Every change to the manifest goes through these methods and is written atomically. Shards are
    encoded and written on one writer thread (Parquet encoding, zstd, fsync and hashing then overlap
    the caller's work); :meth:`wait` blocks until what was handed over is on disk, and an error of the
    writer is raised by the next ``flush``, ``wait``, ``update_meta`` or ``finish``.
    """

    def __init__(self, path: Path, manifest: StoreManifest, groups_per_shard: int) -> None:
        if groups_per_shard < 1:
            raise ValueError(f"groups_per_shard must be >= 1, got {groups_per_shard}")
        self.path = path
        self._manifest = manifest
        self.groups_per_shard = groups_per_shard
        self._pending: list[StoredGroup] = []
        self._done: set[int] = set(manifest.group_ids)
        self._added = manifest.groups
        self._writer: ThreadPoolExecutor | None = None
        self._writing: Future[None] | None = None

    @classmethod
    def create(
        cls,
        path: str | Path,
        *,
        stage: int,
        expected_groups: int,
        groups_per_shard: int = 64,
        meta: dict[str, Any] | None = None,
    ) -> StageWriter:
        path = Path(path)
        if (path / MANIFEST).exists():
            raise StoreError(f"stage store {path} already exists; open it with StageWriter.resume")
        path.mkdir(parents=True, exist_ok=True)
        manifest = StoreManifest(stage=stage, expected_groups=expected_groups, meta=dict(meta or {}))
        manifest._write(path)
        return cls(path, manifest, groups_per_shard)

    @classmethod
    def resume(cls, path: str | Path, *, groups_per_shard: int = 64) -> StageWriter:
        """Reopen an incomplete store: verified shards are kept, stray files are removed."""
        path = Path(path)
        manifest = StoreManifest.read(path)
        if manifest.complete:
            raise StoreError(f"stage store {path} is already complete; open it with StageStore.open")
        _verify_shards(path, manifest)
        listed = {s.file for s in manifest.shards}
        for stray in path.glob("shard-*.parquet*"):
            if stray.name not in listed:  # a shard written but not yet recorded when the run died
                stray.unlink()
        return cls(path, manifest, groups_per_shard)

    @property
    def meta(self) -> dict[str, Any]:
        """A copy of the store's metadata (change it with :meth:`update_meta`)."""
        return dict(self._manifest.meta)

    @property
    def done_group_ids(self) -> set[int]:
        """Groups already stored (pending ones included); a group id is the prompt's slot in the stage."""
        return set(self._done)

    @property
    def groups_written(self) -> int:
        """Groups added so far (kept from a resumed store, on disk, being written or pending)."""
        return self._added

    def update_meta(self, values: dict[str, Any]) -> None:
        """Merge ``values`` into the store's metadata and write the manifest."""
        self.wait()  # the writer thread writes the manifest too
        self._manifest.meta.update(values)
        self._manifest._write(self.path)

    def add(self, group: StoredGroup) -> None:
        if not group.samples:
            raise ValueError(f"group {group.group_id} ({group.prompt_id}) has no samples")
        if group.group_id in self._done:
            raise StoreError(f"group {group.group_id} is already in stage store {self.path}")
        self._pending.append(group)
        self._done.add(group.group_id)
        self._added += 1
        if len(self._pending) >= self.groups_per_shard:
            self.flush()

    def flush(self) -> None:
        """Hands the pending groups, as one shard, to the writer thread (after the shard before it is on
        disk: at most one shard is being written while the next one fills, so memory stays flat)."""
        if not self._pending:
            return
        self.wait()
        groups, self._pending = self._pending, []
        if self._writer is None:
            self._writer = ThreadPoolExecutor(1, thread_name_prefix="mucode-store")
        self._writing = self._writer.submit(self._write_shard, groups)

    def wait(self) -> None:
        """Blocks until the shard being written is on disk and in the manifest (raises what its write raised)."""
        writing, self._writing = self._writing, None
        if writing is not None:
            writing.result()

    def _write_shard(self, groups: list[StoredGroup]) -> None:
        m = self._manifest
        name = f"shard-{len(m.shards):05d}.parquet"
        rows = [row for g in groups for row in _rows(g)]
        table = pa.Table.from_pylist(rows, schema=SCHEMA)
        tmp = self.path / (name + ".tmp")
        pq.write_table(table, tmp, compression="zstd")
        with tmp.open("rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, self.path / name)
        m.shards.append(
            ShardEntry(
                file=name,
                rows=len(rows),
                groups=len(groups),
                bytes=(self.path / name).stat().st_size,
                sha256=_sha256(self.path / name),
            )
        )
        m.groups += len(groups)
        m.rows += len(rows)
        m.group_ids.extend(g.group_id for g in groups)
        m._write(self.path)

    def finish(self, extra_meta: dict[str, Any] | None = None) -> StageStore:
        self.flush()
        self.wait()
        if self._writer is not None:
            self._writer.shutdown()
            self._writer = None
        m = self._manifest
        if m.groups != m.expected_groups:
            raise StoreError(
                f"stage store {self.path} has {m.groups} groups but {m.expected_groups} were expected; "
                f"not marking it complete"
            )
        m.meta.update(extra_meta or {})
        m.complete = True
        m._write(self.path)
        return StageStore.open(self.path)


def merge_stores(
    store_dir: Path,
    parts: list[Path],
    *,
    stage: int,
    expected_groups: int,
    meta: Callable[[list[StoreManifest]], dict[str, Any]],
) -> StoreManifest:
    """Write the complete manifest of ``store_dir`` listing the shards of the complete stores ``parts``
    (its subdirectories, e.g. one per rank); ``meta`` makes the merged metadata from the parts' manifests."""
    manifests = [StoreManifest.read(part) for part in parts]
    for part, m in zip(parts, manifests, strict=True):
        if not m.complete:
            raise StoreError(f"{part} is not complete; its stage {stage} was not finished")
    shards = [
        replace(s, file=f"{part.relative_to(store_dir)}/{s.file}")
        for part, m in zip(parts, manifests, strict=True)
        for s in m.shards
    ]
    group_ids = [g for m in manifests for g in m.group_ids]
    if len(set(group_ids)) != len(group_ids) or len(group_ids) != expected_groups:
        raise StoreError(
            f"{store_dir}: the parts hold {len(group_ids)} groups ({len(set(group_ids))} distinct), "
            f"{expected_groups} expected. Delete {store_dir} to regenerate the stage."
        )
    merged = StoreManifest(
        stage=stage,
        expected_groups=expected_groups,
        complete=True,
        groups=len(group_ids),
        rows=sum(s.rows for s in shards),
        shards=shards,
        group_ids=group_ids,
        meta=meta(manifests),
    )
    merged._write(store_dir)
    return merged


def _verify_shards(path: Path, manifest: StoreManifest) -> None:
    for shard in manifest.shards:
        file = path / shard.file
        if not file.exists():
            raise StoreError(
                f"stage store {path}: shard {shard.file} listed in the manifest is missing. "
                f"Delete {path} to regenerate the stage."
            )
        size = file.stat().st_size
        digest = _sha256(file)
        if size != shard.bytes or digest != shard.sha256:
            raise StoreError(
                f"stage store {path}: shard {shard.file} is corrupt (sha256 {digest[:12]}…, "
                f"{size} bytes; the manifest records {shard.sha256[:12]}…, {shard.bytes} bytes). "
                f"Delete {path} to regenerate the stage (its policy checkpoint is kept), "
                f"or restore the file from a backup."
            )


class StageStore:
    """A complete, verified stage store, read shard by shard (made by :meth:`open` only)."""

    def __init__(self, path: Path, manifest: StoreManifest) -> None:
        self.path = path
        self.manifest = manifest
        self._cache: tuple[int, list[StoredGroup]] | None = None

    @staticmethod
    def is_complete(path: str | Path) -> bool:
        """True when a manifest exists and says complete (no checksum check: use :meth:`open`)."""
        try:
            return StoreManifest.read(path).complete
        except StoreError:
            return False

    @classmethod
    def open(cls, path: str | Path) -> StageStore:
        path = Path(path)
        manifest = StoreManifest.read(path)
        if not manifest.complete:
            raise StoreError(
                f"stage store {path} is incomplete ({manifest.groups} of "
                f"{manifest.expected_groups} groups written): its generation was interrupted. "
                f"Run again with --resume to finish it, or delete {path} to regenerate it."
            )
        _verify_shards(path, manifest)
        return cls(path, manifest)

    @property
    def num_groups(self) -> int:
        return self.manifest.groups

    @property
    def num_rows(self) -> int:
        return self.manifest.rows

    @property
    def meta(self) -> dict[str, Any]:
        return dict(self.manifest.meta)

    def _load_shard(self, index: int) -> list[StoredGroup]:
        if self._cache is not None and self._cache[0] == index:
            return self._cache[1]
        shard = self.manifest.shards[index]
        try:
            table = pq.read_table(self.path / shard.file, schema=SCHEMA)
        except (pa.ArrowException, OSError) as e:
            raise StoreError(f"stage store {self.path}: cannot read {shard.file}: {e}") from e
        if table.num_rows != shard.rows:
            raise StoreError(
                f"stage store {self.path}: {shard.file} has {table.num_rows} rows, the manifest "
                f"records {shard.rows}. Delete {self.path} to regenerate the stage."
            )
        groups: dict[int, StoredGroup] = {}
        for row in table.to_pylist():
            group = groups.setdefault(
                row["group_id"], StoredGroup(group_id=row["group_id"], prompt_id=row["prompt_id"])
            )
            group.samples.append(StoredSample(**{name: row[name] for name in _SAMPLE_FIELDS}))
        if len(groups) != shard.groups:
            raise StoreError(
                f"stage store {self.path}: {shard.file} has {len(groups)} groups, the manifest "
                f"records {shard.groups}. Delete {self.path} to regenerate the stage."
            )
        result = list(groups.values())
        self._cache = (index, result)
        return result

    def order(self, seed: int) -> list[tuple[int, int]]:
        """The visiting order for ``seed``: (shard index, group index in shard) pairs."""
        rng = random.Random(seed)
        shards = list(range(len(self.manifest.shards)))
        rng.shuffle(shards)
        order: list[tuple[int, int]] = []
        for s in shards:
            inner = list(range(self.manifest.shards[s].groups))
            rng.shuffle(inner)
            order.extend((s, g) for g in inner)
        return order

    def minibatches(
        self, groups_per_update: int, *, seed: int, start: int = 0, count: int | None = None
    ) -> Iterator[list[StoredGroup]]:
        """Yield minibatches of ``groups_per_update`` groups, starting at minibatch ``start``.

        One pass over the store gives ``num_groups // groups_per_update`` minibatches; asking for
        more (``count``) starts a new pass with a new shuffle (seed + pass number).
        """
        per_pass = self.num_groups // groups_per_update
        if per_pass < 1:
            raise StoreError(
                f"stage store {self.path} holds {self.num_groups} groups, fewer than the "
                f"{groups_per_update} prompts one update needs"
            )
        total = per_pass if count is None else count
        for index in range(start, total):
            epoch, within = divmod(index, per_pass)
            order = self._order_cached(derive_seed(seed, SeedPurpose.STORE_PASS, index=epoch))
            picks: Sequence[tuple[int, int]] = order[
                within * groups_per_update : (within + 1) * groups_per_update
            ]
            yield [self._load_shard(s)[g] for s, g in picks]

    _order_memo: tuple[int, list[tuple[int, int]]] | None = None

    def _order_cached(self, seed: int) -> list[tuple[int, int]]:
        if self._order_memo is None or self._order_memo[0] != seed:
            self._order_memo = (seed, self.order(seed))
        return self._order_memo[1]

    def iter_groups(self) -> Iterator[StoredGroup]:
        """Every group in storage order (for summaries and exports)."""
        for index in range(len(self.manifest.shards)):
            yield from self._load_shard(index)
