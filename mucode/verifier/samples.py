"""How another framework's sample (a response and its label) becomes a mucode ``Item``.

Shared by the verl reward function, the TRL reward function and the OpenRLHF route, so one data set
reads the same everywhere. First rule that applies:

1. ``extra_info["mucode"]`` or the label is ``{"program": ..., "spec": {...}}`` (or its JSON text):
   used as is (plug-in programs too);
2. the label is a dict (or JSON text of one) with ``tests``: a code item with that spec;
3. the label has ``inputs``/``outputs`` (verl's sandbox_fusion format, optional ``fn_name``): a code
   item, stdio (or call when ``fn_name`` is set);
4. otherwise: a math item with ``answer = label``.
"""

from __future__ import annotations

import json
from typing import Any

from mucode.protocol import Item

__all__ = ["to_item"]


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
        return Item(id=item_id, program=spec["program"], response=response, spec=spec.get("spec", {}))
    truth = _parsed(label)
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
    return Item(id=item_id, program="math", response=response, spec={"answer": truth})
