"""The study task's base policy: a tiny Llama, made peaky by supervised learning, cached per seed.

A word-level tokenizer over the task's words (``SYMBOLS`` symbols, the two formats, ``:`` and three
specials) and a 1-layer Llama-architecture model built from a config (about 40k parameters) are
trained on warm-up targets (:func:`mucode.data.chain.sl_answer`) in which a step is right with
probability ``p_step`` (0.96) and the failing format is written half of the time; so the base starts
RL confident (a right step has probability ≈ 0.96) with a reward near ``p_format · p_step^STEPS``
≈ 0.26. The result is saved in Hugging Face format (the trainer loads it like any model) under
``<cache>/chain-<recipe hash>-seed<S>``, with ``recipe.json`` and ``base.json`` (its measured
reward); :func:`ensure_base` reuses a finished one and builds it otherwise (atomically: a directory
is renamed into place only when complete). Imports torch, tokenizers and transformers (at import).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import shutil
import time
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from mucode.data.chain import FORMATS, STEPS, SYMBOLS, chain_records, permutation, sl_answer, symbol
from mucode.data.prompts import render_prompt
from mucode.rewards.chain import score_chain

__all__ = ["BaseRecipe", "base_dir", "build_base", "chain_tokenizer", "ensure_base", "sample_reward"]

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %} {{ message['content'] }}{% endfor %}"
    "{% if add_generation_prompt %} :{% endif %}"
)
SPECIALS = ["<pad>", "<bos>", "<eos>"]


@dataclasses.dataclass(frozen=True)
class BaseRecipe:
    """One base build's settings (``recipe.json``); its hash names the cache directory."""

    steps: int = 600
    batch: int = 128
    lr: float = 3e-3
    p_step: float = 0.96
    p_format: float = 0.5
    hidden: int = 64
    layers: int = 1

    def key(self) -> str:
        text = json.dumps(dataclasses.asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:10]


def chain_tokenizer() -> PreTrainedTokenizerFast:
    """Word-level: one token per symbol, format and ``:``; decodes with spaces between words."""
    words = SPECIALS + [":", *FORMATS] + [symbol(i) for i in range(SYMBOLS)]
    core = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<pad>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins words with spaces
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
        chat_template=CHAT_TEMPLATE,
        model_max_length=64,
    )


def _model(tokenizer: PreTrainedTokenizerFast, recipe: BaseRecipe) -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=recipe.hidden,
        intermediate_size=2 * recipe.hidden,
        num_hidden_layers=recipe.layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=64,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def _batch(
    prompts: list[tuple[int, list[int]]], tokenizer: Any, rng: random.Random, recipe: BaseRecipe
) -> tuple[torch.Tensor, torch.Tensor]:
    perm = permutation()
    rows, labels = [], []
    for start, prompt in rng.choices(prompts, k=recipe.batch):
        text = sl_answer(start, perm, rng, recipe.p_step, recipe.p_format)
        response = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        rows.append(prompt + response)
        labels.append([-100] * len(prompt) + response)
    return torch.tensor(rows), torch.tensor(labels)  # every row has the same length


def build_base(out: Path, recipe: BaseRecipe, seed: int, *, threads: int = 1) -> dict[str, float]:
    """Build, train and save the base policy for ``seed`` in ``out``; returns its measured figures."""
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    rng = random.Random(seed)
    tokenizer = chain_tokenizer()
    model = _model(tokenizer, recipe)
    records = chain_records()
    prompts = [(int(r.prompt_id.split("-")[1]), render_prompt(tokenizer, r)) for r in records]
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, recipe.lr, total_steps=recipe.steps, pct_start=0.1
    )
    model.train()
    start = time.perf_counter()
    for _ in range(recipe.steps):
        ids, labels = _batch(prompts, tokenizer, rng, recipe)
        loss = model(input_ids=ids, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
    model.eval()
    figures = {
        "sl_loss": float(loss.item()),
        "sl_seconds": time.perf_counter() - start,
        "parameters": float(sum(p.numel() for p in model.parameters())),
        **sample_reward(model, tokenizer, samples=16, seed=seed),
    }
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "recipe.json").write_text(
        json.dumps({**dataclasses.asdict(recipe), "seed": seed}, indent=2) + "\n"
    )
    (tmp / "base.json").write_text(json.dumps(figures, indent=2) + "\n")
    reloaded = AutoTokenizer.from_pretrained(tmp)
    if render_prompt(reloaded, records[0]) != prompts[0][1]:
        raise RuntimeError(f"{tmp}: the saved tokenizer does not reload identically")
    try:
        tmp.rename(out)
    except OSError:  # another process finished the same build first: theirs is identical
        shutil.rmtree(tmp, ignore_errors=True)
    return figures


@torch.no_grad()
def sample_reward(model: Any, tokenizer: Any, *, samples: int, seed: int) -> dict[str, float]:
    """The policy's mean reward on the task's prompts (``samples`` each, temperature 1), the share of
    the failing format, and the mean number of right leading steps: a direct forward loop, no engine."""
    records = chain_records()
    prompts = torch.tensor([render_prompt(tokenizer, r) for r in records for _ in range(samples)])
    generator = torch.Generator().manual_seed(seed)
    was_training = model.training
    model.eval()
    ids = prompts
    for _ in range(STEPS + 1):  # no KV cache: 20 positions, a 1-layer model
        logits = model(input_ids=ids).logits[:, -1, :].float()
        nxt = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)
        ids = torch.cat([ids, nxt], dim=1)
    model.train(was_training)
    texts = tokenizer.batch_decode(ids[:, prompts.shape[1] :], skip_special_tokens=True)
    answers = [r.spec["answer"] for r in records for _ in range(samples)]
    scored = [score_chain(t, a) for t, a in zip(texts, answers, strict=True)]
    n = len(scored)
    return {
        "reward": sum(s[0] for s in scored) / n,
        "failing_format": sum(t.split()[:1] == [FORMATS[1]] for t in texts) / n,
        "steps_right": sum(s[2] for s in scored) / n,
    }


def base_dir(cache: Path, recipe: BaseRecipe, seed: int) -> Path:
    return cache / f"chain-{recipe.key()}-seed{seed}"


def ensure_base(cache: Path, seed: int, recipe: BaseRecipe | None = None) -> Path:
    """The cached base for ``seed`` (built now when missing)."""
    recipe = recipe or BaseRecipe()
    out = base_dir(cache, recipe, seed)
    if not (out / "base.json").exists():
        cache.mkdir(parents=True, exist_ok=True)
        build_base(out, recipe, seed)
    return out
