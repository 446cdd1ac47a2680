"""The executor's test-set cache (sandbox/testsets.py, mucode/sandbox/testsets.py): a problem's tests
cross the job socket once; a lost entry is sent again, never judged wrong; a forged blob is refused;
and no program can read or change a cached test set, its own problem's or another's.

The hostile test checks first that programs run unprivileged in a pid namespace of their own
(assert_confined, GUARD). Backend tests run against both backends (``sb``)."""

from __future__ import annotations

import json
import os
import secrets
import socket
from typing import Any

import pytest
from mucode.sandbox.executor.protocol import recv_frame, send_frame, send_raw
from mucode.sandbox.executor.testsets import ENTRIES, Store, key_of, pack, views
from sandbox_helpers import GUARD, Handle, assert_confined, assert_nothing_left, every_slot_correct, stdio_job

from mucode.protocol import Status
from mucode.sandbox.testsets import Shipments

SUM_OK = "import sys\nd = sys.stdin.read().split()\nprint(sum(map(int, d[1:])))"
SUM_WRONG = "import sys\nd = sys.stdin.read().split()\nprint(sum(map(int, d[2:])))"


def problem(marker: str, tests: int = 3, values: int = 9000) -> tuple[list[str], list[str]]:
    """``tests`` stdin inputs of ``values`` numbers each (well over the inline threshold), ending in
    a comment-like token ``marker`` the programs ignore (it is not a number: the sum skips it)."""
    rng = secrets.SystemRandom()
    inputs, outputs = [], []
    for _ in range(tests):
        xs = [rng.randrange(10**6) for _ in range(values)]
        inputs.append(f"{marker}\n" + " ".join(map(str, xs)) + "\n")
        outputs.append(f"{sum(xs)}\n")
    return inputs, outputs


# ---- the blob and the store, in this process -------------------------------------------------


def test_pack_round_trips_every_string() -> None:
    inputs = ["", "1 2\n", "é ü 中文\n", "\ud800 lone surrogate", "x" * 100_000]
    blob = pack(inputs)
    assert [str(v, "utf-8", "surrogatepass") for v in views(blob)] == inputs
    assert key_of(blob) == key_of(pack(list(inputs))) != key_of(pack(inputs[:-1]))
    assert views(pack([])) == []


@pytest.mark.parametrize(
    "blob",
    [b"", b"MTS1", b"XXXX\0\0\0\0", pack(["abc"])[:-1], pack(["abc"]) + b"!", b"MTS1\xff\xff\xff\xff"],
)
def test_views_refuse_what_is_not_a_blob(blob: bytes) -> None:
    with pytest.raises(ValueError):
        views(blob)


def test_store_keeps_recent_sets_within_its_capacity() -> None:
    store = Store(10_000)
    blobs = [pack([f"{i}:" + "x" * 3000]) for i in range(8)]
    for blob in blobs:
        assert store.put(key_of(blob), blob)
    assert [store.get(key_of(b)) is not None for b in blobs] == [False] * 5 + [True] * 3
    assert all(store.get(key_of(b)) == b for b in blobs[-3:])
    too_big = pack(["y" * 20_000])
    assert not store.put(key_of(too_big), too_big)
    assert store.get(key_of(too_big)) is None
    assert Store(0).get(key_of(blobs[0])) is None and not Store(0).put(key_of(blobs[0]), blobs[0])


def test_store_table_full_drops_the_oldest() -> None:
    store = Store(ENTRIES * 64)
    blobs = [pack([str(i)]) for i in range(ENTRIES + 1)]
    for blob in blobs:
        assert store.put(key_of(blob), blob)
    assert store.get(key_of(blobs[0])) is None
    assert store.get(key_of(blobs[1])) == blobs[1] and store.get(key_of(blobs[-1])) == blobs[-1]


def test_store_is_shared_by_forked_processes_and_checks_what_it_reads() -> None:
    store = Store(1 << 20)
    blob = pack(["shared across a fork " * 100])
    pid = os.fork()
    if pid == 0:
        os._exit(0 if store.put(key_of(blob), blob) else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert store.get(key_of(blob)) == blob
    os.pwrite(store.fd, b"X", os.fstat(store.fd).st_size - (1 << 20) + 20)  # corrupt its bytes
    assert store.get(key_of(blob)) is None  # never handed out under its key


# ---- through the backends ----------------------------------------------------------------------


def _endpoints(sb: Handle) -> list[Any]:
    return list(sb.backend.pool.endpoints.values())  # type: ignore[attr-defined]


def _sent(sb: Handle) -> tuple[int, int]:
    eps = _endpoints(sb)
    return sum(e.shipments.sent for e in eps), sum(e.shipments.resent for e in eps)


def test_a_problems_samples_send_its_tests_once(sb: Handle) -> None:
    inputs, outputs = problem("once-" + secrets.token_hex(4))
    assert all(e.info.get("test_set_cache_bytes", 0) > 0 for e in _endpoints(sb))
    sent, resent = _sent(sb)
    jobs = [stdio_job(SUM_OK if i % 4 else SUM_WRONG, inputs, outputs) for i in range(8)]
    verdicts = [r.verdict for r in sb.judge_many(jobs)]
    assert verdicts == [Status.wrong_answer if i % 4 == 0 else Status.correct for i in range(8)]
    assert _sent(sb) == (sent + 1, resent)
    again = sb.judge(stdio_job(SUM_OK, inputs, outputs))
    assert again.verdict is Status.correct and len(again.tests) == 3
    assert _sent(sb) == (sent + 1, resent)


def test_a_test_set_the_executor_lost_is_sent_again(sb: Handle) -> None:
    inputs, outputs = problem("lost-" + secrets.token_hex(4))
    packed = sb.call(sb.backend.test_sets.packed(list(inputs)))  # type: ignore[attr-defined]
    assert packed is not None
    for ep in _endpoints(sb):
        ep.shipments._state[packed.key] = True  # what the host believes; the executor never saw it
    sent, resent = _sent(sb)
    ok, bad = sb.judge_many([stdio_job(SUM_OK, inputs, outputs), stdio_job(SUM_WRONG, inputs, outputs)])
    assert (ok.verdict, bad.verdict) == (Status.correct, Status.wrong_answer)
    # once per executor job at most: two jobs, and the part of one that the idle third slot took
    # (test_spread.py) each learn that the executor lacks it
    assert _sent(sb)[1] >= resent + 1 and _sent(sb)[0] <= sent + 3


def _exchange(sb: Handle, request: dict[str, Any], raw: bytes | None) -> list[dict[str, Any]]:
    frames = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(str(_endpoints(sb)[0].socket_path))
        send_frame(s, request)
        if raw is not None:
            send_raw(s, raw)
        while (frame := recv_frame(s)) is not None:
            frames.append(frame)
            if frame.get("ev") in ("done", "error", "unknown_test_set"):
                break
            if frame.get("ev") == "test":
                send_frame(s, {"op": "next"})
    return frames


def test_a_blob_that_is_not_its_keys_is_refused(sb: Handle) -> None:
    real = pack(["1\n5\n"])
    forged = pack(["1\n6\n"])
    request: dict[str, Any] = {
        "op": "run",
        "language": "python",
        "mode": "stdio",
        "program": "print(input())",
    }
    request.update(time_limit_s=2.0, memory_limit_mb=256, test_set=key_of(real), test_set_follows=True)
    frames = _exchange(sb, request, forged)
    assert frames[-1]["ev"] == "error" and "SHA-256" in frames[-1]["message"], frames
    frames = _exchange(
        sb, {**request, "test_set_follows": False, "test_set": key_of(pack(["never sent"]))}, None
    )
    assert frames[-1]["ev"] == "unknown_test_set"
    frames = _exchange(sb, {**request, "test_set": "../../etc/passwd"}, None)
    assert frames[-1]["ev"] == "error" and "test_set" in frames[-1]["message"]


HOSTILE = (
    GUARD
    + """
import ctypes, json, os, sys
data = sys.stdin.read()
report = {"opened": [], "own_fds": [], "memory": {}}
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    for sub in ("fd", "map_files"):
        try:
            names = os.listdir(f"/proc/{pid}/{sub}")
        except OSError:
            continue
        for name in names:
            path = f"/proc/{pid}/{sub}/{name}"
            try:
                target = os.readlink(path)
            except OSError:
                target = "?"
            for mode in (os.O_RDWR, os.O_RDONLY):
                try:
                    fd = os.open(path, mode)
                except OSError:
                    continue
                if "test-sets" in target:
                    try:
                        os.pwrite(fd, b"0" * 65536, 0)
                        os.pwrite(fd, b"0" * 65536, 1 << 20)
                    except OSError:
                        pass
                os.close(fd)
                report["opened"].append([path, target, mode])
for fd in range(1024):
    try:
        report["own_fds"].append([fd, os.readlink(f"/proc/self/fd/{fd}")])
    except OSError:
        pass
# each marker as two halves, never whole in this program's own memory: a whole one found is the
# executor's (or another job's) data
found = {a + "|" + b: 0 for a, b in PARTS}
with open("/proc/self/maps") as maps:  # this process's memory, read in place (/proc/self/mem is root's)
    regions = [line.split() for line in maps]
for fields in regions:
    lo, hi = (int(x, 16) for x in fields[0].split("-"))
    if "r" not in fields[1] or (len(fields) > 5 and fields[5] in ("[vvar]", "[vsyscall]", "[vvar_vclock]")):
        continue
    for start in range(lo, hi, 1 << 20):
        chunk = ctypes.string_at(start, min(hi, start + (1 << 20) + 256) - start)  # overlapping
        for a, b in PARTS:
            head, tail = a.encode(), b.encode()
            at = chunk.find(head)
            while 0 <= at < 1 << 20:
                found[a + "|" + b] += chunk[at + len(head) : at + len(head) + len(tail)] == tail
                at = chunk.find(head, at + 1)
report["memory"] = found
print(json.dumps(report))
"""
)


def test_no_program_reads_or_changes_cached_test_sets(sb: Handle) -> None:
    assert_confined(sb)
    mine, other = "mine-" + secrets.token_hex(6), "other-" + secrets.token_hex(6)
    a_in, a_out = problem(mine)
    b_in, b_out = problem(other)
    warm = sb.judge_many([stdio_job(SUM_OK, a_in, a_out), stdio_job(SUM_OK, b_in, b_out)])
    assert [r.verdict for r in warm] == [Status.correct, Status.correct]
    sent, _ = _sent(sb)
    hostile = HOSTILE.replace("PARTS", json.dumps([[m[:8], m[8:]] for m in (mine, other)]))
    runs = sb.judge_many([stdio_job(hostile, a_in, a_out) for _ in range(3)])  # on every slot, by key
    for run in runs:
        out = run.tests[0].stdout
        assert run.tests[0].verdict is Status.wrong_answer, (out, run.tests[0].stderr)
        report = json.loads(out.splitlines()[-1])
        assert not [o for o in report["opened"] if "test-sets" in o[1]], report["opened"]
        assert not [f for f in report["own_fds"] if "test-sets" in f[1]], report["own_fds"]
        seen = {key.replace("|", ""): n for key, n in report["memory"].items()}
        assert seen[mine] > 0, report  # the scan sees this job's own inputs ...
        assert seen[other] == 0, report  # ... and nothing of another problem's
    assert_nothing_left(sb)
    again = sb.judge_many(
        [stdio_job(p, i, o) for p in (SUM_OK, SUM_WRONG) for i, o in ((a_in, a_out), (b_in, b_out))]
    )
    assert [r.verdict for r in again] == [Status.correct] * 2 + [Status.wrong_answer] * 2
    assert all(len(r.tests) == 3 for r in again[:2])
    assert _sent(sb)[0] == sent  # still cached: nothing the programs did cost a resend
    every_slot_correct(sb)


def test_a_job_that_only_named_a_forgotten_key_settles_quietly() -> None:
    """Two samples named a key the executor had lost; the first's ``forget`` removed it. The second
    ending without an answer (``stored`` None, no future of its own) must not raise: found under
    load in CI as a KeyError that replaced the job's verdict."""
    ships = Shipments()
    ships._state["k"] = True
    ships.forget("k")
    ships.settle("k", None, None)
    assert "k" not in ships._state
    ships.settle("k", None, True)
    assert ships._state["k"] is True
