"""The vllm engine. CPU tests pin what does not need vLLM (request settings, the conversion of vLLM's
documented output objects); the ``gpu`` tests run vLLM on the tiny policy."""

from __future__ import annotations

import importlib.util
import logging
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from mucode.assets import tiny_policy_path
from mucode.rollout import SamplingParams, make_engine, response_logprobs
from mucode.rollout.vllm import VLLMSettings, group_from_output, llm_kwargs, sampling_kwargs

HAS_VLLM = importlib.util.find_spec("vllm") is not None


def test_requests_ask_for_the_sampled_tokens_logprob_after_temperature() -> None:
    settings = VLLMSettings(
        model_path="m",
        sampling=SamplingParams(temperature=0.6, max_new_tokens=99, seed=5),
        tensor_parallel_size=2,
        engine_kwargs={"max_num_seqs": 512},
    )
    assert sampling_kwargs(settings.sampling, 8) == {
        "n": 8,
        "temperature": 0.6,
        "top_p": 1.0,
        "top_k": -1,
        "max_tokens": 99,
        "logprobs": 0,
    }
    kwargs = llm_kwargs(settings, replica=1)
    assert kwargs["logprobs_mode"] == "processed_logprobs"
    assert (kwargs["seed"], kwargs["tensor_parallel_size"], kwargs["max_num_seqs"]) == (6, 2, 512)


def test_every_sampling_field_reaches_vllm_s_sampling_params() -> None:
    """The translation to ``vllm.SamplingParams``: each field under vLLM's name, top-k off as -1 (vLLM's
    "off"; mucode also takes 0 for off), the seed to the engine (``vllm.LLM(seed=...)``), not the request."""
    sampling = SamplingParams(temperature=0.3, top_p=0.85, top_k=40, max_new_tokens=17, seed=11)
    assert sampling_kwargs(sampling, 3) == {
        "n": 3,
        "temperature": 0.3,
        "top_p": 0.85,
        "top_k": 40,
        "max_tokens": 17,
        "logprobs": 0,
    }
    assert sampling_kwargs(sampling.replace(top_k=0), 1)["top_k"] == -1
    assert llm_kwargs(VLLMSettings(model_path="m", sampling=sampling), replica=0)["seed"] == 11
    assert VLLMSettings(model_path="m", dtype="bf16").dtype == "bfloat16"  # vLLM's spelling


def _logprob(value: float) -> SimpleNamespace:
    return SimpleNamespace(logprob=value, rank=1, decoded_token="x")


def test_request_output_becomes_a_group() -> None:
    # shaped as vllm.outputs.RequestOutput / CompletionOutput; logprobs: one {token_id: Logprob} per position
    completions = [
        SimpleNamespace(
            index=1,
            text="b",
            token_ids=[7, 2],
            finish_reason="stop",
            logprobs=[{7: _logprob(-0.5)}, {2: _logprob(-0.25)}],
        ),
        SimpleNamespace(
            index=0,
            text="aaa",
            token_ids=(5, 5, 5),
            finish_reason="length",
            logprobs=[{5: _logprob(-1.0), 9: _logprob(-0.1)}, {5: _logprob(-2.0)}, {5: _logprob(-3.0)}],
        ),
    ]
    group = group_from_output("p", [1, 2, 3], SimpleNamespace(outputs=completions))
    assert [s.sample_index for s in group] == [0, 1]
    first, second = group
    assert (first.response_token_ids, first.behaviour_logprobs, first.finish_reason) == (
        [5, 5, 5],
        [-1.0, -2.0, -3.0],
        "length",
    )
    assert (second.response_token_ids, second.behaviour_logprobs, second.finish_reason) == (
        [7, 2],
        [-0.5, -0.25],
        "stop",
    )
    assert first.prompt_token_ids == [1, 2, 3] and second.response_text == "b"
    missing = SimpleNamespace(
        outputs=[SimpleNamespace(index=0, text="", token_ids=[1], finish_reason="stop", logprobs=None)]
    )
    with pytest.raises(RuntimeError, match="logprobs=0"):
        group_from_output("p", [1], missing)


@pytest.mark.skipif(HAS_VLLM, reason="checks the message shown when vLLM is missing")
def test_missing_vllm_says_how_to_install_it() -> None:
    with pytest.raises(ImportError, match="mucode\\[vllm\\]"):
        make_engine("vllm", "tiny")


@pytest.mark.gpu
def test_vllm_logprobs_match_the_trainer_and_close_frees_the_gpu(caplog: pytest.LogCaptureFixture) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mucode.data import load_tasks, render_prompts

    path = tiny_policy_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    prompts = render_prompts(
        tokenizer, load_tasks("toy", "math", limit=4) + load_tasks("toy", "code", limit=4)
    )
    engine = make_engine(
        "vllm",
        "tiny",
        SamplingParams(temperature=0.8, max_new_tokens=32),
        dtype="float32",
        batch_size=3,
        gpu_memory_utilization=0.3,
        enforce_eager=True,
    )
    groups = list(engine.generate(prompts, 4))
    replicas: list[Any] = list(engine._replicas)  # noqa: SLF001 - checking that the processes end
    engine.close()
    assert all(not p.is_alive() for p in replicas)
    samples = [s for g in groups for s in g]
    stopped = [s for s in samples if s.finish_reason == "stop"]
    assert stopped and all(
        s.response_token_ids[-1] == tokenizer.eos_token_id for s in stopped
    )  # EOS kept, as hf
    assert sorted({s.prompt_id for s in samples}) == sorted(pid for pid, _ in prompts) and len(samples) == 32
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    out = response_logprobs(
        model,
        [s.prompt_token_ids for s in samples],
        [s.response_token_ids for s in samples],
        0.8,
        pad_token_id=tokenizer.pad_token_id,
    )
    for row, sample in enumerate(samples):
        behaviour = torch.tensor(sample.behaviour_logprobs)
        torch.testing.assert_close(out.logprobs[row, : len(behaviour)].detach(), behaviour, atol=2e-3, rtol=0)
    with caplog.at_level(logging.WARNING):
        make_engine(
            "vllm", "tiny", SamplingParams(top_p=0.9, max_new_tokens=4), gpu_memory_utilization=0.3
        ).close()
    assert "top_p=0.9" in caplog.text


def test_colocated_engine_is_built_for_torchrun_with_sleep_mode() -> None:
    from mucode.rollout.vllm_colocated import colocated_llm_kwargs

    settings = VLLMSettings(
        model_path="m",
        sampling=SamplingParams(temperature=0.7, seed=3),
        tensor_parallel_size=4,
        gpu_memory_utilization=0.9,
    )
    kwargs = colocated_llm_kwargs(settings, rank=2)
    assert kwargs["distributed_executor_backend"] == "external_launcher"
    assert kwargs["enable_sleep_mode"] is True and kwargs["tensor_parallel_size"] == 1
    assert kwargs["seed"] == 5 and kwargs["logprobs_mode"] == "processed_logprobs"
    assert kwargs["gpu_memory_utilization"] == 0.9


@pytest.mark.gpu
def test_a_killed_vllm_replica_is_an_engine_error() -> None:
    from mucode.rollout.types import EngineError
    from mucode.rollout.vllm import visible_gpus

    engine = make_engine(
        "vllm",
        "tiny",
        SamplingParams(max_new_tokens=8),
        dtype="float32",
        gpu_memory_utilization=0.3,
        enforce_eager=True,
        devices=[visible_gpus()[0]],
    )
    try:
        engine._replicas[0].kill()  # noqa: SLF001 - the replica process dies as an OOM kill would end it
        engine._replicas[0].join(timeout=30)  # noqa: SLF001
        with pytest.raises(EngineError, match="died"):
            list(engine.generate([("p", [1, 2, 3])], 2))
    finally:
        engine.close()


@pytest.mark.gpu
def test_colocated_engine_takes_new_weights_in_memory() -> None:
    from transformers import AutoModelForCausalLM

    from mucode.rollout.vllm_colocated import ColocatedVLLM

    path = tiny_policy_path()
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    engine = ColocatedVLLM(
        str(path),
        SamplingParams(temperature=1.0, max_new_tokens=16, seed=0),
        dtype="float32",
        gpu_memory_utilization=0.3,
        engine_kwargs={"enforce_eager": True},
    )
    prompts = [("a", [5, 6, 7, 8]), ("b", [9, 10, 11])]
    list(engine.generate(prompts, 2))
    engine.sleep()
    with torch.no_grad():  # a different policy: every weight moved
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    engine.load_weights((k, v.cuda()) for k, v in model.state_dict().items())
    samples = [s for g in engine.generate(prompts, 4) for s in g]
    engine.sleep()
    out = response_logprobs(
        model, [s.prompt_token_ids for s in samples], [s.response_token_ids for s in samples], 1.0
    )
    for row, sample in enumerate(samples):  # the engine sampled from the new weights
        behaviour = torch.tensor(sample.behaviour_logprobs)
        torch.testing.assert_close(out.logprobs[row, : len(behaviour)].detach(), behaviour, atol=2e-3, rtol=0)
    engine.close()


def test_the_installed_version_decides_whether_logprobs_follow_the_temperature() -> None:
    from mucode.rollout.vllm import processed_logprobs_supported

    assert not processed_logprobs_supported("0.10.0")
    assert not processed_logprobs_supported("0.10.1+cu126")  # accepts logprobs_mode, ignores the temperature
    assert processed_logprobs_supported("0.10.2")
    assert processed_logprobs_supported("0.33.0")
