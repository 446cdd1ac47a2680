"""Run samples through LiveCodeBench's own grader (`nvidia-livecodebench`), as a separate process.

Usage: python lcb_reference.py < cases.json > verdicts.json, where cases is a list of
{"input_output": <LiveCodeBench's JSON string>, "code": str, "timeout": int}. Each case goes through
`check_correctness` (a fresh process per sample, its `run_test` inside, as LiveCodeBench's
`codegen_metrics` does, including its handling of a grader exception); the verdict is
LiveCodeBench's: every test result > 0. The grader disables
os functions in the processes it runs code in (its `reliability_guard`), hence a process of its own.
"""

from __future__ import annotations

import contextlib
import json
import sys


def main() -> None:
    from livecodebench.evaluation.compute_code_generation_metrics import check_correctness

    cases = json.load(sys.stdin)
    verdicts = []
    for case in cases:
        results = [-2]  # as evaluate_generations_by_problem: a grader exception leaves this failure
        with contextlib.suppress(Exception):
            results, _ = check_correctness(
                {"input_output": case["input_output"]}, case["code"], timeout=case["timeout"], debug=False
            )
        verdicts.append(all(r > 0 for r in results))  # LiveCodeBench's pass rule (pass_k_utils)
    json.dump(verdicts, sys.stdout)


if __name__ == "__main__":
    main()
