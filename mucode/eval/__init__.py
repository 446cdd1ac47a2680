"""Evaluators: LiveCodeBench pass@k, math pass@1 (five-benchmark average), HumanEval+/MBPP+.

All of them verify through the verifier service (`mucode.verifier.client`), never in process.
The benchmark registry (`BENCHMARKS`, `mucode.eval.benchmarks`) holds each kind's named protocols
(`get_protocol(kind, name)`): every setting a published number depends on, and the defaults every
entry point (CLI, training-time evaluation, the evaluators) uses.
The trainer's periodic evaluation calls `evaluate_math` / `evaluate_livecodebench` /
`evaluate_evalplus` (or `evaluate_benchmarks` by name) with its rollout engine and tokenizer.
"""

from __future__ import annotations

import importlib
from typing import Any

# Exports resolve on first use (PEP 562): importing ``mucode.eval`` (every ``mucode`` command does,
# to register the eval commands) must not import the evaluators, which pull in httpx (the verifier
# client), ``datasets``' loaders and the benchmark tables: ~0.3 CPU-s a command that needs none.
_EXPORTS = {
    "BENCHMARKS": "mucode.eval.benchmarks",
    "Benchmark": "mucode.eval.benchmarks",
    "get_protocol": "mucode.eval.benchmarks",
    "protocol_names": "mucode.eval.benchmarks",
    "EngineSource": "mucode.eval.core",
    "SamplesSource": "mucode.eval.core",
    "evaluate_benchmarks": "mucode.eval.benchmarks",
    "evaluate_evalplus": "mucode.eval.evalplus.evaluate",
    "VerifierOptions": "mucode.eval.judge",
    "evaluate_livecodebench": "mucode.eval.livecodebench.evaluate",
    "MATH_BENCHMARKS": "mucode.eval.math_bench",
    "evaluate_math": "mucode.eval.math_bench",
    "pass_at_k": "mucode.eval.passk",
    "pass_at_k_table": "mucode.eval.passk",
    "Protocol": "mucode.eval.protocols",
    "format_table": "mucode.eval.report",
    "metrics_from_report": "mucode.eval.report",
    "write_report": "mucode.eval.report",
}

__all__ = [
    "BENCHMARKS",
    "MATH_BENCHMARKS",
    "Benchmark",
    "EngineSource",
    "Protocol",
    "SamplesSource",
    "VerifierOptions",
    "evaluate_benchmarks",
    "evaluate_evalplus",
    "evaluate_livecodebench",
    "evaluate_math",
    "format_table",
    "get_protocol",
    "metrics_from_report",
    "pass_at_k",
    "pass_at_k_table",
    "protocol_names",
    "write_report",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mucode.eval' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
