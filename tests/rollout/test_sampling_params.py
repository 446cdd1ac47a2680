"""One ``SamplingParams`` for every engine: built from the config, taken by ``make_engine``, the engines and
plug-in builders; the old sampling keywords and old-style builders are refused with one line naming it."""

from __future__ import annotations

from pathlib import Path

import pytest
from plugin_dist import write_dist

from mucode.config import load_config
from mucode.rollout import HFEngine, SamplingParams, make_engine
from mucode.rollout.dummy import DummyEngine
from mucode.rollout.factory import ENGINES
from mucode.rollout.vllm import VLLMEngine
from mucode.rollout.vllm_colocated import ColocatedVLLM


def test_the_config_builds_the_engines_sampling_params() -> None:
    cfg = load_config(
        None,
        [
            "rollout.temperature=0.7",
            "rollout.top_p=0.9",
            "rollout.top_k=20",
            "rollout.max_response_tokens=33",
            "rollout.seed=4",
        ],
    )
    assert cfg.rollout.sampling_params() == SamplingParams(
        temperature=0.7, top_p=0.9, top_k=20, max_new_tokens=33, seed=4
    )
    changed = cfg.rollout.sampling_params().replace(seed=9)
    assert (changed.seed, changed.temperature) == (9, 0.7)


def test_sampling_params_are_frozen_and_checked() -> None:
    sampling = SamplingParams()
    with pytest.raises(AttributeError):
        sampling.temperature = 2.0  # type: ignore[misc]
    for bad, needle in [
        ({"temperature": -1.0}, "temperature must be >= 0"),
        ({"top_p": 0.0}, "top_p must be in (0, 1]"),
        ({"max_new_tokens": 0}, "max_new_tokens must be >= 1"),
    ]:
        with pytest.raises(ValueError, match=needle.replace("(", r"\(").replace("]", r"\]")):
            SamplingParams(**bad)  # type: ignore[arg-type]
    assert SamplingParams(top_k=5).truncated and SamplingParams(top_p=0.5).truncated
    assert not SamplingParams().truncated


def test_the_old_sampling_keywords_are_refused_in_one_line(tiny: tuple) -> None:
    model, tokenizer = tiny
    calls = [
        (lambda: make_engine("hf", "tiny", temperature=0.5, device="cpu"), "temperature"),
        (lambda: HFEngine(model, tokenizer, max_new_tokens=4, seed=0), "max_new_tokens, seed"),
        (lambda: DummyEngine(tokenizer, top_k=3), "top_k"),
        (
            lambda: VLLMEngine("m", temperature=0.5, dtype="float32"),
            "temperature",
        ),  # before vLLM is looked for
        (lambda: ColocatedVLLM("m", top_p=0.9), "top_p"),
    ]
    for call, named in calls:
        with pytest.raises(TypeError) as err:
            call()
        message = str(err.value)
        assert "SamplingParams" in message and named in message and "\n" not in message, message


def test_an_engine_samples_with_the_params_it_was_given(tiny: tuple) -> None:
    model, tokenizer = tiny
    sampling = SamplingParams(temperature=0.0, max_new_tokens=3, seed=0)
    engine = HFEngine(model, tokenizer, sampling, batch_size=2)
    [group] = engine.generate([("p", [5, 6, 7])], 2)
    assert engine.sampling is sampling
    assert all(len(s.response_token_ids) <= 3 for s in group)
    assert group[0].response_token_ids == group[1].response_token_ids  # greedy


def _install_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, source: str) -> None:
    """A real ``mucode.engines`` entry point ``plugged`` (a dist-info on sys.path) naming ``module:build``."""
    write_dist(tmp_path, module, source, "mucode.engines", {"plugged": "build"})
    monkeypatch.syspath_prepend(str(tmp_path))
    ENGINES.refresh()


def test_a_plugin_builder_gets_the_sampling_params(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _install_plugin(
        tmp_path,
        monkeypatch,
        "new_style_engine",
        "def build(model_path, sampling, **settings):\n    return (sampling, settings)\n",
    )
    try:
        sampling = SamplingParams(temperature=0.4, seed=3)
        got, settings = make_engine("plugged", "m", sampling, batch_size=5)  # type: ignore[misc]
        assert got is sampling and settings["batch_size"] == 5
        assert not {"temperature", "top_p", "top_k", "max_new_tokens", "seed"} & set(settings)
    finally:
        monkeypatch.undo()
        ENGINES.refresh()


def test_an_old_style_plugin_builder_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``fn(model_path, **settings)`` reading ``settings['temperature']`` would otherwise run on defaults."""
    _install_plugin(
        tmp_path,
        monkeypatch,
        "old_style_engine",
        "def build(model_path, **settings):\n    return settings['temperature']\n",
    )
    try:
        with pytest.raises(TypeError) as err:
            make_engine("plugged", "m", SamplingParams(temperature=0.4))
        message = str(err.value)
        assert "'plugged'" in message and "SamplingParams" in message and "\n" not in message
        assert "fn(model_path, sampling: SamplingParams, **settings)" in message
    finally:
        monkeypatch.undo()
        ENGINES.refresh()
