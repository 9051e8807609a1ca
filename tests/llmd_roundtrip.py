"""Export then import: the figures of each llm-d report against the row `servelab import` made
of it, read by a mapping of this test's own (not the importer's), to 1e-6 relative."""
import math

import yaml

LATENCIES = {"time_to_first_token": "ttft", "time_per_output_token": "tpot", "inter_token_latency": "itl",
             "request_latency": "e2el"}
THROUGHPUTS = {"output_token_rate": "output_throughput_tps", "total_token_rate": "total_token_throughput_tps",
               "request_rate": "request_throughput_rps"}


def expected(report: dict) -> dict:
    """{column: value} a report says (latencies in s or s/token -> the table's ms)."""
    aggregate = report["results"].get("request_performance", {}).get("aggregate", {})
    want = {}
    for field, prefix in LATENCIES.items():
        stats = aggregate.get("latency", {}).get(field)
        if stats:
            scale = 1000 if stats["units"] in ("s", "s/token") else 1
            want.update({f"{prefix}_{s}_ms": stats[s] * scale for s in ("mean", "p50", "p90", "p99") if s in stats})
    for field, column in THROUGHPUTS.items():
        if field in aggregate.get("throughput", {}):
            want[column] = aggregate["throughput"][field]["mean"]
    batch = report["results"]["observability"].get("servelab_point", {}).get("batch_latency_s") or {}
    want.update({f"latency_{s}_s": batch[s] for s in ("mean", "p50", "p90", "p99") if s in batch})
    requests = aggregate.get("requests")
    if requests:
        completed = requests["total"] - requests.get("failures", 0) - requests.get("incomplete", 0)
        want.update(prompts_sent=requests["total"], failed=requests.get("failures", 0), completed=completed)
        for field, column in (("input_length", "total_input_tokens"), ("output_length", "total_output_tokens")):
            if field in requests:
                want[column] = requests[field]["mean"] * completed
    return want


def mismatches(paths, table) -> list[str]:
    """Every figure of every report (in `paths`' order) that the imported table's row lacks or differs on."""
    out = []
    assert len(paths) == len(table)
    for path, row in zip(paths, table.to_dict("records")):
        for column, want in expected(yaml.safe_load(path.read_text())).items():
            got = row.get(column)
            if got is None or (isinstance(got, float) and math.isnan(got)) or \
                    abs(got - want) > 1e-6 * max(abs(want), 1e-12):
                out.append(f"{path.parent.name}/{path.name} {column}: imported {got}, report {want}")
    return out
