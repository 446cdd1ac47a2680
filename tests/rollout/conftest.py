from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from mucode.assets import tiny_policy_path
from mucode.data import load_tasks, render_prompts


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """One intra-op thread: on a shared 2-core machine two threads make a tiny model ~15x slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny() -> tuple[Any, Any]:
    """The embedded tiny policy (float32, CPU) and its tokenizer."""
    path = tiny_policy_path()
    return AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32
    ).eval(), AutoTokenizer.from_pretrained(path)


@pytest.fixture(scope="session")
def toy_prompts(tiny: tuple[Any, Any]) -> list[tuple[str, list[int]]]:
    """Three math and three code toy prompts (different lengths, so batches are padded)."""
    _, tokenizer = tiny
    records = load_tasks("toy", "math", limit=3) + load_tasks("toy", "code", limit=3)
    return render_prompts(tokenizer, records)
