"""How another framework's sample (a response and its label) becomes a mucode ``Item``.

Shared by the verl reward function, the TRL reward function and the OpenRLHF route, so one data set
reads the same everywhere. First rule that applies:

1. ``extra_info["mucode"]`` or the label is ``{"program": ..., "spec": {...}}`` (or its JSON text):
   used as is (plug-in programs too);
2. the label is a dict (or JSON text of one) with ``tests``: a code item with that spec;
3. the label has ``inputs``/``outputs`` (verl's sandbox_fusion format, optional ``fn_name``): a code
   item, stdio (or call when ``fn_name`` is set);
4. a dict with ``answer``: a math item with that spec;
5. otherwise: a math item with ``answer = label`` (text or a number; a one-element list is its element).

Labels read by 🤗 datasets from a struct column carry ``None`` for the keys a row lacks (Arrow gives
every row the union of the keys); those ``None`` entries are dropped before the spec is validated, in
the label's nested dicts (not inside lists such as test outputs, where ``None`` is a value), so a row
reads as it was written.

``strip_special_tokens`` removes the special-token text a client decoded with the response (OpenRLHF
decodes with ``skip_special_tokens=False``: ``...```<|im_end|>``): the trailing run of known end and
padding markers (``SPECIAL_TOKENS``) and the whitespace between them.
"""

from __future__ import annotations

import json
from typing import Any

from mucode.protocol import Item

__all__ = ["SPECIAL_TOKENS", "strip_special_tokens", "to_item"]

SPECIAL_TOKENS = (
    "<|im_end|>",
    "<|endoftext|>",
    "<|im_start|>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "<|eom_id|>",
    "<｜end▁of▁sentence｜>",
    "</s>",
    "<eos>",
    "<end_of_turn>",
    "<|end|>",
    "<|return|>",
    "<pad>",
    "[PAD]",
)
"""End-of-sequence and padding token texts of the common tokenizers (Qwen, Llama 3, DeepSeek, Mistral,
Gemma, Phi, gpt-oss)."""


def strip_special_tokens(response: str, tokens: tuple[str, ...] = SPECIAL_TOKENS) -> str:
    """``response`` without its trailing run of special-token texts (and the whitespace among them)."""
    end = len(response)
    while True:
        text = response[:end].rstrip()
        token = next((t for t in tokens if text.endswith(t)), None)
        if token is None:
            return response[:end] if end == len(response) else text
        end = len(text) - len(token)


def _without_none(value: Any) -> Any:
    """``value`` with the ``None`` entries of its nested dicts removed (Arrow's fill of absent keys); lists
    (test inputs and outputs, where ``None`` can be a value) are left as they are."""
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    return value


def _parsed(label: Any) -> Any:
    """JSON text of an object (as Parquet often stores it) parsed; anything else as it is."""
    if isinstance(label, str) and label.lstrip().startswith("{"):
        try:
            return json.loads(label)
        except json.JSONDecodeError:
            return label
    return label


def to_item(data_source: str, response: str, label: Any, extra_info: dict[str, Any] | None) -> Item:
    """The mucode item for one sample (rules in the module docstring); ``extra_info["index"]`` is its id."""
    extra = extra_info or {}
    item_id = str(extra["index"]) if "index" in extra else None
    spec = extra.get("mucode")
    if isinstance(spec, str):  # JSON text, as `mucode verl-config --data-out` writes it to Parquet
        spec = json.loads(spec)
    if isinstance(spec, dict):
        spec = _without_none(spec)
        return Item(id=item_id, program=spec["program"], response=response, spec=spec.get("spec", {}))
    truth = _without_none(_parsed(label))
    if isinstance(truth, list | tuple) and len(truth) == 1:
        truth = truth[0]
    if isinstance(truth, dict) and "program" in truth:  # {"program", "spec"} as the label itself
        return Item(id=item_id, program=truth["program"], response=response, spec=truth.get("spec", {}))
    if isinstance(truth, dict) and "tests" in truth:
        return Item(id=item_id, program="code", response=response, spec=truth)
    if isinstance(truth, dict) and "inputs" in truth and "outputs" in truth:
        fn_name = truth.get("fn_name")
        tests = {
            "format": "call" if fn_name else "stdio",
            "inputs": list(truth["inputs"]),
            "outputs": list(truth["outputs"]),
            "fn_name": fn_name,
        }
        return Item(id=item_id, program="code", response=response, spec={"tests": tests})
    if isinstance(truth, dict) and "answer" in truth:
        return Item(id=item_id, program="math", response=response, spec=truth)
    return Item(id=item_id, program="math", response=response, spec={"answer": truth})
