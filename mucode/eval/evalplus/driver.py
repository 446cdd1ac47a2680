"""The program that runs one EvalPlus sample inside mucode's sandbox (standard library only).

`build_driver` returns the source of a Python program holding the sample's code; `build_payload`
the task's test inputs, ground-truth outputs and time limits as a base64 pickle, which the program
reads on stdin (the item's one stdio test, identical for every sample of the task, so a request
carries it once). Run as a program it executes the code in a fresh namespace with output swallowed (evalplus's
`unsafe_execute`), calls the entry point on each input under its time limit, and compares with
evalplus 0.3.1's rules (`evalplus/eval/__init__.py`):

- exact equality first; then, when the ground truth is a float (or a flat list/tuple of floats) or the
  problem sets `atol`, same type, same length and `np.allclose(out, exp, rtol=1e-7, atol)` (atol
  1e-6 when the problem sets 0), re-implemented without numpy (nested sequences compared
  element-wise, NaN never close);
- MBPP special oracles (set equality for some tasks, "not None" tasks, `are_equivalent`,
  `sum_div`, `surface_Area`, `digit_distance_nums`) with evalplus's own oracle functions, whose
  source is copied in from the installed evalplus;
- HumanEval/32 (`find_zero`): passes when |poly(xs, out)| ≤ atol. Deviation: evalplus 0.3.1's runner
  `continue`s past its bookkeeping on this oracle, so locally it fails every find_zero solution;
  here the oracle decides, as it intends.

It stops at the first failing input (evalplus's default fast check) and prints one line: the pass
marker, or `FAIL <i>` / `ERROR <i> <exception or timeout>` (i = -1 while loading the code). The
verifier compares that line outside the sandbox.

Limit: the comparison runs in the sandboxed process next to the sample, as in evalplus and
HumanEval; the ground truth is therefore inside the sandbox, and a program written to find it could.
"""

from __future__ import annotations

import base64
import inspect
import pickle
from typing import Any

__all__ = ["PASS_MARKER", "build_driver", "build_payload"]

PASS_MARKER = "MUCODE_EVALPLUS_PASS"

_DRIVER = r'''
import base64, io, math, os, pickle, signal, sys, time

_P = pickle.loads(base64.b64decode(sys.stdin.buffer.read()))

class _Timeout(BaseException):
    pass

def _on_alarm(signum, frame):
    raise _Timeout()

class _NoInput(io.StringIO):
    def read(self, *args, **kwargs):
        raise OSError("stdin is not readable")
    readline = readlines = read

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

def _main():
    real_stdout = sys.stdout
    signal.signal(signal.SIGALRM, _on_alarm)
    sink = io.StringIO()
    sys.stdout, sys.stderr, sys.stdin = sink, sink, _NoInput()
    verdict = "MUCODE_EVALPLUS_PASS"
    i = -1  # the input being run (-1: loading the code)
    try:
        namespace = {}
        deadline = time.monotonic() + _P["budget_s"]
        signal.setitimer(signal.ITIMER_REAL, _P["budget_s"])
        exec(_CODE, namespace)
        fn = namespace[_P["entry_point"]]
        atol = _P["atol"]
        for i, (inp, exp) in enumerate(zip(_P["inputs"], _P["expected"])):
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Timeout()
            signal.setitimer(signal.ITIMER_REAL, min(_P["time_limits"][i], left))
            try:
                out = fn(*inp)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            passed, atol = _check(_P["dataset"], _P["entry_point"], inp, out, exp, atol)
            if not passed:
                verdict = "FAIL %d" % i
                break
    except _Timeout:
        verdict = "ERROR %d timeout" % i
    except BaseException as err:
        verdict = "ERROR %d %s" % (i, type(err).__name__)
    sys.stdout = real_stdout
    real_stdout.write(verdict + "\n")
    real_stdout.flush()
    os._exit(0)

_main()
'''


def _oracle_source() -> str:
    from evalplus.eval import _special_oracle  # lazy: evalplus

    return inspect.getsource(_special_oracle)


def build_payload(
    *,
    entry_point: str,
    dataset: str,
    inputs: list[Any],
    expected: list[Any],
    atol: float,
    time_limits: list[float],
    budget_s: float,
) -> str:
    """The test data of one task and test set (base64 pickle), given to the driver on stdin.

    It is the same for every sample of the task, so the verifier receives it once per request.
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
    return base64.b64encode(pickle.dumps(payload, protocol=4)).decode("ascii")


def build_driver(code: str) -> str:
    """Source of the sandbox program that checks `code` against the payload it reads on stdin."""
    return f"_CODE = {code!r}\n" + _oracle_source() + "\n" + _DRIVER
