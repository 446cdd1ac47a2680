"""Asynchronous μ-GRPO with real processes on the CPU: generator processes and the trainer at once.

- two generators and one trainer on the small policy: every slot trained once, the lag bound held in
  every stored row, nothing dropped for age, the asynchronous figures in the summary;
- the invariant: with the smallest lag bound (``max_lag_updates = sync_every − 1``: 0 with
  ``sync_every = 1``) and a deterministic engine, the asynchronous run reproduces the staged run's
  stores and weights exactly (the staged run with ``updates_per_stage = sync_every``);
- SIGKILL of the trainer mid-run (its generators exit by themselves), then ``--resume``: the same
  stores and weights as the uninterrupted run; SIGKILL of a generator mid-stage: it is restarted, the
  run finishes with every slot once;
- the weight hand-off: a publisher killed half-way through writing leaves the previous version the
  latest and readable.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from train_helpers import run_overrides, write_tasks
from typer.testing import CliRunner

from mucode.cli.app import get_app
from mucode.config import ConfigError, load_config
from mucode.train.async_feed import update_slots
from mucode.train.async_generator import build_engine
from mucode.train.async_handoff import FileHandoff
from mucode.train.async_loop import run_async_training
from mucode.train.loop import run_training
from mucode.train.plot import plot_run
from mucode.train.report import load_run, render_report
from mucode.train.store import StageStore


def _async(policy: Path, data: Path, run_dir: Path, **extra: object) -> list[str]:
    values = {"asynchronous__enabled": True, "train__weight_sync": "disk", **extra}
    return run_overrides(policy, data, run_dir, **values)


def _rows(store: StageStore) -> list[tuple]:
    return sorted(
        (
            g.group_id,
            s.sample_index,
            tuple(s.response_tokens),
            tuple(round(x, 6) for x in s.behaviour_logprobs),
            s.reward,
            s.advantage,
            s.policy_version,
        )
        for g in store.iter_groups()
        for s in g.samples
    )


def _staleness(run_dir: Path, stages: int, mu: int, b: int) -> list[int]:
    out = []
    for k in range(stages):
        for g in StageStore.open(run_dir / "stages" / f"stage-{k:04d}").iter_groups():
            out.append(k * mu + g.group_id // b - g.samples[0].policy_version)
    return out


def test_lag_bound_below_the_sync_period_is_refused() -> None:
    with pytest.raises(ConfigError, match="max_lag_updates=1 is below asynchronous.sync_every - 1 = 3"):
        load_config(
            None, ["asynchronous.enabled=true", "asynchronous.sync_every=4", "asynchronous.max_lag_updates=1"]
        )


def test_verl_config_writes_verls_fully_async_keys() -> None:
    preset = Path(__file__).resolve().parents[2] / "configs" / "async_mu_grpo.yaml"
    out = CliRunner().invoke(get_app(), ["verl-config", "--config", str(preset)])
    assert out.exit_code == 0, out.output
    assert "verl.experimental.fully_async_policy.fully_async_main" in out.output
    assert "async_training.trigger_parameter_sync_step=4" in out.output
    assert "async_training.staleness_threshold=255.25" in out.output  # (1024 + 1) / 4 - 1


def test_two_generators_one_trainer_hold_the_lag_bound(
    small_policy: Path, plugins_on_path: Path, tmp_path: Path
) -> None:
    data = write_tasks(tmp_path / "tasks.jsonl", "parity")
    run_dir = tmp_path / "run"
    cfg = load_config(
        None,
        _async(
            small_policy,
            data,
            run_dir,
            asynchronous__generators=2,
            asynchronous__sync_every=1,
            asynchronous__max_lag_updates=2,
            batch__updates_per_stage=3,
        ),
    )
    result = run_async_training(cfg)
    assert result.state.global_update == 6
    stale = _staleness(run_dir, 2, 3, 2)
    assert len(stale) == 12 and min(stale) >= 0 and max(stale) <= 2  # every slot once, the bound held
    for k in (0, 1):
        store = StageStore.open(run_dir / "stages" / f"stage-{k:04d}")
        assert sorted(g.group_id for g in store.iter_groups()) == list(range(6))
        assert {p.parent.name for p in (store.path).glob("gen-*/manifest.json")} == {"gen-00", "gen-01"}
    totals = json.loads((run_dir / "summary.json").read_text())["totals"]
    assert totals["async/dropped_for_age"] == 0
    assert totals["async/staleness_max"] == max(stale)
    assert sum(totals["async/staleness_hist"].values()) == 12
    assert 0.0 <= totals["async/trainer_idle_ratio"] < 1.0
    assert totals["async/generator_starts"] == 2 and totals["async/generator_restarts"] == 0
    assert "asynchronous:" in (run_dir / "summary.txt").read_text()
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if '"event"' not in x]
    assert [r["update"] for r in rows] == list(range(1, 7))
    assert all(r["async/staleness_max"] <= 2 for r in rows)
    assert (run_dir / "plots" / "async.png") in plot_run(run_dir)


def _same_weights(a: Path, b: Path) -> None:
    wa, wb = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    assert wa.keys() == wb.keys()
    for name in wa:
        assert torch.equal(wa[name], wb[name]), name


@pytest.mark.parametrize("handoff", ["file", "push"])
def test_lag_bound_zero_reproduces_the_staged_run(
    small_policy: Path, plugins_on_path: Path, tmp_path: Path, handoff: str
) -> None:
    """max_lag_updates=0 (sync_every=1) against the staged run with one update per stage, with either weight
    hand-off (file: read from the published directory; push: broadcast over gloo), each loaded into the
    generator's running engine. (With
    sync_every = μ > 1 the groups are the same but the staged trainer visits a stage's groups in a shuffled
    storage order, the asynchronous one in slot order; the resume test covers that case's determinism.)"""
    sync_every = 1
    data = write_tasks(tmp_path / "tasks.jsonl", "parity")
    shape = {"batch__updates_per_stage": sync_every, "batch__num_stages": 4 // sync_every}
    staged_dir, async_dir = tmp_path / "staged", tmp_path / "async"
    staged_cfg = load_config(
        None, run_overrides(small_policy, data, staged_dir, train__weight_sync="disk", **shape)
    )
    run_training(
        staged_cfg, engine_factory=lambda stage, path, seed: build_engine(staged_cfg, str(path), seed)
    )
    async_cfg = load_config(
        None,
        _async(
            small_policy,
            data,
            async_dir,
            asynchronous__sync_every=sync_every,
            asynchronous__max_lag_updates=sync_every - 1,
            asynchronous__handoff=handoff,
            **shape,
        ),
    )
    run_async_training(async_cfg)
    for k in range(4 // sync_every):
        staged = StageStore.open(staged_dir / "stages" / f"stage-{k:04d}")
        got = StageStore.open(async_dir / "stages" / f"stage-{k:04d}")
        assert _rows(got) == _rows(staged)
        assert {s.policy_version for g in got.iter_groups() for s in g.samples} == {k * sync_every}
    gen = json.loads((async_dir / "async" / "gen-00.json").read_text())
    assert (gen["builds"], gen["loads"]) == (1, 3)  # one engine; versions 1-3 loaded into it
    last = f"stage-{4 // sync_every - 1:04d}"
    _same_weights(async_dir / "policy" / last, staged_dir / "policy" / last)
    report = render_report([load_run(staged_dir), load_run(async_dir)]).splitlines()
    assert "trainer idle %" in report[0] and "max lag" in report[0]
    end = report[0].index("max lag") + len("max lag")  # cells are right-aligned under their header
    assert report[2].startswith("staged") and report[2][end - 7 : end].strip() == "–"
    assert report[3].startswith("async") and report[3][end - 7 : end].strip() == "0"  # max lag 0
    start = load_file(small_policy / "model.safetensors")
    end = load_file(async_dir / "policy" / last / "model.safetensors")
    assert max(float((start[n] - end[n]).abs().max()) for n in start) > 1e-4  # training moved them


KILL_TRAINER_AFTER = """
import os, signal, sys
from mucode.config import load_config
from mucode.train.async_loop import run_async_training

def die(state):
    if state.global_update == int(sys.argv[1]):
        os.kill(os.getpid(), signal.SIGKILL)

run_async_training(load_config(None, sys.argv[2:]), on_update=die)
"""


def test_trainer_killed_mid_run_resumes_to_the_uninterrupted_run(
    small_policy: Path, plugins_on_path: Path, tmp_path: Path
) -> None:
    data = write_tasks(tmp_path / "tasks.jsonl", "parity")
    shape = {
        "batch__updates_per_stage": 2,
        "asynchronous__sync_every": 2,
        "asynchronous__max_lag_updates": 1,  # the smallest bound: the run is deterministic
        "asynchronous__generators": 2,
    }
    ref_dir, run_dir = tmp_path / "ref", tmp_path / "killed"
    run_async_training(load_config(None, _async(small_policy, data, ref_dir, **shape)))
    args = _async(small_policy, data, run_dir, **shape)
    killed = subprocess.run(
        [sys.executable, "-c", KILL_TRAINER_AFTER, "3", *args],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=300,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stdout[-2000:] + killed.stderr[-3000:]
    assert (run_dir / "checkpoints" / "latest").read_text() == "update-00000002"
    done = subprocess.run(
        [sys.executable, "-m", "mucode.cli", "train", "--no-plot", *args, "--resume"],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "resuming at stage 0, update 2/2 (global 2)" in done.stdout  # the stage end is redone
    for k in (0, 1):  # no verified group lost, none sampled twice, the same as uninterrupted
        ref = StageStore.open(ref_dir / "stages" / f"stage-{k:04d}")
        got = StageStore.open(run_dir / "stages" / f"stage-{k:04d}")
        assert _rows(got) == _rows(ref)
    _same_weights(run_dir / "policy" / "stage-0001", ref_dir / "policy" / "stage-0001")
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if '"event"' not in x]
    assert [r["update"] for r in rows] == [1, 2, 3, 4]  # update 3 replayed once, not logged twice
    totals = json.loads((run_dir / "summary.json").read_text())["totals"]
    assert totals["async/generator_starts"] == 4 and totals["async/staleness_max"] <= 1


DYING_ENGINE = '''
"""An engine factory whose generator process SIGKILLs itself once, at its first group of stage 1 (its
third engine call: one call per update, two updates per stage). The engine is loaded in place across
versions (it wraps the hf engine as ``.engine``), so it is built once per process."""
import os, signal
from pathlib import Path
from mucode.rollout.factory import make_engine


class _Dying:
    def __init__(self, engine, marker):
        self.engine, self.marker, self.calls = engine, marker, 0
        self.generator = engine.generator  # reseeded per update

    def generate(self, prompts, samples_per_prompt):
        self.calls += 1
        for group in self.engine.generate(prompts, samples_per_prompt):
            if self.calls == 3 and not self.marker.exists():
                self.marker.write_text("killed")
                os.kill(os.getpid(), signal.SIGKILL)
            yield group

    def close(self):
        self.engine.close()


def build(cfg, policy_path, seed):
    r = cfg.rollout
    engine = make_engine("hf", policy_path, r.sampling_params().replace(seed=seed), batch_size=r.batch_size,
                         device="cpu")
    return _Dying(engine, Path(os.environ["MUCODE_TEST_MARKER"]))
'''


@pytest.mark.parametrize("handoff", ["file", "push"])
def test_killed_generator_is_restarted(
    small_policy: Path, plugins_on_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, handoff: str
) -> None:
    """With the push hand-off the restarted generator joins the trainer's weight push again."""
    (tmp_path / "dying_engine.py").write_text(DYING_ENGINE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ["PYTHONPATH"]]))
    monkeypatch.setenv("MUCODE_TEST_MARKER", str(tmp_path / "marker"))
    data = write_tasks(tmp_path / "tasks.jsonl", "parity")
    run_dir = tmp_path / "run"
    cfg = load_config(
        None,
        _async(
            small_policy,
            data,
            run_dir,
            batch__updates_per_stage=2,
            asynchronous__sync_every=2,
            asynchronous__max_lag_updates=1,
            asynchronous__engine_factory="dying_engine:build",
            asynchronous__handoff=handoff,
        ),
    )
    result = run_async_training(cfg)
    assert (tmp_path / "marker").exists()  # the generator did die once
    totals = result.summary["totals"]
    assert totals["async/generator_restarts"] == 1 and totals["async/generator_starts"] == 2
    store = StageStore.open(run_dir / "stages" / "stage-0001")
    assert sorted(g.group_id for g in store.iter_groups()) == list(update_slots(0, 2)) + list(
        update_slots(1, 2)
    )
    events = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if '"event"' in x]
    assert [e["generator"] for e in events if e["event"] == "generator_restart"] == [0]


HALF_PUBLISH = """
import os, signal, sys
from pathlib import Path
from mucode.train.async_handoff import FileHandoff

def save(directory):
    directory.mkdir()
    (directory / "config.json").write_text("{}")
    (directory / "model.safetensors").write_bytes(b"half")
    os.kill(os.getpid(), signal.SIGKILL)  # dies in the middle of writing version 8

FileHandoff(Path(sys.argv[1])).publish(8, save)
"""


def test_a_half_written_policy_is_never_the_latest(tmp_path: Path) -> None:
    root = tmp_path / "weights"
    handoff = FileHandoff(root)

    def save(directory: Path) -> None:
        directory.mkdir()
        (directory / "model.safetensors").write_bytes(b"complete version 4")

    handoff.publish_path(0, "/base")
    assert handoff.latest() is not None and handoff.latest().version == 0  # type: ignore[union-attr]
    handoff.publish(4, save)
    died = subprocess.run([sys.executable, "-c", HALF_PUBLISH, str(root)], env=os.environ.copy(), timeout=120)
    assert died.returncode == -signal.SIGKILL
    latest = handoff.latest()
    assert latest is not None and latest.version == 4
    assert (Path(latest.path) / "model.safetensors").read_bytes() == b"complete version 4"
    assert not (root / "v-00000008").exists() and (root / ".v-00000008.tmp").exists()
    handoff.publish(12, save)  # the next publish clears the dead one's leftovers
    assert not (root / ".v-00000008.tmp").exists() and handoff.latest().version == 12  # type: ignore[union-attr]
