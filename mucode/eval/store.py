"""On-disk cache of one evaluation run, so a partial run resumes without redoing work.

Layout under `<run_dir>/<benchmark>/`:
- `manifest.json`: the settings that make generated samples comparable (model, prompt style,
  sampling settings, …). Resuming with different settings is refused instead of mixing samples.
- `samples.jsonl`: one line per generated sample `{"id", "index", "prompt", "response"}`, appended
  as each group of samples finishes. `prompt` fingerprints the prompt the sample answers; a sample
  is reused only for the same prompt (a problem whose text or id mapping changed is sampled anew).
- `verdicts.jsonl`: one line per verified part of a sample `{"id", "index", "part", "sha",
  "reward", "status"}`, appended after each verified chunk. `sha` fingerprints the exact item sent
  to the verifier (program, response, spec); a verdict is reused for any identical item, and
  infrastructure failures (`verifier_error`, `sandbox_error`) are never reused: they are retried on
  the next run.

Lines are appended and flushed one at a time; a torn last line (a crash mid-write) is ignored.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from mucode.protocol import INFRA_STATUSES
from mucode.verifier.wire import encoded_tests

__all__ = ["INFRA_STATUSES", "RunStore", "StoreMismatch", "item_sha", "prompt_key"]
# INFRA_STATUSES: verifier statuses that say nothing about the response: never a score, never cached.


class StoreMismatch(RuntimeError):
    """The run directory holds samples made with other settings."""


_TESTS_DIGESTS: dict[int, tuple[object, str]] = {}
"""id(tests object) → (the object, kept alive so its id is not reused; its digest)."""
_TESTS_DIGESTS_MAX = 256


def _digest_of(tests: object) -> str:
    """Digest of a spec's test set, computed once per object: every sample of a problem shares one
    test-set object (up to tens of megabytes for LiveCodeBench), which must not be re-serialized
    per sample. Test sets are never mutated after they are built. It is the set's wire key
    (``encoded_tests``, kept for the client that sends it next: one encoding for both), or for what
    has no canonical JSON (NaN, objects JSON lacks) a digest of its lenient encoding."""
    hit = _TESTS_DIGESTS.get(id(tests))
    if hit is not None and hit[0] is tests:
        return hit[1]
    try:
        digest = encoded_tests(tests, keep=True)[0]
    except (TypeError, ValueError):
        digest = hashlib.sha256(json.dumps(tests, sort_keys=True, default=str).encode()).hexdigest()
    if len(_TESTS_DIGESTS) >= _TESTS_DIGESTS_MAX:
        _TESTS_DIGESTS.pop(next(iter(_TESTS_DIGESTS)))
    _TESTS_DIGESTS[id(tests)] = (tests, digest)
    return digest


def item_sha(item: dict[str, Any]) -> str:
    """A fingerprint of a verifier item (program, response and spec; the id is left out)."""
    spec = item.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("tests"), dict | list):
        spec = {**spec, "tests": {"sha256": _digest_of(spec["tests"])}}
    body = {"program": item.get("program"), "response": item.get("response"), "spec": spec}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:32]


def prompt_key(prompt: object) -> str:
    """A fingerprint of a prompt (chat messages or text), to tie cached samples to it."""
    return hashlib.sha256(json.dumps(prompt, sort_keys=True).encode()).hexdigest()[:16]


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    with path.open("rb+") as handle:  # end a line torn by a crash, so the next append starts clean
        handle.seek(0, 2)
        if handle.tell() > 0:
            handle.seek(-1, 2)
            if handle.read(1) != b"\n":
                handle.write(b"\n")
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line torn by a crash; its work is redone
    return rows


class RunStore:
    """Samples and verdicts of one benchmark in one run directory (None: keep nothing on disk)."""

    def __init__(self, root: Path | None, manifest: dict[str, Any]) -> None:
        self.root = root
        self.samples: dict[tuple[str, str], dict[int, str]] = {}
        self._verdicts: dict[str, dict[str, Any]] = {}
        if root is None:
            return
        root.mkdir(parents=True, exist_ok=True)
        manifest_path = root / "manifest.json"
        wanted = json.loads(json.dumps(manifest, default=str))
        if manifest_path.exists():
            found = json.loads(manifest_path.read_text())
            if found != wanted:
                diff = sorted(k for k in set(found) | set(wanted) if found.get(k) != wanted.get(k))
                raise StoreMismatch(
                    f"{root} holds a run with other settings ({', '.join(diff)} differ: "
                    f"{ {k: found.get(k) for k in diff} } there vs { {k: wanted.get(k) for k in diff} } now). "
                    f"Use another --run-dir, or delete {root} to start over."
                )
        else:
            manifest_path.write_text(json.dumps(wanted, indent=2, sort_keys=True))
        for row in _read_jsonl(root / "samples.jsonl"):
            key = (str(row["id"]), str(row.get("prompt", "")))
            self.samples.setdefault(key, {})[int(row["index"])] = row["response"]
        for row in _read_jsonl(root / "verdicts.jsonl"):
            if row.get("status") not in INFRA_STATUSES and "sha" in row:
                self._verdicts[str(row["sha"])] = row

    def _append(self, name: str, rows: list[dict[str, Any]]) -> None:
        if self.root is None or not rows:
            return
        with (self.root / name).open("a", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            handle.flush()

    def add_samples(self, problem_id: str, responses: list[str], prompt_key: str = "") -> None:
        """Record newly generated responses of a problem's prompt (indices continue after the cached ones)."""
        have = self.samples.setdefault((problem_id, prompt_key), {})
        rows = []
        for response in responses:
            index = len(have)
            have[index] = response
            rows.append({"id": problem_id, "index": index, "prompt": prompt_key, "response": response})
        self._append("samples.jsonl", rows)

    def responses(self, problem_id: str, n: int, prompt_key: str = "") -> list[str]:
        """The first n cached responses to this prompt of a problem (fewer if fewer are cached)."""
        have = self.samples.get((problem_id, prompt_key), {})
        return [have[i] for i in range(n) if i in have]

    def verdict(self, sha: str) -> dict[str, Any] | None:
        """The cached verdict of the item with this fingerprint (see `item_sha`), if any."""
        return self._verdicts.get(sha)

    def add_verdicts(self, rows: list[dict[str, Any]]) -> None:
        """Record verdicts `{"id", "index", "part", "sha", "reward", "status"}`; infra failures are not kept."""
        kept = [r for r in rows if r["status"] not in INFRA_STATUSES]
        for row in kept:
            self._verdicts[row["sha"]] = row
        self._append("verdicts.jsonl", kept)
