"""LiveCodeBench code generation: pass@k judged in mucode's sandbox with LiveCodeBench's own rules.

Modules: ``data`` (the release files, private tests decoded), ``prompts`` (LiveCodeBench's prompt
styles), ``driver`` (the stdio and call-based harness a sample runs in), ``evaluate``
(``evaluate_livecodebench``: generate, judge, report).
"""

from mucode.eval.livecodebench.evaluate import evaluate_livecodebench

__all__ = ["evaluate_livecodebench"]
