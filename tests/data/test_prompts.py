"""render_prompt: the chat template applied once, the generation prompt open, no doubled specials."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from mucode.assets import tiny_policy_path
from mucode.data import TaskRecord, load_tasks, render_prompt, render_prompts


@pytest.fixture(scope="module")
def tokenizer():  # type: ignore[no-untyped-def]
    return AutoTokenizer.from_pretrained(tiny_policy_path())


def test_render_prompt_applies_the_chat_template(tokenizer) -> None:  # type: ignore[no-untyped-def]
    (record,) = load_tasks("toy", "math", limit=1)
    ids = render_prompt(tokenizer, record)
    text = tokenizer.decode(ids)
    assert text == f"<|im_start|>user\n{record.messages[0]['content']}<|im_end|>\n<|im_start|>assistant\n"
    assert ids.count(tokenizer.convert_tokens_to_ids("<|im_start|>")) == 2
    assert render_prompts(tokenizer, [record]) == [(record.prompt_id, ids)]


def test_template_override_and_missing_template(tokenizer) -> None:  # type: ignore[no-untyped-def]
    record = TaskRecord(
        prompt_id="p", messages=[{"role": "user", "content": "hi"}], program="math", spec={"answer": "1"}
    )
    plain = render_prompt(tokenizer, record, chat_template="Q: {{ messages[-1]['content'] }}\nA:")
    assert tokenizer.decode(plain) == "Q: hi\nA:"
    saved = tokenizer.chat_template
    tokenizer.chat_template = None
    try:
        with pytest.raises(ValueError, match="no chat template"):
            render_prompt(tokenizer, record)
    finally:
        tokenizer.chat_template = saved


def test_prompt_lengths_in_chunks_equal_one_render_per_prompt(tokenizer) -> None:  # type: ignore[no-untyped-def]
    from mucode.data.prompts import prompt_lengths

    records = load_tasks("toy", "math") + load_tasks("toy", "code")
    expected = [len(render_prompt(tokenizer, r)) for r in records]
    assert len(set(expected)) > 5  # the prompts differ in length, so the comparison is not trivial
    assert prompt_lengths(tokenizer, records, chunk=7) == expected
    assert prompt_lengths(tokenizer, records) == expected
