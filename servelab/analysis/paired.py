"""Paired comparisons over interleaved rounds (servelab/serve/rounds.py): in each round every
configuration was measured once, in a random order, so a configuration and its baseline met
the same state of the box in that round. Each round gives a ratio of the configuration to
the baseline; the verdict comes from the interval of those ratios over the rounds.

The interval is Student's t on the logs of the ratios (a paired t): with 3 to 10 rounds a
bootstrap's percentile interval is too narrow (it cannot reach past the few values it
resamples): simulated with normal noise, 1,000 trials each, its 95 % interval of the mean
covered 75 % at n = 3, 84 % at 5 and 88 % at 8, where t's covered 95 % at each, and the log makes a ratio and its inverse symmetric (x1.25 and x0.8 are
+-0.22). The difference in % is 100 (exp(mean log ratio) - 1); the interval is mapped the
same way.

The stopping rule is Stein's two-stage rule on those logs (servelab.stats.stein_repeats):
the first stage's spread alone decides how many rounds bring the paired 95 % interval within
+-`within`, at most `most`, so a rerun decides the same and the interval keeps its coverage.
"""

from __future__ import annotations

from servelab.stats import log_ratios, paired_interval as interval, stein_rounds  # noqa: F401  (the pairing's statistics)

DESIGN = "interleaved rounds"
# the metrics a comparison may pair (servelab.analysis.comparisons.HEADLINE, and their held window's)
METRICS = tuple(m for base in ("ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "output_throughput_tps",
                               "goodput_rps") for m in (base, f"steady_{base}"))
METHOD = ("paired t on the logs of each round's ratio to the baseline (interleaved rounds in a random order), "
          "95 % two-sided; equivalence: two one-sided tests at 95 % (the 90 % interval inside +-margin)")


def parse(text) -> list[float | None]:
    """A table's `METRIC_by_round` cell ("v0;v1;..."; an empty value: a round not measured)."""
    if not isinstance(text, str) or not text:
        return []
    return [float(v) if v not in ("", "nan") else None for v in text.split(";")]


def cell(values: list[float | None]) -> str:
    return ";".join("" if v is None else repr(float(v)) for v in values)
