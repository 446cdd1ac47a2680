"""A study's grid (variants × seeds) as real ``run_training`` runs, each in its own worker process.

Layout under the study's root (default ``runs/study/<name>``): ``bases/`` (the cached base per seed,
:mod:`mucode.study.base`), ``runs/<variant>/seed-<S>/`` (a run directory as ``mucode train`` writes
it, plus ``spec.json``, ``worker.log`` and, when it finished, ``done.json``). Resumable: a run with
``done.json`` is skipped; a run the trainer had started (its ``config.yaml`` is there) is resumed by the
trainer's own ``resume`` (from its latest checkpoint, every 64 updates and at stage ends; a stage
store being written is finished, not redone); one that never got that far starts from scratch (its
directory is cleared). The grid is ordered seed-major (every variant's seed 0, then seed 1, …), so
a study stopped half-way has every variant at the same number of seeds. Up to ``jobs`` workers run at
once (``python -m mucode.study.worker spec.json``: one process each, so a crash or a hang costs one
run, and each gets its own torch thread).
A failed run is reported with the tail of its log and never hidden from the report.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mucode.data.chain import response_budget
from mucode.study.grid import COMMON, TASKS, Study, Variant

__all__ = ["RunSpec", "grid", "run_grid", "slug"]


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9.=_-]+", "_", name).strip("_")


@dataclass(frozen=True)
class RunSpec:
    study: str
    variant: str
    seed: int
    preset: str
    overrides: list[str]
    run_dir: str
    cache: str
    heldout_every: int
    heldout_samples: int
    base_steps: int = 600
    """Supervised steps of the seed's base (``BaseRecipe.steps``; fewer: a weaker base, for quick checks)."""
    task: str = "chain"
    """A name in :data:`mucode.study.grid.TASKS`: the plain chain task, or its code form (sandbox)."""

    @property
    def form(self) -> str:
        return TASKS[self.task]

    @property
    def path(self) -> Path:
        return Path(self.run_dir)

    def done(self) -> bool:
        return (self.path / "done.json").exists()

    def started(self) -> bool:
        """The trainer began this run (its ``config.yaml`` is written): the worker resumes it."""
        return (self.path / "config.yaml").exists()


CHECKPOINT_EVERY = 64
"""Updates between two checkpoints of a study run (what a killed run loses at most); a tiny policy's
checkpoint costs milliseconds."""


def _variant_overrides(
    study: Study, v: Variant, updates: int, seed: int, run_dir: Path, task: str
) -> list[str]:
    mu = min(v.mu or study.mu, updates)
    stages = max(1, updates // mu)
    form = TASKS[task]
    return [
        *COMMON,
        f"rollout.max_response_tokens={response_budget(form)}",  # the answer and the stop token
        *(["verifier.backend=local"] if form == "code" else []),  # a local verifier, the local sandbox
        *v.overrides,
        f"batch.updates_per_stage={mu}",
        f"batch.num_stages={stages}",
        f"train.checkpoint_every={CHECKPOINT_EVERY}",
        f"train.seed={seed}",
        f"rollout.seed={seed}",
        f"data.shuffle_seed={seed}",
        f"train.run_dir={run_dir}",
        f"train.run_name={slug(v.name)}-seed{seed}",
    ]


def grid(
    study: Study,
    root: Path,
    seeds: int,
    *,
    updates: int | None = None,
    variants: list[str] | None = None,
    heldout_every: int = 16,
    heldout_samples: int = 4,
    base_steps: int = 600,
    task: str = "chain",
) -> list[RunSpec]:
    """The study's runs: every (selected) variant × seeds 0 … seeds-1, seed-major (all variants' seed 0
    first), so that a study interrupted half-way has the same seeds of every variant."""
    chosen = [v for v in study.variants if variants is None or v.name in variants or slug(v.name) in variants]
    if variants is not None and not chosen:
        names = ", ".join(repr(slug(v.name)) for v in study.variants)
        raise KeyError(f"no variant of {study.name!r} matches {variants}; variants: {names}")
    if task not in TASKS:
        raise KeyError(f"unknown study task {task!r}; tasks: {', '.join(TASKS)}")
    total = updates or study.updates
    specs = []
    for seed in range(seeds):
        for v in chosen:
            run_dir = root / "runs" / slug(v.name) / f"seed-{seed}"
            specs.append(
                RunSpec(
                    study=study.name,
                    variant=v.name,
                    seed=seed,
                    preset=v.preset,
                    overrides=_variant_overrides(study, v, total, seed, run_dir, task),
                    run_dir=str(run_dir),
                    cache=str(root / "bases"),
                    heldout_every=heldout_every,
                    heldout_samples=heldout_samples,
                    base_steps=base_steps,
                    task=task,
                )
            )
    return specs


def _launch(spec: RunSpec) -> dict[str, Any]:
    """One run in a worker process; its outcome (``ok``, the log's tail on failure)."""
    resume = spec.started()
    if spec.path.exists() and not resume:
        shutil.rmtree(spec.path)  # the trainer never started it: nothing to resume
    spec.path.mkdir(parents=True, exist_ok=True)
    (spec.path / "spec.json").write_text(json.dumps(asdict(spec), indent=2) + "\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    with open(spec.path / "worker.log", "a" if resume else "w") as log:
        code = subprocess.call(
            [sys.executable, "-m", "mucode.study.worker", str(spec.path / "spec.json")],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
    tail = (spec.path / "worker.log").read_text(errors="replace").splitlines()[-5:]
    return {"variant": spec.variant, "seed": spec.seed, "ok": code == 0 and spec.done(), "tail": tail}


def run_grid(specs: list[RunSpec], jobs: int, say: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Run every unfinished spec, ``jobs`` at a time; returns the outcomes of the runs started now
    (finished ones are skipped and not listed). The bases (one per seed) are built one at a time in
    seed order beside the runs, and a run starts once its seed's base is there: the first runs do
    not wait for every seed's base."""
    todo = [s for s in specs if not s.done()]
    skipped = len(specs) - len(todo)
    if skipped:
        say(f"{skipped} of {len(specs)} runs already finished: skipped")
    keys = sorted({_base_key(s) for s in todo}, key=lambda k: (k[1], k))
    with ThreadPoolExecutor(max_workers=1) as builder, ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        bases = {key: builder.submit(_build_base, *key) for key in keys}

        def start(spec: RunSpec) -> dict[str, Any]:
            bases[_base_key(spec)].result()  # its seed's base first (a failed build raises here)
            return _launch(spec)

        outcomes = []
        for outcome in pool.map(start, todo):
            mark = "done" if outcome["ok"] else "FAILED: " + " | ".join(outcome["tail"][-2:])
            say(f"  {outcome['variant']} seed {outcome['seed']}: {mark}")
            outcomes.append(outcome)
    return outcomes


def _base_key(spec: RunSpec) -> tuple[str, int, int, str]:
    return (spec.cache, spec.seed, spec.base_steps, spec.form)


def _build_base(cache: str, seed: int, steps: int, form: str) -> None:
    """The seed's base, built in a worker process (torch is not imported in the study's own process)."""
    subprocess.check_call(
        [sys.executable, "-m", "mucode.study.worker", "--base", cache, str(seed), str(steps), form],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
