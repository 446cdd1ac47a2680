"""Responses for evaluation: sampled with a rollout engine (cached, resumable) or read from a file.

Engine mode: prompts are rendered to token ids here (chat messages through the tokenizer's chat
template with the generation prompt, or continuing a final assistant message that pre-fills the
answer's start; raw text prompts as they are), then the engine samples n
responses per prompt. Only the missing samples of each problem are generated; each finished group
is appended to the run store at once, so an interrupted run resumes where it stopped.

Samples-file mode: one JSON object a line with the problem's id and `response`; several lines with
the same id are several samples of that problem.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mucode.data.files import json_lines
from mucode.eval.store import RunStore, prompt_key

__all__ = ["Prompt", "cut_at_stop", "generate_responses", "read_samples_file", "render_prompt_ids"]

Prompt = str | list[dict[str, str]]
"""Raw text, or chat messages that the tokenizer's chat template turns into text."""
Progress = Callable[[str], None]


def render_prompt_ids(tokenizer: Any, prompt: Prompt) -> list[int]:
    """Token ids of a prompt: chat messages through the chat template, raw text tokenized as is."""
    if isinstance(prompt, str):
        return [int(i) for i in tokenizer(prompt)["input_ids"]]
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(
            f"tokenizer {getattr(tokenizer, 'name_or_path', '')!r} has no chat template; use a chat model, or the "
            "base-model prompt layout (--prompt-style base) where the evaluator offers one"
        )
    if prompt and prompt[-1]["role"] == "assistant":  # a prefilled assistant turn that the model continues
        text = tokenizer.apply_chat_template(prompt, tokenize=False, continue_final_message=True)
    else:
        text = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    return [int(i) for i in tokenizer(text, add_special_tokens=False)["input_ids"]]


def generate_responses(
    engine: Any,
    tokenizer: Any,
    prompts: Mapping[str, Prompt],
    n: int,
    store: RunStore,
    *,
    progress: Progress | None = None,
    on_group: Callable[[str, int, list[str]], None] | None = None,
    stop: Sequence[str] = (),
) -> dict[str, list[str]]:
    """n responses per problem id: cached ones first, the rest sampled with `engine` and cached.

    `on_group(problem_id, first_index, responses)` is called for each newly generated group as soon
    as it is saved (the evaluators start verifying it while generation goes on). `stop`: each
    response is cut before the first stop string (as an engine with stop strings returns it).
    """
    say = progress or (lambda _msg: None)
    keys = {pid: prompt_key(prompt) for pid, prompt in prompts.items()}
    by_need: dict[int, list[str]] = {}
    for problem_id in prompts:
        need = n - len(store.responses(problem_id, n, keys[problem_id]))
        if need > 0:
            by_need.setdefault(need, []).append(problem_id)
    total = sum(len(ids) for ids in by_need.values())
    if total:
        say(f"generating for {total}/{len(prompts)} problems ({len(prompts) - total} cached)")
    done = 0
    for need, ids in sorted(by_need.items()):
        rendered = [(pid, render_prompt_ids(tokenizer, prompts[pid])) for pid in ids]
        for group in engine.generate(rendered, need):
            ordered = sorted(group, key=lambda s: s.sample_index)
            problem_id, texts = ordered[0].prompt_id, [cut_at_stop(s.response_text, stop) for s in ordered]
            first_index = len(store.responses(problem_id, n, keys[problem_id]))
            store.add_samples(problem_id, texts, keys[problem_id])
            if on_group is not None:
                on_group(problem_id, first_index, texts)
            done += 1
            if done % 10 == 0 or done == total:
                say(f"generated {done}/{total} problems")
    return {pid: store.responses(pid, n, keys[pid]) for pid in prompts}


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """`text` up to (not including) the earliest occurrence of any stop string."""
    ends = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    return text[: min(ends)] if ends else text


def read_samples_file(path: str | Path, id_key: str | tuple[str, ...] = "id") -> dict[str, list[str]]:
    """Responses per problem id from a JSON Lines file of `{id_key: ..., "response": ...}` objects.

    With several id keys, each line uses the first one it has (e.g. `("unique_id", "id")`).
    """
    keys = (id_key,) if isinstance(id_key, str) else id_key
    samples: dict[str, list[str]] = {}

    for number, row in json_lines(path):
        key = next((k for k in keys if isinstance(row, dict) and k in row), None)
        if key is None or not isinstance(row.get("response"), str):
            raise ValueError(
                f'{path}:{number}: expected {{"{keys[0]}": ..., "response": "..."}}, got {json.dumps(row)[:120]}'
            )
        samples.setdefault(str(row[key]), []).append(row["response"])
    if not samples:
        raise ValueError(f"{path}: no samples")
    return samples
