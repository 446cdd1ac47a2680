"""Output checkers from an installed plug-in package (a dist-info with ``mucode.checkers`` entry points,
on ``PYTHONPATH``), used through a real verifier in a child process with the local sandbox: a
function checker (judged in the verifier, and in its judge workers for large outputs), a checker
program (judged in the sandbox), and an unknown name refused with the valid ones listed."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from plugin_dist import write_dist

from mucode.sandbox.checkers import CHECKERS
from mucode.sandbox.types import CheckerProgram
from mucode.verifier.session import VerifierSession
from mucode.verifier.spawn import spawned_verifier

PLUGIN = '''
from mucode.sandbox.types import CheckerProgram


def same_tokens(expected: str, actual: str) -> bool:
    """Any order of the expected tokens."""
    if actual.strip() == "RAISE":
        raise KeyError("a plug-in that breaks on some output")
    return sorted(expected.split()) == sorted(actual.split())


PERMUTATION = CheckerProgram(
    "import sys\\n"
    "n = int(open(sys.argv[1]).read())\\n"
    "out = open(sys.argv[2]).read().split()\\n"
    "sys.exit(0 if sorted(out, key=int) == [str(i) for i in range(1, n + 1)] else 1)\\n"
)
'''


@pytest.fixture()
def plugin_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    write_dist(
        tmp_path,
        "mucode_test_checkers",
        PLUGIN,
        "mucode.checkers",
        {"same_tokens": "same_tokens", "permutation": "PERMUTATION"},
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    CHECKERS.refresh()
    yield tmp_path
    monkeypatch.undo()
    CHECKERS.refresh()


def test_an_installed_package_registers_checkers(plugin_path: Path) -> None:
    assert {"same_tokens", "permutation"} <= set(CHECKERS.names())
    assert isinstance(CHECKERS.get("permutation"), CheckerProgram)


def _item(key: str, program: str, checker: str, inputs: list[str], outputs: list[str]) -> dict[str, object]:
    return {
        "id": key,
        "program": "code",
        "response": f"```python\n{program}\n```",
        "spec": {"tests": {"format": "stdio", "inputs": inputs, "outputs": outputs}, "checker": checker},
    }


@pytest.mark.skipif(os.geteuid() != 0, reason="the local sandbox backend needs root (CI runs as root)")
def test_plugin_checkers_judge_in_a_spawned_verifier(plugin_path: Path) -> None:
    big = " ".join(str(i) for i in range(6000))  # over judging.INLINE_BYTES: judged in a judge worker
    reversed_big = "print(' '.join(str(i) for i in range(5999, -1, -1)))"
    items = [
        _item("tokens-ok", "print('b a c')", "same_tokens", ["\n"], ["a b c\n"]),
        _item("tokens-bad", "print('a a c')", "same_tokens", ["\n"], ["a b c\n"]),
        _item("tokens-raise", "print('RAISE')", "same_tokens", ["\n"], ["a b c\n"]),
        _item("tokens-big", reversed_big, "same_tokens", ["\n"], [big]),
        _item("perm-ok", "n = int(input())\nprint(*range(n, 0, -1))", "permutation", ["4\n"], ["1 2 3 4\n"]),
        _item("perm-bad", "print(1, 1)", "permutation", ["2\n"], ["1 2\n"]),
        _item(
            "token-default", "n = int(input())\nprint(*range(n, 0, -1))", "code_contests", ["2\n"], ["1 2\n"]
        ),
    ]
    with spawned_verifier(
        "local", programs=["code"], run_code=False, backend_options={"slots": 2, "uid_base": 62300}
    ) as url:
        with VerifierSession(url) as session:
            results = {r.id: r.status.value for r in session.verify(items)}
        assert results == {
            "tokens-ok": "correct",
            "tokens-bad": "wrong_answer",
            "tokens-raise": "wrong_answer",  # the plug-in raised on the program's output
            "tokens-big": "correct",
            "perm-ok": "correct",
            "perm-bad": "wrong_answer",
            "token-default": "wrong_answer",
        }
        bad = httpx.post(
            f"{url}/v1/verify",
            json={"items": [_item("x", "print(1)", "no_such_checker", ["\n"], ["1\n"])]},
            timeout=60,
        )
        inline = {"source": "import sys\nsys.exit(0 if open(sys.argv[2]).read() == 'ok\\n' else 1)\n"}
        given = _item("inline", "print('ok')", "exact", ["\n"], ["anything\n"])
        given["spec"] = {**given["spec"], "checker_program": inline}  # type: ignore[dict-item]
        ok = httpx.post(f"{url}/v1/verify", json={"items": [given]}, timeout=120)
        cobol = {**given, "spec": {**given["spec"], "checker_program": {**inline, "language": "cobol"}}}  # type: ignore[dict-item]
        refused = httpx.post(f"{url}/v1/verify", json={"items": [cobol]}, timeout=60)
    assert ok.status_code == 200 and ok.json()["results"][0]["status"] == "correct", ok.text
    assert refused.status_code == 422 and "items[0].spec.checker_program" in refused.text, refused.text
    assert "checker language 'cobol'" in refused.text
    assert bad.status_code == 422, bad.text
    text = bad.text
    assert (
        "unknown output checker 'no_such_checker'" in text and "permutation" in text and "same_tokens" in text
    )
