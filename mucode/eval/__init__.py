"""Evaluators: LiveCodeBench pass@k, math pass@1 (five-benchmark average), HumanEval+/MBPP+.

All of them verify through the verifier service (`mucode.verifier.client`), never in process.
The benchmark registry (`BENCHMARKS`, `mucode.eval.benchmarks`) holds each kind's named protocols
(`get_protocol(kind, name)`): every setting a published number depends on, and the defaults every
entry point (CLI, training-time evaluation, the evaluators) uses.
The trainer's periodic evaluation calls `evaluate_math` / `evaluate_livecodebench` /
`evaluate_evalplus` (or `evaluate_benchmarks` by name) with its rollout engine and tokenizer.
"""

from __future__ import annotations

from mucode.eval.benchmarks import BENCHMARKS, Benchmark, evaluate_benchmarks, get_protocol, protocol_names
from mucode.eval.core import EngineSource, SamplesSource
from mucode.eval.evalplus import evaluate_evalplus
from mucode.eval.judge import VerifierOptions
from mucode.eval.livecodebench.evaluate import evaluate_livecodebench
from mucode.eval.math_bench import MATH_BENCHMARKS, evaluate_math
from mucode.eval.passk import pass_at_k, pass_at_k_table
from mucode.eval.protocols import Protocol
from mucode.eval.report import format_table, metrics_from_report, write_report

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
