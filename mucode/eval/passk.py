"""pass@k: the unbiased estimator of Chen et al. (2021), computed without large binomials.

pass@k of one problem with n samples of which c pass is 1 − C(n−c, k)/C(n, k): the chance that a
k-subset drawn without replacement from the n samples holds at least one passing sample. The ratio of
binomials is evaluated as the product ∏_{i=n−c+1}^{n} (1 − k/i), which stays in [0, 1] and never
forms a binomial, so it is exact to float rounding for any n (math.comb overflows float beyond n≈1000).
A benchmark's pass@k is the mean over its problems.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["mean_pass_at_k", "pass_at_k", "pass_at_k_table"]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem: n samples drawn, c of them correct, budget k (1 ≤ k ≤ n)."""
    if not (isinstance(n, int) and isinstance(c, int) and isinstance(k, int)):
        raise TypeError(f"pass_at_k takes integers, got n={n!r}, c={c!r}, k={k!r}")
    if n < 1 or not 0 <= c <= n:
        raise ValueError(f"pass_at_k needs n ≥ 1 and 0 ≤ c ≤ n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"pass@{k} is undefined with n={n} samples: choose 1 ≤ k ≤ n")
    if n - c < k:  # every k-subset holds a correct sample
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def mean_pass_at_k(counts: Iterable[tuple[int, int]], k: int) -> tuple[float, int]:
    """Mean pass@k over problems given as (n, c) pairs; problems with n < k are left out.

    Returns (mean, number of problems used); the mean is NaN when no problem has k samples.
    """
    values = [pass_at_k(n, c, k) for n, c in counts if n >= k]
    if not values:
        return float("nan"), 0
    return sum(values) / len(values), len(values)


def pass_at_k_table(counts: Sequence[tuple[int, int]], ks: Iterable[int] | None = None) -> dict[str, float]:
    """`{"pass@k": mean}` for every k in `ks` (default: 1 … the largest n) that some problem reaches."""
    if not counts:
        return {}
    max_n = max(n for n, _ in counts)
    chosen = sorted(set(ks)) if ks is not None else list(range(1, max_n + 1))
    table: dict[str, float] = {}
    for k in chosen:
        if k < 1 or k > max_n:
            continue
        mean, used = mean_pass_at_k(counts, k)
        if used:
            table[f"pass@{k}"] = mean
    return table
