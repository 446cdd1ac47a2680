"""Checker tables: which special judge judges which problem, for data sets that carry none.

deepmind/code_contests has no checker sources: a problem whose statement accepts any of several
answers ("if there are multiple answers, print any of them") cannot be judged by comparing with its
one stored output. ``load_tasks(..., checkers=TABLE)`` gives those problems a checker, so they are
judged instead of dropped (``mucode.data.schemas``, ``code_contests``).

A table is a JSON object ``{key: entry}``, or a JSON/JSON Lines file of entries that carry their key
(``"name"``, or ``"contest_id"`` and ``"index"``), or such a mapping/list in Python. The key is the
problem's ``name`` (``"1548_E. Gregor and the Two Painters"``) or its Codeforces id
``"<cf_contest_id>/<cf_index>"`` (``"1548/E"``, the id other Codeforces sets use). An entry is

- ``{"source": str, "language"?: "python", "time_limit_s"?, "memory_limit_mb"?}``: a checker program
  (``spec.checker_program``; testlib-style, see docs/sandbox.md), or
- ``{"checker": "<name>"}``: a checker registered in ``mucode.sandbox.checkers.CHECKERS`` (built in
  or a plug-in of the ``mucode.checkers`` entry-point group).

Only the shape is checked here (the data layer knows no sandbox): the verifier validates the checker
itself (language, limits, Python source that compiles) when it first sees an item, a 422 naming the
field.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["CheckerTable", "checker_for", "load_checker_table"]

CheckerTable = dict[str, dict[str, Any]]
_PROGRAM_KEYS = {"source", "language", "time_limit_s", "memory_limit_mb"}


def _entry(key: str, raw: Mapping[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in raw.items() if k not in ("name", "contest_id", "index")}
    if "checker" in body:
        if set(body) != {"checker"} or not isinstance(body["checker"], str):
            raise ValueError(f"checker table entry {key!r}: {{'checker': NAME}} takes no other field")
        return {"checker": body["checker"]}
    unknown = set(body) - _PROGRAM_KEYS
    if unknown or not isinstance(body.get("source"), str) or not body["source"].strip():
        raise ValueError(
            f"checker table entry {key!r} needs 'source' (the checker program) or 'checker' (a "
            f"registered name); unknown fields: {sorted(unknown)}"
        )
    return {"checker_program": body}


def _key(raw: Mapping[str, Any]) -> str:
    if raw.get("name"):
        return str(raw["name"])
    if raw.get("contest_id") is not None and raw.get("index") is not None:
        return f"{raw['contest_id']}/{raw['index']}"
    raise ValueError(f"a checker table row needs 'name' or 'contest_id' and 'index'; got keys {sorted(raw)}")


def _rows(path: Path) -> Iterable[Any]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    data = json.loads(text)
    return data if isinstance(data, list) else [data]


def load_checker_table(source: str | Path | Mapping[str, Any] | Iterable[Mapping[str, Any]]) -> CheckerTable:
    """The table ``source`` (module docstring) as ``{key: spec fields}``; raises ValueError naming
    the bad entry."""
    rows: Iterable[Any]
    if isinstance(source, (str, Path)):
        rows = _rows(Path(source).expanduser())
    elif isinstance(source, Mapping):
        rows = [source]
    else:
        rows = source
    table: CheckerTable = {}
    for row in rows:
        if not isinstance(row, Mapping):
            raise ValueError(f"a checker table holds JSON objects, not {type(row).__name__}")
        keyed = any(k in row for k in ("name", "contest_id"))
        pairs = [(_key(row), row)] if keyed else list(row.items())
        for key, raw in pairs:
            if not isinstance(raw, Mapping):
                raise ValueError(f"checker table entry {key!r} must be an object, not {type(raw).__name__}")
            if key in table:
                raise ValueError(f"checker table has two entries for {key!r}")
            table[str(key)] = _entry(str(key), raw)
    return table


def checker_for(row: Mapping[str, Any], table: CheckerTable | None) -> dict[str, Any] | None:
    """The spec fields (``checker_program`` or ``checker``) of a code_contests row, by its ``name``
    or ``cf_contest_id/cf_index``; None when the table has neither."""
    if not table:
        return None
    found = table.get(str(row.get("name") or ""))
    if found is None and row.get("cf_contest_id") and row.get("cf_index"):
        found = table.get(f"{row['cf_contest_id']}/{row['cf_index']}")
    return dict(found) if found is not None else None
