"""`mucode verify`: items scored in process through the same code as the service."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from mucode.cli import get_app


def test_verify_math_file(tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text(
        "\n".join(
            json.dumps(x)
            for x in [
                {"id": "a", "response": "\\boxed{\\frac12}", "spec": {"answer": "0.5"}},
                {"id": "b", "response": "\\boxed{2}", "spec": {"answer": "3"}},
                {
                    "id": "c",
                    "program": "exact_match",
                    "response": "Answer: ok",
                    "spec": {"answer": "OK"},
                    "extra": 1,
                },
            ]
        )
        + "\n"
    )
    out = tmp_path / "results.jsonl"
    result = CliRunner().invoke(
        get_app(),
        ["verify", "--program", "math", "--input", str(items), "--output", str(out), "--math-workers", "1"],
    )
    assert result.exit_code == 0, result.output
    results = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["id"], r["status"], r["reward"]) for r in results] == [
        ("a", "correct", 1.0),
        ("b", "wrong_answer", 0.0),
        ("c", "correct", 1.0),
    ]


def test_verify_rejects_bad_items_with_line_numbers(tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text('{"response": "x", "spec": {"answer": 1}}\nnot json\n')
    result = CliRunner().invoke(get_app(), ["verify", "--program", "math", "--input", str(items)])
    assert result.exit_code == 2
    assert "items.jsonl:2: not a valid item" in result.output

    items.write_text('{"response": "x", "spec": {}}\n')
    result = CliRunner().invoke(get_app(), ["verify", "--program", "math", "--input", str(items)])
    assert result.exit_code == 2 and "items[0].spec.answer: Field required" in result.output

    result = CliRunner().invoke(get_app(), ["verify", "--program", "chess", "--input", str(items)])
    assert result.exit_code == 2 and "unknown reward program 'chess'" in result.output

    items.write_text(
        json.dumps({"id": "ok", "response": "x", "spec": {"answer": 1}})
        + "\n"
        + json.dumps({"id": "a\ud800", "response": "x", "spec": {"answer": 1}})
        + "\n"
    )
    result = CliRunner().invoke(get_app(), ["verify", "--program", "math", "--input", str(items)])
    assert result.exit_code == 2
    assert "items.jsonl:2: not a valid item: id: contains a lone surrogate" in result.output


def test_verify_reads_stdin_and_writes_stdout() -> None:
    line = json.dumps({"id": "x", "response": "Answer: 42", "spec": {"answer": "42"}})
    result = CliRunner().invoke(
        get_app(), ["verify", "--program", "exact_match", "--input", "-"], input=line + "\n"
    )
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    assert json.loads(first) == {
        "id": "x",
        "reward": 1.0,
        "status": "correct",
        "details": {"extracted": "42"},
    }


def test_serve_names_the_bad_setting_in_one_line() -> None:
    result = CliRunner().invoke(
        get_app(), ["serve", "--backend", "local"], env={"MUCODE_MAX_QUEUED_ITEMS": "1"}
    )
    assert result.exit_code == 2
    assert result.output.startswith(
        "invalid verifier settings: max_queued_items=1 is below max_items_per_request"
    )
    assert len(result.output.strip().splitlines()) == 1
    result = CliRunner().invoke(get_app(), ["serve", "--backend", "local"], env={"MUCODE_PORT": "eighty"})
    assert result.exit_code == 2 and "MUCODE_PORT: Input should be a valid integer" in result.output
