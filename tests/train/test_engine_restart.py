"""An engine that dies mid-stage (EngineError) is started again and the stage continues with the
prompts it had not generated; anything else ends the stage."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from mucode.data import load_tasks
from mucode.data.prompts import render_prompt
from mucode.rollout.hf import HFEngine
from mucode.rollout.types import EngineError, Sample, SamplingParams
from mucode.train.policy import load_policy
from mucode.train.rollout_phase import generate_stage
from mucode.train.store import StageStore, StageWriter
from mucode.train.verify import VerifyPipeline, verifier_urls


class DiesAfter:
    """A real hf engine whose process 'dies' after ``groups`` groups (as a vLLM replica can)."""

    def __init__(self, engine: HFEngine, groups: int, error: type[Exception] = EngineError) -> None:
        self.engine, self.groups, self.error = engine, groups, error

    def generate(
        self, prompts: list[tuple[str, list[int]]], samples_per_prompt: int
    ) -> Iterator[list[Sample]]:
        for n, group in enumerate(self.engine.generate(prompts, samples_per_prompt)):
            if n == self.groups:
                raise self.error("replica died (on purpose)")
            yield group

    def close(self) -> None:
        self.engine.close()


def _run(policy: Path, store_dir: Path, engines: list, tmp_path: Path) -> tuple[StageStore | None, list]:
    model, tokenizer = load_policy(str(policy), dtype="float32", device=torch.device("cpu"))
    records = load_tasks("toy", "math", limit=6)
    prompts = [(slot, r, render_prompt(tokenizer, r)) for slot, r in enumerate(records)]
    asked: list[int] = []

    def factory() -> object:
        engine = HFEngine(model, tokenizer, SamplingParams(max_new_tokens=6, seed=len(asked)), batch_size=2)
        asked.append(len(asked))
        return engines.pop(0)(engine) if engines else engine

    writer = StageWriter.create(store_dir, stage=0, expected_groups=len(prompts), groups_per_shard=1)
    with verifier_urls([], "local") as urls:
        pipeline = VerifyPipeline(urls)
        try:
            stats = generate_stage(
                stage=0,
                engine_factory=factory,
                prompts=prompts,
                samples_per_prompt=2,
                writer=writer,
                pipeline=pipeline,
                adv_std="unbiased",
                adv_eps=1e-6,
                show_progress=False,
                max_engine_restarts=2,
            )
        finally:
            pipeline.close()
    assert stats.engine_starts == len(asked)
    return writer.finish(), asked


def test_a_dead_engine_is_restarted_and_the_stage_completes(small_policy: Path, tmp_path: Path) -> None:
    store, asked = _run(
        small_policy, tmp_path / "store", [lambda e: DiesAfter(e, 2), lambda e: DiesAfter(e, 1)], tmp_path
    )
    assert len(asked) == 3  # two deaths, a third engine finished the stage
    groups = list(store.iter_groups())
    assert sorted(g.group_id for g in groups) == list(range(6))  # every prompt exactly once
    assert all(len(g.samples) == 2 for g in groups)


def test_too_many_deaths_or_other_errors_end_the_stage(small_policy: Path, tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="on purpose"):
        _run(small_policy, tmp_path / "a", [lambda e: DiesAfter(e, 0)] * 3, tmp_path)
    with pytest.raises(ValueError, match="on purpose"):
        _run(small_policy, tmp_path / "b", [lambda e: DiesAfter(e, 1, ValueError)], tmp_path)
