"""Building the embedded tiny policy (``mucode/assets/tiny/``): tokenizer, model, supervised warm-up.

No downloads: a byte-level BPE tokenizer is trained on the toy tasks' text, a small
Llama-architecture model is built from a config, and it is warmed up on the toy train prompts
(math and code). A target's answer is right with probability ``p_correct`` (otherwise one of the
problem's typical wrong answers), and it is written in the scored format (``\\boxed{}``, a code
fence) with probability ``p_format`` only (otherwise unformatted, which the reward programs score 0).
So the policy starts RL with a low but non-zero reward, which RL raises first by settling on the
format (one decision at the first response token, shared by all problems), then on the answers.

:func:`quick_eval` measures a built policy's reward with a quick in-process check (boxed-answer
string match for math, a plain subprocess running the stdio tests for code): NOT the sandbox, which
is the judge during training. ``scripts/make_tiny_policy.py`` is the command line over this module;
the trainer tests build their small random policies with :func:`build_tokenizer` and
:func:`build_model`. Imports torch, tokenizers and transformers (at import).
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from mucode.data import render_prompt
from mucode.data.toy import ToyProblem, toy_problems, unformatted

__all__ = ["Recipe", "build_model", "build_tiny_policy", "build_tokenizer", "quick_eval", "quick_reward"]

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


@dataclasses.dataclass(frozen=True)
class Recipe:
    """The settings of one build (written next to the model as ``recipe.json``)."""

    steps: int = 500
    batch: int = 64
    lr: float = 3e-3
    p_correct: float = 0.75  # share of warm-up answers that are right
    p_format: float = 0.25  # share of warm-up answers in the scored format
    hidden: int = 64
    layers: int = 3
    vocab: int = 1024
    seed: int = 0
    threads: int = 1  # torch CPU threads (1 is fastest on a busy machine)
    eval_samples: int = 4


def build_tokenizer(corpus: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on ``corpus``, with the ChatML chat template."""
    core = Tokenizer(models.BPE())
    # Merges may span words (the instruction repeated in every prompt collapses into a few tokens),
    # but digits, brackets and newlines stay single tokens, so answers and programs are sampled
    # piece by piece rather than memorised as one token each.
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r"[0-9(){}\[\]\n,.:*+\-/%=]"), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(corpus, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
        model_max_length=512,
    )


def build_model(tokenizer: PreTrainedTokenizerFast, hidden: int, layers: int) -> LlamaForCausalLM:
    """A randomly initialised Llama-architecture causal LM sized for ``tokenizer``."""
    # Llama, not Qwen2: transformers 5 loads a qwen2 checkpoint's tokenizer as Qwen2Tokenizer, whose
    # fixed pre-tokenizer would silently replace ours; for llama it honours tokenizer.json.
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=3 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def _warmup_batch(
    problems: list[tuple[ToyProblem, list[int]]],
    tokenizer: PreTrainedTokenizerFast,
    rng: random.Random,
    recipe: Recipe,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    rows, targets = [], []
    for problem, prompt in rng.sample(problems, recipe.batch):
        text = problem.correct if rng.random() < recipe.p_correct else rng.choice(problem.wrong)
        if rng.random() >= recipe.p_format:
            text = unformatted(problem.record.program, text)  # type: ignore[arg-type]
        response = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        rows.append(prompt + response)
        targets.append([-100] * len(prompt) + response)
    width = max(len(r) for r in rows)
    ids = torch.full((recipe.batch, width), tokenizer.pad_token_id)
    labels = torch.full((recipe.batch, width), -100)
    mask = torch.zeros((recipe.batch, width), dtype=torch.long)
    for i, (row, target) in enumerate(zip(rows, targets, strict=True)):
        ids[i, : len(row)] = torch.tensor(row)
        labels[i, : len(row)] = torch.tensor(target)
        mask[i, : len(row)] = 1
    return ids, labels, mask


def _toy_tokenizer(vocab: int) -> PreTrainedTokenizerFast:
    everything = toy_problems("math", split="all") + toy_problems("code", split="all")
    corpus = [r for p in everything for r in (p.correct, *p.wrong)]
    corpus += [unformatted(p.record.program, r) for p in everything for r in (p.correct, *p.wrong)]  # type: ignore[arg-type]
    tokenizer = build_tokenizer(corpus, vocab)  # a first pass only to render the chat template
    corpus += [
        str(tokenizer.apply_chat_template(p.record.messages, tokenize=False, add_generation_prompt=True))
        for p in everything
    ]
    return build_tokenizer(corpus, vocab)


def build_tiny_policy(out: Path, recipe: Recipe, progress: Callable[[str], None] = print) -> None:
    """Tokenizer, model and warm-up per ``recipe``, saved to ``out`` with its ``recipe.json``."""
    torch.set_num_threads(recipe.threads)
    torch.manual_seed(recipe.seed)
    rng = random.Random(recipe.seed)
    tokenizer = _toy_tokenizer(recipe.vocab)
    model = build_model(tokenizer, recipe.hidden, recipe.layers)
    progress(f"vocab {len(tokenizer)}, parameters {sum(p.numel() for p in model.parameters()):,}")
    encoded = [(p, render_prompt(tokenizer, p.record)) for p in toy_problems("math") + toy_problems("code")]
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, recipe.lr, total_steps=recipe.steps, pct_start=0.05
    )
    model.train()
    start = time.time()
    for step in range(1, recipe.steps + 1):
        ids, labels, mask = _warmup_batch(encoded, tokenizer, rng, recipe)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if step % 25 == 0 or step == recipe.steps:
            progress(f"step {step}/{recipe.steps} loss {loss.item():.3f} ({time.time() - start:.0f} s)")
    out.mkdir(parents=True, exist_ok=True)
    model.eval()
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    reloaded = AutoTokenizer.from_pretrained(out)
    for problem, prompt in encoded[:: max(1, len(encoded) // 50)]:
        if render_prompt(reloaded, problem.record) != prompt:
            raise RuntimeError(f"{out}: the saved tokenizer does not reload identically")
    (out / "recipe.json").write_text(json.dumps(dataclasses.asdict(recipe), indent=2) + "\n")


_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_FENCE = re.compile(r"```(?:python)?\n(.*?)```", re.DOTALL)


def quick_reward(problem: ToyProblem, response: str) -> float:
    """Approximate reward of one response (not the verifier: no sandbox)."""
    spec: Any = problem.record.spec
    if problem.record.program == "math":
        found = _BOXED.findall(response)
        return float(bool(found) and found[-1].strip() == spec["answer"])
    blocks = _FENCE.findall(response)
    if not blocks:
        return 0.0
    for stdin, expected in zip(spec["tests"]["inputs"], spec["tests"]["outputs"], strict=True):
        try:
            run = subprocess.run(
                [sys.executable, "-I", "-S", "-c", blocks[-1]],
                input=stdin,
                capture_output=True,
                text=True,
                timeout=5,
            )
        except (subprocess.TimeoutExpired, ValueError):  # ValueError: a NUL byte in the program
            return 0.0
        if run.stdout.split() != expected.split():
            return 0.0
    return 1.0


def quick_eval(out: Path, samples: int, split: str) -> dict[str, float]:
    """Mean :func:`quick_reward` per task of the policy in ``out``, sampled at temperature 1."""
    from mucode.rollout import SamplingParams, make_engine  # lazy: torch

    sampling = SamplingParams(temperature=1.0, max_new_tokens=64, seed=1)
    engine = make_engine("hf", str(out), sampling, batch_size=256, device="cpu")
    tokenizer = AutoTokenizer.from_pretrained(out)
    figures = {}
    for task in ("math", "code"):
        problems = {p.record.prompt_id: p for p in toy_problems(task, split=split)}
        prompts = [(pid, render_prompt(tokenizer, p.record)) for pid, p in problems.items()]
        rewards = [
            quick_reward(problems[s.prompt_id], s.response_text)
            for group in engine.generate(prompts, samples)
            for s in group
        ]
        figures[task] = sum(rewards) / len(rewards)
    engine.close()
    return figures
