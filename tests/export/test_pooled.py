"""A report's latency statistics over the point's requests (servelab/export/pooled.py), on a
recorded H200 run (seed 002's path, 6 repeats a point) whose store keeps every repeat's
requests for one configuration (seqs128) and only the records for the others: a single repeat gives the client's own figures, repeats give their pooled requests'
percentiles with each repeat's own beside them."""
import numpy as np
import pandas as pd
import pytest
import yaml

from servelab.export import llmd_export, pooled
from servelab.raw_result import read_raw

RUN = __import__("pathlib").Path(__file__).parents[1] / \
    "data/recorded_gpu/h200_20261202_certainty/study_phi4_path_l4kv"


def raws_of(row) -> list[dict]:
    return [read_raw(RUN / "store" / key) for key in row["point_key"].split(";")]


def test_one_repeats_requests_give_the_clients_own_statistics():
    row = pd.read_csv(RUN / "metrics.csv").set_index("server_point", drop=False).loc["seqs128"]
    for raw in raws_of(row):
        stats = pooled.from_raws([raw])["pooled"]
        for lat in ("ttft", "tpot", "itl", "e2el"):
            for stat, theirs in (("mean", "mean"), ("p50", "p50"), ("p90", "p90"), ("p99", "p99"),
                                 ("stddev", "std")):
                # the client's per-request times are kept to the microsecond
                assert stats[lat][stat] == pytest.approx(raw[f"{theirs}_{lat}_ms"], rel=2e-6, abs=2e-3), (lat, stat)
        assert stats["ttft"]["min"] <= stats["ttft"]["p50"] <= stats["ttft"]["max"]


def test_a_repeated_points_report_pools_its_requests_and_keeps_each_repeats_figures(tmp_path):
    llmd_export.export(RUN, tmp_path / "llmd")
    rows = pd.read_csv(RUN / "metrics.csv").set_index("server_point", drop=False)

    def report_of(server_point):
        return yaml.safe_load((tmp_path / "llmd" / server_point / "benchmark_report_v0.2,_stage_0.yaml").read_text())

    # no requests kept: the table's mean of the repeats' figures, and the report says so
    baseline = report_of("baseline")
    assert baseline["results"]["observability"]["servelab_point"]["latency_statistics"] == \
        "the mean of its 6 repeats' own figures"
    assert baseline["results"]["request_performance"]["aggregate"]["latency"]["time_to_first_token"]["p99"] == \
        pytest.approx(rows.loc["baseline", "ttft_p99_ms"] / 1000, rel=1e-12)
    for row in [rows.loc["seqs128"].to_dict()]:
        raws = raws_of(row)
        assert len(raws) == 6
        report = report_of(row["server_point"])
        ttft = report["results"]["request_performance"]["aggregate"]["latency"]["time_to_first_token"]
        ok = [t * 1000 for raw in raws for t, e in zip(raw["ttfts"], raw["errors"]) if not e]
        assert ttft["p99"] * 1000 == pytest.approx(np.percentile(ok, 99), rel=1e-9)
        assert ttft["mean"] * 1000 == pytest.approx(np.mean(ok), rel=1e-9)
        assert ttft["min"] * 1000 == pytest.approx(min(ok)) and ttft["max"] * 1000 == pytest.approx(max(ok))
        point = report["results"]["observability"]["servelab_point"]
        assert point["latency_statistics"] == f"over the {len(ok)} requests of its {len(raws)} repeats pooled"
        # each repeat's own p99, as its client computed it, beside the pooled one
        assert point["repeat_figures_s"]["ttft_p99"] == pytest.approx([r["p99_ttft_ms"] / 1000 for r in raws],
                                                                      rel=2e-6)
        # the pooled p99 is not the mean of the repeats' p99s (the table's figure)
        assert ttft["p99"] * 1000 != pytest.approx(row["ttft_p99_ms"], rel=1e-6)


def test_without_per_request_figures_the_repeats_mean_is_named_as_such():
    raws = raws_of(pd.read_csv(RUN / "metrics.csv").set_index("server_point", drop=False).loc["seqs128"])
    for raw in raws:
        raw.pop("itls")
    assert pooled.from_raws(raws) is None
    aiperf_like = {"completed": 40, "std_ttft_ms": 8.12, "min_ttft_ms": 10.83, "max_ttft_ms": 53.2}
    assert pooled.from_raws([aiperf_like]) == {"requests": 40, "repeats": 1, "per_repeat": [],
                                               "pooled": {"ttft": {"stddev": 8.12, "min": 10.83, "max": 53.2}}}
