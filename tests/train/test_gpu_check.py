"""scripts/gpu_check.py runs end to end on the CPU with a tiny shape (on a GPU it is run by hand)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_gpu_check_runs_with_a_tiny_shape(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("gpu_check", REPO / "scripts" / "gpu_check.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "figures.json"
    code = module.main(
        [
            "--tiny",
            "--device",
            "cpu",
            "--stages",
            "2",
            "--updates",
            "2",
            "--prompts",
            "4",
            "--samples",
            "4",
            "--prompt-tokens",
            "12",
            "--response-tokens",
            "12",
            "--lr",
            "1e-3",
            "--json",
            str(out),
        ]
    )
    assert code == 0  # the fixed-batch loss went down
    figures = json.loads(out.read_text())
    first, second = figures["stages"]
    assert first["gen_tokens_per_s"] > 0 and first["train_tokens_per_s"] > 0
    # the trainer's optimizer state steps aside: what it holds during generation is its parameters only
    assert second["trainer_after"] < second["trainer_before"] / 2
    assert second["trainer_full_aside"] == 0
    assert second["fixed_loss_after"] < first["fixed_loss_before"]
