"""`mucode export`: an in-stage checkpoint becomes a Hugging Face model that `from_pretrained` loads."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from train_helpers import run_overrides, write_tasks
from typer.testing import CliRunner

from mucode.cli import get_app
from mucode.config import load_config
from mucode.train.export import CheckpointError, as_model_path, find_checkpoint
from mucode.train.loop import run_training


@pytest.fixture(scope="module")
def run_dir(small_policy: Path, plugin_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    import os
    import sys

    # the plug-in for this process and for the local verifier, which runs in a child process
    sys.path.insert(0, str(plugin_dir))
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(plugin_dir), saved or ""])
    try:
        tmp = tmp_path_factory.mktemp("export")
        data = write_tasks(tmp / "tasks.jsonl", "parity")
        run = tmp / "run"
        # one stage of 3 updates with a checkpoint every update: update-2 is inside the stage
        run_training(
            load_config(
                None,
                run_overrides(
                    small_policy,
                    data,
                    run,
                    batch__num_stages=1,
                    train__checkpoint_every=1,
                    train__checkpoint_keep=5,
                ),
            )
        )
    finally:
        sys.path.remove(str(plugin_dir))
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    return run


def test_in_stage_checkpoint_exports_and_loads(run_dir: Path, small_policy: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    checkpoint = run_dir / "checkpoints" / "update-00000002"
    out = CliRunner().invoke(get_app(), ["export", str(checkpoint), str(tmp_path / "hf")])
    assert out.exit_code == 0, out.output
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "hf")
    saved = torch.load(checkpoint / "model.pt", map_location="cpu", weights_only=True)
    for name, tensor in model.state_dict().items():
        if name in saved:
            torch.testing.assert_close(tensor, saved[name].to(tensor.dtype))
    base = AutoModelForCausalLM.from_pretrained(small_policy)
    assert any(not torch.equal(p, q) for p, q in zip(model.parameters(), base.parameters(), strict=True))
    assert (tmp_path / "hf" / "tokenizer.json").is_file()


def test_run_dir_means_its_latest_checkpoint_and_eval_paths_resolve_once(run_dir: Path) -> None:
    latest = find_checkpoint(run_dir)
    assert latest.name == "update-00000003"
    resolved = as_model_path(str(latest))
    assert resolved == str(latest / "hf") and (latest / "hf" / "config.json").is_file()
    stamp = (latest / "hf" / "config.json").stat().st_mtime_ns
    assert as_model_path(str(latest)) == resolved  # exported once, then reused
    assert (latest / "hf" / "config.json").stat().st_mtime_ns == stamp
    assert as_model_path("Qwen/Qwen2.5-Math-7B") == "Qwen/Qwen2.5-Math-7B"  # not a directory: unchanged


def test_not_a_checkpoint_is_one_line_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="update-00000128"):
        find_checkpoint(tmp_path)
    out = CliRunner().invoke(get_app(), ["export", str(tmp_path), str(tmp_path / "out")])
    assert out.exit_code == 2 and "not a mucode checkpoint" in out.output
    assert "Traceback" not in out.output


def test_eval_takes_a_checkpoint_directory_as_its_model(run_dir: Path, tmp_path: Path) -> None:
    import json

    from mucode.eval.data import MATH_DATA_DIR

    from mucode.verifier.local import local_verifier

    checkpoint = run_dir / "checkpoints" / "update-00000001"
    with local_verifier("local", programs=["math"], run_code=False, math_workers=1) as url:
        out = CliRunner().invoke(
            get_app(),
            [
                "eval",
                "math",
                "--model",
                str(checkpoint),
                "--benchmarks",
                "amc23",
                "--data-dir",
                str(MATH_DATA_DIR),
                "--limit",
                "2",
                "-n",
                "1",
                "--max-tokens",
                "8",
                "--device",
                "cpu",
                "--output",
                str(tmp_path / "r.json"),
                "--run-dir",
                str(tmp_path / "eval"),
                "--verifier-url",
                url,
            ],
        )
    assert out.exit_code == 0, out.output
    assert (checkpoint / "hf" / "config.json").is_file()
    assert json.loads((tmp_path / "r.json").read_text())["amc23"]["n_samples"] == 2
