"""The trainer's state steps aside for generation and comes back bit-identical."""

from __future__ import annotations

import copy
from pathlib import Path

import torch
from train_helpers import synthetic_groups

from mucode.config import load_config
from mucode.rollout.hf import HFEngine
from mucode.rollout.types import SamplingParams
from mucode.train.aside import held_bytes, step_aside
from mucode.train.distributed import DistInfo
from mucode.train.optimize import Updater, UpdateSettings, make_optimizer
from mucode.train.policy import load_policy


def _trained(policy: Path) -> tuple[torch.nn.Module, torch.optim.Optimizer, Updater, object]:
    cfg = load_config(None, [f"model.path={policy}", "optim.lr=1e-2", "batch.micro_batch_tokens=4096"])
    torch.manual_seed(0)
    model, tokenizer = load_policy(str(policy), dtype="float32", device=torch.device("cpu"))
    optimizer, scheduler = make_optimizer(model, cfg.optim)
    settings = UpdateSettings.from_config(cfg)
    updater = Updater(model, optimizer, scheduler, settings, DistInfo(), pad_token_id=tokenizer.pad_token_id)
    updater.step(synthetic_groups(vocab=300, n_groups=2))  # AdamW state exists, gradients are held
    return model, optimizer, updater, tokenizer


def _snapshot(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict, list]:
    params = {k: v.detach().clone() for k, v in model.state_dict().items()}
    state = [{k: v.clone() for k, v in s.items()} for s in optimizer.state.values()]
    return params, state


def _assert_bit_identical(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, snap: tuple[dict, list]
) -> None:
    params, state = snap
    for name, value in model.state_dict().items():
        assert torch.equal(value, params[name]) and value.dtype == params[name].dtype, name
    for got, want in zip(optimizer.state.values(), state, strict=True):
        for key in want:
            assert torch.equal(got[key], want[key]), key


def test_state_round_trip_is_bit_identical_and_frees_everything(small_policy: Path) -> None:
    model, optimizer, updater, _ = _trained(small_policy)
    before = held_bytes(model, optimizer)
    assert before["params"] > 0 and before["grads"] > 0 and before["optimizer"] > 2 * before["params"] * 0.9
    snap = _snapshot(model, optimizer)

    parked = step_aside(model, optimizer, params=True)
    assert held_bytes(model, optimizer) == {"params": 0, "grads": 0, "optimizer": 0}
    assert parked.parked_bytes == before["params"] + before["optimizer"]
    parked.restore()
    _assert_bit_identical(model, optimizer, snap)
    assert held_bytes(model, optimizer)["params"] == before["params"]

    # the restored state trains on exactly as the untouched one does
    twin_model, twin_optimizer, twin_updater, _ = _trained(small_policy)
    groups = synthetic_groups(vocab=300, n_groups=2, seed=1)
    updater.step(copy.deepcopy(groups))
    twin_updater.step(copy.deepcopy(groups))
    _assert_bit_identical(model, optimizer, _snapshot(twin_model, twin_optimizer))


def test_engine_sharing_the_weights_runs_while_the_optimizer_state_is_away(small_policy: Path) -> None:
    model, optimizer, _, tokenizer = _trained(small_policy)
    snap = _snapshot(model, optimizer)
    parked = step_aside(model, optimizer, params=False)  # the hf engine computes with the parameters
    held = held_bytes(model, optimizer)
    assert held["optimizer"] == 0 and held["grads"] == 0 and held["params"] > 0
    engine = HFEngine(model, tokenizer, SamplingParams(max_new_tokens=4, seed=0))
    groups = list(engine.generate([("p", [1, 2, 3])], samples_per_prompt=2))
    engine.close()
    assert len(groups) == 1 and len(groups[0]) == 2
    parked.restore()
    _assert_bit_identical(model, optimizer, snap)
