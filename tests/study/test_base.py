"""The study's base builder: a small build saves a loadable HF policy with its figures, cached per seed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mucode.data.chain import chain_records
from mucode.data.prompts import render_prompt
from mucode.study.base import BaseRecipe, base_dir, chain_tokenizer, ensure_base
from mucode.train.policy import load_policy

torch = pytest.importorskip("torch")


def test_tokenizer_is_one_token_per_word_and_decodes_with_spaces() -> None:
    tokenizer = chain_tokenizer()
    ids = render_prompt(tokenizer, chain_records()[7])
    assert tokenizer.convert_ids_to_tokens(ids) == ["<bos>", "s7", ":"]
    words = "A s3 s17 s63"
    encoded = tokenizer(words, add_special_tokens=False)["input_ids"]
    assert (
        len(encoded) == 4
        and tokenizer.decode(encoded + [tokenizer.eos_token_id], skip_special_tokens=True) == words
    )


def test_a_small_build_is_cached_per_seed_and_loads_as_a_policy(tmp_path: Path) -> None:
    recipe = BaseRecipe(steps=40, batch=32)
    path = ensure_base(tmp_path, 0, recipe)
    assert path == base_dir(tmp_path, recipe, 0) and path.name.endswith("seed0")
    figures = json.loads((path / "base.json").read_text())
    assert set(figures) >= {"reward", "failing_format", "steps_right", "parameters", "sl_loss"}
    assert figures["parameters"] < 100_000
    assert json.loads((path / "recipe.json").read_text())["steps"] == 40
    stamp = (path / "model.safetensors").stat().st_mtime_ns
    assert ensure_base(tmp_path, 0, recipe) == path
    assert (path / "model.safetensors").stat().st_mtime_ns == stamp  # reused, not rebuilt
    model, tokenizer = load_policy(str(path), dtype="float32", device=torch.device("cpu"))
    ids = torch.tensor([render_prompt(tokenizer, chain_records()[0])])
    assert model(input_ids=ids).logits.shape[-1] == len(tokenizer)
    assert not list(tmp_path.glob("*.tmp*"))  # built atomically
    assert base_dir(tmp_path, recipe, 1) != path and base_dir(tmp_path, BaseRecipe(), 0) != path


@pytest.mark.slow
def test_the_default_recipe_makes_a_peaky_base_with_a_low_reward(tmp_path: Path) -> None:
    """The toy's premise: a right step has probability ≈ 0.96, the failing format half the answers."""
    figures = json.loads((ensure_base(tmp_path, 0) / "base.json").read_text())
    assert 0.4 < figures["failing_format"] < 0.6
    assert 0.1 < figures["reward"] < 0.4
