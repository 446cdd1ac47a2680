"""Every `mucode eval` mistake is one line on stderr that names the fix, with exit code 2; a partial
run fails unless --allow-partial is given."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mucode.eval.judge import VerifierOptions

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def run(*args: str) -> tuple[int, str, str]:
    from mucode.cli import get_app

    result = CliRunner().invoke(get_app(), ["eval", *args])
    return result.exit_code, result.stdout, result.stderr


def assert_one_line_error(code: int, stderr: str, *words: str) -> None:
    """Exit 2; the last stderr line is the only error line (progress and warnings may come before)."""
    lines = stderr.strip().splitlines()
    assert code == 2, stderr
    assert lines and lines[-1].startswith("error: "), stderr
    assert sum(line.startswith("error:") for line in lines) == 1 and "Traceback" not in stderr
    for word in words:
        assert word in lines[-1], (word, lines[-1])


@pytest.fixture
def lcb_samples(tmp_path: Path) -> Path:
    path = tmp_path / "lcb.jsonl"
    path.write_text(json.dumps({"question_id": "abc900_a", "response": "```python\nprint(1)\n```"}) + "\n")
    return path


def test_no_model_and_no_samples() -> None:
    assert_one_line_error(*run("math")[::2], "--model", "--samples")


def test_missing_samples_file(tmp_path: Path) -> None:
    assert_one_line_error(
        *run("livecodebench", "--samples", str(tmp_path / "nope.jsonl"))[::2], "nope.jsonl", "--samples"
    )


def test_bad_samples_line_is_reported_as_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"question_id": "abc900_a", "response": "x"}) + "\n{not json\n")
    code, _, err = run(
        "livecodebench",
        "--samples",
        str(path),
        "--release",
        "v1",
        "--data-dir",
        str(FIXTURES / "livecodebench"),
    )
    assert_one_line_error(code, err, f"{path}:2")


def test_unknown_release(lcb_samples: Path) -> None:
    assert_one_line_error(
        *run("livecodebench", "--samples", str(lcb_samples), "--release", "v9")[::2], "release_v1", "vA_vB"
    )


def test_unknown_protocol_and_context(lcb_samples: Path) -> None:
    assert_one_line_error(
        *run("livecodebench", "--samples", str(lcb_samples), "--protocol", "nope")[::2], "valid: paper"
    )
    code, _, err = run("math", "--model", "tiny", "--protocol", "paper", "--context", "1000")
    assert_one_line_error(code, err, "4096", "8192")


def test_unknown_prompt_style(lcb_samples: Path) -> None:
    code, _, err = run("livecodebench", "--samples", str(lcb_samples), "--prompt-style", "fancy")
    assert_one_line_error(code, err, "codeqwen", "CodeQwenInstruct")


def test_unknown_benchmark_engine_and_backend() -> None:
    assert_one_line_error(*run("math", "--model", "tiny", "--benchmarks", "gsm8k")[::2], "gsm8k", "math500")
    code, _, err = run(
        "math", "--model", "tiny", "--engine", "nope", "--benchmarks", "aime24", "--limit", "1"
    )
    assert_one_line_error(code, err, "nope", "hf")
    assert_one_line_error(
        *run("math", "--model", "tiny", "--backend", "k8s")[::2], "--backend", "'docker', 'local'"
    )
    assert_one_line_error(*run("evalplus", "--model", "tiny", "--datasets", "apps")[::2], "humaneval")


def test_samples_need_their_benchmark(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps({"id": "1", "response": "\\boxed{1}"}) + "\n")
    assert_one_line_error(*run("math", "--samples", str(path))[::2], "--benchmark")


def test_problems_without_samples_fail_unless_allowed(
    math_data: Path, math_verifier: VerifierOptions, tmp_path: Path
) -> None:
    first = json.loads((math_data / "aime24.json").read_text().splitlines()[0])
    path = tmp_path / "aime.jsonl"
    path.write_text(
        json.dumps({"id": first["id"], "response": f"\\boxed{{{first['expected_answer']}}}"}) + "\n"
    )
    args = [
        "math",
        "--samples",
        str(path),
        "--benchmark",
        "aime24",
        "--no-cache",
        "--verifier-url",
        math_verifier.urls[0],
    ]
    code, out, err = run(*args)
    assert_one_line_error(code, err, "29 problems without samples", "--allow-partial")
    assert "| aime24" in out  # the table is still printed
    code, out, err = run(*args, "--allow-partial")
    assert code == 0, err
    assert "| aime24" in out


@pytest.mark.usefixtures("hub_offline")
def test_a_skipped_benchmark_fails_unless_allowed(tmp_path: Path, math_verifier: VerifierOptions) -> None:
    path = tmp_path / "amc24.jsonl"
    path.write_text(json.dumps({"id": "0", "response": "\\boxed{1}"}) + "\n")
    args = [
        "math",
        "--samples",
        str(path),
        "--benchmark",
        "amc24",
        "--no-cache",
        "--verifier-url",
        math_verifier.urls[0],
    ]
    code, _, err = run(*args)
    assert_one_line_error(code, err, "amc24 skipped", "--allow-partial")
    code, _, err = run(*args, "--allow-partial")
    assert code == 0, err


def test_a_run_directory_made_with_other_settings(
    tmp_path: Path, lcb_samples: Path, code_verifier: VerifierOptions
) -> None:
    data = tmp_path / "lcb"
    shutil.copytree(FIXTURES / "livecodebench", data)
    base = ["livecodebench", "--samples", str(lcb_samples), "--release", "v1", "--data-dir", str(data),
            "--run-dir", str(tmp_path / "run"), "--verifier-url", code_verifier.urls[0], "--allow-partial"]  # fmt: skip
    code, _, err = run(*base)
    assert code == 0, err
    assert_one_line_error(*run(*base, "--prompt-style", "base")[::2], "--run-dir")


def test_usage_mistakes_are_one_line_too() -> None:
    assert_one_line_error(*run("math", "--limit", "abc")[::2], "--limit", "mucode eval math --help")
    assert_one_line_error(*run("nope")[::2], "nope", "mucode eval --help")
    assert_one_line_error(*run("livecodebench", "--relase", "v1")[::2], "--relase", "--help")


def test_a_dead_verifier_url_stops_before_anything_runs(
    lcb_samples: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real HTTP to a closed loopback port: one line naming the URL and the option, exit 2, no run dir."""
    import socket

    import mucode.train.preflight as preflight

    monkeypatch.setattr(preflight, "READY_WAIT_S", 1.0)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"  # closed when the block ends
    run_dir = tmp_path / "run"
    code, _, err = run(
        "livecodebench", "--samples", str(lcb_samples), "--verifier-url", url, "--run-dir", str(run_dir)
    )
    assert_one_line_error(code, err, url, "--verifier-url", "not ready")
    assert not run_dir.exists()
