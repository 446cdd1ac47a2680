"""Reading benchmark files from the Hugging Face Hub or from a local copy of a Hub repository.

Only `huggingface_hub` is used (imported when a download is needed), never `datasets` loading
scripts and never `trust_remote_code`. Files are read with the standard library (JSON, JSON Lines)
or pyarrow (Parquet).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["HubError", "download_dataset_file", "iter_records", "list_dataset_files", "read_records"]


class HubError(RuntimeError):
    """A benchmark's files could not be found or fetched; the message says how to get them offline."""


def download_dataset_file(repo_id: str, filename: str, *, revision: str | None = None) -> Path:
    """Fetch one file of a Hub dataset repository (cached by huggingface_hub) and return its local path."""
    try:
        from huggingface_hub import hf_hub_download
    except ImportError as err:  # pragma: no cover - huggingface_hub comes with transformers
        raise HubError("reading from the Hub needs huggingface_hub: pip install huggingface_hub") from err
    try:
        return Path(hf_hub_download(repo_id, filename, repo_type="dataset", revision=revision))
    except Exception as err:
        raise HubError(
            f"could not fetch {filename} of the Hub dataset {repo_id}: {err}. Offline, download the "
            f"repository's files elsewhere and pass their directory (--data-dir)."
        ) from err


def list_dataset_files(repo_id: str, *, revision: str | None = None) -> list[str]:
    """Every file path in a Hub dataset repository."""
    try:
        from huggingface_hub import list_repo_files
    except ImportError as err:  # pragma: no cover
        raise HubError("reading from the Hub needs huggingface_hub: pip install huggingface_hub") from err
    try:
        return list(list_repo_files(repo_id, repo_type="dataset", revision=revision))
    except Exception as err:
        raise HubError(
            f"could not list the files of the Hub dataset {repo_id}: {err}. Offline, pass a local copy (--data-dir)."
        ) from err


def iter_records(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of a file, streamed line by line for JSON Lines (LiveCodeBench's files reach gigabytes)."""
    if path.suffix.lower() != ".jsonl":
        yield from read_records(path)
        return
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as err:
                    raise HubError(f"{path}:{number}: not JSON ({err})") from err


def read_records(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSON Lines, JSON (a list, or a dict holding one list) or Parquet file."""
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if suffix == ".json" and stripped.startswith(("[", "{")):
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None  # a JSON Lines file named .json (several objects)
        if isinstance(data, list):
            return data
        if isinstance(data, dict):
            lists = [v for v in data.values() if isinstance(v, list)]
            if len(lists) == 1 and all(isinstance(r, dict) for r in lists[0]):
                return lists[0]
            return [data]
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise HubError(f"{path}:{number}: not JSON ({err})") from err
    return rows
