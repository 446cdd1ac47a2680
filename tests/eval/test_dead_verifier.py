"""An evaluation against a verifier that is not there never reports items as verified.

Real HTTP: the judge sends to a closed loopback port; every item comes back with an infrastructure
status, is not kept in the verdict cache, and the progress line counts it as not verified.
"""

from __future__ import annotations

import socket
from pathlib import Path

from mucode.eval.judge import Part, VerifierOptions, judge_parts
from mucode.eval.store import INFRA_STATUSES, RunStore
from mucode.protocol import Connection


def test_a_dead_verifier_verifies_nothing(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"  # closed when the block ends
    items = [{"program": "math", "response": f"\\boxed{{{i}}}", "spec": {"answer": str(i)}} for i in range(2)]
    said: list[str] = []
    store = RunStore(tmp_path, {"benchmark": "x"})
    verdicts = judge_parts(
        [Part("p", i, "main", item) for i, item in enumerate(items)],
        store,
        VerifierOptions(urls=[url], connection=Connection(retries=0, timeout_s=5.0)),
        progress=said.append,
    )
    # charged: a failure (reward 0), its status kept, never counted as verified
    assert all(v["status"] in INFRA_STATUSES and v["reward"] == 0.0 for v in verdicts.values())
    lines = [line for line in said if line.startswith("verified")]
    assert lines and all(line.startswith("verified 0/2 items") for line in lines), said
    assert "2 could not be verified" in lines[-1] and "Connect" in lines[-1], lines[-1]
    assert not (tmp_path / "verdicts.jsonl").exists() or not (tmp_path / "verdicts.jsonl").read_text().strip()
