"""LiveCodeBench's runner in the test process (sandbox/lcbrun.py): the header prebuilt in the zygote binds
what executing it binds, and a program runs this version's runner whether or not the sandbox has it.

Each check runs in a fresh interpreter of its own (the runner swaps `sys.stdout`, raises the recursion
limit and takes the prebuilt module once per process). The verdicts themselves are pinned against
LiveCodeBench's grader in tests/eval/test_lcb_agreement.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from mucode.sandbox.executor import EXECUTOR_DIR
from sandbox_helpers import Handle

from mucode.eval.livecodebench.driver import LCB_IMPORT_HEADER, stdio_driver
from mucode.protocol import Status
from mucode.sandbox.types import CodeJob, TestSpec

TAKE = r"""
import io, json, sys, types
import lcbrun
lcbrun.prebuild()
# what a test process changes after the zygote: its streams and argv
sys.stdout, sys.argv = io.StringIO(), ["solution.py"]
taken = lcbrun._take(lcbrun.HEADER)
limit = sys.getrecursionlimit()
fresh = types.ModuleType("tmp_sol", "")
exec(lcbrun.HEADER, fresh.__dict__)
a, b = taken.__dict__, fresh.__dict__
missing = object()
sys.__stdout__.write(json.dumps({
    "differ": sorted(k for k in a.keys() | b.keys() if a.get(k, missing) is not b.get(k, missing)),
    "names": len(b),
    "stdout_is_current": a["stdout"] is sys.stdout and a["argv"] is sys.argv,
    "taken_again": lcbrun._take(lcbrun.HEADER) is not None,
    "limit": limit,
}))
"""


def test_the_prebuilt_header_binds_what_executing_it_binds() -> None:
    script = f"import sys\nsys.path.insert(0, {str(EXECUTOR_DIR)!r})\n" + TAKE
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout)
    assert got["differ"] == [], got  # every name, the same object (sys's as they are now)
    assert got["names"] > 500 and got["stdout_is_current"]
    assert got["limit"] == 50000  # the header's statements after its imports ran at take time
    assert not got["taken_again"]  # one test process, one module


CODE = "import sys\nn = int(input())\nprint(n + sum(map(int, sys.stdin.read().split())))"
WHICH = (
    "\nsys.stderr.write('prebuilt' if _run is sys.modules.get('lcbrun') and not _run._PREBUILT else 'text')"
)


def test_a_program_uses_the_sandboxs_runner_only_when_it_is_this_source() -> None:
    program = stdio_driver(CODE, LCB_IMPORT_HEADER, 6.0) + WHICH
    in_sandbox = f"import sys\nsys.path.insert(0, {str(EXECUTOR_DIR)!r})\nimport lcbrun\nlcbrun.prebuild()\n"
    runs = {
        "this source, prebuilt": (in_sandbox, "prebuilt"),
        "another source": (in_sandbox + "lcbrun.SOURCE_SHA256 = 'other'\n", "text"),
        "no runner": ("", "text"),
    }
    for name, (setup, expected) in runs.items():
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", setup + f"exec({program!r}, {{'__name__': '__main__'}})"],
            input="2\n3 4\n",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (done.returncode, done.stdout, done.stderr[-200:]) == (0, "9\n", expected), name


def test_both_sandboxes_run_livecodebench_programs_on_the_prebuilt_header(sb: Handle) -> None:
    """In the sandbox (the image's executor, or the local jail's), a LiveCodeBench program takes the
    module its zygote prebuilt: not this source's text run again, nor a header executed per test."""
    program = stdio_driver(CODE, LCB_IMPORT_HEADER, 6.0) + WHICH
    result = sb.judge(CodeJob(program, TestSpec("stdio", ["2\n3 4\n"] * 3, ["9\n"] * 3)))
    assert [(t.verdict, t.stderr) for t in result.tests] == [(Status.correct, "prebuilt")] * 3


def test_a_header_that_cannot_be_prebuilt_costs_speed_not_the_zygote(tmp_path: Path) -> None:
    """A zygote whose prebuild fails still serves (its programs run the header themselves) and says
    why once; it must not die, or every test of its handler would end as a sandbox error."""
    script = (
        f"import sys\nsys.path.insert(0, {str(EXECUTOR_DIR)!r})\nimport lcbrun, runner\n"
        "def fail(header=lcbrun.HEADER):\n    raise ImportError('no statistics here')\n"
        "lcbrun.prebuild = fail\n"
        f"runner.zygote_setup(runner.Slot(0, 0, {str(tmp_path)!r}))\n"
        "print(lcbrun._take(lcbrun.HEADER) is None)\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", script], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout) == (0, "True\n"), done.stderr[-2000:]
    assert "LiveCodeBench's import header not prebuilt: ImportError('no statistics here')" in done.stderr
