"""The statistics every stage uses to tell a difference from noise: the mean of repeats
with the half-width of its 95 % interval (Student's t), Welch's t on two means (and its
90 % interval, for the two one-sided tests of equivalence), and Stein's two-stage rule
for how many repeats a target interval needs."""

from __future__ import annotations

import math
import statistics

# two-sided 95 % quantiles of Student's t by degrees of freedom (beyond 30: the normal's)
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
       10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110,
       18: 2.101, 19: 2.093, 20: 2.086, 25: 2.060, 30: 2.042}

def quantile(table: dict[int, float], normal: float, dof: int) -> float:
    """A tabled t quantile at `dof` (the nearest tabled dof below; the normal's from 60)."""
    if dof >= 30:
        return table[30] if dof < 60 else normal
    return table.get(dof) or table[max(k for k in table if k <= dof)]


def t95(dof: int) -> float:
    return quantile(T95, 1.96, dof)


def mean_ci95(values: list[float]) -> tuple[float, float | None]:
    """Mean and the half-width of its 95 % interval (None for a single value)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, None
    return mean, t95(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))


def welch(mean_a: float, se_a: float, n_a: int, mean_b: float, *, se_b: float, n_b: int) -> tuple[float, float]:
    """Difference b - a and the half-width of its 95 % interval (Welch-Satterthwaite dof)."""
    se, dof = welch_se(se_a, n_a, se_b, n_b)
    return mean_b - mean_a, (t95(dof) * se if se else 0.0)


def welch_se(se_a: float, n_a: int, se_b: float, n_b: int) -> tuple[float, int]:
    """The standard error of a difference of two means and its Welch-Satterthwaite dof."""
    se = math.sqrt(se_a ** 2 + se_b ** 2)
    if se == 0:
        return 0.0, 1
    dof = se ** 4 / ((se_a ** 4 / (n_a - 1) if se_a else 0.0) + (se_b ** 4 / (n_b - 1) if se_b else 0.0))
    return se, max(1, int(dof))


# two-sided 90 % quantiles (one-sided 95 %): the two one-sided tests of equivalence at 95 %
T90 = {1: 6.314, 2: 2.920, 3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 7: 1.895, 8: 1.860, 9: 1.833,
       10: 1.812, 11: 1.796, 12: 1.782, 13: 1.771, 14: 1.761, 15: 1.753, 16: 1.746, 17: 1.740,
       18: 1.734, 19: 1.729, 20: 1.725, 25: 1.708, 30: 1.697}


def t90(dof: int) -> float:
    return quantile(T90, 1.645, dof)


def stein_repeats(first: list[float], within: float, most: int) -> tuple[int, float]:
    """Stein's two-stage rule: from the first stage's n0 values alone, the repeats n that
    bring the mean's 95 % interval within +-`within` (a fraction of the mean), at most
    `most`; and the half-width (a fraction) that n repeats give. The interval
    mean(all n) +- t95(n0 - 1) * s0 / sqrt(n) covers the true mean with at least 95 %
    whatever n comes out (n depends on s0 alone, which is independent of the mean under
    normal noise): unlike 'repeat until the interval looks tight', which stops on lucky
    low spreads and so under-covers."""
    n0 = len(first)
    mean = statistics.fmean(first)
    if n0 < 2 or not mean:
        return n0, math.inf
    s0 = statistics.stdev(first)
    needed = math.ceil((t95(n0 - 1) * s0 / (within * abs(mean))) ** 2)
    n = max(n0, min(most, needed))
    return n, t95(n0 - 1) * s0 / math.sqrt(n) / abs(mean)


def welch90(mean_a: float, se_a: float, n_a: int, mean_b: float, *, se_b: float, n_b: int) -> float:
    """The half-width of the 90 % interval of b - a (Welch): the two one-sided tests at 95 %
    find b equivalent to a within +-m where the difference +- this lies inside +-m."""
    se, dof = welch_se(se_a, n_a, se_b, n_b)
    return t90(dof) * se


# paired comparisons over interleaved rounds (servelab.analysis.paired, servelab.serve.rounds)
def log_ratios(base: list[float], other: list[float]) -> list[float] | None:
    """ln(other_r / base_r) for each round r both measured (positive values only); None
    where fewer than two rounds pair up."""
    logs = [math.log(b / a) for a, b in zip(base, other)
            if a is not None and b is not None and a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)]
    return logs if len(logs) >= 2 else None


def pct(log_value: float) -> float:
    """A mean log ratio as a difference in % (100 (e^x - 1))."""
    return 100 * math.expm1(log_value)


def paired_interval(logs: list[float]) -> dict:
    """The paired difference in % of the baseline, with its 95 % and 90 % intervals."""
    n = len(logs)
    mean = statistics.fmean(logs)
    se = statistics.stdev(logs) / math.sqrt(n)
    half95, half90 = t95(n - 1) * se, t90(n - 1) * se
    return {"diff_pct": pct(mean), "ci95_low_pct": pct(mean - half95), "ci95_high_pct": pct(mean + half95),
            "ci90_low_pct": pct(mean - half90), "ci90_high_pct": pct(mean + half90),
            "detectable_pct": pct(half95), "rounds": n}


def stein_rounds(first_logs: list[float], within: float, most: int) -> int:
    """Rounds that bring the paired 95 % interval within +-`within` (a fraction: the log of
    1 + within), from the first stage's logs alone; at least the first stage, at most `most`."""
    n0 = len(first_logs)
    if n0 < 2:
        return n0
    s0 = statistics.stdev(first_logs)
    needed = math.ceil((t95(n0 - 1) * s0 / math.log1p(within)) ** 2) if s0 else n0
    return max(n0, min(most, needed))
