"""Reading rows from local data files and from Hugging Face Hub data set repositories.

Formats: JSON Lines (``.jsonl``, and ``.json`` files that hold one object a line), JSON arrays
(``.json``) and Parquet (``.parquet``, read one record batch at a time so a large shard never
sits in memory twice). A directory is searched recursively; when its file names carry split names
(``train``, ``test``, ``valid``/``validation``) only the requested split's files are read.

Hub ids are resolved with ``huggingface_hub`` (already a dependency of transformers): the data
files of the requested split are downloaded into the usual Hub cache, then read like local files.
``datasets`` is deliberately not used: its loading scripts are gone in ``datasets >= 4`` and its
Arrow cache doubles the disk footprint of code_contests. With ``HF_HUB_OFFLINE=1`` a data set
already in the cache loads without network.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DATA_SUFFIXES = (".jsonl", ".json", ".parquet")
SPLIT_ALIASES: dict[str, tuple[str, ...]] = {
    "train": ("train", "training"),
    "test": ("test",),
    "valid": ("valid", "validation", "val", "dev"),
    "validation": ("valid", "validation", "val", "dev"),
}
_KNOWN_SPLIT_WORDS = {alias for aliases in SPLIT_ALIASES.values() for alias in aliases}
_PARQUET_BATCH_ROWS = 64


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


def hub_data_files(repo_id: str, split: str, *, revision: str | None = None) -> list[Path]:
    """Download (or find in the cache) the data files of a Hub data set's split."""
    try:
        from huggingface_hub import HfApi, hf_hub_download
    except ImportError as exc:  # pragma: no cover - transformers always brings huggingface_hub
        raise ImportError("loading a Hub data set needs `pip install huggingface_hub`") from exc
    try:
        files = HfApi().list_repo_files(repo_id, repo_type="dataset", revision=revision)
    except Exception as exc:
        raise FileNotFoundError(
            f"could not list the Hub data set {repo_id!r} ({exc}). Offline? Download it elsewhere and pass "
            "a local directory or file (jsonl/json/parquet) as the source instead."
        ) from exc
    chosen = select_split_files(files, split)
    if not chosen:
        raise FileNotFoundError(f"Hub data set {repo_id!r} has no {', '.join(DATA_SUFFIXES)} files")
    return [Path(hf_hub_download(repo_id, name, repo_type="dataset", revision=revision)) for name in chosen]


def _json_rows(path: Path) -> Iterator[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if stripped.startswith("["):
        rows = json.loads(text)
        yield from rows
        return
    if stripped.startswith("{") and path.suffix.lower() == ".json":
        try:
            whole = json.loads(text)
        except json.JSONDecodeError:
            whole = None  # one object a line
        if isinstance(whole, dict):
            if isinstance(whole.get("data"), list):
                yield from whole["data"]
            else:
                yield whole
            return
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not a JSON object ({exc})") from exc


def _parquet_rows(path: Path) -> Iterator[dict[str, Any]]:
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(path)
    for batch in parquet.iter_batches(batch_size=_PARQUET_BATCH_ROWS):
        yield from batch.to_pylist()


def iter_rows(paths: list[Path]) -> Iterator[dict[str, Any]]:
    """Every row of every file, in order."""
    for path in paths:
        reader = _parquet_rows if path.suffix.lower() == ".parquet" else _json_rows
        yield from reader(path)


def first_row(paths: list[Path]) -> dict[str, Any] | None:
    """The first row (for schema detection); ``None`` when the files are empty."""
    return next(iter_rows(paths), None)
