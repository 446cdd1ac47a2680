"""Getting the program out of a model response, selected by ``spec.extract``.

- ``last_fence`` (default): the body of the response's last fenced block (```` ``` ```` or ``~~~``,
  any info string). An unterminated last fence (a response cut off at the length limit) counts as no
  code: running half a program would only produce noise.
- ``none``: the response as it is.
- ``evalplus``: evalplus's sanitizer (keeps the imports, the entry point and what it depends on);
  needs the optional ``evalplus`` package.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["EXTRACTORS", "extract_code"]

_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[^\n`]*\n(?P<body>.*?)^[ \t]*(?P=fence)[ \t]*$", re.M | re.S)


def last_fence(response: str, entry_point: str | None = None) -> str | None:
    blocks = [m.group("body") for m in _FENCE.finditer(response)]
    return blocks[-1] if blocks else None


def whole_response(response: str, entry_point: str | None = None) -> str | None:
    return response


def evalplus_sanitize(response: str, entry_point: str | None = None) -> str | None:
    try:
        from evalplus.sanitize import sanitize
    except ImportError as exc:
        raise RuntimeError(
            "spec.extract='evalplus' needs the evalplus package: pip install 'mucode[eval]'"
        ) from exc
    return sanitize(response, entrypoint=entry_point)


EXTRACTORS: dict[str, Callable[[str, str | None], str | None]] = {
    "last_fence": last_fence,
    "none": whole_response,
    "evalplus": evalplus_sanitize,
}


def extract_code(response: str, method: str = "last_fence", entry_point: str | None = None) -> str | None:
    """The program to run, or None when the response holds no code."""
    try:
        extractor = EXTRACTORS[method]
    except KeyError:
        raise ValueError(f"unknown extract method {method!r}; valid: {sorted(EXTRACTORS)}") from None
    code = extractor(response, entry_point)
    return code if code and code.strip() else None
