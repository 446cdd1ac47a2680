"""Getting the program out of a model response, selected by ``spec.extract``.

- ``last_fence`` (default): the body of the response's last fenced block (```` ``` ```` or ``~~~``,
  any info string without backticks; the closing fence repeats the opening one exactly). An
  unterminated last fence (a response cut off at the length limit) counts as no code: running half a
  program would only produce noise.
- ``none``: the response as it is.
- ``evalplus``: evalplus's sanitizer (keeps the imports, the entry point and what it depends on);
  needs the optional ``evalplus`` package.

Limits: a response longer than ``MAX_RESPONSE_CHARS`` holds no code (no model writes 4 Mi characters
within its context; such a response is noise or an attack). ``last_fence`` is one pass over the lines
plus a binary search per candidate fence length (O(n log n) at worst, linear in practice), and gives
the same blocks as the regular expression ``^[ \\t]*(`{3,}|~{3,})[^\\n`]*\\n(.*?)^[ \\t]*\\1[ \\t]*$``
(multiline, dotall, leftmost non-overlapping matches), which was quadratic on unterminated fences.
Callers in the service run extraction in a worker thread, off the event loop.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass

from mucode.registry import Registry

__all__ = ["EXTRACTORS", "MAX_RESPONSE_CHARS", "Extractor", "extract_code", "scan_fences"]

MAX_RESPONSE_CHARS = 4 * 1024 * 1024
"""Responses longer than this hold no code, whatever the extractor."""


@dataclass(frozen=True)
class _Line:
    char: str  # "`" or "~"
    run: int  # length of the fence run
    opens: bool  # may open a block (followed by a newline, no backtick after the run)
    closes: bool  # may close a block (only spaces or tabs after the run)


def _classify(line: str, terminated: bool) -> _Line | None:
    body = line.lstrip(" \t")
    if not body or body[0] not in "`~":
        return None
    char = body[0]
    rest = body.lstrip(char)
    run = len(body) - len(rest)
    if run < 3:
        return None
    return _Line(char, run, opens=terminated and "`" not in rest, closes=not rest.strip(" \t"))


def scan_fences(response: str) -> tuple[tuple[int, int] | None, int]:
    """The last fenced block as (first body line, closing line) indices into ``response.split("\\n")``,
    or None; and the number of steps taken (lines visited + closing-fence look-ups), for tests."""
    lines = response.split("\n")
    kinds = [_classify(line, i < len(lines) - 1) for i, line in enumerate(lines)]
    closers: dict[tuple[str, int], list[int]] = {}
    for i, kind in enumerate(kinds):
        if kind is not None and kind.closes:
            closers.setdefault((kind.char, kind.run), []).append(i)
    steps = len(lines)
    last: tuple[int, int] | None = None
    i = 0
    while i < len(lines):
        kind = kinds[i]
        close = None
        if kind is not None and kind.opens:
            # a backtick fence is the whole run; a tilde fence may give back tildes to its info string
            for length in range(kind.run, 2 if kind.char == "~" else kind.run - 1, -1):
                steps += 1
                at = closers.get((kind.char, length))
                if at:
                    k = bisect.bisect_right(at, i)
                    if k < len(at):
                        close = at[k]
                        break
        if close is None:
            i += 1
            steps += 1
            continue
        last = (i + 1, close)
        i = close + 1
        steps += 1
    return last, steps


def last_fence(response: str, entry_point: str | None = None) -> str | None:
    found, _ = scan_fences(response)
    if found is None:
        return None
    start, end = found
    if start == end:
        return ""
    lines = response.split("\n")
    return "\n".join(lines[start:end]) + "\n"


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
