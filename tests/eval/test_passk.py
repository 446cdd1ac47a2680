"""pass@k against brute-force enumeration of k-subsets, and its numerical stability."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mucode.eval import pass_at_k, pass_at_k_table
from mucode.eval.passk import mean_pass_at_k


def brute_force(n: int, c: int, k: int) -> Fraction:
    """Fraction of k-subsets of n samples (the first c correct) that hold a correct sample."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    hits = sum(any(samples[i] for i in subset) for subset in subsets)
    return Fraction(hits, len(subsets))


@pytest.mark.parametrize("n", range(1, 9))
def test_equals_brute_force_for_every_c_and_k(n: int) -> None:
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(float(brute_force(n, c, k)), abs=1e-12), (n, c, k)


@given(st.integers(1, 3000).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_matches_exact_rational_for_large_n(args: tuple[int, int, int]) -> None:
    n, c, k = args
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    value = pass_at_k(n, c, k)
    assert 0.0 <= value <= 1.0
    assert value == pytest.approx(float(exact), rel=1e-9, abs=1e-12)


def test_naive_binomial_formula_overflows_where_ours_does_not() -> None:
    with pytest.raises(OverflowError):
        _ = 1 - float(math.comb(2000, 1000)) / float(math.comb(3000, 1000))  # a direct float implementation
    assert pass_at_k(3000, 1000, 1000) == pytest.approx(1.0)
    assert pass_at_k(3000, 1, 1000) == pytest.approx(1000 / 3000)


def test_pass_at_1_is_the_fraction_correct() -> None:
    for n in range(1, 20):
        for c in range(n + 1):
            assert pass_at_k(n, c, 1) == pytest.approx(c / n)


@pytest.mark.parametrize(("n", "c", "k"), [(0, 0, 1), (4, 5, 1), (4, -1, 1), (4, 2, 0), (4, 2, 5)])
def test_rejects_impossible_arguments(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_table_averages_problems_and_skips_those_with_too_few_samples() -> None:
    counts = [(4, 1), (4, 4), (2, 0)]
    table = pass_at_k_table(counts)
    assert table["pass@1"] == pytest.approx((1 / 4 + 1 + 0) / 3)
    assert table["pass@4"] == pytest.approx((1 + 1) / 2)  # the n=2 problem cannot give pass@4
    assert mean_pass_at_k(counts, 3)[1] == 2
    assert set(table) == {"pass@1", "pass@2", "pass@3", "pass@4"}
