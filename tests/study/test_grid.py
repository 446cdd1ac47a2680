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
