"""Run by test_distributed.py under torchrun: one update on fixed groups, weights saved by rank 0."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from mucode.config import load_config
from mucode.train.distributed import full_state_dict, init_distributed, wrap_model
from mucode.train.optimize import Updater, UpdateSettings, make_optimizer
from mucode.train.policy import load_policy
from mucode.train.store import StoredGroup


def main() -> None:
    policy, groups_file, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    torch.set_num_threads(1)
    info = init_distributed("cpu")
    cfg = load_config(None, [f"model.path={policy}", "optim.lr=1e-2", "batch.micro_batch_tokens=48"])
    model, tokenizer = load_policy(str(policy), dtype="float32", device=info.device)
    model = wrap_model(model, info)
    optimizer, scheduler = make_optimizer(model, cfg.optim)
    settings = UpdateSettings.from_config(cfg)
    updater = Updater(model, optimizer, scheduler, settings, info, pad_token_id=tokenizer.pad_token_id)
    groups: list[StoredGroup] = torch.load(groups_file, weights_only=False)
    metrics = updater.step(groups)
    weights = full_state_dict(model)
    if info.is_main:
        torch.save({"weights": weights, "metrics": metrics}, out)
    if info.enabled:  # both ranks leave together: gloo aborts a rank torn down while its peer still talks
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
