"""Prompt rendering: chat messages through the tokenizer's chat template to token ids."""

from __future__ import annotations

from typing import Any

from mucode.data.types import TaskRecord


def render_prompt(tokenizer: Any, record: TaskRecord, *, chat_template: str | None = None) -> list[int]:
    """Token ids of ``record``'s prompt: its messages through the chat template with the
    generation prompt appended (the assistant turn is open).

    The template is rendered to text and tokenized without adding special tokens, so a template
    that writes the BOS token itself does not get a second one. ``chat_template`` overrides the
    tokenizer's (for base models that ship none).
    """
    template = chat_template or getattr(tokenizer, "chat_template", None)
    if not template:
        raise ValueError(
            f"tokenizer {getattr(tokenizer, 'name_or_path', '')!r} has no chat template; pass chat_template= "
            "(a Jinja template) or use a model that ships one"
        )
    text = tokenizer.apply_chat_template(
        record.messages, tokenize=False, add_generation_prompt=True, chat_template=template
    )
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return [int(i) for i in ids]


def prompt_lengths(
    tokenizer: Any, records: list[TaskRecord], *, chat_template: str | None = None, chunk: int = 1024
) -> list[int]:
    """``len(render_prompt(tokenizer, r))`` for every record, tokenizing ``chunk`` prompts per call
    (about twice as fast as one call per prompt on a data set of tens of thousands)."""
    template = chat_template or getattr(tokenizer, "chat_template", None)
    if not template:
        return [len(render_prompt(tokenizer, r, chat_template=chat_template)) for r in records]
    lengths: list[int] = []
    for start in range(0, len(records), chunk):
        texts = [
            tokenizer.apply_chat_template(
                r.messages, tokenize=False, add_generation_prompt=True, chat_template=template
            )
            for r in records[start : start + chunk]
        ]
        lengths += [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
    return lengths


def render_prompts(
    tokenizer: Any, records: list[TaskRecord], *, chat_template: str | None = None
) -> list[tuple[str, list[int]]]:
    """``(prompt_id, token ids)`` pairs, the input of ``RolloutEngine.generate``."""
    return [(r.prompt_id, render_prompt(tokenizer, r, chat_template=chat_template)) for r in records]
