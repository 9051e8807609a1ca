"""Cache reuse by turn: each request of a multi-turn or trace-replay point with its turn,
then a table of TTFT and cached prompt tokens by turn index (results/EXP/turns.csv) and its
figure (turns.png).

Cached tokens are the engine's own count: `usage.prompt_tokens_details.cached_tokens` of
each response, which AIPerf records per request (servelab.engines.clients.aiperf). vLLM's
client records no usage per request: a trace replay's rows give TTFT by turn (the trace's
`turn` field), the tokens the trace makes reusable (`trace_reusable_tokens_mean`, by its
hash ids) and the point's prefix hit rate from the engine's counters
(`vllm:prefix_cache_hits / queries`), its cached tokens left empty.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

COLUMNS = ["experiment", "server_point", "workload", "turn", "requests", "ttft_p50_ms", "ttft_mean_ms",
           "ttft_ci95_ms", "prompt_tokens_mean", "cached_tokens_mean", "turn_hit_rate", "session_prefix_hit_rate",
           "trace_reusable_tokens_mean"]


def requests_of(bench: dict, trace_rows: list[dict] | None = None) -> list[dict]:
    """{turn, ttft_ms, prompt_tokens, cached_tokens} of each completed request of a point."""
    if bench.get("requests") is not None:   # AIPerf's, each with its turn and usage
        return [r for r in bench["requests"] if not r.get("error") and r.get("ttft_ms") is not None]
    if trace_rows is None:
        return []
    # vLLM's client: its detailed lists in the trace's order, one entry a request it sent
    from servelab.fetch.trace import reusable_tokens

    out = []
    for row, reusable, ttft, prompt in zip(trace_rows, reusable_tokens(trace_rows), bench.get("ttfts") or [],
                                           bench.get("input_lens") or []):
        if ttft:
            out.append({"turn": row.get("turn", 1), "ttft_ms": ttft * 1000, "prompt_tokens": prompt,
                        "cached_tokens": None, "reusable_tokens": reusable})
    return out


def ci95(values: list[float]) -> float | None:
    """Half-width of a 95 % interval of the mean (normal approximation; t for n < 30 would
    widen it by up to 2.3x at n = 3, so n is beside it in the table)."""
    if len(values) < 2:
        return None
    return 1.96 * statistics.stdev(values) / math.sqrt(len(values))


def rows_of(experiment: str, server_point: str, workload, requests: list[dict], hit_rate) -> list[dict]:
    out = []
    for turn in sorted({r["turn"] for r in requests}):
        reqs = [r for r in requests if r["turn"] == turn]
        ttfts = [r["ttft_ms"] for r in reqs]
        prompts = [r["prompt_tokens"] for r in reqs if r.get("prompt_tokens") is not None]
        cached = [r["cached_tokens"] for r in reqs if r.get("cached_tokens") is not None]
        out.append({"experiment": experiment, "server_point": server_point, "workload": workload, "turn": turn,
                    "requests": len(reqs), "ttft_p50_ms": statistics.median(ttfts),
                    "ttft_mean_ms": statistics.fmean(ttfts), "ttft_ci95_ms": ci95(ttfts),
                    "prompt_tokens_mean": statistics.fmean(prompts) if prompts else None,
                    "cached_tokens_mean": statistics.fmean(cached) if cached else None,
                    "turn_hit_rate": sum(cached) / sum(prompts) if cached and prompts and sum(prompts) else None,
                    "session_prefix_hit_rate": hit_rate,
                    "trace_reusable_tokens_mean": (statistics.fmean(r["reusable_tokens"] for r in reqs)
                                                   if all("reusable_tokens" in r for r in reqs) else None)})
    return out


def raw_result(point_dir: Path) -> dict:
    """A point's saved benchmark result, plain (`bench.json`) or gzipped (`bench.json.gz`)."""
    import gzip

    if (point_dir / "bench.json.gz").is_file():
        return json.loads(gzip.decompress((point_dir / "bench.json.gz").read_bytes()))
    return json.loads((point_dir / "bench.json").read_text())


def table(view_files: list[str | Path], store_dir: str | Path, trace_file: str | Path | None = None):
    """One row per (server point, workload, turn), the requests of every repeat pooled."""
    import pandas as pd

    trace_rows = None
    if trace_file:
        trace_rows = [json.loads(line) for line in Path(trace_file).read_text().splitlines() if line.strip()]
    pooled: dict[tuple, dict] = {}
    for view in view_files:
        for record in json.loads(Path(view).read_text()):
            if record.get("failure") or "lm_eval" in record["client_knobs"]:
                continue
            bench = raw_result(Path(store_dir) / record["key"])
            key = (record["experiment"], record["server_point"], record["client_knobs"].get("workload"))
            entry = pooled.setdefault(key, {"requests": [], "hits": []})
            entry["requests"] += requests_of(bench, trace_rows)
            rate = bench.get("session_prefix_hit_rate")
            if rate is None:
                rate = (record.get("counters") or {}).get("prefix_cache_hit_rate")
            if rate is not None:
                entry["hits"].append(rate)
    rows = [row for (exp, sp, wl), e in pooled.items()
            for row in rows_of(exp, sp, wl, e["requests"], statistics.fmean(e["hits"]) if e["hits"] else None)]
    return pd.DataFrame(rows, columns=COLUMNS)


def figure(df, out: str | Path, title: str) -> None:
    """Cached prompt tokens and mean TTFT by turn, one line per server configuration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for sp, part in df.groupby("server_point"):
        part = part.sort_values("turn")
        if part["cached_tokens_mean"].notna().any():
            left.plot(part["turn"], part["cached_tokens_mean"], marker="o", label=sp)
        elif part["trace_reusable_tokens_mean"].notna().any():   # a trace replay: what it could reuse
            left.plot(part["turn"], part["trace_reusable_tokens_mean"], marker="o", linestyle="--",
                      label=f"{sp}: reusable by the trace (engine's hit rate "
                            f"{part['session_prefix_hit_rate'].iloc[0]:.2f} over the point)")
        right.errorbar(part["turn"], part["ttft_mean_ms"], yerr=part["ttft_ci95_ms"].fillna(0), marker="o",
                       capsize=3, label=sp)
    left.set(xlabel="Turn of the conversation", ylabel="Cached prompt tokens per request (engine's count)",
             title="Prefix-cache reuse by turn")
    right.set(xlabel="Turn of the conversation", ylabel="TTFT mean (ms; bars: its 95 % interval)",
              title="What the reuse buys")
    for ax in (left, right):
        ax.set_xticks(sorted(df["turn"].unique()))
        if ax.get_legend_handles_labels()[0]:
            ax.legend(title="server configuration")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
