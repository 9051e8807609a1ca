"""The metric columns in one place (servelab/analysis/columns.py): every column a table
writes is in it or is a knob of the point; the checks, the export and the docs read it."""
import json

import pandas as pd
from conftest import REPO

from servelab.analysis import columns
from servelab.checks import cross_checks
from servelab.export import llmd_results

RUN = REPO / "tests/data/recorded_gpu/h200_20261203b_record_sched"


def test_every_column_of_a_recorded_table_is_listed_or_a_knob():
    for exp in ("study_8b_record_overhead", "study_phi4_l4kv_scheduling"):
        table = pd.read_csv(RUN / exp / "metrics.csv")
        knobs = {"client"}
        for view in (RUN / exp / "sessions").glob("*.json"):
            for record in json.loads(view.read_text()):
                identity = record["identity"]
                knobs |= set(identity.get("server") or {}) | set(record.get("client_knobs") or {})
                knobs |= set(identity.get("measurement") or {})
        unlisted = {c for c in table.columns if not c.endswith("_ci95") and not c.startswith("client.")}
        unlisted -= columns.METRIC_COLUMNS | knobs
        assert not unlisted, (exp, sorted(unlisted))


def test_the_checks_the_export_and_the_docs_read_the_one_list():
    assert cross_checks.METRIC_COLUMNS is columns.METRIC_COLUMNS
    assert tuple(llmd_results.LATENCY) == columns.LATENCIES and llmd_results.STATS is columns.STATS
    assert set(llmd_results.COUNTERS) <= columns.COUNTER_COLUMNS
    assert (REPO / "docs/columns.md").read_text() == columns.reference(), \
        "docs/columns.md is stale: python -m servelab.analysis.columns > docs/columns.md"


def test_a_figure_may_name_the_record_and_bound_columns():
    for column in ("bound", "spread_pct", "wait_engine_core_share", "host_steal_cores", "send_s", "window"):
        assert column in columns.METRIC_COLUMNS
