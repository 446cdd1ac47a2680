"""Code extraction from a model response, as LiveCodeBench does it.

LiveCodeBench (`lcb_runner/utils/extraction_utils.py`) splits the response into lines, finds every
line that contains a fence (```), and takes the lines strictly between the last two such lines. A
response with fewer than two fence lines has no code (scored as a failure, status `no_code`). The
language tag on the opening fence is ignored, as it is there.
"""

from __future__ import annotations

__all__ = ["last_fenced_block"]


def last_fenced_block(response: str) -> str | None:
    """The code between the last two fence lines of `response`, or None if there is no fenced block."""
    lines = response.split("\n")
    fences = [i for i, line in enumerate(lines) if "```" in line]
    if len(fences) < 2:
        return None
    return "\n".join(lines[fences[-2] + 1 : fences[-1]])
