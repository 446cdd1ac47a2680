"""The `mucode` command as a user runs it: the installed console script, in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

MUCODE = str(Path(sys.executable).with_name("mucode"))


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MUCODE, *args], capture_output=True, text=True, timeout=120)


def test_help_lists_the_commands() -> None:
    out = run("--help")
    assert out.returncode == 0, out.stderr
    for command in ("config", "env"):
        assert command in out.stdout


def test_config_show_prints_resolved_config_and_batch_plan() -> None:
    out = run("config", "show", "--config", "grpo_mu4", "batch.num_stages=2")
    assert out.returncode == 0, out.stderr
    assert "objective: grpo" in out.stdout
    assert "batch plan:" in out.stdout
    plan = {
        line.split()[0]: line.split()[-1] for line in out.stdout.split("batch plan:")[1].strip().splitlines()
    }
    assert plan["total_updates"] == "8"
    assert plan["engine_switches"] == "4"


def test_config_show_rejects_bad_values_with_exit_2() -> None:
    out = run("config", "show", "algo.veto_scope=bogus")
    assert out.returncode == 2
    assert "algo.veto_scope" in out.stderr and "nontrigger_suffix" in out.stderr
    assert "Traceback" not in out.stderr


def test_env_reports_versions() -> None:
    out = run("env", "--json")
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["python"].startswith(".".join(map(str, sys.version_info[:2])))
    import torch

    assert info["torch"] == torch.__version__.split("+")[0] or info["torch"] == torch.__version__
    assert "accelerators" in info


def test_config_keys_documents_every_field() -> None:
    from mucode.config import MucodeConfig

    out = run("config", "keys")
    assert out.returncode == 0, out.stderr
    for section, field in MucodeConfig.model_fields.items():
        for key, sub in field.annotation.model_fields.items():
            assert f"  {section}.{key}=" in out.stdout
            assert sub.description, f"{section}.{key} has no docstring"


def test_config_show_composes_a_model_preset_with_an_algorithm_preset() -> None:
    out = run("config", "show", "--config", "qwen2.5-coder-7b,grpo_mu4")
    assert out.returncode == 0, out.stderr
    for needle in (
        "path: Qwen/Qwen2.5-Coder-7B",
        "objective: grpo",
        "dual_clip: 3.0",
        "task: code",
        "prompts_per_update: 16",
        "updates_per_stage: 4",
        "eval_every: 200",
    ):
        assert needle in out.stdout, needle


def test_train_refuses_a_context_longer_than_the_model_before_writing(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    out = run(
        "train",
        "--task",
        "math",
        "--config",
        "tiny",
        "--run-dir",
        str(run_dir),
        "rollout.max_response_tokens=400",
    )
    assert out.returncode == 2, out.stderr
    assert (
        "256 + 400 = 656 tokens, but tiny has 512 positions" in out.stderr and "Traceback" not in out.stderr
    )
    assert not run_dir.exists()


def test_report_is_a_command() -> None:
    out = run("report", "--help")
    assert out.returncode == 0 and "time-to-accuracy" in out.stdout


def _verify_one_math_item(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"id": "a", "response": "\\boxed{2}", "spec": {"answer": "2"}}) + "\n")
    return run(*flags, "verify", "--program", "math", "--input", str(items), "--math-workers", "1")


def test_info_records_reach_the_user_by_default_and_with_verbose(tmp_path: Path) -> None:
    for flags in ((), ("-v",), ("--verbose",)):
        out = _verify_one_math_item(tmp_path, *flags)
        assert out.returncode == 0, out.stderr
        assert '"status":"correct"' in out.stdout
        # mucode.verifier.core logs its readiness line at INFO
        assert "INFO mucode.verifier.core: verifier ready" in out.stderr, (flags, out.stderr)


def test_quiet_keeps_info_records_back(tmp_path: Path) -> None:
    out = _verify_one_math_item(tmp_path, "-q")
    assert out.returncode == 0, out.stderr
    assert '"status":"correct"' in out.stdout
    assert "verifier ready" not in out.stderr and "INFO" not in out.stderr
    assert "1 items: correct 1" in out.stderr  # the command's own summary is not a log record


def test_verbose_and_quiet_together_is_a_usage_error() -> None:
    out = run("-v", "-q", "env")
    assert out.returncode == 2
    assert "contradict" in out.stderr and "Traceback" not in out.stderr


def test_verify_and_serve_load_only_their_own_command_module(tmp_path: Path) -> None:
    """`mucode verify` scores a file in well under a CPU-second: it must not import the trainer's
    config or the other commands (a third of a CPU-second); `--help` and `--version` still work."""
    probe = (
        "import sys\nfrom mucode.cli import main\nsys.argv = ['mucode', *sys.argv[1:]]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m in ('mucode.config', 'mucode.cli.train', "
        "'mucode.cli.eval', 'mucode.cli.serve')))"
    )
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"id": "a", "response": "\\boxed{2}", "spec": {"answer": "2"}}) + "\n")
    lean = subprocess.run([sys.executable, "-c", probe, "verify", "--program", "math", "-i", str(items)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert lean.returncode == 0, lean.stderr
    assert '"status":"correct"' in lean.stdout
    assert lean.stdout.strip().splitlines()[-1] == "['mucode.cli.serve']"
    full = subprocess.run(
        [sys.executable, "-c", probe, "--help"], capture_output=True, text=True, timeout=120
    )
    assert full.stdout.strip().splitlines()[-1] == str(sorted(["mucode.config", "mucode.cli.train",
                                                               "mucode.cli.eval", "mucode.cli.serve"]))  # fmt: skip
    assert "verify" in full.stdout and "train" in full.stdout
    assert run("--version").stdout.startswith("mucode ")
