"""The statistics every stage uses to tell a difference from noise: the mean of repeats
with the half-width of its 95 % interval (Student's t), and Welch's t on two means."""

from __future__ import annotations

import math
import statistics

# two-sided 95 % quantiles of Student's t by degrees of freedom (beyond 30: the normal's)
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
       10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110,
       18: 2.101, 19: 2.093, 20: 2.086, 25: 2.060, 30: 2.042}

def t95(dof: int) -> float:
    if dof >= 30:
        return T95[30] if dof < 60 else 1.96
    return T95.get(dof) or T95[max(k for k in T95 if k <= dof)]


def mean_ci95(values: list[float]) -> tuple[float, float | None]:
    """Mean and the half-width of its 95 % interval (None for a single value)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, None
    return mean, t95(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))


def welch(mean_a: float, se_a: float, n_a: int, mean_b: float, *, se_b: float, n_b: int) -> tuple[float, float]:
    """Difference b - a and the half-width of its 95 % interval (Welch-Satterthwaite dof)."""
    se = math.sqrt(se_a ** 2 + se_b ** 2)
    if se == 0:
        return mean_b - mean_a, 0.0
    dof = se ** 4 / ((se_a ** 4 / (n_a - 1) if se_a else 0.0) + (se_b ** 4 / (n_b - 1) if se_b else 0.0))
    return mean_b - mean_a, t95(max(1, int(dof))) * se
