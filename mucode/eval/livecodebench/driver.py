"""The programs that run one LiveCodeBench sample in mucode's sandbox the way LiveCodeBench's grader does.

What LiveCodeBench's `run_test` does to a program, and what is not reproduced, is in the executor's
`lcbrun` module (sandbox/lcbrun.py), which runs in the test process. An item's program is a few
lines that hand the sample's code to it:

- in mucode's sandbox every test process has `lcbrun` loaded (compiled once, not with every test)
  and LiveCodeBench's import header executed once per zygote instead of once per test: a small
  test's process took 4.9 CPU-ms before, 3.8 with this alone. The program calls that module when its
  source is this very file (`SOURCE_SHA256`);
- anywhere else (a sandbox image built from another version of mucode, which may lack the module or
  differ in it), the program runs the text of this version's `lcbrun` itself, compiled in the test
  process: the same verdicts, without the prebuilt header.
"""

from __future__ import annotations

import base64
import functools
import zlib
from pathlib import Path

from mucode.sandbox.executor import lcbrun

__all__ = ["CALL_ENTRY", "LCB_IMPORT_HEADER", "call_driver", "stdio_driver"]

CALL_ENTRY = "_mucode_lcb_call"
"""The function the verifier's `call` format calls in `call_driver` programs."""

LCB_IMPORT_HEADER = lcbrun.HEADER
"""LiveCodeBench's `import_string`, run before every program."""


@functools.cache
def _packed_source() -> str:
    """`lcbrun`'s source as the program carries it: a third of its size, so compiling the program (which
    every test does, whichever branch runs) costs less. Read once, at the first item."""
    return base64.b85encode(zlib.compress(Path(lcbrun.__file__).read_bytes(), 9)).decode("ascii")


def _program(code: str, header: str, time_limit_s: float, run: str) -> str:
    return (
        f"_CODE = {code!r}\n_HEADER = {header!r}\n_LIMIT_S = {float(time_limit_s)!r}\n"
        "import sys\n"
        "_run = sys.modules.get('lcbrun')\n"
        f"if getattr(_run, 'SOURCE_SHA256', None) != {lcbrun.SOURCE_SHA256!r}:  # not this version's\n"
        "    import base64, types, zlib\n"
        "    _run = types.ModuleType('lcbrun')\n"
        f"    exec(zlib.decompress(base64.b85decode({_packed_source()!r})).decode(), _run.__dict__)\n"
        f"{run}\n"
    )


def stdio_driver(code: str, header: str, time_limit_s: float) -> str:
    """The sandbox program that runs `code` on one stdin the way LiveCodeBench's `grade_stdio` does."""
    return _program(code, header, time_limit_s, "_run.stdio(_CODE, _HEADER, _LIMIT_S)")


def call_driver(code: str, header: str, fn_name: str, time_limit_s: float) -> str:
    """The sandbox program whose `CALL_ENTRY` calls `fn_name` of `code` as LiveCodeBench's
    `grade_call_based` does."""
    return _program(
        code, header, time_limit_s, f"{CALL_ENTRY} = _run.load_call(_CODE, _HEADER, {fn_name!r}, _LIMIT_S)"
    )
