"""A run whose verifier is not there stops before its first stage, with one line naming the URL.

Real HTTP on loopback: a closed port, a server whose /readyz answers 503, and a real math verifier.
The command-line case runs ``mucode train`` in a subprocess, as a user would.
"""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from train_helpers import run_overrides, write_tasks

from mucode.train.preflight import PreflightError, check_verifiers
from mucode.verifier.local import local_verifier

ROOT = Path(__file__).resolve().parents[2]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends: nothing listens there


class _NotReady(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = b'{"ok": false, "sandbox": "no container answers"}'
        self.send_response(503)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def not_ready_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotReady)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_closed_port_is_refused_naming_the_url() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(PreflightError, match=rf"the verifier at {url} is not ready after 1 s \(Connect"):
        check_verifiers([url], wait_s=1.0)


def test_a_verifier_answering_503_is_refused_with_its_answer(not_ready_url: str) -> None:
    with pytest.raises(PreflightError, match=r"/readyz answered 503: .*no container answers"):
        check_verifiers([not_ready_url], wait_s=1.0)


def test_a_ready_verifier_passes() -> None:
    with local_verifier("local", programs=["math"], run_code=False, math_workers=1) as url:
        check_verifiers([url], wait_s=1.0)


def test_train_against_a_closed_port_exits_non_zero_within_a_minute(
    small_policy: Path, tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    run_dir = tmp_path / "run"
    data = write_tasks(tmp_path / "tasks.jsonl", "math")
    args = [
        sys.executable,
        "-c",
        "from mucode.cli import main; main()",
        "train",
        "--no-plot",
        *run_overrides(small_policy, data, run_dir),
        f"verifier.url={url}",
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    start = time.monotonic()
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env, check=False)
    elapsed = time.monotonic() - start
    assert done.returncode != 0, done.stdout[-2000:]
    assert elapsed < 60, f"took {elapsed:.0f} s"
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines and f"the verifier at {url} is not ready" in lines[-1], done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert not (run_dir / "config.yaml").exists()  # refused before anything was written
