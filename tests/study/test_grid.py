"""The built-in studies resolve to valid configs; ``methods`` follows the objective registry."""

from __future__ import annotations

from pathlib import Path

import pytest

from mucode.algo.catalog import objective_names
from mucode.config import load_config
from mucode.study.grid import STUDIES, get_study, methods_study
from mucode.study.runner import grid


@pytest.mark.parametrize("name", [*STUDIES, "methods"])
def test_every_variant_of_every_study_is_a_valid_config(name: str, tmp_path: Path) -> None:
    study = get_study(name)
    for spec in grid(study, tmp_path, 1):
        cfg = load_config(spec.preset, [*spec.overrides, "model.path=tiny"])
        b = cfg.batch
        assert b.updates_per_stage * b.num_stages == study.updates
        assert (b.samples_per_prompt, b.prompts_per_update, cfg.optim.lr) == (8, 16, 6e-4)


def test_veto_scopes_sets_each_scope_and_the_baselines() -> None:
    specs = grid(get_study("veto-scopes"), Path("r"), 1)
    configs = {s.variant: load_config(s.preset, [*s.overrides, "model.path=tiny"]) for s in specs}
    assert configs["GRPO mu=4"].batch.updates_per_stage == 4 and configs["GRPO mu=4"].algo.objective == "grpo"
    assert configs["GRPO clip=0.2"].batch.updates_per_stage == 256
    for scope in ("none", "trigger", "suffix", "nontrigger_suffix", "sequence"):
        assert configs[f"veto={scope}"].algo.params.veto_scope.value == scope


def test_methods_has_one_variant_per_registered_objective() -> None:
    names = [v.name.split(" ")[0] for v in methods_study().variants]
    assert names == list(objective_names())


def test_the_grid_is_seed_major_and_the_code_task_runs_a_local_sandbox() -> None:
    specs = grid(get_study("veto-scopes"), Path("r"), 2, variants=["veto=none", "veto=sequence"])
    assert [(s.variant, s.seed) for s in specs] == [
        ("veto=none", 0), ("veto=sequence", 0), ("veto=none", 1), ("veto=sequence", 1),
    ]  # fmt: skip
    plain = load_config(specs[0].preset, [*specs[0].overrides, "model.path=tiny"])
    code_spec = grid(get_study("veto-scopes"), Path("r"), 1, variants=["veto=none"], task="chain-code")[0]
    code = load_config(code_spec.preset, [*code_spec.overrides, "model.path=tiny"])
    budgets = (plain.rollout.max_response_tokens, code.rollout.max_response_tokens)
    assert budgets == (18, 20)  # the answer and the stop token
    assert code.verifier.backend == "local" and not code.verifier.url and code_spec.form == "code"
    with pytest.raises(KeyError, match="tasks: chain, chain-code"):
        grid(get_study("tau"), Path("r"), 1, task="chain-sql")
