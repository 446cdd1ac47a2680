"""One reading layer for data files, local or on the Hugging Face Hub: training sets and benchmarks.

``mucode.data.loader`` (training sets) and the evaluators (``mucode.eval``: math benchmarks,
LiveCodeBench, samples files) read rows only through this module.

Formats: JSON Lines (``.jsonl``, and ``.json`` files that hold one object a line), JSON arrays
(``.json``), a JSON object holding one list of rows (``{"data": [...]}``) and Parquet
(``.parquet``). A directory is searched recursively; when its file names carry split names
(``train``, ``test``, ``valid``/``validation``) only the requested split's files are read.

**Loader.** Rows are read with ``datasets`` (``load_dataset("parquet"|"json", data_files=[file],
streaming=True)``): streamed a chunk at a time, never copied into an Arrow cache on disk, so a
large set neither sits in memory whole nor doubles its disk footprint. Arrow types each column once,
which the standard-library reader does not need, so for JSON:

- a column whose values differ in type between rows (a string in one row and an object in another;
  TRL rows mixing chat messages and plain prompts) cannot be typed: ``datasets`` is told not to
  paper over it (``on_mixed_types=None``: its ``Json`` columns would decode strings that look like
  JSON, turning ``"4"`` into ``4`` and ``"null"`` into ``None``) and the file is read on from the
  first row it did not deliver with the standard library (``json``), logged at INFO with the reason;
- nested objects whose keys differ between rows would each get the union of the keys, the missing
  ones as nulls (a math spec would gain ``"tests": None``); the first row carrying a null inside an
  object switches the rest of the file to the standard library the same way;
- a key missing from a row reads as ``None`` and integers in a column that also holds decimals read
  as decimals (as Parquet files always did).

A ``.json`` file whose text starts with ``{`` (one object, ``{"data": [...]}``, or objects one a
line) is read by the standard library only: ``datasets`` would take ``{"data": [...]}`` for one row.
A file ``datasets`` fails on for any other reason (malformed JSON) is read by the standard library,
whose error names the file and line.

**Hub.** Repository files are listed and fetched with ``huggingface_hub`` into the usual Hub cache
(``HF_HUB_OFFLINE=1`` reads a cached file without network), then read like local files; no loading
scripts, never ``trust_remote_code``. Local files need no network (``HF_DATASETS_OFFLINE=1`` changes
nothing for them). Limit: ``datasets`` leaves a small ``.lock`` file per data file set in its cache
directory (``HF_DATASETS_CACHE``).
"""

from __future__ import annotations

import itertools
import json
import logging
import re
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "DATA_SUFFIXES",
    "HubError",
    "download_dataset_file",
    "first_row",
    "hub_data_files",
    "iter_file_rows",
    "iter_rows",
    "json_lines",
    "list_dataset_files",
    "local_data_files",
    "read_rows",
    "select_split_files",
]

logger = logging.getLogger(__name__)

DATA_SUFFIXES = (".jsonl", ".json", ".parquet")
SPLIT_ALIASES: dict[str, tuple[str, ...]] = {
    "train": ("train", "training"),
    "test": ("test",),
    "valid": ("valid", "validation", "val", "dev"),
    "validation": ("valid", "validation", "val", "dev"),
}
_KNOWN_SPLIT_WORDS = {alias for aliases in SPLIT_ALIASES.values() for alias in aliases}
_BATCH_ROWS = 64
"""Rows decoded to Python at a time, unless they hold more than ``_BATCH_BYTES`` together."""
_BATCH_BYTES = 32 << 20
_OFFLINE_HINT = (
    "Offline, download the repository's files elsewhere and pass their local directory "
    "instead (--data-dir for benchmarks, data.source for training)"
)


class HubError(FileNotFoundError):
    """A data set's files could not be found or fetched; the message says how to get them offline."""


def _split_words(path: str) -> set[str]:
    return {word for word in re.split(r"[/_.\-]+", path.lower()) if word}


def select_split_files(paths: list[str], split: str) -> list[str]:
    """The files of ``split`` among ``paths`` (sorted).

    Files whose path names the split are chosen; if no file names any split, all files are the
    split (e.g. DeepScaleR's single ``deepscaler.json`` is its train split).
    """
    data = sorted(p for p in paths if p.lower().endswith(DATA_SUFFIXES))
    wanted = set(SPLIT_ALIASES.get(split, (split,)))
    chosen = [p for p in data if _split_words(p) & wanted]
    if chosen:
        return chosen
    if any(_split_words(p) & _KNOWN_SPLIT_WORDS for p in data):
        names = sorted({w for p in data for w in _split_words(p) & _KNOWN_SPLIT_WORDS})
        raise FileNotFoundError(
            f"no data file for split {split!r}; the files name these splits: {names}. Pass split=<one of them>."
        )
    return data


def local_data_files(path: Path, split: str) -> list[Path]:
    """The data files a local file or directory stands for."""
    if path.is_file():
        if not path.name.lower().endswith(DATA_SUFFIXES):
            raise ValueError(f"{path}: unsupported file type; use one of {', '.join(DATA_SUFFIXES)}")
        return [path]
    files = [str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()]
    chosen = select_split_files(files, split)
    if not chosen:
        raise FileNotFoundError(f"{path}: no {', '.join(DATA_SUFFIXES)} files found in this directory")
    return [path / name for name in chosen]


def list_dataset_files(repo_id: str, *, revision: str | None = None) -> list[str]:
    """Every file path in a Hub data set repository; raises :class:`HubError` with the offline recipe."""
    from huggingface_hub import list_repo_files  # lazy: huggingface_hub (comes with transformers)

    try:
        return list(list_repo_files(repo_id, repo_type="dataset", revision=revision))
    except Exception as err:
        raise HubError(
            f"could not list the files of the Hub data set {repo_id!r}: {err}. {_OFFLINE_HINT}."
        ) from err


def download_dataset_file(repo_id: str, filename: str, *, revision: str | None = None) -> Path:
    """One file of a Hub data set repository, fetched into (or found in) the Hub cache."""
    from huggingface_hub import hf_hub_download  # lazy: huggingface_hub

    try:
        return Path(hf_hub_download(repo_id, filename, repo_type="dataset", revision=revision))
    except Exception as err:
        raise HubError(
            f"could not fetch {filename} of the Hub data set {repo_id!r}: {err}. {_OFFLINE_HINT}."
        ) from err


def hub_data_files(repo_id: str, split: str, *, revision: str | None = None) -> list[Path]:
    """Download (or find in the cache) the data files of a Hub data set's split."""
    chosen = select_split_files(list_dataset_files(repo_id, revision=revision), split)
    if not chosen:
        raise HubError(f"Hub data set {repo_id!r} has no {', '.join(DATA_SUFFIXES)} files")
    return [download_dataset_file(repo_id, name, revision=revision) for name in chosen]


def _builder(path: Path) -> str | None:
    """The ``datasets`` builder of a file, or None when only the standard library reads it right."""
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return "parquet"
    if suffix == ".json":
        with path.open("rb") as handle:
            head = handle.read(4096).lstrip()
        return None if head.startswith(b"{") or not head else "json"
    return "json" if suffix == ".jsonl" else None


class _TypingFailureFilter(logging.Filter):
    """Drops ``datasets``' ERROR record for a JSON file it cannot type: this module reads the file on
    and logs why at INFO, so the ERROR would report a failure that did not happen."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Failed to load JSON from file")


def _datasets_rows(path: Path, builder: str) -> Generator[dict[str, Any], None, None]:
    import datasets  # lazy: datasets

    json_logger = logging.getLogger("datasets.packaged_modules.json.json")
    if not any(isinstance(f, _TypingFailureFilter) for f in json_logger.filters):
        json_logger.addFilter(_TypingFailureFilter())
    options: dict[str, Any] = {"on_mixed_types": None} if builder == "json" else {}
    loaded = datasets.load_dataset(builder, data_files=[str(path)], split="train", streaming=True, **options)
    # Arrow batches turned into rows here: iterating the dataset row by row costs ~10x (per-row decoding)
    for table in loaded.with_format("arrow").iter(batch_size=_BATCH_ROWS):
        if table.nbytes <= _BATCH_BYTES:
            yield from table.to_pylist()
        else:  # large rows (LiveCodeBench's tests reach 100s of MB): one at a time into Python
            for index in range(table.num_rows):
                yield table.slice(index, 1).to_pylist()[0]


def _has_nested_null(row: dict[str, Any]) -> bool:
    """Whether an object below the row's top level holds a null (the mark of Arrow's key union)."""
    stack = [v for v in row.values() if isinstance(v, dict | list)]
    while stack:
        value = stack.pop()
        children = value.values() if isinstance(value, dict) else value
        for child in children:
            if isinstance(child, dict | list):
                stack.append(child)
            elif child is None and isinstance(value, dict):
                return True
    return False


def _json_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The standard-library reader: a JSON array, ``{"data": [...]}``, one object, or JSON Lines."""
    with path.open(encoding="utf-8") as handle:
        head = handle.read(4096).lstrip()
    if head.startswith("[") or (head.startswith("{") and path.suffix.lower() == ".json"):
        try:
            whole = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            whole = None  # objects one a line
        if isinstance(whole, list):
            yield from whole
            return
        if isinstance(whole, dict):
            lists = [v for v in whole.values() if isinstance(v, list)]
            yield from lists[0] if len(lists) == 1 and all(isinstance(r, dict) for r in lists[0]) else [whole]
            return
    for _, row in json_lines(path):
        yield row


def json_lines(path: str | Path) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of each non-blank line of a JSON Lines file, read line by line (LiveCodeBench's
    files reach gigabytes); a line that is not JSON raises ValueError naming ``file:line``."""
    with Path(path).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    yield number, json.loads(line)
                except json.JSONDecodeError as err:
                    raise ValueError(f"{path}:{number}: not JSON ({err})") from err


def _parquet_rows(path: Path) -> Iterator[dict[str, Any]]:
    import pyarrow.parquet as pq  # lazy: pyarrow

    for batch in pq.ParquetFile(path).iter_batches(batch_size=_BATCH_ROWS):
        yield from batch.to_pylist()


def _plain_rows(path: Path) -> Iterator[dict[str, Any]]:
    return _parquet_rows(path) if path.suffix.lower() == ".parquet" else _json_rows(path)


def iter_file_rows(path: Path) -> Iterator[dict[str, Any]]:
    """Every row of one file, in order: streamed by ``datasets``, else by the standard library (see above)."""
    builder = _builder(path)
    delivered = 0
    if builder is not None:
        rows = _datasets_rows(path, builder)
        reason = ""
        try:  # closed in every case: a half-read stream must not outlive its reader (Arrow threads)
            while not reason:
                try:
                    row = next(rows)
                except StopIteration:
                    return
                except Exception as err:  # Arrow could not type the file (mixed types), or malformed JSON
                    reason = f"datasets could not read it ({type(err).__name__}: {str(err)[:200]})"
                    break
                if builder == "json" and _has_nested_null(row):
                    reason = (
                        "nested objects differ in their keys (Arrow would fill the missing ones with nulls)"
                    )
                    break
                yield row
                delivered += 1
        finally:
            rows.close()
        logger.info("%s: reading rows %d… with the standard library: %s", path, delivered, reason)
    yield from itertools.islice(_plain_rows(path), delivered, None)


def iter_rows(paths: list[Path]) -> Iterator[dict[str, Any]]:
    """Every row of every file, in order."""
    for path in paths:
        yield from iter_file_rows(Path(path))


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Every row of one file, as a list."""
    return list(iter_file_rows(Path(path)))


def first_row(paths: list[Path]) -> dict[str, Any] | None:
    """The first row (for schema detection); ``None`` when the files are empty."""
    rows = iter_rows(paths)
    try:
        return next(rows, None)
    finally:
        rows.close()  # type: ignore[attr-defined]
