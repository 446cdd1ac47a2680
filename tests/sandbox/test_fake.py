"""The ``fake`` sandbox backend: verdicts from a table, rules or a default, without running anything;
kept out of the production names and refusing to be built empty; the same job validation as the
real backends; and the real verifier service over loopback HTTP serving code items with it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from mucode.registry import UnknownNameError
from mucode.protocol import Status
from mucode.sandbox import CodeJob, RawRun, TestSpec, backend_names, make_backend, production_backend_names
from mucode.sandbox.fake import FakeBackend, program_hash
from mucode.verifier.local import local_verifier

ADD = "a, b = map(int, input().split())\nprint(a + b)"
SUB = "a, b = map(int, input().split())\nprint(a - b)"
TESTS = TestSpec("stdio", ["1 2\n", "5 7\n"], ["3\n", "12\n"])


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _started(**options: Any) -> FakeBackend:
    backend = make_backend("fake", **options)
    assert isinstance(backend, FakeBackend)
    await backend.start()
    return backend


def test_fake_is_registered_but_not_offered_to_users() -> None:
    assert "fake" in backend_names()
    assert "fake" not in production_backend_names()
    assert {"docker", "attach", "local"} <= set(production_backend_names())
    with pytest.raises(ValueError, match="test double"):
        make_backend("fake")  # no table, rules or default: never selected by accident
    with pytest.raises(ValueError, match="needs a verdict, one of correct"):
        make_backend("fake", default="passed")
    with pytest.raises(UnknownNameError, match="attach, docker, fake, local"):
        make_backend("podman")


def test_table_by_text_or_hash_then_rules_then_default() -> None:
    async def go() -> list[Status]:
        b = await _started(
            table={ADD: "correct", program_hash(SUB): {"verdict": "wrong_answer"}},
            rules=[{"contains": "while True", "verdict": "time_limit"}],
            default="runtime_error",
        )
        jobs = [ADD, SUB, "while True:\n    pass", "print(1)"]
        out = [(await b.judge(CodeJob(p, TESTS))).verdict for p in jobs]
        assert b.calls[program_hash(ADD)] == 1 and sum(b.calls.values()) == 4
        return out

    assert _run(go()) == [Status.correct, Status.wrong_answer, Status.time_limit, Status.runtime_error]


def test_outcomes_follow_the_verdict_and_the_tests() -> None:
    async def go() -> None:
        b = await _started(
            table={
                ADD: "correct",
                SUB: "wrong_answer",
                "boom": {"verdict": "runtime_error", "stderr": "ZeroDivisionError"},
            }
        )
        ok = await b.judge(CodeJob(ADD, TESTS))
        assert [t.stdout for t in ok.tests] == ["3\n", "12\n"] and all(
            t.verdict is Status.correct for t in ok.tests
        )
        bad = await b.judge(CodeJob(SUB, TESTS))
        assert (
            len(bad.tests) == 1 and bad.tests[0].verdict is Status.wrong_answer
        )  # stops at the first failure
        every = await b.judge(CodeJob(SUB, TESTS, stop_on_first_failure=False))
        assert len(every.tests) == 2
        crash = await b.judge(CodeJob("boom", TESTS))
        assert crash.tests[0].stderr == "ZeroDivisionError" and crash.tests[0].exit_code == 1
        missing = await b.judge(
            CodeJob("print(2)", TESTS)
        )  # no entry, no default: infrastructure, not a reward
        assert missing.verdict is Status.sandbox_error and program_hash("print(2)") in (missing.error or "")
        raw = await b.run_raw(RawRun("boom"))
        assert raw.verdict is Status.runtime_error
        health = await b.health()
        assert health["ok"] is True and health["fake"] is True
        await b.close()
        with pytest.raises(RuntimeError, match="not started"):
            await b.judge(CodeJob(ADD, TESTS))

    _run(go())


def test_malformed_jobs_are_refused_as_the_real_backends_refuse_them() -> None:
    async def go() -> None:
        b = await _started(default="correct")
        with pytest.raises(ValueError, match="2 inputs but 1 outputs"):
            await b.judge(CodeJob(ADD, TestSpec("stdio", ["1 2\n", "3 4\n"], ["3\n"])))
        with pytest.raises(ValueError, match="needs fn_name"):
            await b.judge(CodeJob(ADD, TestSpec("call", ["[1]"], ["1"])))

    _run(go())


def test_the_verifier_service_scores_code_with_the_fake_backend() -> None:
    """The real service over loopback HTTP, options as JSON (as MUCODE_BACKEND_OPTIONS carries them)."""
    options = json.loads(
        json.dumps({"rules": [{"contains": "a + b", "verdict": "correct"}], "default": "wrong_answer"})
    )
    spec = {"tests": {"format": "stdio", "inputs": ["1 2\n"], "outputs": ["3\n"]}}
    items = [
        {"id": str(i), "program": "code", "response": f"```python\n{p}\n```", "spec": spec}
        for i, p in enumerate([ADD, SUB])
    ]
    with local_verifier("fake", programs=["code"], backend_options=options) as url:
        ready = httpx.get(f"{url}/readyz", timeout=30)
        assert ready.status_code == 200, ready.text
        r = httpx.post(f"{url}/v1/verify", json={"items": items}, timeout=60)
        assert r.status_code == 200, r.text
        assert [(x["id"], x["status"], x["reward"]) for x in r.json()["results"]] == [
            ("0", "correct", 1.0),
            ("1", "wrong_answer", 0.0),
        ]
