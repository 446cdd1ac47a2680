"""A plug-in objective, installed through a real ``mucode.objectives`` entry point, is selected by
``algo.objective=NAME`` in a tiny training run, takes its own typed parameters from the config, and
its loss is the one the optimizer steps on.

The plug-in is a distribution on ``sys.path`` (a module plus a ``*.dist-info`` with METADATA and
``entry_points.txt``), found by ``importlib.metadata`` like any installed package. The registry
loads plug-ins on first lookup and keeps them, so the fixture calls ``OBJECTIVES.refresh()`` (the
public way to re-read entry points) after putting the distribution on the path and after removing it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from plugin_dist import write_dist
from train_helpers import run_overrides, write_tasks

from mucode.algo import OBJECTIVES
from mucode.config import ConfigError, load_config

PLUGIN = '''
"""A plug-in objective for mucode's tests: the plain policy-gradient surrogate, scaled by ``weight``,
that appends one line per call to the file named by MUCODE_TEST_OBJECTIVE_LOG."""
import os
from dataclasses import dataclass

from mucode.algo import Objective, ObjectiveParams


@dataclass(frozen=True)
class CountingParams(ObjectiveParams):
    weight: float = 1.0
    """Scales the surrogate."""


def _loss(x, p, prepared, out):
    with open(os.environ["MUCODE_TEST_OBJECTIVE_LOG"], "a") as f:
        f.write(f"{p.weight} {int(x.mask.sum())}\\n")
    return -(x.rho * x.mask_float * (x.advantages[:, None] * x.scale)).sum() * p.weight


COUNTING = Objective(name="counting", params_type=CountingParams, loss_fn=_loss, summary="test plug-in")


@dataclass(frozen=True)
class GroupMeanParams(ObjectiveParams):
    kl_coef: float = 0.5
    """A reference KL on by default, as the built-in off-policy GRPO has."""


def _group_mean_loss(x, p, prepared, out):
    """ρ·(r − mean of the row's group) per token, the group mean computed from the call's groups."""
    import torch

    means = torch.zeros_like(x.rewards)
    for g in torch.unique(x.groups):
        rows = x.groups == g
        means[rows] = x.rewards[rows].mean()
    with open(os.environ["MUCODE_TEST_OBJECTIVE_LOG"], "a") as f:
        f.write(f"{len(torch.unique(x.groups))} {x.groups.numel()} {x.progress}\\n")
    centred = (x.rewards - means).to(x.rho.dtype)
    return -(x.rho * x.mask_float * (centred[:, None] * x.scale)).sum()


GROUP_MEAN = Objective(name="group_mean", params_type=GroupMeanParams, loss_fn=_group_mean_loss,
                       summary="test plug-in reading groups", uses_groups=True)
'''


@pytest.fixture()
def objective_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The ``counting`` objective installed as a distribution on sys.path; yields its call log."""
    root = write_dist(
        tmp_path / "site",
        "mucode_test_objective",
        PLUGIN,
        "mucode.objectives",
        {"counting": "COUNTING", "group_mean": "GROUP_MEAN"},
    )
    monkeypatch.syspath_prepend(str(root))
    log = tmp_path / "calls.log"
    monkeypatch.setenv("MUCODE_TEST_OBJECTIVE_LOG", str(log))
    OBJECTIVES.refresh()  # entry points are read once per process: read them again, with the plug-in
    yield log
    monkeypatch.undo()
    OBJECTIVES.refresh()  # later tests must not see it


def test_plugin_objective_is_selected_from_the_config_and_its_loss_is_used(
    objective_plugin: Path, small_policy: Path, plugins_on_path: Path, tmp_path: Path
) -> None:
    from mucode.train.loop import run_training

    data = write_tasks(tmp_path / "tasks.jsonl", "parity", n=4)
    run_dir = tmp_path / "run"
    overrides = run_overrides(
        small_policy,
        data,
        run_dir,
        algo__objective="counting",
        algo__weight=0.5,
        batch__updates_per_stage=2,
        batch__num_stages=1,
    )
    cfg = load_config(None, overrides)
    assert type(cfg.algo.params).__name__ == "CountingParams" and cfg.algo.params.weight == 0.5
    run_training(cfg)

    calls = objective_plugin.read_text().splitlines()
    rows = [
        json.loads(line)
        for line in (run_dir / "metrics.jsonl").read_text().splitlines()
        if '"event"' not in line
    ]
    assert [r["update"] for r in rows] == [1, 2]
    # one call per micro-batch of every update, each with the configured weight and real tokens
    assert len(calls) == sum(r["batch/micro_batches"] for r in rows) >= 2
    assert all(c.split()[0] == "0.5" and int(c.split()[1]) > 0 for c in calls)
    saved = (run_dir / "config.yaml").read_text()
    assert "objective: counting" in saved and "weight: 0.5" in saved


def test_plugin_objective_gets_whole_groups_their_rewards_and_the_reference_kl(
    objective_plugin: Path, small_policy: Path, plugins_on_path: Path, tmp_path: Path
) -> None:
    """An out-of-tree objective that reads groups and inherits the reference KL, as the built-ins do."""
    from mucode.train.loop import run_training

    data = write_tasks(tmp_path / "tasks.jsonl", "parity", n=4)
    run_dir = tmp_path / "run"
    overrides = run_overrides(
        small_policy,
        data,
        run_dir,
        algo__objective="group_mean",
        batch__updates_per_stage=2,
        batch__num_stages=2,
        batch__micro_batch_tokens=64,
        reference__reset_every_stages=1,
    )
    cfg = load_config(None, overrides)
    assert cfg.algo.params.kl_coef == 0.5
    run_training(cfg)

    calls = [line.split() for line in objective_plugin.read_text().splitlines()]
    assert calls and all(
        int(rows) == 4 * int(n_groups) for n_groups, rows, _ in calls
    )  # whole groups of G = 4
    assert sorted({float(progress) for *_, progress in calls}) == [0.0, 0.25, 0.5, 0.75]
    rows = [
        json.loads(line)
        for line in (run_dir / "metrics.jsonl").read_text().splitlines()
        if '"event"' not in line
    ]
    kl = [r["kl/ref"] for r in rows]
    assert kl[0] == pytest.approx(0.0, abs=1e-6)  # π_ref is the starting policy, π_θ has not moved yet
    assert kl[1] > 1e-6  # after one update it has
    assert kl[2] == pytest.approx(0.0, abs=1e-6)  # reset to the current policy at stage 1
    assert all(r["groups/count"] == 2 for r in rows)


def test_plugin_objective_params_are_its_own(objective_plugin: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, ["algo.objective=counting", "algo.veto_scope=sequence"])
    assert "veto_scope: not a parameter of algo.objective=counting (CountingParams)" in str(err.value)
    assert "weight" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(
        ConfigError,
        match=r"valid names: agpo, conspo, counting, group_mean, grpo, m2po, mu_grpo, offpolicy_grpo",
    ):
        load_config(None, ["algo.objective=sgd"])


def test_verl_config_refuses_a_plugin_objective_in_one_line(objective_plugin: Path) -> None:
    from typer.testing import CliRunner

    from mucode.cli import get_app

    result = CliRunner().invoke(get_app(), ["verl-config", "algo.objective=counting"])
    assert result.exit_code == 2, result.output
    assert (
        result.output.strip()
        == "algo.objective=counting has no verl loss; verl-config supports grpo, m2po, mu_grpo, offpolicy_grpo"
    )
