"""One study run in this process: ``python -m mucode.study.worker SPEC.json`` (or ``--base CACHE SEED STEPS FORM``).

The run is mucode's own trainer (``run_training``) on the chain task's records, from the seed's cached
base, scoring in-process with the ``chain`` reward program (no HTTP) or, for the code form, through the
trainer's own verifier path (a local verifier serving the ``code`` program with the ``local`` sandbox
backend, over loopback HTTP), with the held-out hook; on
success it writes ``done.json`` (the run's summary totals) into the run directory. A run directory
that already holds the trainer's ``config.yaml`` is resumed (``run_training(resume=True)``: the latest
checkpoint, the stage stores already written).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mucode.config import load_config
from mucode.data.chain import chain_records
from mucode.rewards.chain import ChainReward
from mucode.study.base import BaseRecipe, ensure_base
from mucode.study.grid import TASKS
from mucode.study.heldout import heldout_hook
from mucode.train.inprocess import in_process_verifier
from mucode.train.loop import run_training

__all__ = ["main", "run_spec"]


def run_spec(spec: dict[str, object]) -> dict[str, object]:
    """Train the run ``spec`` describes (a :class:`mucode.study.runner.RunSpec` as a dict)."""
    form = TASKS[str(spec.get("task", "chain"))]
    recipe = BaseRecipe(steps=int(spec.get("base_steps", 600)), form=form)  # type: ignore[call-overload]
    base = ensure_base(Path(str(spec["cache"])), int(spec["seed"]), recipe)  # type: ignore[call-overload]
    overrides = [*spec["overrides"], f"model.path={base}"]  # type: ignore[misc]
    cfg = load_config(str(spec["preset"]), overrides)
    run_dir = Path(str(spec["run_dir"]))
    # the plain form is scored in this process; the code form by the trainer's own (local) verifier
    verifier = in_process_verifier({"chain": ChainReward()}) if form == "plain" else None
    try:
        result = run_training(
            cfg,
            resume=(run_dir / "config.yaml").exists(),
            records=chain_records(form=form),
            verifier=verifier,
            update_hook=heldout_hook(int(spec["heldout_every"]), int(spec["heldout_samples"]), form),  # type: ignore[call-overload]
        )
    finally:
        if verifier is not None:
            verifier.pipeline.close()
    totals = result.summary.get("totals", result.summary)
    done = {"base": str(base), "global_update": result.state.global_update, "totals": totals}
    (run_dir / "done.json").write_text(json.dumps(done, indent=2, default=str) + "\n")
    return done


def main(argv: list[str]) -> int:
    if argv[:1] == ["--base"]:
        ensure_base(Path(argv[1]), int(argv[2]), BaseRecipe(steps=int(argv[3]), form=argv[4]))
        return 0
    run_spec(json.loads(Path(argv[0]).read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
