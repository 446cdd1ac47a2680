"""The chain task's code form end to end: a reduced study whose answers run in the real sandbox.

``mucode study --task chain-code``: the trainer starts its own local verifier (loopback HTTP, the
``local`` sandbox backend) and every response is executed as a program. The test reads the stage
store back and checks each verdict against the program's strict pure reading: a sandbox verdict that
disagrees with what the program prints is a failure of the path, not of the policy.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from mucode.cli import get_app
from mucode.data.chain import chain_records, code_answer_words
from mucode.train.store import StageStore

pytestmark = pytest.mark.slow


@pytest.mark.timeout(1200)
def test_a_reduced_code_study_is_judged_in_the_sandbox(tmp_path: Path) -> None:
    root = tmp_path / "study"
    args = ["study", "veto-scopes", "--task", "chain-code", "--seeds", "1", "--updates", "1", "--heldout-every", "1",
            "--jobs", "1", "--base-steps", "150", "--variants", "veto=sequence", "--root", str(root)]  # fmt: skip
    result = CliRunner().invoke(get_app(), args)
    assert result.exit_code == 0, result.output
    assert (
        "mucode study veto-scopes (chain-code)" in result.output and "| veto=sequence | 1 |" in result.output
    )
    answers = {r.prompt_id: r.spec["answer"] for r in chain_records(form="code")}
    (stage,) = (root / "runs" / "veto=sequence" / "seed-0" / "stages").glob("stage-*")
    samples = [s for g in StageStore.open(stage).iter_groups() for s in g.samples]
    assert len(samples) == 16 * 8
    statuses = {s.status for s in samples}
    assert "correct" in statuses or "wrong_answer" in statuses  # programs ran and printed
    assert statuses <= {"correct", "wrong_answer", "compile_error", "runtime_error", "no_code"}, statuses
    for s in samples:
        printed = code_answer_words(s.response_text)
        expected = printed == f"A {answers[s.prompt_id]}"
        assert (s.reward == 1.0) == expected, (s.response_text, s.status)
        assert not s.masked
