"""Mixed precision: bfloat16 compute over float32 master weights moves the weights as float32 training
does at the paper's lr (1e-6), where pure bfloat16 training rounds the updates away."""

from __future__ import annotations

import copy
from pathlib import Path

import torch
from train_helpers import synthetic_groups

from mucode.config import load_config
from mucode.train.distributed import DistInfo
from mucode.train.optimize import Updater, UpdateSettings, make_optimizer
from mucode.train.policy import load_policy
from mucode.train.precision import Precision


def _changed_fraction(policy: Path, master: str, compute: str, updates: int = 8) -> tuple[float, dict]:
    """Fraction of matrix weights that differ from the start after ``updates`` updates at lr 1e-6."""
    cfg = load_config(
        None,
        [
            f"model.path={policy}",
            f"model.dtype={compute}",
            f"model.master_dtype={master}",
            "optim.lr=1e-6",
            "optim.grad_clip=null",
            "batch.micro_batch_tokens=4096",
        ],
    )
    torch.manual_seed(0)
    model, tokenizer = load_policy(str(policy), dtype=master, device=torch.device("cpu"))
    start = {k: v.detach().clone() for k, v in model.named_parameters()}
    optimizer, scheduler = make_optimizer(model, cfg.optim)
    settings = UpdateSettings.from_config(cfg)
    updater = Updater(model, optimizer, scheduler, settings, DistInfo(), pad_token_id=tokenizer.pad_token_id)
    groups = synthetic_groups(vocab=300, n_groups=4)
    metrics = {}
    for i in range(updates):
        metrics = updater.step(copy.deepcopy(groups[i % 2 * 2 : i % 2 * 2 + 2]))
    changed = total = 0
    for name, p in model.named_parameters():
        if p.dim() >= 2:
            changed += int((p.detach() != start[name]).sum())
            total += p.numel()
    state_dtypes = {v.dtype for s in optimizer.state.values() for k, v in s.items() if k != "step"}
    return changed / total, {
        "metrics": metrics,
        "param_dtype": next(model.parameters()).dtype,
        "state_dtypes": state_dtypes,
    }


def test_bf16_compute_over_fp32_masters_moves_the_weights_as_fp32_does(small_policy: Path) -> None:
    fp32, _ = _changed_fraction(small_policy, "float32", "float32")
    mixed, mixed_info = _changed_fraction(small_policy, "float32", "bfloat16")
    pure_bf16, _ = _changed_fraction(small_policy, "bfloat16", "bfloat16")
    assert fp32 > 0.9  # Adam moves every weight whose gradient is non-zero by ~lr
    assert mixed > 0.95 * fp32, (mixed, fp32)
    assert pure_bf16 < 0.1 * fp32, (pure_bf16, fp32)  # the failure mixed precision exists to avoid
    assert mixed_info["param_dtype"] == torch.float32
    assert mixed_info["state_dtypes"] == {torch.float32}
    assert mixed_info["metrics"]["optim/grad_norm"] > 0


def test_autocast_runs_the_forward_in_the_compute_dtype(small_policy: Path) -> None:
    model, _ = load_policy(str(small_policy), dtype="float32", device=torch.device("cpu"))
    ids = torch.tensor([[1, 2, 3, 4]])
    with Precision.from_names("float32", "bfloat16").autocast(torch.device("cpu")):
        mixed = model(input_ids=ids).logits
    with Precision.from_names("float32", "float32").autocast(torch.device("cpu")):
        full = model(input_ids=ids).logits
    assert mixed.dtype == torch.bfloat16 and full.dtype == torch.float32
    assert not torch.equal(mixed.float(), full)  # a different arithmetic, not a relabelled one
    torch.testing.assert_close(mixed.float(), full, rtol=0.05, atol=0.05)


def test_fsdp_policy_and_the_engine_hand_over_follow_the_two_dtypes(small_policy: Path) -> None:
    from mucode.train.distributed import iter_full_tensors

    mixed = Precision.from_names("float32", "bfloat16")
    policy = mixed.fsdp_mixed_precision()
    assert (policy.param_dtype, policy.reduce_dtype, policy.buffer_dtype) == (
        torch.bfloat16,
        torch.float32,
        torch.bfloat16,
    )
    assert Precision.from_names("float32", "float32").fsdp_mixed_precision() is None
    model, _ = load_policy(str(small_policy), dtype="float32", device=torch.device("cpu"))
    pushed = dict(iter_full_tensors(model, mixed.compute))  # what an in-memory engine receives
    state = model.state_dict()
    assert pushed.keys() == state.keys()
    for name, tensor in pushed.items():
        assert tensor.dtype == torch.bfloat16
        assert torch.equal(tensor, state[name].to(torch.bfloat16))
