"""Seed 002's tuning study as a search on a lent GPU box, replayed (tests/data/recorded_gpu/
h200x2_20261128_phi4: 2x NVIDIA H200, vLLM 0.26.0, random weights of Phi-4-mini's shape,
commit e2bbe66, `NAMES=vllm OVERLAYS=config/studies/phi4-search-gpu.yaml envs/lent-gpu/course-run.sh`).
The search (study_phi4_search) and seed 002's hand-tuned path as a grid
(study_phi4_hand), 100 prompts a point, load bisected on request_rate 16..128.

What it showed: the search ran end to end on GPUs (3 rounds, 9 launches, converged, its
frontier measured again 3 times), but every configuration's "goodput at 128 req/s" was one
burst of 100 requests; the judge now refuses such points (servelab.search.slo.unheld), and
replayed with it every configuration's goodput falls to the lowest load, within a few per
cent of each other. Bench files keep what the judge reads (generated texts and per-token
ITLs left out for size)."""
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from servelab.search import confirm, outcome

RUN = Path(__file__).parents[2] / "tests/data/recorded_gpu/h200x2_20261128_phi4"
SEARCH, HAND = "study_phi4_search", "study_phi4_hand"


def best(experiment: str) -> dict:
    return json.loads((RUN / experiment / "best.json").read_text())


def replayed(experiment: str) -> dict[str, dict]:
    """{server point: its outcome} judged today from the recorded points."""
    table, slo = pd.read_csv(RUN / experiment / "metrics.csv"), best(experiment)["slo"]
    return {sp: outcome.config_outcome(
                [({"client_knobs": {"request_rate": r.request_rate}, "session": r.session},
                  json.loads((RUN / "bench" / f"{r.point_key}.json").read_text())) for r in rows.itertuples()],
                "request_rate", slo)
            for sp, rows in table.groupby("server_point", sort=False)}


def test_the_search_ran_its_rounds_on_two_gpus_and_measured_its_frontier_again():
    found = best(SEARCH)
    assert (found["launches"], found["rounds"], found["strategy"]) == (9, 3, "coordinate")
    assert found["stopped"] == "converged: every neighbour of the best configuration was tried"
    assert len(pd.read_csv(RUN / SEARCH / "tried.csv")) == 9
    assert [len(json.loads((RUN / SEARCH / f"round{r}.json").read_text())["configs"]) for r in range(4)] == [1, 5, 3, 0]
    # the verdict between the two, recomputed from their recorded repeats
    c = found["confirmation"]
    entries = [{"server_point": sp} for sp in c["configs"]]
    measured = {sp: {"goodput": v["goodput_tps"], "slo_met": 3} for sp, v in c["configs"].items()}
    again = confirm.decide(entries, measured)
    assert again["diff_pct"] == pytest.approx(c["diff_pct"]) and again["ci95_pct"] == pytest.approx(c["ci95_pct"])
    assert c["verdict"] == "not distinguishable"   # the run's word, before equivalence was told apart
    assert again["verdict"] in ("undecided", "equivalent within +-5 %")
    assert all(len(v["goodput_tps"]) == 3 for v in c["configs"].values())
    # the hand-tuned grid: its four corners, one round
    assert best(HAND)["launches"] == 4 and best(HAND)["strategy"] == "grid"


def test_what_the_run_crowned_at_128_req_s_was_a_burst_that_the_judge_now_refuses():
    """Recorded: 6 of 9 configurations "met at the highest load searched (request_rate=128)".
    Replayed with today's judge, 128 req/s was a burst for each (100 arrivals in 0.78 s,
    under the median request), and the bisection had measured nothing between 16 and 128
    for them, so each one's goodput is its 16 req/s throughput; so is every other
    configuration's that met the SLO (max_num_seqs 64 held no higher rate it measured)."""
    tried = pd.read_csv(RUN / SEARCH / "tried.csv")
    at_top = tried[tried["limited_by"] == "met at the highest load searched (request_rate=128)"]
    assert len(at_top) == 6
    now = replayed(SEARCH)
    for sp in at_top["server_point"]:
        assert now[sp]["max_load"] == 16.0, sp
        assert re.match(r"at request_rate=128\.0: not held: 100 requests arrived in 0\.7\ds, under the median "
                        r"request's \d\.\d\ds \(one burst, not 128 req/s", now[sp]["limited_by"]), now[sp]["limited_by"]
    goodputs = [o["goodput_tps"] for o in now.values() if o["goodput_tps"]]
    assert len(goodputs) == 8 and max(goodputs) / min(goodputs) < 1.06   # within the tie rule's 5 % and noise


def test_the_one_configuration_without_goodput_missed_the_itl_limit_at_the_lowest_load():
    """FP8 KV at 128 sequences missed p99 ITL <= 50 ms at 16 req/s in both experiments on
    this box (56.1 and 51.0 ms), where every other configuration met it. Not a property of
    FP8: p99 ITL at 16 req/s sat at 40-56 ms for every configuration, and in the 2x H100
    attempt of the same day (not recorded) 128/FP8 met it and 256/bf16 missed at 55.5 ms."""
    for experiment, fp8 in ((SEARCH, "max_num_seqs=128+kv_cache_dtype=fp8+max_num_batched_tokens=8192"),
                            (HAND, "max_num_seqs=128+kv_cache_dtype=fp8")):
        now = replayed(experiment)
        assert now[fp8]["goodput_tps"] == 0 and re.match(r"at request_rate=16\.0: p99_itl_ms 5\d\.\d > 50",
                                                          now[fp8]["limited_by"])
        assert all(o["max_load"] == 16.0 for sp, o in now.items() if sp != fp8)


def test_the_frontier_figure_judges_each_row_as_the_search_judges_its_saved_result():
    """search/frontier.png marks each point met or missed from the metrics table alone:
    the same verdict as the judge on the point's saved result, bursts included."""
    from servelab.analysis.search_plots import met_slo
    from servelab.search import slo

    for experiment in (SEARCH, HAND):
        table, limits = pd.read_csv(RUN / experiment / "metrics.csv"), best(experiment)["slo"]
        from_rows = met_slo(table, limits)
        from_results = [slo.judge(limits, json.loads((RUN / "bench" / f"{key}.json").read_text()))[0]
                        for key in table["point_key"]]
        assert list(from_rows) == from_results
        assert not from_rows[table["request_rate"] == 128].any() and from_rows.any()
