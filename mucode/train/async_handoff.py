"""Weight hand-off of asynchronous μ-GRPO: the trainer publishes policy versions, generators load the latest.

One interface, :class:`PolicyHandoff`: :meth:`~PolicyHandoff.publish` (trainer) and
:meth:`~PolicyHandoff.latest` (generators). A version is the trainer's update count when it was
published; version 0 is the base policy.

:class:`FileHandoff` (CPU, one machine; also what GPUs use today, see below)::

    weights/
      v-00000004/     # an HF policy directory; written as .v-00000004.tmp, every file fsynced, renamed
      LATEST          # {"version": 4, "path": ".../v-00000004"}: replaced atomically after the rename

A reader follows only ``LATEST``, which names a directory only once it is complete, so a generator
never reads a half-written policy (tested with a writer killed mid-publish). The ``keep`` newest
versions stay on disk; a reader whose directory was deleted under it (it fell ``keep`` versions
behind while loading) reads the pointer again (:func:`load_latest`).

The other implementation, ``asynchronous.handoff=push`` (``mucode.train.async_push``), broadcasts the
weights from the trainer's memory over a torch.distributed pair group per generator (nccl on GPUs,
gloo on CPU), each message closed by a version trailer. Either way a generator loads a new version
into its running engine (``mucode.train.async_engine``), it does not start a new one.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

__all__ = ["FileHandoff", "PolicyHandoff", "PolicyVersion", "load_latest", "make_handoff"]

POINTER = "LATEST"
T = TypeVar("T")


@dataclass(frozen=True)
class PolicyVersion:
    version: int
    """The trainer's update count when this policy was published."""
    path: str
    """Where the policy lies (an HF directory; the base model's path for version 0; empty when pushed)."""
    weights: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    """The policy's tensors by HF name when they came in memory (the push hand-off), else None."""


class PolicyHandoff(Protocol):
    """How policy versions go from the trainer to the generators."""

    def publish(
        self, version: int, save: Callable[[Path], None], tensors: Callable[[], Iterable[tuple[str, Any]]]
    ) -> float:
        """Make ``version`` the latest: ``save(directory)`` writes the policy, ``tensors()`` gives its
        ``(hf_name, tensor)`` pairs (each implementation uses one). Returns the seconds it took the trainer."""
        ...

    def publish_path(self, version: int, path: str) -> None:
        """Make ``version`` the latest, naming an existing policy (the base model) instead of writing one."""
        ...

    def latest(self) -> PolicyVersion | None:
        """The newest complete version, or None before the first publish."""
        ...

    def drop_after(self, version: int) -> None:
        """On resume: forget versions newer than the checkpoint (never consumed by the resumed trainer)."""
        ...


def _fsync_tree(root: Path) -> None:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            with path.open("rb") as f:
                os.fsync(f.fileno())
    fd = os.open(root, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FileHandoff:
    """Versions as directories under ``root`` and an atomically replaced pointer (see the module doc)."""

    def __init__(self, root: Path, keep: int = 3) -> None:
        self.root = Path(root)
        self.keep = max(2, keep)

    def _write_pointer(self, version: int, path: str) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".{POINTER}.tmp"
        with tmp.open("w") as f:
            json.dump({"version": version, "path": path}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.root / POINTER)

    def publish_path(self, version: int, path: str) -> None:
        self._write_pointer(version, path)

    def publish(
        self,
        version: int,
        save: Callable[[Path], None],
        tensors: Callable[[], Iterable[tuple[str, Any]]] | None = None,
    ) -> float:
        start = time.perf_counter()
        final = self.root / f"v-{version:08d}"
        tmp = self.root / f".v-{version:08d}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        self.root.mkdir(parents=True, exist_ok=True)
        save(tmp)  # writes the directory ``tmp`` (save_policy makes it itself)
        _fsync_tree(tmp)
        if final.exists():  # a resumed trainer publishes the same version again: same weights
            shutil.rmtree(final)
        os.replace(tmp, final)
        self._write_pointer(version, str(final))
        self._prune()
        return time.perf_counter() - start

    def _prune(self) -> None:
        versions = sorted(self.root.glob("v-[0-9]*"))
        for old in versions[: -self.keep]:
            shutil.rmtree(old, ignore_errors=True)
        for stale in self.root.glob(".v-*.tmp"):  # a publish that died half-way
            shutil.rmtree(stale, ignore_errors=True)

    def latest(self) -> PolicyVersion | None:
        try:
            obj = json.loads((self.root / POINTER).read_text())
        except FileNotFoundError:
            return None
        return PolicyVersion(version=int(obj["version"]), path=str(obj["path"]))

    def drop_after(self, version: int) -> None:
        """On resume: forget versions newer than the checkpoint."""
        for path in self.root.glob("v-[0-9]*"):
            if int(path.name.removeprefix("v-")) > version:
                shutil.rmtree(path, ignore_errors=True)


def load_latest(
    handoff: PolicyHandoff, load: Callable[[PolicyVersion], T], attempts: int = 5
) -> tuple[PolicyVersion, T]:
    """``load`` the latest version; if its directory vanished while loading (pruned), read the pointer again."""
    for attempt in range(attempts):
        current = handoff.latest()
        if current is None:
            raise RuntimeError("no policy version has been published yet")
        try:
            return current, load(current)
        except (FileNotFoundError, OSError):
            if attempt == attempts - 1:
                raise
            time.sleep(0.05)
    raise AssertionError("unreachable")


def make_handoff(run_dir: Path) -> FileHandoff:
    """The run's hand-off (the file hand-off on every device, see the module doc)."""
    return FileHandoff(Path(run_dir) / "weights")
