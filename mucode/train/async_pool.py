"""The trainer's generator processes: started first, told to go once the trainer is ready, restarted when
they die.

Start-up overlaps: :meth:`GeneratorPool.start` runs before the trainer loads its data and policy
(and, from ``mucode train``, before it imports torch: :func:`start_generators`; this module imports
neither). Each
process (``python -m mucode.train.async_generator``) gets the resolved config as its first stdin line
and loads the tokenizer, the data and its engine meanwhile; :meth:`GeneratorPool.go` sends the second
line (verifier URLs, its log file, the hand-off to join) when the trainer has prepared the run and
published version 0. Until then a generator writes to the trainer's stderr (a failing import shows in
the trainer's console); afterwards to ``async/gen-GG.log``. A process restarted by
:meth:`GeneratorPool.supervise` gets both lines at once. :meth:`GeneratorPool.stop` ends them: it
closes their stdin (a generator still waiting for its start message exits), waits for those that are
finishing, and terminates the rest; ``abort=True`` (the trainer failed) terminates at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from mucode.config import MucodeConfig
from mucode.train.plan import run_path

__all__ = ["GeneratorPool", "start_generators"]


class GeneratorPool:
    """``asynchronous.generators`` generator processes of one run (see the module doc)."""

    def __init__(self, cfg: MucodeConfig, run_dir: Path) -> None:
        self.cfg, self.run_dir, self.a = cfg, run_dir, cfg.asynchronous
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.start_message: dict[str, Any] | None = None
        self.restarts = 0

    def log(self, index: int) -> Path:
        return self.run_dir / "async" / f"gen-{index:02d}.log"

    def _send(self, index: int, message: dict[str, Any]) -> None:
        stdin: IO[bytes] | None = self.procs[index].stdin
        assert stdin is not None
        with contextlib.suppress(BrokenPipeError, OSError):  # a dead process: supervise() says so
            stdin.write((json.dumps(message) + "\n").encode())
            stdin.flush()

    def spawn(self, index: int) -> None:
        old = self.procs.get(index)
        if old is not None and old.stdin is not None:  # a dead one's pipe
            with contextlib.suppress(OSError):
                old.stdin.close()
        env = os.environ.copy()
        if self.a.generator_devices:
            env["CUDA_VISIBLE_DEVICES"] = str(self.a.generator_devices[index % len(self.a.generator_devices)])
        self.procs[index] = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mucode.train.async_generator",
                str(self.run_dir),
                str(index),
                str(os.getpid()),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            env=env,
        )
        self._send(index, {"config": self.cfg.model_dump(mode="json"), "spawned_at": time.time()})
        if self.start_message is not None:
            self._send(index, {**self.start_message, "log": str(self.log(index))})

    def start(self) -> None:
        for index in range(self.a.generators):
            self.spawn(index)

    def go(self, urls: list[str], handoff: dict[str, str]) -> None:
        """The trainer is ready: every generator may sample (verifier ``urls``, the hand-off to join)."""
        self.log(0).parent.mkdir(parents=True, exist_ok=True)
        self.start_message = {"urls": list(urls), "handoff": handoff}
        for index in self.procs:
            self._send(index, {**self.start_message, "log": str(self.log(index))})

    def dead(self) -> list[tuple[int, int]]:
        """``(index, exit code)`` of the generators that ended with an error."""
        return [(i, code) for i, p in self.procs.items() if (code := p.poll()) is not None and code != 0]

    def stop(self, abort: bool = False) -> None:
        for proc in self.procs.values():
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
        for proc in self.procs.values():
            if proc.poll() is None and not abort:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=30)
            if proc.poll() is None:
                proc.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=10)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.procs.clear()


def start_generators(cfg: MucodeConfig) -> GeneratorPool:
    """Start the run's generator processes now (``mucode train`` does so before importing torch, so that
    their start-up overlaps the trainer's own); ``run_async_training(cfg, pool=...)`` takes them over."""
    pool = GeneratorPool(cfg, run_path(cfg.train))
    pool.start()
    return pool
