"""Report entries (pass@k with charged infrastructure failures counted as failures), metric keys, and the
verdict cache."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_report_entries_and_metric_keys() -> None:
    from mucode.eval.report import ProblemOutcome, format_table, metrics_from_report, summarize

    outcomes = [
        ProblemOutcome("a", ["correct", "wrong_answer"], {"difficulty": "easy"}),
        ProblemOutcome("b", ["sandbox_error", "correct"], {"difficulty": "hard"}),  # charged: a failure
        ProblemOutcome("c", ["no_code", "runtime_error"], {"difficulty": "hard"}),
    ]
    entry = summarize(outcomes, 2, breakdowns=["difficulty"])
    assert entry["pass@1"] == pytest.approx((1 / 2 + 1 / 2 + 0) / 3)
    assert entry["pass@2"] == pytest.approx((1 + 1 + 0) / 3) and "n_problems_at_k" not in entry
    assert entry["charged"] == 1 and entry["infra_errors"] == 1
    assert entry["n_correct"] == 2 and entry["n_samples"] == 6
    assert entry["by_difficulty"]["hard"]["pass@1"] == pytest.approx(0.25)
    metrics = metrics_from_report({"x": entry, "average": {"pass@1": 0.25}})
    assert metrics["eval/x/pass@2"] == pytest.approx(2 / 3) and metrics["eval/average/pass@1"] == 0.25
    table = format_table({"x": entry})
    assert "|   difficulty=easy |        1 | 2 |   50.0 |  100.0 |" in table


def test_forging_an_infra_status_never_raises_pass_at_k() -> None:
    """The issue's LiveCodeBench case: two wrong samples that make the verifier fail instead must
    not lift pass@1 from 0.25 to 0.5; charged samples are failures, and are counted."""
    from mucode.eval.report import ProblemOutcome, summarize

    honest = [ProblemOutcome("p", ["correct", "wrong_answer", "wrong_answer", "wrong_answer"])]
    forged = [ProblemOutcome("p", ["correct", "wrong_answer", "sandbox_error", "verifier_error"])]
    a, b = summarize(honest, 4), summarize(forged, 4)
    for k in ("pass@1", "pass@2", "pass@4"):
        assert b[k] <= a[k] + 1e-12, k
    assert b["pass@1"] == pytest.approx(0.25) and b["charged"] == 2 and b["n_samples"] == 4


def test_a_fully_cached_run_starts_no_verifier(tmp_path: Path) -> None:
    """Verdicts come from the run cache; the session's local verifier is never started."""
    from mucode.eval.judge import Part, VerifierOptions, judge_parts, verifier_session
    from mucode.eval.store import RunStore, item_sha

    item = {"program": "math", "response": "\\boxed{1}", "spec": {"answer": "1"}}
    store = RunStore(tmp_path, {"benchmark": "x"})
    store.add_verdicts(
        [{"id": "p", "index": 0, "part": "main", "sha": item_sha(item), "reward": 1.0, "status": "correct"}]
    )
    with verifier_session(VerifierOptions(backend="no-such-backend"), ["math"]) as options:
        verdicts = judge_parts(
            [Part("p", 1, "main", item), Part("q", 0, "main", None)],
            RunStore(tmp_path, {"benchmark": "x"}),
            options,
        )
        assert options.shared is not None and options.shared._urls is None
    assert (
        verdicts[("p", 1, "main")]["status"] == "correct"
        and verdicts[("q", 0, "main")]["status"] == "no_code"
    )


def test_samples_are_reused_only_for_the_same_prompt_and_torn_lines_are_ignored(tmp_path: Path) -> None:
    from mucode.eval.store import RunStore, StoreMismatch, prompt_key

    old, new = (
        prompt_key([{"role": "user", "content": "2+2?"}]),
        prompt_key([{"role": "user", "content": "2+3?"}]),
    )
    store = RunStore(tmp_path, {"benchmark": "x", "model": "a"})
    store.add_samples("p", ["r0", "r1"], old)
    with (tmp_path / "samples.jsonl").open("a") as handle:
        handle.write('{"id": "p", "index": 2, "prom')  # a crash mid-line
    again = RunStore(tmp_path, {"benchmark": "x", "model": "a"})
    assert again.responses("p", 4, old) == ["r0", "r1"]
    assert again.responses("p", 4, new) == []  # the problem's prompt changed: sample it anew
    again.add_samples("p", ["r2"], old)
    assert RunStore(tmp_path, {"benchmark": "x", "model": "a"}).responses("p", 4, old) == ["r0", "r1", "r2"]
    with pytest.raises(StoreMismatch, match="model"):
        RunStore(tmp_path, {"benchmark": "x", "model": "b"})
