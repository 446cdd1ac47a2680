"""Values every request field must hold: valid Unicode text and finite numbers, so that nothing fails
later while encoding it.

JSON may carry ``"\\ud800"`` (a lone UTF-16 surrogate) and Python's JSON decoder accepts it, but such a
string cannot be encoded as UTF-8: left in an item it would fail in the sandbox (``sandbox_error``) or
in the response (a 500) after the work was done. ``text_problems`` finds every such string (keys
included) so the service answers 422 before any work. The scan is linear and skips ASCII strings at
no cost (``str.isascii`` is O(1) for them). Likewise ``NaN``/``Infinity``, which Python's decoder
accepts but JSON does not have: refused, so no program compares against a value no client can send.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["text_problems"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def _where(loc: str, key: object) -> str:
    if isinstance(key, int):
        return f"{loc}[{key}]"
    name = str(key)
    if not name.isascii() and _SURROGATE.search(name):
        name = ascii(name)  # never echo a lone surrogate: the error response itself must encode
    return f"{loc}.{name}" if loc else name


def text_problems(value: Any, loc: str = "", limit: int = 20) -> list[str]:
    """One line per string of ``value`` (walked through dicts and lists) holding a lone surrogate."""
    problems: list[str] = []
    stack: list[tuple[str, Any]] = [(loc, value)]
    while stack and len(problems) < limit:
        where, v = stack.pop()
        if isinstance(v, str):
            if not v.isascii() and (m := _SURROGATE.search(v)):
                problems.append(
                    f"{where or 'body'}: contains a lone surrogate (U+{ord(m.group()):04X}) at "
                    f"character {m.start()}; send valid Unicode text (it must encode as UTF-8)"
                )
        elif isinstance(v, float) and not math.isfinite(v):
            problems.append(f"{where or 'body'}: {v} is not a JSON number; send a finite number or a string")
        elif isinstance(v, dict):
            for k, x in reversed(list(v.items())):
                if isinstance(k, str) and not k.isascii() and _SURROGATE.search(k):
                    problems.append(
                        f"{_where(where, k)}: this key contains a lone surrogate; send valid Unicode"
                    )
                stack.append((_where(where, k), x))
        elif isinstance(v, list | tuple):
            stack.extend((_where(where, i), x) for i, x in reversed(list(enumerate(v))))
    return problems
