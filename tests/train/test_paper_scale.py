"""The ``dummy`` rollout engine and the paper-scale stage bench, at a small size."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import torch
from train_helpers import run_overrides, write_tasks

from mucode.assets import resolve_model_path
from mucode.config import load_config
from mucode.rollout.dummy import DummyEngine, fixed_distribution
from mucode.rollout.factory import make_engine
from mucode.rollout.types import SamplingParams
from mucode.train.loop import run_training
from mucode.train.store import StageStore

REPO = Path(__file__).resolve().parents[2]


def _bench():  # noqa: ANN202 - the bench module
    spec = importlib.util.spec_from_file_location("paper_scale", REPO / "bench" / "paper_scale.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("paper_scale", module)
    spec.loader.exec_module(module)
    return module


def test_fixed_distribution_at_a_temperature_is_the_softmax_of_scaled_log_probs() -> None:
    base = fixed_distribution(50, 3, mean_response_tokens=10)
    assert math.isclose(float(np.exp(base).sum()), 1.0, rel_tol=1e-9)
    assert math.isclose(float(np.exp(base[3])), 0.1, rel_tol=1e-9)  # P(stop) = 1 / mean length
    for temperature in (0.6, 1.0, 1.7):
        expected = torch.log_softmax(torch.tensor(base) / temperature, dim=-1).numpy()
        np.testing.assert_allclose(fixed_distribution(50, 3, 10, temperature), expected, atol=1e-12)


def test_dummy_engine_reports_the_exact_log_prob_of_every_token_and_samples_its_law() -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path("tiny"))
    engine = make_engine(
        "dummy",
        "tiny",
        SamplingParams(temperature=0.8, max_new_tokens=40, seed=1),
        batch_size=16,
        mean_response_tokens=12,
    )
    assert isinstance(engine, DummyEngine)
    logp = fixed_distribution(len(tokenizer), tokenizer.eos_token_id, 12, 0.8)
    groups = list(engine.generate([(f"p{i}", [5, 6, 7]) for i in range(200)], 4))
    engine.close()
    assert sorted(g[0].prompt_id for g in groups) == sorted(f"p{i}" for i in range(200))
    counts: Counter[int] = Counter()
    lengths = []
    for group in groups:
        assert [s.sample_index for s in group] == [0, 1, 2, 3]
        for s in group:
            tokens = s.response_token_ids
            assert 1 <= len(tokens) <= 41 and s.prompt_token_ids == [5, 6, 7]
            np.testing.assert_array_equal(
                np.array(s.behaviour_logprobs, dtype=np.float32), logp[tokens].astype(np.float32)
            )
            stopped = tokens[-1] == tokenizer.eos_token_id
            assert (s.finish_reason == "stop") == stopped and (stopped or len(tokens) == 40)
            assert tokenizer.eos_token_id not in tokens[:-1]
            assert s.response_text == tokenizer.decode(tokens, skip_special_tokens=True)
            counts.update(tokens)
            lengths.append(len(tokens))
    # the sampled frequencies follow the distribution (the most likely non-stop tokens, within 25 %)
    total = sum(counts.values())
    probs = np.exp(logp)
    for token in np.argsort(-probs)[:5]:
        assert abs(counts[int(token)] / total - probs[token] / probs.sum()) < 0.25 * probs[token], int(token)


def test_a_small_paper_scale_stage_runs_end_to_end(tmp_path: Path) -> None:
    figures = _bench().run_stage(
        tmp_path,
        prompts=64,
        samples=4,
        prompts_per_update=16,
        dataset=100,
        mean_response_tokens=24,
        max_response_tokens=64,
        updates=1,
    )
    assert figures["responses"] == 256 and figures["mu"] == 4
    assert sum(figures["statuses"].values()) == 256 and figures["masked"] == 0
    assert set(figures["statuses"]) <= {"correct", "wrong_answer", "no_answer"}
    store = StageStore.open(tmp_path / "stage-0000")
    assert store.num_groups == 64 and store.num_rows == 256
    assert figures["store_bytes"] > 0 and figures["store_shards"] == 1
    for phase in (
        "prompt selection",
        "generation (dummy engine)",
        "store write",
        "minibatch read (all μ)",
        "update (stand-in policy, 1 timed)",
    ):
        assert figures["times"][phase] >= 0
    assert figures["peak_rss_mb"] > 0
    json.dumps(figures)  # the bench prints it as JSON


def test_the_trainer_runs_a_stage_with_the_dummy_engine(
    small_policy: Path, plugins_on_path: Path, tmp_path: Path
) -> None:
    data = write_tasks(tmp_path / "tasks.jsonl", "parity")
    run_dir = tmp_path / "run"
    result = run_training(
        load_config(
            None, run_overrides(small_policy, data, run_dir, rollout__engine="dummy", batch__num_stages=1)
        )
    )
    store = StageStore.open(run_dir / "stages" / "stage-0000")
    assert store.num_groups == 6 and result.summary["totals"]["updates"] == 3
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if '"event"' not in x]
    assert rows[0]["stale/abs_log_ratio_mean"] > 0.1  # the dummy engine is not the policy: ρ ≠ 1 at once
