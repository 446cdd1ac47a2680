"""LiveCodeBench problems (`livecodebench/code_generation_lite`), read from its release files.

The Hub repository holds one JSON Lines file per release increment: `test.jsonl`, `test2.jsonl` …
`test6.jsonl`. Release names are LiveCodeBench's own (its loading script's `version_tag`):
`release_vN` is cumulative, the first N files (release_v5: 880 problems to Jan 2025, release_v6:
1055 to Apr 2025), `release_latest` all of them; `vN` is file N alone (v5: `test5.jsonl` only);
`vA_vB` the files A to B. Its loading script needs `trust_remote_code`, which
datasets ≥ 4 refuses, so the files are read directly, from the Hub (huggingface_hub) or from a local
directory holding them. A contest-date window narrows any release.

Fields as in the release files: question_title, question_content, platform, question_id,
contest_id, contest_date (ISO), starter_code, difficulty, public_test_cases (a JSON list of
{input, output, testtype}), private_test_cases (the same JSON, or base64 → zlib → pickle → that JSON
string), metadata (JSON with func_name for functional problems).

The pickled private tests are unpickled with a restricted unpickler that accepts only plain values
(the payload is one string), so a tampered file cannot run code on load.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any, Literal

from mucode.data.files import HubError, download_dataset_file, iter_file_rows

__all__ = [
    "LCB_HUB_ID",
    "RELEASE_FILES",
    "LCBProblem",
    "LCBTest",
    "decode_test_cases",
    "load_livecodebench",
    "parse_problem",
    "release_files",
]

LCB_HUB_ID = "livecodebench/code_generation_lite"

_INCREMENTS = ["test.jsonl", "test2.jsonl", "test3.jsonl", "test4.jsonl", "test5.jsonl", "test6.jsonl"]


def _release_table() -> dict[str, list[str]]:
    n = len(_INCREMENTS)
    table = {f"release_v{i}": _INCREMENTS[:i] for i in range(1, n + 1)}
    table["release_latest"] = list(_INCREMENTS)
    table.update({f"v{i}": [_INCREMENTS[i - 1]] for i in range(1, n + 1)})
    table.update({f"v{a}_v{b}": _INCREMENTS[a - 1 : b] for a in range(1, n + 1) for b in range(a + 1, n + 1)})
    return table


RELEASE_FILES: dict[str, list[str]] = _release_table()
"""LiveCodeBench release name → the files it is made of."""


def release_files(release: str) -> list[str]:
    """Files of a release, named as LiveCodeBench names them (`release_v5`, `v5`, `v1_v3`, `release_latest`)."""
    if release not in RELEASE_FILES:
        raise ValueError(
            f"unknown LiveCodeBench release {release!r}; valid: release_v1…release_v{len(_INCREMENTS)} "
            f"(cumulative), release_latest, v1…v{len(_INCREMENTS)} (one file), vA_vB (files A to B)"
        )
    return RELEASE_FILES[release]


@dataclass(frozen=True)
class LCBTest:
    input: str
    output: str
    testtype: Literal["stdin", "functional"]


@dataclass(frozen=True)
class LCBProblem:
    question_id: str
    title: str
    content: str
    platform: str
    contest_id: str
    contest_date: datetime
    starter_code: str
    difficulty: str
    public_tests: tuple[LCBTest, ...]
    private_tests: tuple[LCBTest, ...]
    func_name: str | None

    @property
    def tests(self) -> tuple[LCBTest, ...]:
        """Public then private tests: a sample passes only if it passes all of them."""
        return self.public_tests + self.private_tests

    @property
    def is_functional(self) -> bool:
        return self.func_name is not None


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}: LiveCodeBench tests are plain data")


def decode_test_cases(raw: str | list[Any]) -> list[dict[str, Any]]:
    """Test cases from plain JSON or from base64 → zlib → pickle → JSON (LiveCodeBench's private tests)."""
    if isinstance(raw, list):
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        pass
    try:
        payload = _PlainUnpickler(io.BytesIO(zlib.decompress(base64.b64decode(raw.encode("utf-8"))))).load()
    except Exception as err:
        raise ValueError(f"test cases are neither JSON nor base64/zlib/pickle-encoded JSON: {err}") from err
    return json.loads(payload) if isinstance(payload, str | bytes) else payload


def _tests(raw: str | list[Any]) -> tuple[LCBTest, ...]:
    return tuple(LCBTest(str(t["input"]), str(t["output"]), t["testtype"]) for t in decode_test_cases(raw))


def parse_problem(row: dict[str, Any]) -> LCBProblem:
    """One release-file row → LCBProblem (tests decoded, metadata parsed)."""
    metadata = row.get("metadata") or "{}"
    meta = json.loads(metadata) if isinstance(metadata, str) else dict(metadata)
    public, private = _tests(row["public_test_cases"]), _tests(row.get("private_test_cases") or "[]")
    kinds = {t.testtype for t in public + private}
    func_name = meta.get("func_name")
    if "functional" in kinds and not func_name:
        raise ValueError(f"problem {row['question_id']}: functional tests but no metadata.func_name")
    if kinds == {"stdin"}:
        func_name = None
    if len(kinds) > 1:
        raise ValueError(f"problem {row['question_id']}: mixes test types {sorted(kinds)}")
    contest_date = row["contest_date"]
    if not isinstance(contest_date, datetime):
        contest_date = datetime.fromisoformat(str(contest_date))
    return LCBProblem(
        question_id=str(row["question_id"]),
        title=row.get("question_title", ""),
        content=row["question_content"],
        platform=str(row.get("platform", "unknown")),
        contest_id=str(row.get("contest_id", "")),
        contest_date=contest_date,
        starter_code=row.get("starter_code") or "",
        difficulty=str(row.get("difficulty", "unknown")),
        public_tests=public,
        private_tests=private,
        func_name=func_name,
    )


def _as_datetime(value: str | date | datetime | None, *, end_of_day: bool = False) -> datetime | None:
    """A naive datetime; a bare date means its first instant, or its last with `end_of_day`."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value) if "T" in value or " " in value else date.fromisoformat(value)
    if isinstance(value, datetime):
        return value.replace(tzinfo=None)
    moment = datetime(value.year, value.month, value.day)
    return moment.replace(hour=23, minute=59, second=59, microsecond=999999) if end_of_day else moment


def _file_paths(files: Iterable[str], source: str | Path | None, revision: str | None) -> list[Path]:
    if source is None:
        return [download_dataset_file(LCB_HUB_ID, name, revision=revision) for name in files]
    root = Path(source)
    paths = [root / name for name in files]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise HubError(
            f"{root} lacks {', '.join(missing)} of LiveCodeBench; copy them from the Hub dataset {LCB_HUB_ID} "
            f"or pick an earlier release"
        )
    return paths


def load_livecodebench(
    release: str = "release_latest",
    *,
    source: str | Path | None = None,
    start_date: str | date | datetime | None = None,
    end_date: str | date | datetime | None = None,
    revision: str | None = None,
    limit: int | None = None,
) -> list[LCBProblem]:
    """Problems of a release, from the Hub (`source=None`) or a directory of its files.

    `start_date`/`end_date` (ISO dates, inclusive) keep problems whose contest_date falls in the
    window; an end date without a time includes that whole day. `limit` keeps the first problems.
    """
    start, end = _as_datetime(start_date), _as_datetime(end_date, end_of_day=True)
    problems: list[LCBProblem] = []
    seen: set[str] = set()
    for path in _file_paths(release_files(release), source, revision):
        for row in iter_file_rows(path):
            moment = datetime.fromisoformat(str(row["contest_date"])).replace(tzinfo=None)
            if (start is not None and moment < start) or (end is not None and moment > end):
                continue  # before decoding the (large) private tests
            if str(row["question_id"]) in seen:
                continue
            problem = parse_problem(row)
            seen.add(problem.question_id)
            problems.append(problem)
    if limit is not None:
        problems = problems[:limit]
    return problems
