"""Code extraction from a model response for the LiveCodeBench evaluator: mucode's one rule.

``mucode.rewards.extract.last_fenced_block`` is LiveCodeBench's rule (`lcb_runner/utils/extraction_utils.py`:
the lines between the last two fence lines) made exact about what a fence line is; the verifier, the
training adapters and this evaluator share it, so training never scores 0 what evaluation accepts.
Its docstring lists the examples and the (rare) responses on which LiveCodeBench's own extractor
differs. A response without a closed block has no code (status `no_code`).
"""

from __future__ import annotations

from mucode.rewards.extract import last_fenced_block

__all__ = ["last_fenced_block"]
