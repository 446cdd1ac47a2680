"""torchrun on CPU (gloo): two ranks make the same update as one process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from train_helpers import synthetic_groups as _groups


def _run(nproc: int, policy: Path, groups: Path, out: Path) -> dict:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           str(Path(__file__).with_name("dist_step.py")), str(policy), str(groups), str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return torch.load(out, weights_only=False)


@pytest.mark.slow
def test_two_gloo_ranks_make_the_single_process_update(small_policy: Path, tmp_path: Path) -> None:
    groups = _groups(vocab=300, n_groups=5)  # odd: the ranks get different numbers of groups
    torch.save(groups, tmp_path / "groups.pt")
    one = _run(1, small_policy, tmp_path / "groups.pt", tmp_path / "one.pt")
    two = _run(2, small_policy, tmp_path / "groups.pt", tmp_path / "two.pt")
    for key in ("loss/policy", "optim/grad_norm", "stale/tokens", "stale/ratio_mean_neg_adv"):
        assert two["metrics"][key] == pytest.approx(one["metrics"][key], rel=1e-4), key
    for name, tensor in one["weights"].items():
        torch.testing.assert_close(two["weights"][name], tensor, rtol=0, atol=1e-4)
