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
  needs the optional ``evalplus`` package.

Limits: a response longer than ``MAX_RESPONSE_CHARS`` holds no code (no model writes 4 Mi characters
within its context; such a response is noise or an attack). ``last_fence`` is one pass over the lines
plus a binary search per candidate closing fence (O(n log n) at worst, linear in practice).
Callers in the service run extraction in a worker thread, off the event loop.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass

from mucode.registry import Registry

__all__ = [
    "EXTRACTORS",
    "MAX_RESPONSE_CHARS",
    "Extractor",
    "extract_code",
    "last_fenced_block",
    "scan_fences",
]

MAX_RESPONSE_CHARS = 4 * 1024 * 1024
"""Responses longer than this hold no code, whatever the extractor."""


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
