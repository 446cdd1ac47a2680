"""Benchmark data shipped with mucode (installed as ``mucode.eval.data``), each folder with a README
giving its provenance: ``math/`` (MATH500, AIME24, AIME25, AMC23, the layout ``mucode eval math
--data-dir`` reads) and ``livecodebench/`` (LiveCodeBench's few-shot examples for its base-model
prompt)."""

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent
MATH_DATA_DIR = DATA_DIR / "math"
"""MATH500, AIME24, AIME25 and AMC23 as shipped with mucode."""
LIVECODEBENCH_DATA_DIR = DATA_DIR / "livecodebench"

__all__ = ["DATA_DIR", "LIVECODEBENCH_DATA_DIR", "MATH_DATA_DIR"]
