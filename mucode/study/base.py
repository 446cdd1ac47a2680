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

from mucode.data.chain import (
    FORMATS,
    STOP,
    chain_records,
    code_answer_words,
    form_words,
    permutation,
    response_budget,
    sl_answer,
    to_form,
)
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
    form: str = "plain"
    """The task's answer form (``mucode.data.chain.FORMS``): its words are the tokenizer's."""

    def key(self) -> str:
        text = json.dumps({**dataclasses.asdict(self), "stop": STOP}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:10]


def chain_tokenizer(form: str = "plain") -> PreTrainedTokenizerFast:
    """Word-level: one token per word of ``form`` (symbols, formats, ``:``; the code form's quoted words,
    ``print(`` and ``)``); decodes with spaces between words."""
    words = SPECIALS + form_words(form)
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
        text = to_form(sl_answer(start, perm, rng, recipe.p_step, recipe.p_format), recipe.form)
        response = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] * STOP
        rows.append(prompt + response)
        labels.append([-100] * len(prompt) + response)
    return torch.tensor(rows), torch.tensor(labels)  # every row has the same length


def build_base(out: Path, recipe: BaseRecipe, seed: int, *, threads: int = 1) -> dict[str, float]:
    """Build, train and save the base policy for ``seed`` in ``out``; returns its measured figures."""
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    rng = random.Random(seed)
    tokenizer = chain_tokenizer(recipe.form)
    model = _model(tokenizer, recipe)
    records = chain_records(form=recipe.form)
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
        **sample_reward(model, tokenizer, samples=16, seed=seed, form=recipe.form),
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
def sample_reward(
    model: Any, tokenizer: Any, *, samples: int, seed: int, form: str = "plain"
) -> dict[str, float]:
    """The policy's mean reward on the task's prompts (``samples`` each, temperature 1, KV-cached, no
    engine), judged as the training reward is (``form``'s rule, pure Python): a response is the trainer's
    budget of tokens (``response_budget``), cut at a stop token if it draws one. Also the share in the
    failing format, the mean right leading steps, and the share that drew a stop token."""
    records = chain_records(form=form)
    prompts = torch.tensor([render_prompt(tokenizer, r) for r in records for _ in range(samples)])
    generator = torch.Generator().manual_seed(seed)
    budget = response_budget(form)
    was_training = model.training
    model.eval()
    out = model(input_ids=prompts, use_cache=True)
    drawn = []
    for step in range(budget):
        logits = out.logits[:, -1, :].float()
        drawn.append(torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator))
        if step + 1 < budget:
            out = model(input_ids=drawn[-1], past_key_values=out.past_key_values, use_cache=True)
    model.train(was_training)
    eos, rows = tokenizer.eos_token_id, torch.cat(drawn, dim=1).tolist()
    responses = [row[: row.index(eos)] if eos in row else row for row in rows]
    texts = tokenizer.batch_decode(responses, skip_special_tokens=True)
    answers = [r.spec["answer"] for r in records for _ in range(samples)]
    scored = [_judge(t, a, form) for t, a in zip(texts, answers, strict=True)]
    n = len(scored)
    return {
        "reward": sum(s[0] for s in scored) / n,
        "failing_format": sum(s[1] for s in scored) / n,
        "steps_right": sum(s[2] for s in scored) / n,
        "stopped": sum(eos in row for row in rows) / n,
    }


def _judge(text: str, answer: str, form: str) -> tuple[float, bool, int]:
    """(reward, failing format, right leading steps) of one response: the plain form's reward program
    (``score_chain``), or the code form's strict reading of the program (one cut off by the budget,
    or with a word after its ``)``, is not a program of that shape: it fails, as in the sandbox)."""
    if form == "code":
        plain = code_answer_words(text)
        if plain is None:
            return 0.0, text.split()[1:2] == [f"'{FORMATS[1]}',"], 0
        reward, _, right = score_chain(plain, answer)
        return reward, plain.split()[:1] == [FORMATS[1]], right
    reward, _, right = score_chain(text, answer)
    return reward, text.split()[:1] == [FORMATS[1]], right


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
