"""GPU check of the staged trainer's machinery: one device, the ``hf`` engine, a randomly initialised
model of Qwen2.5-1.5B's shape (built from a config: no download), bf16 compute over fp32 masters.

    python scripts/gpu_check.py                 # on one GPU
    python scripts/gpu_check.py --tiny          # a tiny shape, any device (the CPU test runs this)

Each stage: the trainer steps aside (``mucode.train.aside``), the engine generates G responses per
prompt on random prompts, the trainer comes back and makes μ updates (``mucode.train.optimize``)
on the stage's responses with fixed ±1 advantages (a random model earns no reward, so the
advantages are synthetic). It prints, per stage: device memory held by the trainer before and after
stepping aside (with the ``hf`` engine the parameters stay, the engine computes with them; a full
step-aside is also measured), the engine's share (peak during generation above what the trainer
kept), generation and training tokens per second, and the policy loss on a fixed batch (two of
stage 0's groups with their advantages), which must go down: the script exits 1 if it does not.

The stand-in tokenizer maps ids to text as numbers (the model is random; nothing reads the text).

``--async RUN_DIR`` runs the asynchronous pass instead (``mucode.train.async_loop``): the tiny policy
on the toy task with one generator process, publishing every 2 updates with a lag bound of 4, once per
weight hand-off (``--handoff file,push``; push goes over nccl when there is a second GPU for the
generator, else over gloo on the one GPU both share) and engine (``--engine hf`` or ``vllm``: the
in-process vLLM engine in the generator, loading each version in place). It prints per run the
trainer's and the generator's idle ratios, the mean publish and load times, the engines built and the
largest staleness, and exits 1 if the bound was exceeded, a group was dropped, or a generator built
its engine more than once (a version must load into the running engine). With two GPUs or more it
also runs the nccl push test (``tests/train/test_async_push.py -m gpu``). ``--device cpu`` runs the
same pass on a CPU (file and gloo push).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from typing import Any

import torch

from mucode.algo import get_objective, loss_denominator
from mucode.config import load_config
from mucode.rollout.hf import HFEngine
from mucode.rollout.logprobs import response_logprobs
from mucode.rollout.types import SamplingParams
from mucode.train.aside import held_bytes, step_aside
from mucode.train.distributed import DistInfo
from mucode.train.optimize import Updater, UpdateSettings, make_optimizer
from mucode.train.precision import Precision
from mucode.train.store import StoredGroup, StoredSample

QWEN25_15B = dict(
    hidden_size=1536,
    intermediate_size=8960,
    num_hidden_layers=28,
    num_attention_heads=12,
    num_key_value_heads=2,
    vocab_size=151936,
    max_position_embeddings=32768,
    rope_theta=1e6,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
)
TINY = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=512,
    max_position_embeddings=1024,
    rope_theta=1e4,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
)


class IdsTokenizer:
    """What the engine needs of a tokenizer, for a model whose text nobody reads."""

    def __init__(self, vocab: int) -> None:
        self.eos_token_id = vocab - 1
        self.pad_token_id = vocab - 2

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return " ".join(map(str, ids))


def build_model(shape: dict[str, Any], device: torch.device) -> torch.nn.Module:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(**shape, use_cache=False)
    with torch.device(device):
        model = Qwen2ForCausalLM(config)  # fp32 masters
    return model


def gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB" if abs(n) >= 2**30 else f"{n / 2**20:.2f} MiB"


def device_bytes(device: torch.device, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> float:
    """Memory the trainer holds: CUDA's allocator count on a GPU, the trainer's own tensors elsewhere."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        return float(torch.cuda.memory_allocated(device))
    return float(sum(held_bytes(model, optimizer).values()))


def to_groups(groups: list[list[Any]]) -> list[StoredGroup]:
    """Generated samples as stored groups, with fixed advantages +1/-1 alternating inside each group."""
    out = []
    for gid, group in enumerate(groups):
        samples = [
            StoredSample(
                prompt_id=str(gid),
                sample_index=s.sample_index,
                prompt_tokens=s.prompt_token_ids,
                response_tokens=s.response_token_ids,
                behaviour_logprobs=s.behaviour_logprobs,
                reward=float(s.sample_index % 2),
                status="correct",
                masked=False,
                advantage=1.0 if s.sample_index % 2 else -1.0,
            )
            for s in group
        ]
        out.append(StoredGroup(group_id=gid, prompt_id=str(gid), samples=samples))
    return out


@torch.no_grad()
def fixed_batch_loss(
    model: torch.nn.Module,
    groups: list[StoredGroup],
    cfg: Any,
    precision: Precision,
    device: torch.device,
    pad: int,
) -> float:
    """The objective on ``groups`` with the current weights (one forward, no update)."""
    samples = [s for g in groups for s in g.samples if s.response_tokens]
    with precision.autocast(device):
        out = response_logprobs(
            model,
            [s.prompt_tokens for s in samples],
            [s.response_tokens for s in samples],
            cfg.rollout.temperature,
            pad_token_id=pad,
        )
    width = out.logprobs.shape[1]
    behaviour = torch.zeros((len(samples), width), device=device)
    for i, s in enumerate(samples):
        behaviour[i, : len(s.behaviour_logprobs)] = torch.tensor(s.behaviour_logprobs, device=device)
    advantages = torch.tensor([s.advantage for s in samples], device=device)
    params = cfg.algo.params
    denominator = loss_denominator(out.mask.cpu(), params.aggregation, norm_length=params.norm_length)
    loss, _ = get_objective(cfg.algo.objective)(
        out.logprobs,
        behaviour,
        advantages,
        out.mask,
        params,
        denominator=denominator,
        entropy=None,
        prepared=None,
    )
    return float(loss)


def run_stage(
    k: int, ctx: dict[str, Any], fixed: list[StoredGroup] | None
) -> tuple[dict[str, float], list[StoredGroup]]:
    model, optimizer, updater, args, device = (
        ctx["model"],
        ctx["optimizer"],
        ctx["updater"],
        ctx["args"],
        ctx["device"],
    )
    rng = random.Random(k)
    vocab = ctx["vocab"]
    prompts = [
        (str(i), [rng.randrange(vocab - 2) for _ in range(args.prompt_tokens)]) for i in range(args.prompts)
    ]
    row: dict[str, float] = {"stage": k}
    row["trainer_before"] = device_bytes(device, model, optimizer)
    if k > 0:  # a full step-aside, as for an engine with weights of its own (vllm): measured, then undone
        full = step_aside(model, optimizer, params=True)
        row["trainer_full_aside"] = device_bytes(device, model, optimizer)
        full.restore()
    parked = step_aside(model, optimizer, params=False)  # the hf engine computes with the parameters
    row["trainer_after"] = device_bytes(device, model, optimizer)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    engine = HFEngine(
        model,
        ctx["tokenizer"],
        SamplingParams(max_new_tokens=args.response_tokens, seed=k),
        batch_size=args.batch,
        stop_token_ids=[vocab - 1],
        autocast_dtype=ctx["precision"].compute,
    )
    start = time.perf_counter()
    groups = list(engine.generate(prompts, args.samples))
    row["gen_s"] = time.perf_counter() - start
    engine.close()
    row["engine_share"] = (
        float(torch.cuda.max_memory_allocated(device)) - row["trainer_after"]
        if device.type == "cuda"
        else float("nan")
    )
    parked.restore()
    row["gen_tokens_per_s"] = sum(len(s.response_token_ids) for g in groups for s in g) / row["gen_s"]
    stored = to_groups(groups)
    fixed = fixed if fixed is not None else stored[:2]  # two groups: one forward, whatever the model size
    row["fixed_loss_before"] = fixed_batch_loss(model, fixed, ctx["cfg"], ctx["precision"], device, vocab - 2)
    tokens, start = 0, time.perf_counter()
    per_update = max(1, len(stored) // args.updates)
    for u in range(args.updates):
        batch = stored[(u * per_update) % len(stored) :][:per_update] or stored[:per_update]
        updater.step(batch)
        tokens += sum(len(s.prompt_tokens) + len(s.response_tokens) for g in batch for s in g.samples)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    row["train_tokens_per_s"] = tokens / (time.perf_counter() - start)
    row["fixed_loss_after"] = fixed_batch_loss(model, fixed, ctx["cfg"], ctx["precision"], device, vocab - 2)
    return row, fixed


def async_pass(device: str, run_dir: str, handoffs: list[str], engine: str) -> int:
    """The asynchronous pass (see the module doc); 0 when every run held the bound on a warm engine."""
    from pathlib import Path

    from mucode.train.async_loop import run_async_training

    two_gpus = torch.cuda.is_available() and torch.cuda.device_count() > 1
    failed = 0
    for handoff in handoffs:
        extra = [f"asynchronous.handoff={handoff}", f"rollout.engine={engine}"]
        if two_gpus:
            extra += ["asynchronous.generator_devices=[1]"]  # the trainer on GPU 0; push: nccl
        if engine == "vllm":
            extra += ["rollout.gpu_memory_utilization=0.3"]
        cfg = load_config(
            "tiny",
            [
                f"train.device={device}",
                f"train.run_dir={Path(run_dir) / f'{handoff}-{engine}'}",
                "train.progress=false",
                "train.tensorboard=false",
                "train.final_rollout_prompts=0",
                "batch.updates_per_stage=4",
                "batch.num_stages=2",
                "asynchronous.enabled=true",
                "asynchronous.sync_every=2",
                "asynchronous.max_lag_updates=4",
                *extra,
            ],
        )
        totals = run_async_training(cfg).summary.get("totals", {})
        gen = json.loads((Path(cfg.train.run_dir) / "async" / "gen-00.json").read_text())
        keys = [
            "async/trainer_idle_ratio",
            "async/generator_idle_ratio",
            "async/publish_s_mean",
            "async/load_s_mean",
        ]
        label = f"async pass ({handoff}, {engine}{', 2 GPUs' if two_gpus else ''})"
        print(
            f"{label}: "
            + ", ".join(f"{k}={totals.get(k)}" for k in keys)
            + f", engines built {gen['builds']}"
        )
        ok = (
            totals.get("async/staleness_max", 99) <= 4
            and totals.get("async/dropped_for_age", 1) == 0
            and gen["builds"] == 1
            and gen["loads"] >= 1
        )
        print(
            f"{label}: staleness max {totals.get('async/staleness_max')} (bound 4): {'ok' if ok else 'NOT ok'}"
        )
        failed += not ok
    if two_gpus:
        import subprocess

        test = Path(__file__).resolve().parents[1] / "tests" / "train" / "test_async_push.py"
        code = subprocess.call([sys.executable, "-m", "pytest", "-q", "-m", "gpu", str(test)])
        print(f"nccl push test: {'ok' if code == 0 else 'NOT ok'}")
        failed += code != 0
    return 0 if failed == 0 else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--async", dest="asynchronous", metavar="RUN_DIR", help="run the asynchronous pass in RUN_DIR"
    )
    parser.add_argument("--handoff", default="file,push", help="--async: the weight hand-offs to run")
    parser.add_argument(
        "--engine", default="hf", choices=["hf", "vllm"], help="--async: the generator's engine"
    )
    parser.add_argument("--tiny", action="store_true", help="a tiny model shape (CPU smoke run)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--stages", type=int, default=3)
    parser.add_argument("--updates", type=int, default=4, help="μ: updates per stage")
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--samples", type=int, default=8, help="G")
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--response-tokens", type=int, default=256)
    parser.add_argument("--batch", type=int, default=256, help="sequences the engine decodes together")
    parser.add_argument("--lr", type=float, default=1e-6)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    if args.asynchronous:
        return async_pass(args.device, args.asynchronous, args.handoff.split(","), args.engine)
    device = torch.device(
        args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    )
    shape = TINY if args.tiny else QWEN25_15B
    compute = "bfloat16"
    cfg = load_config(
        None,
        [
            f"model.dtype={compute}",
            "model.master_dtype=float32",
            f"optim.lr={args.lr}",
            "batch.micro_batch_tokens=8192",
            "train.log_entropy=false",
        ],
    )
    precision = Precision.from_names("float32", compute)
    model = build_model(shape, device)
    optimizer, scheduler = make_optimizer(model, cfg.optim)
    info = DistInfo(device=device)
    settings = UpdateSettings.from_config(cfg)
    updater = Updater(model, optimizer, scheduler, settings, info, pad_token_id=shape["vocab_size"] - 2)
    n_params = sum(p.numel() for p in model.parameters())
    print(
        f"gpu_check: {n_params / 1e6:,.1f} M parameters ({'tiny' if args.tiny else 'Qwen2.5-1.5B'} shape), "
        f"device {device}, fp32 masters + {compute} compute, lr {args.lr}",
        flush=True,
    )
    ctx = {
        "model": model,
        "optimizer": optimizer,
        "updater": updater,
        "args": args,
        "device": device,
        "vocab": shape["vocab_size"],
        "tokenizer": IdsTokenizer(shape["vocab_size"]),
        "cfg": cfg,
        "precision": precision,
    }
    rows, fixed = [], None
    for k in range(args.stages):
        row, fixed = run_stage(k, ctx, fixed)
        rows.append(row)
        full = f", full step-aside {gib(row['trainer_full_aside'])}" if "trainer_full_aside" in row else ""
        print(
            f"stage {k}: trainer {gib(row['trainer_before'])} → {gib(row['trainer_after'])} during generation"
            f"{full}; engine share {gib(row['engine_share'])}; generation {row['gen_tokens_per_s']:,.0f} tok/s; "
            f"training {row['train_tokens_per_s']:,.0f} tok/s; fixed-batch loss "
            f"{row['fixed_loss_before']:+.6f} → {row['fixed_loss_after']:+.6f}",
            flush=True,
        )
    first, last = rows[0]["fixed_loss_before"], rows[-1]["fixed_loss_after"]
    ok = last < first
    print(f"fixed-batch loss {first:+.6f} → {last:+.6f}: {'down' if ok else 'NOT down'}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"parameters": n_params, "device": str(device), "stages": rows}, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
