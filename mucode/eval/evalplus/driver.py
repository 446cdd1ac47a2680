"""One EvalPlus sample as an ``assert`` job of mucode's sandbox (standard library only in the sandbox).

`build_program` wraps the sample's code as evalplus's `unsafe_execute` runs it: a fresh namespace
(no `__name__`, so `if __name__ == "__main__":` blocks do not run), output swallowed, stdin
unreadable. `build_tests` returns the test code: the task's inputs, ground-truth outputs and time
limits (a base64 pickle) and evalplus 0.3.1's comparison rules (`evalplus/eval/__init__.py`). The
sandbox runs that test code in its assert harness, a process of its own that shares no memory with
the sample (mucode/sandbox/executor/harness.py): the sample's entry point is called through a pipe
with plain-data arguments, its outputs come back as plain data, and the rules are applied there, so
the ground truth and the verdict are never in the sample's process. The rules:

- exact equality first; then, when the ground truth is a float (or a flat list/tuple of floats) or the
  problem sets `atol`, same type, same length and `np.allclose(out, exp, rtol=1e-7, atol)` (atol
  1e-6 when the problem sets 0), re-implemented without numpy (nested sequences compared
  element-wise, NaN never close);
- MBPP special oracles (set equality for some tasks, "not None" tasks, `are_equivalent`,
  `sum_div`, `surface_Area`, `digit_distance_nums`) with evalplus's own oracle functions, whose
  source is copied in from the installed evalplus;
- HumanEval/32 (`find_zero`): passes when |poly(xs, out)| ≤ atol (evalplus's `poly`, from the
  test code, not the sample's). Deviation: evalplus 0.3.1's runner `continue`s past its
  bookkeeping on this oracle, so locally it fails every find_zero solution; here the oracle decides,
  as it intends.

It stops at the first failing input (evalplus's default fast check): an `AssertionError` naming
`FAIL <i>` or `ERROR <i> <exception or timeout>` (the sandbox's `wrong_answer`). Per-input time
limits (wall clock) and the per-task budget are enforced by the harness with `SIGALRM`; a sample
that takes longer to load than the sandbox's limit is `time_limit`. Deviations from evalplus:
arguments and results cross the process boundary as plain data (a result that is not, such as a
custom object, fails; a numpy value is compared as its `tolist()`); arguments are copies, as
evalplus's `deepcopy`.
"""

from __future__ import annotations

import base64
import inspect
import pickle
from typing import Any

__all__ = ["build_program", "build_tests"]

_RULES = r'''
import base64, math, pickle, signal, time

class _Timeout(BaseException):
    pass

def _on_alarm(signum, frame):
    raise _Timeout()

def _is_floats(x):
    if isinstance(x, float):
        return True
    if isinstance(x, (list, tuple)) and x:
        return all(isinstance(i, float) for i in x)
    return False

def _flatten(x):
    if isinstance(x, (list, tuple)):
        out = []
        for item in x:
            sub = _flatten(item)
            if sub is None:
                return None
            out.append(sub)
        return out
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return x

def _close(a, b, atol, rtol):
    if isinstance(a, list) or isinstance(b, list):
        if not (isinstance(a, list) and isinstance(b, list)):
            # numpy broadcasts a scalar against a sequence
            if isinstance(a, list):
                return all(_close(x, b, atol, rtol) for x in a)
            return all(_close(a, y, atol, rtol) for y in b)
        if len(a) != len(b):
            return False
        return all(_close(x, y, atol, rtol) for x, y in zip(a, b))
    if math.isnan(a) or math.isnan(b):
        return False
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= atol + rtol * abs(b)

def _allclose(out, exp, atol):
    a, b = _flatten(out), _flatten(exp)
    if a is None or b is None:
        return False
    return _close(a, b, atol, 1e-07)

def _check(dataset, entry_point, inp, out, exp, atol):
    """(passed, atol): evalplus mutates atol for the remaining inputs once it meets a float."""
    exact_match = out == exp
    if dataset == "mbpp":
        if "are_equivalent" == entry_point:
            exact_match = exact_match or True
        elif "sum_div" == entry_point:
            exact_match = exact_match or out == 0
        elif "surface_Area" == entry_point:
            exact_match = exact_match or abs(out - _surface_Area(*inp)) <= atol
        elif "digit_distance_nums" == entry_point:
            exact_match = exact_match or out == _digit_distance_nums(*inp)
        elif entry_point in MBPP_OUTPUT_SET_EQ_TASKS:
            exact_match = set(out) == set(exp)
        elif entry_point in MBPP_OUTPUT_NOT_NONE_TASKS:
            if isinstance(out, bool):
                exact_match = out == exp
            else:
                exact_match = exp == (out is not None)
    if dataset == "humaneval" and "find_zero" == entry_point:
        return abs(_poly(*inp, out)) <= atol, atol
    if atol == 0 and _is_floats(exp):
        atol = 1e-6
    if not exact_match and atol != 0:
        if type(out) != type(exp):
            return False, atol
        if isinstance(exp, (list, tuple)) and len(out) != len(exp):
            return False, atol
        return _allclose(out, exp, atol), atol
    return bool(exact_match), atol

def check(candidate):
    signal.signal(signal.SIGALRM, _on_alarm)
    verdict = None
    i = -1
    deadline = time.monotonic() + _P["budget_s"]
    atol = _P["atol"]
    try:
        for i, (inp, exp) in enumerate(zip(_P["inputs"], _P["expected"])):
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Timeout()
            signal.setitimer(signal.ITIMER_REAL, min(_P["time_limits"][i], left))
            try:
                out = candidate(*inp)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            passed, atol = _check(_P["dataset"], _P["entry_point"], inp, out, exp, atol)
            if not passed:
                verdict = "FAIL %d" % i
                break
    except _Timeout:
        verdict = "ERROR %d timeout" % i
    except Exception as err:
        verdict = "ERROR %d %s" % (i, type(err).__name__)
    if verdict is not None:
        raise AssertionError(verdict)
'''

_WRAPPER = r"""
import io, os, sys

class _NoInput(io.StringIO):
    def read(self, *args, **kwargs):
        raise OSError("stdin is not readable")
    readline = readlines = read

sys.stdout = sys.stderr = open(os.devnull, "w")
sys.stdin = _NoInput()
_namespace = {}
exec(compile(_CODE, "solution.py", "exec"), _namespace)
"""


def _oracle_source() -> str:
    from evalplus.eval import _special_oracle  # lazy: evalplus

    return inspect.getsource(_special_oracle)


def build_tests(
    *,
    entry_point: str,
    dataset: str,
    inputs: list[Any],
    expected: list[Any],
    atol: float,
    time_limits: list[float],
    budget_s: float,
) -> str:
    """The test code of one task and test set, run by the sandbox's assert harness with
    ``check(<entry_point>)`` (the same for every sample of the task).

    `budget_s`: wall-clock seconds for the whole run (evalplus's per-task timeout).
    """
    if len(inputs) != len(expected) or len(inputs) != len(time_limits):
        raise ValueError("inputs, expected outputs and time limits must have the same length")
    payload = {
        "entry_point": entry_point,
        "dataset": dataset,
        "inputs": inputs,
        "expected": expected,
        "atol": atol,
        "time_limits": time_limits,
        "budget_s": budget_s,
    }
    data = base64.b64encode(pickle.dumps(payload, protocol=4)).decode("ascii")
    return _oracle_source() + "\n" + _RULES + f"\n_P = pickle.loads(base64.b64decode({data!r}))\n"


def build_program(code: str, entry_point: str) -> str:
    """The sandboxed program: the sample's code run as evalplus runs it, its entry point bound at
    the top level (a sample without it fails when the tests look it up)."""
    return (
        f"_CODE = {code!r}\n"
        + _WRAPPER
        + f"if {entry_point!r} in _namespace:\n    {entry_point} = _namespace[{entry_point!r}]\n"
    )
