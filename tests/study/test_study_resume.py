"""A study run killed mid-stage resumes from its checkpoint, through the study's own runner.

Real parts: the worker process runs mucode's trainer on the chain task; the test kills it (SIGKILL,
no clean-up) once it has logged an update past its first checkpoint, then ``run_grid`` resumes it.
The resumed run's metrics must hold every update exactly once and its log must say where it resumed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mucode.study.grid import get_study
from mucode.study.runner import grid, run_grid

pytestmark = pytest.mark.slow


def _updates(run: Path) -> list[int]:
    path = run / "metrics.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r["update"] for r in rows if "event" not in r]


@pytest.mark.timeout(1200)
def test_a_killed_run_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    (spec,) = grid(get_study("veto-scopes"), tmp_path, 1, updates=16, variants=["veto=sequence"], heldout_every=4,
                   base_steps=40)  # fmt: skip
    spec = dataclasses.replace(spec, overrides=[*spec.overrides, "train.checkpoint_every=4"])
    spec.path.mkdir(parents=True)
    (spec.path / "spec.json").write_text(json.dumps(dataclasses.asdict(spec)))
    first_log = tmp_path / "first-worker.log"
    with open(first_log, "w") as sink:
        worker = subprocess.Popen(
            [sys.executable, "-m", "mucode.study.worker", str(spec.path / "spec.json")],
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 600
    while (
        not [u for u in _updates(spec.path) if u > 5]
        and worker.poll() is None
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    ended = worker.poll()  # None: still running, as it should be when it is killed
    os.killpg(worker.pid, signal.SIGKILL)
    worker.wait()
    updates = _updates(spec.path)
    why = f"worker exit {ended}, updates {updates}, its log ends: {first_log.read_text()[-2000:]}"
    assert ended is None and updates and 5 < max(updates) < 16, why
    assert not spec.done() and spec.started(), why

    (outcome,) = run_grid([spec], jobs=1, say=lambda _: None)
    assert outcome["ok"], outcome["tail"]
    log = (spec.path / "worker.log").read_text()
    assert "resuming at stage 0, update " in log and "(global 0)" not in log  # from a checkpoint
    assert _updates(spec.path) == list(range(1, 17))  # each update once: rewound to the checkpoint
    heldout = [json.loads(line) for line in (spec.path / "metrics.jsonl").read_text().splitlines()]
    assert [e["update"] for e in heldout if e.get("event") == "heldout"] == [0, 4, 8, 12, 16]
