"""End to end through HTTP with the docker sandbox backend (marker ``docker``; CI runs these).

One service (in-process uvicorn on a loopback port, ``local_verifier("docker")``) with a managed pool
of sandbox containers is shared by the tests of this module; the fault tests kill its containers.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import httpx
import pytest

from mucode.verifier.local import local_verifier

pytestmark = pytest.mark.docker

BACKEND = {"containers": 2, "slots_per_container": 2, "health_interval_s": 1.0}

STDIO_OK = "Sure.\n```python\na, b = map(int, input().split())\nprint(a + b)\n```"
CALL_OK = (
    "```python\nclass Solution:\n    def twoSum(self, nums, target):\n        seen = {}\n"
    "        for i, x in enumerate(nums):\n            if target - x in seen:\n"
    "                return [seen[target - x], i]\n            seen[x] = i\n```"
)
ASSERT_OK = "```python\ndef is_even(n):\n    return n % 2 == 0\n```"
STDIO_TESTS = {"format": "stdio", "inputs": ["1 2\n", "10 -3\n"], "outputs": ["3\n", "7\n"]}
CALL_TESTS = {
    "format": "call",
    "fn_name": "twoSum",
    "inputs": ["[2, 7, 11, 15]\n9", "[3, 2, 4]\n6"],
    "outputs": ["[0, 1]", "[1, 2]"],
}
ASSERT_TESTS = {"format": "assert", "assert_code": "assert is_even(2)\nassert not is_even(3)"}


def code(id_: str, response: str, tests: dict, **spec) -> dict:
    return {"id": id_, "program": "code", "response": response, "spec": {"tests": tests, **spec}}


def math(id_: str, response: str, answer) -> dict:
    return {"id": id_, "program": "math", "response": response, "spec": {"answer": answer}}


def owned_containers() -> list[str]:
    """Sandbox containers started by this process (the backend labels them with its owner id)."""
    out = subprocess.run(
        [
            "docker",
            "ps",
            "-a",
            "--filter",
            "label=mucode.sandbox=1",
            "--format",
            '{{.Names}} {{.Label "mucode.sandbox.owner"}}',
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    mine = f"{os.getpid()}-"
    return [
        line.split()[0]
        for line in out.stdout.splitlines()
        if line.split()[1:] and line.split()[1].startswith(mine)
    ]


def verify(url: str, items: list[dict], timeout: float = 120) -> list[dict]:
    r = httpx.post(f"{url}/v1/verify", json={"items": items}, timeout=timeout)
    assert r.status_code == 200, r.text
    return r.json()["results"]


def busy_slots(url: str) -> int:
    sandbox = httpx.get(f"{url}/readyz", timeout=30).json()["sandbox"]
    return int(sandbox["pool_size"] - sandbox["idle"])


def wait_all_busy(url: str, pool_size: int, request: Future, timeout_s: float = 120) -> None:
    """Polls /readyz until every slot of the pool is busy at once; fails if ``request`` ends first."""
    deadline = time.monotonic() + timeout_s
    while busy_slots(url) < pool_size:
        assert not request.done(), "the request finished without its programs ever running all at once"
        assert time.monotonic() < deadline, f"the {pool_size} slots were never all busy within {timeout_s} s"
        time.sleep(0.05)


def wait_ready(url: str, pool_size: int, timeout_s: float = 90) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        r = httpx.get(f"{url}/readyz", timeout=30)
        body = r.json()
        if r.status_code == 200 and body["sandbox"].get("pool_size") == pool_size:
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"verifier not ready after {timeout_s} s: {body}")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with local_verifier("docker", backend_options=BACKEND, math_workers=2, math_timeout_s=3.0) as base:
        yield base


def test_code_in_all_three_formats(url: str) -> None:
    items = [
        code("stdio-ok", STDIO_OK, STDIO_TESTS),
        code("stdio-wrong", "```python\nprint(3)\n```", STDIO_TESTS),
        code("call-ok", CALL_OK, CALL_TESTS, checker="exact"),
        code("call-wrong", CALL_OK.replace("[seen[target - x], i]", "[i, seen[target - x]]"), CALL_TESTS),
        code("assert-ok", ASSERT_OK, ASSERT_TESTS),
        code("assert-wrong", "```python\ndef is_even(n):\n    return True\n```", ASSERT_TESTS),
        code("crash", "```python\nraise ValueError('boom')\n```", STDIO_TESTS),
        code("slow", "```python\nwhile True:\n    pass\n```", STDIO_TESTS, time_limit_s=0.5),
        code("no-code", "I cannot solve this.", STDIO_TESTS),
        code("raw", "a, b = map(int, input().split())\nprint(a + b)", STDIO_TESTS, extract="none"),
    ]
    results = {r["id"]: r for r in verify(url, items)}
    expected = {
        "stdio-ok": "correct",
        "stdio-wrong": "wrong_answer",
        "call-ok": "correct",
        "call-wrong": "wrong_answer",
        "assert-ok": "correct",
        "assert-wrong": "wrong_answer",
        "crash": "runtime_error",
        "slow": "time_limit",
        "no-code": "no_code",
        "raw": "correct",
    }
    assert {k: r["status"] for k, r in results.items()} == expected
    assert all(r["reward"] == (1.0 if r["status"] == "correct" else 0.0) for r in results.values())
    assert len(results["stdio-ok"]["details"]["tests"]) == 2
    assert "ValueError: boom" in results["crash"]["details"]["tests"][0]["stderr"]


def test_math_equivalences(url: str) -> None:
    items = [
        math("half", "so $\\boxed{\\frac12}$", "0.5"),
        math("float", "\\boxed{27.0}", 27),
        math("interval", "\\boxed{(1, 2]}", "(1,2]"),
        math("wrong-interval", "\\boxed{[1, 2)}", "(1,2]"),
        math("wrong", "\\boxed{26}", "27"),
        math("none", "I give up.", "27"),
    ]
    got = [r["status"] for r in verify(url, items)]
    assert got == ["correct", "correct", "correct", "wrong_answer", "wrong_answer", "no_answer"]


def test_mixed_batch_is_verified_concurrently(url: str) -> None:
    """The four programs of one request occupy the pool's four slots at the same moment (seen through
    /readyz while they sleep), not one after another."""
    sleepy = "```python\nimport time\ntime.sleep(6.0)\nprint(3)\n```"
    tests = {"format": "stdio", "inputs": ["\n"], "outputs": ["3\n"]}
    items = [code(f"c{i}", sleepy, tests, time_limit_s=60) for i in range(4)]
    items += [math(f"m{i}", f"\\boxed{{{i}}}", 1) for i in range(4)]
    wait_ready(url, pool_size=4)
    with ThreadPoolExecutor(1) as pool:
        request = pool.submit(verify, url, items, 300)
        wait_all_busy(url, 4, request)
        results = request.result(timeout=300)
    assert [r["id"] for r in results] == [it["id"] for it in items]
    assert [r["status"] for r in results[:4]] == ["correct"] * 4
    assert [r["status"] for r in results[4:]] == ["wrong_answer", "correct", "wrong_answer", "wrong_answer"]


def test_pathological_math_times_out_while_the_rest_is_verified(url: str) -> None:
    items = [
        math("slow", "\\boxed{9^{9^{9^{9^{9}}}}}", 1),
        code("c", STDIO_OK, STDIO_TESTS),
        math("m", "\\boxed{2}", 2),
    ]
    assert [r["status"] for r in verify(url, items)] == ["time_limit", "correct", "correct"]


def verl_sandbox_fusion():
    """verl's own ``verl/utils/reward_score/sandbox_fusion`` package from the installed verl, loaded
    without running ``verl/__init__`` (which imports torch and costs ~10 s of CPU): same files, unmodified."""
    import importlib.util
    import sys

    spec = importlib.util.find_spec("verl")
    assert spec is not None and spec.submodule_search_locations, (
        "verl is not installed (pip install 'mucode[verl]')"
    )
    pkg_dir = os.path.join(spec.submodule_search_locations[0], "utils", "reward_score", "sandbox_fusion")
    name = "_verl_sandbox_fusion"
    if name not in sys.modules:
        sub = importlib.util.spec_from_file_location(
            name, os.path.join(pkg_dir, "__init__.py"), submodule_search_locations=[pkg_dir]
        )
        assert sub is not None and sub.loader is not None
        module = importlib.util.module_from_spec(sub)
        sys.modules[name] = module
        sub.loader.exec_module(module)
    return sys.modules[name]


def test_run_code_drives_verls_sandbox_fusion_client(url: str) -> None:
    sandbox_fusion = verl_sandbox_fusion()
    assert sandbox_fusion.__file__.endswith("verl/utils/reward_score/sandbox_fusion/__init__.py")

    endpoint = f"{url}/run_code"
    ok = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    score, meta = sandbox_fusion.compute_score(endpoint, None, 512, ok, json.dumps(STDIO_TESTS), timeout=5)
    assert score == 1.0, meta
    score, meta = sandbox_fusion.compute_score(
        endpoint, None, 512, "```python\nprint(0)\n```", STDIO_TESTS, timeout=5
    )
    assert score == 0.0 and meta[0]["status"] == "wrong_answer"
    score, meta = sandbox_fusion.compute_score(
        endpoint, None, 512, "```python\nwhile True: pass\n```", STDIO_TESTS, timeout=1
    )
    assert score == 0.0 and meta[0]["status"] == "timeout"
    score, meta = sandbox_fusion.compute_score(
        endpoint, None, 512, "```python\nimport sys\nsys.exit(4)\n```", STDIO_TESTS, timeout=5
    )
    assert score == 0.0 and meta[0]["status"] == "runtime_error" and meta[0]["exit_code"] == 4
    fn = "```python\ndef add(a, b):\n    return a + b\n```"
    calls = {"fn_name": "add", "inputs": ["1\n2", "5\n5"], "outputs": ["3", "10"]}
    score, meta = sandbox_fusion.compute_score(endpoint, None, 512, fn, calls, timeout=5)
    assert score == 1.0, meta


def test_run_code_rejects_what_it_cannot_run(url: str) -> None:
    r = httpx.post(f"{url}/run_code", json={"code": "fn main() {}", "language": "rust"})
    assert r.status_code == 422 and "python" in r.json()["problems"][0]


def test_bad_code_spec_is_422(url: str) -> None:
    bad = code("x", STDIO_OK, {"format": "call", "inputs": ["1"], "outputs": ["1"]})
    r = httpx.post(f"{url}/v1/verify", json={"items": [bad]})
    assert r.status_code == 422
    assert r.json()["problems"] == [
        "items[0].spec.tests: Value error, format 'call' needs 'fn_name' "
        "(the function or Solution method to call)"
    ]


def test_killed_container_jobs_are_rerun_and_the_pool_recovers(url: str) -> None:
    """A container killed mid-job: its jobs are re-run once on a fresh slot (the sandbox backend's rule),
    so every item still gets its real verdict, and the pool replaces the container."""
    # this service's containers (other pools of this test process, e.g. session fixtures, may be up too)
    victims = sorted(wait_ready(url, pool_size=4)["sandbox"]["executors"])
    assert len(victims) == 2 and set(victims) <= set(owned_containers()), victims
    # the programs sleep long enough that the kill, sent once all four are seen running, lands mid-job
    sleepy = "```python\nimport time\ntime.sleep(12)\nprint(3)\n```"
    tests = {"format": "stdio", "inputs": ["\n"], "outputs": ["3\n"]}
    items = [code(f"c{i}", sleepy, tests, time_limit_s=60) for i in range(4)]

    with ThreadPoolExecutor(1) as pool:
        request = pool.submit(verify, url, items, 300)
        wait_all_busy(url, 4, request)  # all four programs are sleeping in the two containers now
        subprocess.run(["docker", "kill", victims[0]], check=True, capture_output=True)
        assert not request.done(), "the programs ended before the kill landed (it tested nothing)"
        results = request.result(timeout=300)
    statuses = [r["status"] for r in results]
    assert statuses == ["correct"] * 4, statuses  # the killed container's two jobs ran again elsewhere

    ready = wait_ready(url, pool_size=4)
    assert ready["sandbox"]["replaced"] >= 1
    assert victims[0] not in owned_containers()
    results = verify(url, [code(f"after{i}", STDIO_OK, STDIO_TESTS) for i in range(6)])
    assert [r["status"] for r in results] == ["correct"] * 6


def test_clean_restart_leaves_nothing_behind(url: str) -> None:
    # A second service in the same process: it starts, works, and removes its own containers on exit.
    before = set(owned_containers())
    with local_verifier(
        "docker", backend_options={"containers": 1, "slots_per_container": 1}, programs=["code"]
    ) as second:
        assert len(set(owned_containers()) - before) == 1
        assert verify(second, [code("a", STDIO_OK, STDIO_TESTS)])[0]["status"] == "correct"
    assert set(owned_containers()) == before
    with local_verifier(
        "docker", backend_options={"containers": 1, "slots_per_container": 1}, programs=["code"]
    ) as third:
        assert verify(third, [code("b", STDIO_OK, STDIO_TESTS)])[0]["status"] == "correct"
    assert set(owned_containers()) == before
