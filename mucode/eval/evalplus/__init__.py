"""HumanEval+ / MBPP+ (base and plus tests) judged in mucode's sandbox with evalplus's rules.

Modules: ``driver`` (what runs in the sandbox), ``evaluate`` (``evaluate_evalplus``: load the data
set, generate, judge, report).
"""

from mucode.eval.evalplus.evaluate import evaluate_evalplus

__all__ = ["evaluate_evalplus"]
