"""The hf engine: behaviour log-probs equal the trainer's recomputed log-probs (ρ = 1 at the first
update), groups are complete and stream out, sampling is seeded and private."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import torch

from mucode.rollout import HFEngine, SamplingParams, make_engine, response_logprobs, sequence_logprobs
from mucode.rollout.hf import filter_logits


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_behaviour_logprobs_equal_recomputed_logprobs(
    tiny: tuple[Any, Any], toy_prompts: list, temperature: float
) -> None:
    model, tokenizer = tiny
    engine = HFEngine(
        model, tokenizer, SamplingParams(temperature=temperature, max_new_tokens=24, seed=3), batch_size=4
    )
    samples = [s for group in engine.generate(toy_prompts, 3) for s in group]
    assert len(samples) == 18
    # recompute in one batch with a different padding layout than any generation batch
    out = response_logprobs(
        model,
        [s.prompt_token_ids for s in samples],
        [s.response_token_ids for s in samples],
        temperature,
        pad_token_id=tokenizer.pad_token_id,
    )
    for row, sample in enumerate(samples):
        behaviour = torch.tensor(sample.behaviour_logprobs)
        assert len(behaviour) == len(sample.response_token_ids) == int(out.mask[row].sum())
        recomputed = out.logprobs[row, : len(behaviour)].detach()
        torch.testing.assert_close(recomputed, behaviour, atol=1e-4, rtol=0)
        ratio = torch.exp(recomputed - behaviour)
        assert float((ratio - 1).abs().max()) < 1e-4
        assert bool((behaviour <= 0).all())
    single = samples[5]
    torch.testing.assert_close(
        sequence_logprobs(model, single.prompt_token_ids, single.response_token_ids, temperature).detach(),
        torch.tensor(single.behaviour_logprobs),
        atol=1e-4,
        rtol=0,
    )


def test_groups_are_complete_and_finish_reasons_are_right(tiny: tuple[Any, Any], toy_prompts: list) -> None:
    model, tokenizer = tiny
    max_new = 12
    engine = HFEngine(model, tokenizer, SamplingParams(max_new_tokens=max_new, seed=0), batch_size=5)
    groups = list(engine.generate(toy_prompts, 4))
    assert sorted(g[0].prompt_id for g in groups) == sorted(pid for pid, _ in toy_prompts)
    stop_ids = set(engine.stop_token_ids)
    reasons = set()
    for group in groups:
        assert [s.sample_index for s in group] == [0, 1, 2, 3]
        assert len({s.prompt_id for s in group}) == 1
        for sample in group:
            reasons.add(sample.finish_reason)
            tokens = sample.response_token_ids
            assert not stop_ids & set(tokens[:-1])
            if sample.finish_reason == "stop":
                assert tokens[-1] in stop_ids
            else:
                assert len(tokens) == max_new and tokens[-1] not in stop_ids
            assert sample.response_text == tokenizer.decode(tokens, skip_special_tokens=True)
    assert reasons == {"stop", "length"}  # math answers fit in 12 tokens, code programs do not


def test_groups_stream_out_before_the_rest_is_generated(tiny: tuple[Any, Any], toy_prompts: list) -> None:
    model, tokenizer = tiny
    prefills = []
    hook = model.register_forward_hook(
        lambda module, args, kwargs, output: prefills.append(kwargs["input_ids"].shape[1] > 1),
        with_kwargs=True,
    )
    try:
        engine = HFEngine(model, tokenizer, SamplingParams(max_new_tokens=8, seed=0), batch_size=2)
        stream = engine.generate(toy_prompts, 2)
        first = next(stream)
        assert len(first) == 2 and sum(prefills) == 1  # one batch decoded so far
        rest = list(stream)
        assert len(rest) == len(toy_prompts) - 1 and sum(prefills) == len(toy_prompts)
    finally:
        hook.remove()


def test_sampling_is_seeded_and_leaves_the_global_rng_alone(tiny: tuple[Any, Any], toy_prompts: list) -> None:
    model, tokenizer = tiny

    def tokens(seed: int) -> list[list[int]]:
        engine = HFEngine(model, tokenizer, SamplingParams(max_new_tokens=10, seed=seed), batch_size=6)
        return [s.response_token_ids for g in engine.generate(toy_prompts, 2) for s in g]

    state = torch.get_rng_state()
    assert tokens(1) == tokens(1)
    assert tokens(1) != tokens(2)
    assert torch.equal(torch.get_rng_state(), state)


def test_greedy_follows_the_argmax(tiny: tuple[Any, Any], toy_prompts: list) -> None:
    model, tokenizer = tiny
    engine = HFEngine(model, tokenizer, SamplingParams(temperature=0.0, max_new_tokens=6), batch_size=6)
    for (_, prompt), group in zip(toy_prompts, engine.generate(toy_prompts, 1), strict=True):
        ids = list(prompt)
        for token in group[0].response_token_ids:
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([ids])).logits[0, -1]
            assert token == int(logits.argmax())
            ids.append(token)


def test_filter_logits_matches_a_brute_force_nucleus() -> None:
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 40, generator=generator)
    for top_k, top_p in [(5, 1.0), (-1, 0.7), (10, 0.5), (-1, 1.0)]:
        kept = filter_logits(logits, top_k, top_p) > float("-inf")
        for row in range(logits.shape[0]):
            order = torch.argsort(logits[row], descending=True).tolist()
            allowed = order[:top_k] if top_k > 0 else order
            probs = torch.softmax(logits[row, allowed], -1)
            expect, mass = set(), 0.0
            for token, p in zip(allowed, probs.tolist(), strict=True):
                if mass >= top_p:
                    break
                expect.add(token)
                mass += p
            assert set(torch.nonzero(kept[row]).flatten().tolist()) == expect, (top_k, top_p, row)


def test_response_logprobs_backpropagates_through_padding(tiny: tuple[Any, Any]) -> None:
    model, tokenizer = tiny
    out = response_logprobs(
        model,
        [[5, 6, 7, 8, 9], [5]],
        [[10, 11], [12, 13, 14, 15]],
        1.0,
        pad_token_id=tokenizer.pad_token_id,
        with_entropy=True,
    )
    assert out.mask.tolist() == [[True, True, False, False], [True, True, True, True]]
    assert out.entropy is not None and bool((out.entropy[out.mask] > 0).all())
    (out.logprobs.sum() + out.entropy.sum()).backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(bool(torch.isfinite(g).all()) for g in grads)
    model.zero_grad(set_to_none=True)


def test_make_engine_by_name(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(ValueError, match=r"unknown rollout engine 'sglang'; valid names: dummy, hf, vllm"):
        make_engine("sglang", "tiny")
    with caplog.at_level(logging.WARNING):
        engine = make_engine(
            "hf", "tiny", SamplingParams(max_new_tokens=4, top_p=0.9), device="cpu", tensor_parallel_size=2
        )
    assert "ignored" in caplog.text and "top_p=0.9" in caplog.text
    (group,) = list(engine.generate([("p", [1, 2, 3])], 2))
    assert len(group) == 2 and all(1 <= len(s.response_token_ids) <= 4 for s in group)
    engine.close()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_hf_engine_on_gpu_matches_recomputed_logprobs(toy_prompts: list, dtype: str) -> None:
    engine = make_engine(
        "hf", "tiny", SamplingParams(max_new_tokens=24, seed=0), device="cuda", dtype=dtype, batch_size=8
    )
    assert isinstance(engine, HFEngine)
    samples = [s for g in engine.generate(toy_prompts, 4) for s in g]
    with torch.no_grad():
        out = response_logprobs(
            engine.model,
            [s.prompt_token_ids for s in samples],
            [s.response_token_ids for s in samples],
            1.0,
            pad_token_id=engine.pad_token_id,
        )
    tolerance = 1e-4 if dtype == "float32" else 5e-2  # bf16 matmuls differ between cached and full passes
    for row, sample in enumerate(samples):
        behaviour = torch.tensor(sample.behaviour_logprobs, device="cuda")
        torch.testing.assert_close(out.logprobs[row, : len(behaviour)], behaviour, atol=tolerance, rtol=0)
    engine.close()
