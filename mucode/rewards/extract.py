"""Getting the program out of a model response, selected by ``spec.extract``.

- ``last_fence`` (default): the body of the response's last fenced block. The one rule of mucode for
  fenced code — the verifier, the TRL/verl/OpenRLHF adapters and the LiveCodeBench evaluator all use
  ``last_fenced_block`` — and LiveCodeBench's rule (``lcb_runner/utils/extraction_utils.py``: the lines
  between the last two lines holding a fence) made exact about what a fence is:

  * a *fence line* starts (after spaces or tabs) with a run of 3 or more backticks or tildes;
  * the block closes at the response's last fence line that has an opening fence before it; whatever
    follows the closing run on that line (an EOS marker, trailing prose) does not matter;
  * it opens at the nearest fence line before that with the same run (same character, same length) and
    an info string without backticks (the language tag, ignored); a longer fence can hold shorter ones.

  Examples (``⏎`` is a newline)::

      ```python⏎print(1)⏎```<|im_end|>             -> print(1)⏎   (EOS text after the fence)
      ```python⏎print(1)⏎``` Hope this helps!      -> print(1)⏎   (prose after the fence)
      ```⏎a⏎```⏎text⏎```py⏎b⏎```                   -> b⏎          (the last block)
      ````markdown⏎```python⏎x⏎```⏎````            -> ```python⏎x⏎```⏎
      ```python⏎print(1)                           -> None        (cut off at the length limit)
      ```python⏎a⏎```⏎```python⏎b (cut off)        -> None        (the last pair holds nothing)

  Differences from LiveCodeBench, on purpose: a fence in the middle of a line (``use ```x``` here``)
  is not a fence line there; tilde fences count; opening and closing runs must match. On responses
  whose fences start their lines with three backticks (what models write) both give the same code.
- ``none``: the response as it is.
- ``evalplus``: evalplus's sanitizer (keeps the imports, the entry point and what it depends on);
  needs the optional ``evalplus`` package. It is super-linear (about cubic in the lines of an
  unfenced response: 200 lines of ``x = 1`` take half a minute), so :func:`extract_code_async` runs
  it in a process pool of its own (``SANITIZER_WORKERS`` workers, never the shared thread pool),
  with ``SANITIZE_CPU_S`` of CPU and ``SANITIZE_MEMORY_MB`` per response; a response of more than
  ``MAX_SANITIZE_LINES`` lines, or one the sanitizer cannot finish within those limits, holds no code.

Limits: a response longer than ``MAX_RESPONSE_CHARS`` holds no code (no model writes 4 Mi characters
within its context; such a response is noise or an attack). ``last_fence`` is one pass over the lines
plus a binary search per candidate closing fence (O(n log n) at worst, linear in practice).
Callers in the service use :func:`extract_code_async`: a worker thread for the linear extractors,
the sanitizer's own processes for ``evalplus``; never the event loop.
"""

from __future__ import annotations

import asyncio
import bisect
import importlib.util
import threading
from collections.abc import Callable
from dataclasses import dataclass

from mucode.registry import Registry
from mucode.sandbox.judging import JudgeFault, JudgePool

__all__ = [
    "EXTRACTORS",
    "MAX_RESPONSE_CHARS",
    "MAX_SANITIZE_LINES",
    "Extractor",
    "extract_code",
    "extract_code_async",
    "last_fenced_block",
    "scan_fences",
]

MAX_RESPONSE_CHARS = 4 * 1024 * 1024
"""Responses longer than this hold no code, whatever the extractor."""
MAX_SANITIZE_LINES = 2000
"""Responses with more lines hold no code for ``evalplus`` (its sanitizer is super-linear)."""
SANITIZE_CPU_S = 10.0
SANITIZE_MEMORY_MB = 1024
SANITIZER_WORKERS = 2


@dataclass(frozen=True)
class _Line:
    char: str  # "`" or "~"
    run: int  # length of the fence run
    opens: bool  # may open a block (followed by a newline, no backtick after the run)


def _classify(line: str, terminated: bool) -> _Line | None:
    body = line.lstrip(" \t")
    if not body or body[0] not in "`~":
        return None
    char = body[0]
    rest = body.lstrip(char)
    run = len(body) - len(rest)
    if run < 3:
        return None
    return _Line(char, run, opens=terminated and not (char == "`" and "`" in rest))


def scan_fences(response: str) -> tuple[tuple[int, int] | None, int]:
    """The last fenced block as (first body line, closing line) indices into ``response.split("\\n")``,
    or None; and the number of steps taken (lines visited + opening-fence look-ups), for tests."""
    lines = response.split("\n")
    kinds = [_classify(line, i < len(lines) - 1) for i, line in enumerate(lines)]
    openers: dict[tuple[str, int], list[int]] = {}
    for i, kind in enumerate(kinds):
        if kind is not None and kind.opens:
            openers.setdefault((kind.char, kind.run), []).append(i)
    steps = len(lines)
    for i in range(len(lines) - 1, -1, -1):
        steps += 1
        kind = kinds[i]
        at = openers.get((kind.char, kind.run)) if kind is not None else None
        if at:
            steps += 1
            k = bisect.bisect_left(at, i)
            if k > 0:
                return (at[k - 1] + 1, i), steps
    return None, steps


def last_fenced_block(response: str) -> str | None:
    """The body of the last fenced block (rule in the module docstring), each line ending in a newline;
    None when there is none."""
    found, _ = scan_fences(response)
    if found is None:
        return None
    start, end = found
    if start == end:
        return ""
    lines = response.split("\n")
    return "\n".join(lines[start:end]) + "\n"


def last_fence(response: str, entry_point: str | None = None) -> str | None:
    return last_fenced_block(response)


def whole_response(response: str, entry_point: str | None = None) -> str | None:
    return response


def evalplus_sanitize(response: str, entry_point: str | None = None) -> str | None:
    """evalplus's sanitizer, in the calling thread (unbounded in time: the service uses
    :func:`extract_code_async`); over ``MAX_SANITIZE_LINES`` lines: no code."""
    if response.count("\n") >= MAX_SANITIZE_LINES:
        return None
    try:
        from evalplus.sanitize import sanitize  # lazy: evalplus
    except ImportError as exc:
        raise RuntimeError(
            "spec.extract='evalplus' needs the evalplus package: pip install 'mucode[eval]'"
        ) from exc
    return sanitize(response, entrypoint=entry_point)


Extractor = Callable[[str, str | None], str | None]
"""``fn(response, entry_point) -> program or None``."""

EXTRACTORS: Registry[Extractor] = Registry("extract method")
"""``spec.extract`` values: the one list of them (the code spec validates against it)."""
for _name, _fn in (("last_fence", last_fence), ("none", whole_response), ("evalplus", evalplus_sanitize)):
    EXTRACTORS.register(_name, _fn)


def extract_code(response: str, method: str = "last_fence", entry_point: str | None = None) -> str | None:
    """The program to run, or None when the response holds no code (or is over ``MAX_RESPONSE_CHARS``)."""
    extractor = EXTRACTORS.get(method)  # UnknownNameError (a ValueError) lists the valid methods
    if len(response) > MAX_RESPONSE_CHARS:
        return None
    code = extractor(response, entry_point)
    return code if code and code.strip() else None


_sanitizer: JudgePool | None = None
_sanitizer_lock = threading.Lock()


def _sanitizer_pool() -> JudgePool:
    global _sanitizer
    with _sanitizer_lock:
        if _sanitizer is None:
            _sanitizer = JudgePool(SANITIZER_WORKERS, cpu_s=SANITIZE_CPU_S, memory_mb=SANITIZE_MEMORY_MB)
        return _sanitizer


async def extract_code_async(
    response: str, method: str = "last_fence", entry_point: str | None = None
) -> tuple[str | None, str]:
    """``extract_code`` off the event loop, and why there is no code ("" when there is): the linear
    extractors in a worker thread, ``evalplus`` in the sanitizer's own bounded processes."""
    if method != "evalplus":
        code = await asyncio.to_thread(extract_code, response, method, entry_point)
        return code, "" if code is not None else f"no code found with extract={method!r}"
    EXTRACTORS.get(method)
    if importlib.util.find_spec("evalplus") is None:
        raise RuntimeError("spec.extract='evalplus' needs the evalplus package: pip install 'mucode[eval]'")
    if len(response) > MAX_RESPONSE_CHARS or response.count("\n") >= MAX_SANITIZE_LINES:
        return None, f"the response is over the evalplus sanitizer's cap of {MAX_SANITIZE_LINES} lines"
    try:
        code = await _sanitizer_pool().call(__name__, "evalplus_sanitize", response, entry_point)
    except JudgeFault as fault:
        return None, f"the evalplus sanitizer could not finish on this response: {fault}"
    if not (code and code.strip()):
        return None, "no code found with extract='evalplus'"
    return code, ""
