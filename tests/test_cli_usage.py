"""Every user mistake on the command line is one line naming the fix, exit code 2, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from mucode.cli import get_app


def _bad_yaml(tmp: Path) -> str:
    path = tmp / "bad.yaml"
    path.write_text("batch:\n  prompts_per_update: 3\n updates: [\n")
    return str(path)


CASES = [
    (["nosuchcmd"], "No such command"),
    (["train", "--nosuchflag"], "mucode train --help"),
    (["train", "--task", "chess"], "is not one of 'code', 'math'"),
    (["train", "--task", "math", "batch.prompts_per_updat=3"], "prompts_per_updat"),
    (["train", "--config", "nosuchpreset"], "one of the presets"),
    (["train", "--config", "{bad_yaml}"], "bad.yaml:3:"),
    (["config", "show", "algo.objective=sgd"], "algo.objective"),
    (
        ["config", "show", "algo.objective=grpo", "algo.veto_scope=suffix"],
        "veto_scope: not a parameter of algo.objective=grpo",
    ),
    (["config", "show", "verifier.url=[unclosed"], "quote it"),
    (["config", "keys", "nosection"], "sections:"),
    (["export"], "Missing argument"),
    (["export", "{tmp}", "{tmp}/out"], "not a mucode checkpoint"),
    (["export", "{tmp}", "{tmp}/out", "--dtype", "int8"], "float32, bfloat16 or float16"),
    (["plot", "{tmp}"], "metrics.jsonl not found"),
    (["verl-config", "--gpus-per-node", "0"], "--gpus-per-node"),
    (["eval", "math", "--samples", "{tmp}/none.jsonl"], "no such samples file"),
    (["eval", "math", "--nosuch"], "No such option"),
]


@pytest.mark.parametrize(("args", "expect"), CASES, ids=[" ".join(a)[:40] for a, _ in CASES])
def test_wrong_invocation_is_one_line_exit_2(args: list[str], expect: str, tmp_path: Path) -> None:
    args = [a.format(tmp=tmp_path, bad_yaml=_bad_yaml(tmp_path)) for a in args]
    result = CliRunner().invoke(get_app(), args)
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2, result.output
    assert len(lines) == 1, result.output
    assert expect in lines[0] and "Traceback" not in result.output


def test_scalar_url_and_objective_switch_are_accepted() -> None:
    result = CliRunner().invoke(
        get_app(), ["config", "show", "verifier.url=http://host:8000", "algo.objective=grpo"]
    )
    assert result.exit_code == 0, result.output
    assert "- http://host:8000" in result.output and "objective: grpo" in result.output
    assert "veto_scope" not in result.output  # the veto is mu_grpo's: grpo has no such parameter


def test_version_and_typed_keys() -> None:
    from importlib.metadata import version

    result = CliRunner().invoke(get_app(), ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"mucode {version('mucode')}"
    keys = CliRunner().invoke(get_app(), ["config", "keys", "algo"]).output
    assert "algo.dual_clip=null    [float or null]" in keys  # grpo's parameters, under its heading
    assert "algo.veto_scope=sequence    [one of: none, trigger, suffix, nontrigger_suffix, sequence]" in keys
