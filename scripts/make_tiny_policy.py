"""Build the embedded tiny policy (mucode/assets/tiny/): tokenizer, model, supervised warm-up.

    .venv/bin/python scripts/make_tiny_policy.py [--out mucode/assets/tiny] [--steps 1500]

No downloads: a byte-level BPE tokenizer is trained on the toy tasks' text, a small Llama-architecture
model is built from a config, and it is warmed up on the toy train prompts (math and code). A
target's answer is right with probability ``--p-correct`` (otherwise one of the problem's typical
wrong answers), and it is written in the scored format (``\\boxed{}``, a code fence) with
probability ``--p-format`` only (otherwise unformatted, which the reward programs score 0). So the
policy starts RL with a low but non-zero reward, which RL raises first by settling on the format
(one decision at the first response token, shared by all problems), then on the answers. ``--eval`` samples from the result at temperature 1 and prints its reward
measured with a quick in-process check (boxed-answer string match for math, a plain subprocess
running the stdio tests for code: NOT the sandbox; the verifier is the judge during training).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from mucode.data import render_prompt
from mucode.data.toy import ToyProblem, toy_problems, unformatted

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def build_tokenizer(corpus: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
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


def warmup_batch(
    problems: list[tuple[ToyProblem, list[int]]],
    tokenizer: PreTrainedTokenizerFast,
    rng: random.Random,
    batch: int,
    p_correct: float,
    p_format: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    rows, targets = [], []
    for problem, prompt in rng.sample(problems, batch):
        text = problem.correct if rng.random() < p_correct else rng.choice(problem.wrong)
        if rng.random() >= p_format:
            text = unformatted(problem.record.program, text)  # type: ignore[arg-type]
        response = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        rows.append(prompt + response)
        targets.append([-100] * len(prompt) + response)
    width = max(len(r) for r in rows)
    ids = torch.full((batch, width), tokenizer.pad_token_id)
    labels = torch.full((batch, width), -100)
    mask = torch.zeros((batch, width), dtype=torch.long)
    for i, (row, target) in enumerate(zip(rows, targets, strict=True)):
        ids[i, : len(row)] = torch.tensor(row)
        labels[i, : len(row)] = torch.tensor(target)
        mask[i, : len(row)] = 1
    return ids, labels, mask


_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_FENCE = re.compile(r"```(?:python)?\n(.*?)```", re.DOTALL)


def quick_reward(problem: ToyProblem, response: str) -> float:
    """Approximate reward for --eval (not the verifier)."""
    spec = problem.record.spec
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


def evaluate(out: Path, samples: int, split: str) -> dict[str, float]:
    from mucode.rollout import make_engine

    engine = make_engine(
        "hf", str(out), temperature=1.0, max_new_tokens=64, seed=1, batch_size=256, device="cpu"
    )
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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parents[1] / "mucode/assets/tiny"
    )
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument(
        "--p-correct", type=float, default=0.75, help="share of warm-up answers that are right"
    )
    parser.add_argument(
        "--p-format", type=float, default=0.25, help="share of warm-up answers in the scored format"
    )
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--vocab", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (1 is fastest on a busy machine)"
    )
    parser.add_argument("--eval", action="store_true", help="measure the reward of the result (quick check)")
    parser.add_argument("--eval-only", action="store_true")
    parser.add_argument("--eval-samples", type=int, default=4)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if not args.eval_only:
        torch.manual_seed(args.seed)
        rng = random.Random(args.seed)
        train = toy_problems("math") + toy_problems("code")
        everything = toy_problems("math", split="all") + toy_problems("code", split="all")
        corpus = [r for p in everything for r in (p.correct, *p.wrong)]
        corpus += [unformatted(p.record.program, r) for p in everything for r in (p.correct, *p.wrong)]  # type: ignore[arg-type]
        tokenizer = build_tokenizer(corpus, args.vocab)  # a first pass only to render the chat template
        corpus += [
            tokenizer.apply_chat_template(p.record.messages, tokenize=False, add_generation_prompt=True)
            for p in everything
        ]
        tokenizer = build_tokenizer(corpus, args.vocab)
        model = build_model(tokenizer, args.hidden, args.layers)
        print(
            f"vocab {len(tokenizer)}, parameters {sum(p.numel() for p in model.parameters()):,}", flush=True
        )
        encoded = [(p, render_prompt(tokenizer, p.record)) for p in train]
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
        schedule = torch.optim.lr_scheduler.OneCycleLR(
            optimizer, args.lr, total_steps=args.steps, pct_start=0.05
        )
        model.train()
        start = time.time()
        for step in range(1, args.steps + 1):
            ids, labels, mask = warmup_batch(
                encoded, tokenizer, rng, args.batch, args.p_correct, args.p_format
            )
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            if step % 25 == 0 or step == args.steps:
                print(
                    f"step {step}/{args.steps} loss {loss.item():.3f} ({time.time() - start:.0f} s)",
                    flush=True,
                )
        args.out.mkdir(parents=True, exist_ok=True)
        model.eval()
        model.save_pretrained(args.out)
        tokenizer.save_pretrained(args.out)
        reloaded = AutoTokenizer.from_pretrained(args.out)
        for problem, prompt in encoded[:: max(1, len(encoded) // 50)]:
            if render_prompt(reloaded, problem.record) != prompt:
                raise RuntimeError(f"{args.out}: the saved tokenizer does not reload identically")
        recipe = {k: v for k, v in vars(args).items() if k not in ("out", "eval", "eval_only")}
        (args.out / "recipe.json").write_text(json.dumps(recipe, indent=2) + "\n")
        print(f"saved to {args.out}")
    if args.eval or args.eval_only:
        for split in ("train", "test"):
            print(f"quick reward at T=1 ({split}):", evaluate(args.out, args.eval_samples, split))


if __name__ == "__main__":
    main()
