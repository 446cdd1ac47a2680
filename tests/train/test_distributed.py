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
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={nproc}",
        str(Path(__file__).with_name("dist_step.py")),
        str(policy),
        str(groups),
        str(out),
    ]
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


def test_wrappers_are_recognised_in_one_place(tmp_path: Path) -> None:
    """``is_wrapped``/``is_fsdp``/``unwrap`` (the one test of a wrapper): a DDP module on a one-rank gloo
    group is wrapped but not FSDP, and unwraps to the user's module (FSDP itself needs an accelerator)."""
    import torch.distributed as dist
    from torch import nn

    from mucode.train.distributed import is_fsdp, is_wrapped, unwrap

    plain = nn.Linear(2, 2)
    assert not is_wrapped(plain) and not is_fsdp(plain) and unwrap(plain) is plain
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        ddp = nn.parallel.DistributedDataParallel(plain)
        assert is_wrapped(ddp) and not is_fsdp(ddp) and unwrap(ddp) is plain
    finally:
        dist.destroy_process_group()
