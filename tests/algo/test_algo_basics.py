"""Registry, modes, advantages, ratios and denominators: hand-computed cases and a loop reference."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import mucode.algo as algo
from mucode.algo import (
    DuplicateNameError,
    GRPOParams,
    LossAggregation,
    MuGRPOParams,
    Objective,
    Registry,
    UnknownNameError,
    get_objective,
    group_advantages,
    loss_denominator,
    objective_names,
    register_objective,
)


def test_registry_rejects_duplicates_and_lists_valid_names() -> None:
    reg: Registry[int] = Registry("widget")
    reg.register("a", 1)
    with pytest.raises(DuplicateNameError, match="already registered"):
        reg.register("a", 2)
    assert reg.get("a") == 1
    with pytest.raises(UnknownNameError, match="valid names: a"):
        reg.get("b")


def test_objective_registry_has_builtins_and_rejects_a_second_mu_grpo() -> None:
    assert {"grpo", "mu_grpo", "m2po"} <= set(objective_names())
    with pytest.raises(UnknownNameError, match="agpo, conspo, grpo, m2po, mu_grpo, offpolicy_grpo"):
        get_objective("mu-grpo")
    clash = Objective(name="mu_grpo", params_type=MuGRPOParams, loss_fn=get_objective("mu_grpo").loss_fn)
    with pytest.raises(DuplicateNameError):
        register_objective(clash)


def test_wrong_params_type_and_bad_modes_fail_with_a_fix() -> None:
    mu = get_objective("mu_grpo")
    x = torch.zeros(1, 2)
    with pytest.raises(TypeError, match="MuGRPOParams"):
        mu(x, x, torch.zeros(1), torch.ones(1, 2), GRPOParams())
    with pytest.raises(ValueError, match="'sequence'"):
        MuGRPOParams(veto_scope="seq")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="token-mean"):
        MuGRPOParams(aggregation="mean")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="τ_c"):
        MuGRPOParams(veto_threshold=0.0)
    with pytest.raises(ValueError, match="dual_clip"):
        GRPOParams(dual_clip=0.5)
    with pytest.raises(ValueError, match=r"advantages must be \[B\]"):
        mu(x, x, torch.zeros(1, 2), torch.ones(1, 2))


def test_algo_imports_only_torch_and_stdlib() -> None:
    import ast
    import pathlib
    import sys

    allowed = {"torch", "mucode"} | set(sys.stdlib_module_names)
    root = pathlib.Path(algo.__file__).parent
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                assert top in allowed, f"{path.name} imports {name}"
                if top == "mucode":
                    # mucode.registry is the shared, standard-library-only name registry
                    assert name.startswith("mucode.algo") or name == "mucode.registry", (
                        f"{path.name} imports {name}"
                    )


# --- advantages -------------------------------------------------------------------------------


def test_group_advantages_hand_computed() -> None:
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    g = torch.tensor([7, 7, 7, 7, 3, 3, 3])  # non-contiguous ids; group 3 all equal
    unbiased = group_advantages(r, g, std="unbiased", eps=0.0)
    s = math.sqrt(1 / 3)  # sample std of [1, 0, 0, 1]
    torch.testing.assert_close(unbiased, torch.tensor([0.5 / s, -0.5 / s, -0.5 / s, 0.5 / s, 0, 0, 0]))
    population = group_advantages(r, g, std="population", eps=0.0)
    torch.testing.assert_close(population, torch.tensor([1.0, -1, -1, 1, 0, 0, 0]))
    dr = group_advantages(r, g, std="none")
    torch.testing.assert_close(dr, torch.tensor([0.5, -0.5, -0.5, 0.5, 0, 0, 0]))
    with_eps = group_advantages(r, g, std="population", eps=0.5)
    torch.testing.assert_close(with_eps[:4], torch.tensor([0.5, -0.5, -0.5, 0.5]))


def test_group_advantages_equal_groups_singletons_and_invalid_are_exactly_zero() -> None:
    r = torch.tensor([0.1, 0.1, 0.1, 0.7, 1.0, 0.0, 5.0])
    g = torch.tensor([0, 0, 0, 1, 2, 2, 2])
    valid = torch.tensor([True, True, True, True, True, True, False])
    for std in ("unbiased", "population", "none"):
        a = group_advantages(r, g, std=std, valid=valid)
        assert a[:4].eq(0).all(), std  # all-equal group and a singleton group
        assert a[6] == 0  # invalid response
        assert a[4] > 0 > a[5]  # group 2 statistics ignore the invalid 5.0
        torch.testing.assert_close(a[4], -a[5])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 4), st.sampled_from([0.0, 1.0, 0.5])), min_size=1, max_size=20),
    st.sampled_from(["unbiased", "population", "none"]),
)
def test_group_advantages_match_a_per_group_loop(pairs: list[tuple[int, float]], std: str) -> None:
    g = torch.tensor([p[0] for p in pairs])
    r = torch.tensor([p[1] for p in pairs])
    got = group_advantages(r, g, std=std, eps=1e-6)
    for gid in set(g.tolist()):
        vals = [p[1] for p in pairs if p[0] == gid]
        n, mean = len(vals), sum(vals) / len(vals)
        for k, p in enumerate(pairs):
            if p[0] != gid:
                continue
            if max(vals) == min(vals) or (std == "unbiased" and n < 2):
                expected = 0.0
            elif std == "none":
                expected = p[1] - mean
            else:
                var = sum((v - mean) ** 2 for v in vals) / (n - 1 if std == "unbiased" else n)
                expected = (p[1] - mean) / (math.sqrt(var) + 1e-6)
            assert got[k].item() == pytest.approx(expected, rel=1e-5, abs=1e-6)


# --- denominators -----------------------------------------------------------------------------


def test_loss_denominators_count_every_response_with_tokens() -> None:
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]], dtype=torch.bool)
    assert loss_denominator(mask, "seq-mean-token-mean") == 2.0  # the empty row is padding
    assert loss_denominator(mask, LossAggregation.TOKEN_MEAN) == 4.0
    assert loss_denominator(mask, "seq-mean-token-sum-norm") == 8.0  # 2 responses × L=4
    assert loss_denominator(mask, "seq-mean-token-sum-norm", norm_length=10) == 20.0
    with pytest.raises(ValueError, match="denominator must be > 0"):
        get_objective("grpo")(torch.zeros(3, 4), torch.zeros(3, 4), torch.ones(3), mask, denominator=0.0)


def test_ratio_guard_clamps_only_outside_twenty() -> None:
    lr = torch.tensor([-30.0, -19.0, 0.0, 19.0, 30.0], requires_grad=True)
    rho = algo.ratio(lr)
    rho.sum().backward()
    torch.testing.assert_close(rho.detach(), torch.exp(torch.tensor([-20.0, -19, 0, 19, 20])))
    assert lr.grad is not None
    assert lr.grad[0] == 0 and lr.grad[-1] == 0
    torch.testing.assert_close(lr.grad[1:4], rho.detach()[1:4])


def test_half_precision_logprobs_are_computed_in_float32() -> None:
    lp = torch.randn(3, 5).to(torch.bfloat16).requires_grad_()
    b = torch.randn(3, 5).to(torch.bfloat16)
    loss, _ = get_objective("mu_grpo")(lp, b, torch.tensor([1.0, -1.0, 0.5]), torch.ones(3, 5))
    assert loss.dtype == torch.float32
    loss.backward()
    assert lp.grad is not None and lp.grad.dtype == torch.bfloat16
