"""One stage at the paper's size on a CPU: B_train = 32,768 prompts × G = 8 = 262,144 responses.

    .venv/bin/python bench/paper_scale.py [--fractions 0.125,0.5,1] [--prompts 32768] [--samples 8]
        [--mean-response-tokens 512] [--max-response-tokens 3072] [--dataset 40315] [--updates 4]
        [--out runs/bench-paper-scale] [--keep]

Everything but the model is real: the trainer's prompt selection (``stage_prompts``) over a data set
of DeepScaleR's size, the prompt-length filter, the chat template, the ``dummy`` rollout engine
(random tokens from a fixed distribution with exact log-probs: no model forward), verification of
every response by the real verifier service (math-verify, on loopback, its own worker processes),
group advantages, the stage store (Parquet shards, manifest, checksums) and its minibatch reader
over all μ = 1024 minibatches of B_mini = 32 groups. The optimizer update uses a stand-in policy (a bigram
model over the tokenizer's vocabulary, 16
hidden units, no attention); ``--updates`` of them are timed and the stage's 1024 extrapolated.

Each size runs in a fresh process, so its peak RSS is its own. Printed per size: time per phase,
peak RSS of the trainer process (and of the verifier's worker processes), the store's size on
disk, and CPU milliseconds per response while generating, verifying and storing: the trainer
process (all its threads: pipeline, store writer; the engine's own sampling and decoding taken
out, measured on its thread), the verifier process (started as the trainer starts it, in a process
of its own, math only: no code sandbox) and its math-verify workers, from /proc. Memory must stay flat in the
stage size: only a bounded number of groups is held while
generating (``VerifyPipeline.max_pending``), one shard while writing, one shard while reading.

Deviations from a real run: the data set is synthetic arithmetic (40,315 problems with answers);
responses are random text, so nearly all are wrong and the update has no signal (timing only);
the tiny policy's tokenizer (1,024 tokens) stands in for a real one.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

MB = 1024 * 1024


def synthetic_math(n: int, seed: int = 0) -> list[Any]:
    """``n`` arithmetic problems with their answers, as math TaskRecords (DeepScaleR stands in)."""
    from mucode.data.types import TaskRecord

    rng = random.Random(seed)
    records = []
    for i in range(n):
        a, b, c = rng.randint(2, 999), rng.randint(2, 99), rng.randint(1, 9999)
        text = (
            f"Problem {i}. A store sells {a} boxes with {b} pencils in each box, and then receives {c} "
            f"more pencils. How many pencils does it have in total? Let's think step by step and output "
            f"the final answer within \\boxed{{}}."
        )
        records.append(
            TaskRecord(
                prompt_id=f"syn-{i}",
                messages=[{"role": "user", "content": text}],
                program="math",
                spec={"answer": str(a * b + c)},
            )
        )
    return records


class _Timed:
    """Accumulates the time spent inside a generator (the engine) or a method (the store's flush)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.cpu_s = 0.0
        """CPU time of the calling thread inside the generator (the engine runs on the trainer's thread)."""

    def wrap_iter(self, it: Any) -> Any:
        while True:
            start, cpu = time.perf_counter(), time.thread_time()
            try:
                item = next(it)
            except StopIteration:
                self.seconds += time.perf_counter() - start
                self.cpu_s += time.thread_time() - cpu
                return
            self.seconds += time.perf_counter() - start
            self.cpu_s += time.thread_time() - cpu
            yield item

    def wrap_call(self, fn: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        return call


def stand_in_policy(vocab_size: int, hidden: int = 16) -> Any:
    """A bigram policy (embedding → linear head over the tokenizer's vocabulary, no attention) with the
    call signature the trainer uses: the optimizer's machinery (micro-batching, padding, log-probs, the
    objective, backward, AdamW) runs for real while the model's arithmetic is a small fraction of a
    transformer's (attention over 3k-token rows would dominate on a CPU and say nothing about the stage)."""
    import torch
    from torch import nn

    class BigramPolicy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(vocab_size, hidden)
            self.head = nn.Linear(hidden, vocab_size)

        def forward(
            self,
            input_ids: torch.Tensor,
            attention_mask: Any = None,
            position_ids: Any = None,
            use_cache: bool = False,
            logits_to_keep: int = 0,
        ) -> Any:
            hidden_states = self.embed(input_ids if not logits_to_keep else input_ids[:, -logits_to_keep:])
            return SimpleNamespace(logits=self.head(hidden_states))

    torch.manual_seed(0)
    return BigramPolicy()


def _read(path: Path) -> bytes:
    """A /proc file, or nothing when its thread or process ended between listing and reading."""
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _cpu_s(pid: int) -> float:
    stat = _read(Path(f"/proc/{pid}/stat"))
    if not stat:  # the process ended
        return 0.0
    fields = stat.rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    return [int(c) for task in Path(f"/proc/{pid}/task").iterdir() for c in _read(task / "children").split()]


def _verifier_cpu() -> tuple[float, float]:
    """CPU seconds of the spawned verifier process itself and of its math workers."""
    service = [
        c for c in _children(os.getpid()) if b"mucode.verifier.spawn" in _read(Path(f"/proc/{c}/cmdline"))
    ]
    if not service:
        return 0.0, 0.0
    return _cpu_s(service[0]), sum(_cpu_s(w) for w in _children(service[0]))


def _rss_mb() -> tuple[float, float]:
    me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return me, children


def run_stage(
    out: Path,
    *,
    prompts: int,
    samples: int,
    prompts_per_update: int,
    dataset: int,
    mean_response_tokens: float,
    max_response_tokens: int,
    updates: int,
    seed: int = 0,
    math_workers: int | None = None,
) -> dict[str, Any]:
    """One stage of ``prompts`` × ``samples`` responses end to end; returns the figures."""
    from transformers import AutoTokenizer

    from mucode.assets import resolve_model_path
    from mucode.config import load_config
    from mucode.data.prompts import render_prompt
    from mucode.protocol import Connection
    from mucode.rollout.factory import make_engine
    from mucode.rollout.types import SamplingParams
    from mucode.train.distributed import DistInfo
    from mucode.train.loop import stage_prompts
    from mucode.train.optimize import Updater, UpdateSettings, make_optimizer
    from mucode.train.preflight import drop_long_prompts
    from mucode.train.rollout_phase import generate_stage
    from mucode.train.store import StageStore, StageWriter
    from mucode.train.verify import VerifyPipeline
    from mucode.verifier.spawn import spawned_verifier

    figures: dict[str, Any] = {"prompts": prompts, "responses": prompts * samples}
    times: dict[str, float] = {}
    tiny = resolve_model_path("tiny")
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    records = synthetic_math(dataset, seed)

    start = time.perf_counter()
    records, dropped = drop_long_prompts(records, tokenizer, 1024)
    times["prompt filter (tokenize data set)"] = time.perf_counter() - start
    start = time.perf_counter()
    slots = stage_prompts(records, 0, prompts, seed)
    times["prompt selection"] = time.perf_counter() - start
    start = time.perf_counter()
    todo = [(slot, record, render_prompt(tokenizer, record)) for slot, record in slots]
    times["prompt rendering"] = time.perf_counter() - start
    figures["mean_prompt_tokens"] = sum(len(ids) for _, _, ids in todo) / len(todo)
    del slots

    store_dir = out / "stage-0000"
    shutil.rmtree(store_dir, ignore_errors=True)
    writer = StageWriter.create(store_dir, stage=0, expected_groups=prompts, groups_per_shard=64)
    store_timer, engine_timer = _Timed(), _Timed()
    writer.flush = store_timer.wrap_call(writer.flush)  # type: ignore[method-assign]

    class TimedEngine:
        def __init__(self) -> None:
            self.inner = make_engine(
                "dummy",
                tiny,
                SamplingParams(temperature=1.0, max_new_tokens=max_response_tokens, seed=seed),
                batch_size=64,
                mean_response_tokens=mean_response_tokens,
            )

        def generate(self, batch: Any, g: int) -> Any:
            return engine_timer.wrap_iter(iter(self.inner.generate(batch, g)))

        def close(self) -> None:
            self.inner.close()

    # what a math stage needs: the math program and its workers, no code sandbox (run_code off)
    settings = {"programs": ["math"], "run_code": False} | (
        {"math_workers": math_workers} if math_workers else {}
    )
    rss_marks: dict[str, float] = {}
    with spawned_verifier(**settings) as url:  # as the trainer starts it: its own process
        pipeline = VerifyPipeline([url], connection=Connection(timeout_s=600, retries=2))
        try:
            start, cpu = time.perf_counter(), time.process_time()
            service_cpu, workers_cpu = _verifier_cpu()
            stats = generate_stage(
                stage=0,
                engine_factory=TimedEngine,
                prompts=todo,
                samples_per_prompt=samples,
                writer=writer,
                pipeline=pipeline,
                adv_std="unbiased",
                adv_eps=1e-6,
                show_progress=False,
            )
            wall = time.perf_counter() - start
            writer.wait()
            trainer_cpu = time.process_time() - cpu
            service_after, workers_after = _verifier_cpu()
        finally:
            pipeline.close()
    responses = prompts * samples
    figures["cpu_ms_per_response"] = {
        "trainer, engine excluded": 1000 * (trainer_cpu - engine_timer.cpu_s) / responses,
        "engine (dummy)": 1000 * engine_timer.cpu_s / responses,
        "verifier process": 1000 * (service_after - service_cpu) / responses,
        "math workers": 1000 * (workers_after - workers_cpu) / responses,
    }
    figures["verifier_requests"] = pipeline.requests
    start = time.perf_counter()
    writer.finish(extra_meta={"rollout": stats.as_metrics()})
    finish_s = time.perf_counter() - start
    rss_marks["after generation"] = _rss_mb()[0]
    times["generation (dummy engine)"] = engine_timer.seconds
    times["store write"] = store_timer.seconds + finish_s
    times["verification tail (after generation)"] = stats.times.get("time/verify", 0.0)
    times["generate+verify+store (wall)"] = wall + finish_s
    figures["verifier_busy_s"] = stats.times.get("verifier/busy_s", 0.0)
    figures["statuses"] = stats.statuses
    figures["masked"] = stats.masked
    figures["mean_response_tokens"] = stats.response_tokens / max(1, stats.responses)
    del todo, writer

    start = time.perf_counter()
    store = StageStore.open(store_dir)
    times["store open (checksums)"] = time.perf_counter() - start
    figures["store_bytes"] = sum(p.stat().st_size for p in store_dir.iterdir())
    figures["store_shards"] = len(store.manifest.shards)
    mu = prompts // prompts_per_update

    cfg = load_config("tiny", ["batch.micro_batch_tokens=16384", "train.log_entropy=false"])
    model = stand_in_policy(len(tokenizer))
    optimizer, scheduler = make_optimizer(model, cfg.optim)
    update_settings = UpdateSettings.from_config(cfg)
    pad = tokenizer.pad_token_id or 0
    updater = Updater(model, optimizer, scheduler, update_settings, DistInfo(), pad_token_id=pad)
    read_s = update_s = 0.0
    read = 0
    tick = time.perf_counter()
    for index, minibatch in enumerate(store.minibatches(prompts_per_update, seed=seed, count=mu)):
        read_s += time.perf_counter() - tick
        read += len(minibatch)
        if index < updates:
            begin = time.perf_counter()
            updater.step(minibatch)
            update_s += time.perf_counter() - begin
        tick = time.perf_counter()
    assert read == mu * prompts_per_update, (read, mu, prompts_per_update)
    rss_marks["after minibatch read and updates"] = _rss_mb()[0]
    times["minibatch read (all μ)"] = read_s
    done = min(updates, mu)
    times[f"update (stand-in policy, {done} timed)"] = update_s
    times[f"update (extrapolated to μ={mu})"] = update_s / max(1, done) * mu
    figures["mu"] = mu
    figures["times"] = times
    figures["dropped_long_prompts"] = dropped
    me, children = _rss_mb()
    figures["peak_rss_mb"] = me
    figures["peak_rss_after_generation_mb"] = rss_marks["after generation"]
    figures["peak_rss_children_mb"] = children
    return figures


def _report(rows: list[dict[str, Any]]) -> str:
    lines = []
    phases = list(rows[-1]["times"])
    header = f"{'phase':<42}" + "".join(f"{r['responses']:>14,}" for r in rows)
    lines += [f"responses per stage →{'':21}" + "".join(f"{'':>14}" for _ in rows), header, "-" * len(header)]
    for phase in phases:
        lines.append(
            f"{phase + ' (s)':<42}" + "".join(f"{r['times'].get(phase, float('nan')):>14.1f}" for r in rows)
        )
    for key, label, scale in [
        ("peak_rss_after_generation_mb", "peak RSS after generation+store (MB)", 1),
        ("peak_rss_mb", "peak RSS, whole stage (MB)", 1),
        ("peak_rss_children_mb", "peak RSS of a verifier worker (MB)", 1),
        ("store_bytes", "store on disk (MB)", MB),
        ("store_shards", "store shards", 1),
        ("mean_prompt_tokens", "mean prompt tokens", 1),
        ("mean_response_tokens", "mean response tokens", 1),
        ("verifier_busy_s", "verifier busy (sum of latencies, s)", 1),
    ]:
        lines.append(f"{label:<42}" + "".join(f"{r[key] / scale:>14,.1f}" for r in rows))
    for part in rows[-1]["cpu_ms_per_response"]:
        lines.append(
            f"{'CPU ms/response, ' + part:<42}"
            + "".join(f"{r['cpu_ms_per_response'][part]:>14.3f}" for r in rows)
        )
    lines.append(f"{'verifier requests':<42}" + "".join(f"{r['verifier_requests']:>14,}" for r in rows))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fractions", default="0.125,0.5,1", help="stage sizes as fractions of --prompts")
    parser.add_argument("--prompts", type=int, default=32_768, help="B_train of the full stage")
    parser.add_argument("--samples", type=int, default=8, help="G")
    parser.add_argument("--prompts-per-update", type=int, default=32, help="B_mini")
    parser.add_argument(
        "--dataset", type=int, default=40_315, help="prompts in the data set (DeepScaleR: 40,315)"
    )
    parser.add_argument("--mean-response-tokens", type=float, default=512)
    parser.add_argument("--max-response-tokens", type=int, default=3072)
    parser.add_argument("--updates", type=int, default=4, help="updates timed with the stand-in policy")
    parser.add_argument("--math-workers", type=int, default=None)
    parser.add_argument("--out", type=Path, default=Path("runs/bench-paper-scale"))
    parser.add_argument("--keep", action="store_true", help="keep the stage stores")
    parser.add_argument("--one", type=float, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    common = dict(
        samples=args.samples,
        prompts_per_update=args.prompts_per_update,
        dataset=args.dataset,
        mean_response_tokens=args.mean_response_tokens,
        max_response_tokens=args.max_response_tokens,
        updates=args.updates,
        math_workers=args.math_workers,
    )
    if args.one is not None:  # a child process: one size, figures as JSON on the last line
        prompts = max(args.prompts_per_update, int(args.prompts * args.one))
        out = args.out / f"size-{prompts}"
        figures = run_stage(out, prompts=prompts, **common)  # type: ignore[arg-type]
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)
        print(json.dumps(figures), flush=True)
        return
    rows = []
    for fraction in [float(f) for f in args.fractions.split(",")]:
        cmd = [
            sys.executable,
            __file__,
            "--one",
            str(fraction),
            *(argv if argv is not None else sys.argv[1:]),
        ]
        print(f"running {fraction:g} of the stage: {' '.join(cmd[1:])}", flush=True)
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(done.stdout[-3000:], done.stderr[-5000:], file=sys.stderr)
            raise SystemExit(f"the {fraction:g} run failed (exit {done.returncode})")
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        figures["process_wall_s"] = time.perf_counter() - start
        rows.append(figures)
        print(json.dumps(figures), flush=True)
        print(_report(rows), flush=True)
    print("\n" + _report(rows))


if __name__ == "__main__":
    main()
