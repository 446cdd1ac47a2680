"""End-to-end runs of the stage loop on a small random policy (CPU, the hf engine, a real verifier)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch
from train_helpers import run_overrides, write_tasks
from typer.testing import CliRunner

from mucode.cli import get_app
from mucode.config import load_config
from mucode.train.loop import ResumeError, run_training
from mucode.train.store import StageStore


def _rows(run_dir: Path) -> list[dict]:
    return [
        json.loads(line)
        for line in (run_dir / "metrics.jsonl").read_text().splitlines()
        if '"event"' not in line
    ]


def test_two_stage_run_rho_one_at_first_update_and_outputs(
    small_policy: Path, plugins_on_path: Path, tmp_path: Path
) -> None:
    data = write_tasks(tmp_path / "tasks.jsonl", "parity")
    run_dir = tmp_path / "run"
    cfg = load_config(None, run_overrides(small_policy, data, run_dir))
    result = run_training(cfg)

    rows = _rows(run_dir)
    assert [r["update"] for r in rows] == list(range(1, 7))
    assert [r["stage"] for r in rows] == [0, 0, 0, 1, 1, 1]
    first = rows[0]
    # The hf engine's behaviour log-probs equal the trainer's recomputation: ρ = 1 at the first update.
    assert first["stale/abs_log_ratio_mean"] < 1e-5
    assert abs(first["stale/ratio_min"] - 1) < 1e-4 and abs(first["stale/ratio_max"] - 1) < 1e-4
    assert first["stale/veto_token_frac"] == 0.0
    for key in (
        "reward/mean",
        "stale/clip_frac_high",
        "stale/ratio_mean_neg_adv",
        "stale/approx_kl",
        "policy/entropy",
        "optim/grad_norm",
        "loss/policy",
    ):
        assert key in first, key
    # parity rewards are mixed, so the updates move the policy (non-zero gradient)
    assert any(r["optim/grad_norm"] > 0 for r in rows)
    # later updates of a stage are off-policy: ρ ≠ 1
    assert rows[2]["stale/abs_log_ratio_mean"] > 1e-4

    # two stores, each complete with the stage's B_train groups; per-stage HF policies saved
    for k in (0, 1):
        store = StageStore.open(run_dir / "stages" / f"stage-{k:04d}")
        assert store.num_groups == 6 and store.num_rows == 24
        assert (run_dir / "policy" / f"stage-{k:04d}" / "model.safetensors").exists()
    table = pq.read_table(next((run_dir / "stages" / "stage-0000").glob("shard-*.parquet")))
    assert {"behaviour_logprobs", "advantage", "status", "reward", "group_id"} <= set(table.column_names)

    totals = result.summary["totals"]
    assert totals["engine_switches"] == 4 and totals["updates"] == 6
    for key in ("time/rollout", "time/verify", "time/optimize", "time/total"):
        assert totals[key] >= 0
    assert (run_dir / "summary.txt").read_text().count("\n") >= 6
    events = [
        json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if '"event"' in line
    ]
    assert [e["stage"] for e in events] == [0, 1]

    # every key the run logged is defined in the glossary
    glossary = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()
    logged = {k for r in rows for k in r} | {k for e in events for k in e if k != "event"}
    logged |= set(totals) - {"base_policy"}
    undocumented = {k for k in logged if f"`{k}`" not in glossary and not k.startswith("verifier/status/")}
    assert not undocumented, f"add to docs/metrics.md: {sorted(undocumented)}"

    # the saved stage-1 policy equals the trainer's final weights
    from transformers import AutoModelForCausalLM

    final = AutoModelForCausalLM.from_pretrained(run_dir / "policy" / "stage-0001")
    ckpt = torch.load(run_dir / "checkpoints" / "update-00000006" / "model.pt", weights_only=True)
    for name, tensor in final.state_dict().items():
        assert torch.equal(tensor, ckpt[name]), name

    from mucode.train.plot import plot_run

    paths = plot_run(run_dir)
    assert {p.name for p in paths} >= {
        "reward.png",
        "veto_fraction.png",
        "clip_fraction.png",
        "rho_neg_adv.png",
    }
    assert all(p.stat().st_size > 1000 for p in paths)

    # a finished run cannot be "resumed" into 0 updates, and a fresh run will not overwrite it
    with pytest.raises(ResumeError, match="already finished its 2 stages"):
        run_training(cfg, resume=True)
    with pytest.raises(ResumeError, match="already holds a run"):
        run_training(cfg)


def test_verifier_failures_are_retried_charged_and_counted(
    small_policy: Path, plugins_on_path: Path, tmp_path: Path
) -> None:
    data = write_tasks(tmp_path / "tasks.jsonl", "flaky")
    run_dir = tmp_path / "run"
    cfg = load_config(
        None,
        run_overrides(small_policy, data, run_dir, batch__num_stages=1, verifier__max_masked_fraction=0.3),
    )
    result = run_training(cfg)

    store = StageStore.open(run_dir / "stages" / "stage-0000")
    samples = [s for g in store.iter_groups() for s in g.samples]
    failed = [s for s in samples if s.sample_index == 0]
    assert len(failed) == 6
    for s in failed:  # charged to the policy: trained as a failure (reward 0), never left out
        assert not s.masked and s.status == "verifier_error" and s.reward == 0.0
    assert all(
        not s.masked and s.status in ("correct", "wrong_answer") for s in samples if s.sample_index != 0
    )
    assert result.summary["totals"]["verifier/masked"] == 6
    meta = store.meta["rollout"]
    assert (
        meta["verifier/masked"] == 6 and meta["verifier/resends"] == 6
    )  # each re-sent once (verifier.retries=1)
    assert meta["verifier/masked_frac"] == 0.25
    rows = _rows(run_dir)
    assert all(r["batch/masked_responses"] == 0 and r["batch/responses"] == 8 for r in rows)
    assert all(r["stale/responses"] == 8 for r in rows)  # the charged responses are in the loss


def test_a_forged_infra_status_never_beats_a_wrong_answer(
    small_policy: Path, plugins_on_path: Path, tmp_path: Path
) -> None:
    """In a group where one response is wrong and one makes the verifier fail, both get the same
    (lowest) reward and advantage: failing the verifier earns nothing over being wrong."""
    data = write_tasks(tmp_path / "tasks.jsonl", "flaky")
    run_dir = tmp_path / "run"
    cfg = load_config(
        None,
        run_overrides(small_policy, data, run_dir, batch__num_stages=1, verifier__max_masked_fraction=0.3),
    )
    run_training(cfg)
    for group in StageStore.open(run_dir / "stages" / "stage-0000").iter_groups():
        forged = [s for s in group.samples if s.status == "verifier_error"]
        wrong = [s for s in group.samples if s.status == "wrong_answer"]
        for f in forged:
            assert f.reward == 0.0
            for w in wrong:
                assert f.advantage <= w.advantage + 1e-6


def test_a_broken_verifier_stops_the_run_naming_the_cause(
    small_policy: Path, plugins_on_path: Path, tmp_path: Path
) -> None:
    data = write_tasks(tmp_path / "tasks.jsonl", "broken")
    run_dir = tmp_path / "run"
    out = CliRunner().invoke(
        get_app(), ["train", *run_overrides(small_policy, data, run_dir, batch__num_stages=1)]
    )
    assert out.exit_code == 1, out.output
    lines = [line for line in out.output.splitlines() if line.startswith("stage 0: the verifier failed")]
    assert len(lines) == 1, out.output
    assert "24 of 24 responses" in lines[0] and "broken reward program crashed" in lines[0], lines[0]
    assert not (run_dir / "checkpoints").exists() or not any((run_dir / "checkpoints").glob("update-*"))
