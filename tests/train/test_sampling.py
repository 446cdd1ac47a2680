"""The agpo sampling controller's plan from planted probes: statistics, U, and the official EMA
temperature, prompt after prompt and across stages; the registry and its typed params."""

from __future__ import annotations

import math

import pytest

from mucode.components import SAMPLERS
from mucode.config import ConfigError, load_config
from mucode.train.sampling import AGPOController, AGPOSamplingParams, Probe


def test_agpo_plan_follows_the_probe_statistics_and_the_official_temperature() -> None:
    controller = AGPOController(AGPOSamplingParams())
    probes = {
        3: Probe([1.0, 0.0, 0.0, 0.0], ["\\boxed{2}", "\\boxed{3}", "\\boxed{3}", "\\boxed{3}"]),
        5: Probe([1.0, 1.0, math.nan, 0.0], ["\\boxed{2}"] * 4),  # one response failed verification
        7: Probe([0.0, 0.0, 0.0, 0.0], ["a", "b", "c", "d"]),
    }
    plan = controller.plan([3, 5, 7], probes, base_temperature=1.0)
    h3 = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert plan[3]["probe_sigma"] == pytest.approx(0.5) and plan[3]["probe_vote_entropy"] == pytest.approx(h3)
    assert plan[3]["probe_skewness"] == pytest.approx(2.0)
    sigma5 = math.sqrt(((1 - 2 / 3) ** 2 * 2 + (2 / 3) ** 2) / 2)  # the NaN left out: [1, 1, 0]
    assert plan[5]["probe_sigma"] == pytest.approx(sigma5) and plan[5]["probe_vote_entropy"] == 0.0
    assert plan[7]["probe_vote_entropy"] == pytest.approx(math.log(4)) and plan[7]["probe_sigma"] == 0.0
    u = [plan[s]["probe_uncertainty"] for s in (3, 5, 7)]
    assert u == pytest.approx([0.5 + h3, sigma5, math.log(4)])
    ema, want = u[0], [1.0]  # the official update, once per prompt; the first prompt gets c = 0
    for x in u[1:]:
        c = (x - ema) / (ema + 1e-8)
        ema = 0.1 * x + 0.9 * ema
        want.append(min(1.5, max(0.5, 1.0 * (1 + 0.15 * c))))
    assert [plan[s]["temperature"] for s in (3, 5, 7)] == pytest.approx(want)
    again = controller.plan([3], probes, base_temperature=1.0)  # the EMA carries over to the next stage
    assert again[3]["temperature"] == pytest.approx(
        min(1.5, max(0.5, 1 + 0.15 * (u[0] - ema) / (ema + 1e-8)))
    )


def test_sampling_controllers_are_a_registry_with_typed_params() -> None:
    assert {"fixed", "agpo"} <= set(SAMPLERS.names())
    cfg = load_config(None, ["sampling.controller=agpo", "sampling.gain=0.3"])
    assert isinstance(cfg.sampling.params, AGPOSamplingParams) and cfg.sampling.params.gain == 0.3
    with pytest.raises(ConfigError, match="min_temperature"):
        load_config(None, ["sampling.controller=agpo", "sampling.min_temperature=2.0"])
    with pytest.raises(ConfigError, match="gain: not a parameter of fixed"):
        load_config(None, ["sampling.gain=0.3"])
