"""The embedded tiny policy shipped inside the package (``mucode/assets/tiny/``), and where model paths
resolve (``resolve_model_path``: ``tiny`` names it). Benchmark data ships as ``mucode.eval.data``
(the repository's top-level ``eval/`` folder).

The tiny policy is a ~0.2 M-parameter Llama-architecture causal LM with a byte-level BPE tokenizer
(ChatML chat template) made by ``mucode.train.tiny_build`` (its command line:
``scripts/make_tiny_policy.py``) with a short supervised warm-up on
the toy tasks (``mucode.data.toy``) in which only part of the targets are right and in the scored
format, so that it starts with a low but non-zero reward. It loads offline with ``from_pretrained``
(``recipe.json`` records the script's settings).
"""

from __future__ import annotations

from pathlib import Path

TINY_POLICY_NAME = "tiny"
TINY_POLICY_DIR = Path(__file__).resolve().parent / "tiny"


def tiny_policy_path() -> Path:
    """Directory of the embedded tiny policy (model + tokenizer), loadable with ``from_pretrained``."""
    if not (TINY_POLICY_DIR / "config.json").exists():
        raise FileNotFoundError(
            f"{TINY_POLICY_DIR} holds no tiny policy; rebuild it with `python scripts/make_tiny_policy.py`"
        )
    return TINY_POLICY_DIR


def resolve_model_path(path: str) -> str:
    """``"tiny"`` -> the embedded tiny policy's directory; anything else unchanged."""
    return str(tiny_policy_path()) if path == TINY_POLICY_NAME else path
