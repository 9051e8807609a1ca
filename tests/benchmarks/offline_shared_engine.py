"""Benchmark: one offline point measured standalone and on a shared engine (prints figures).

    .venv/bin/python tests/benchmarks/offline_shared_engine.py --model DIR [--tool latency] \
        [--rounds 3] [--engine-args "--max-model-len 1024 --enforce-eager"] [--point-args "..."]

The same point (`vllm bench latency|throughput` with --point-args) is measured in each
round twice: by the standalone command (`python -m servelab.engines.vllm.cli bench TOOL`,
its own engine) and by servelab's plan runner (servelab.engines.vllm.offline) after
another point, so that it runs on an engine that already served one (issue #18: one
engine per engine configuration must not change what a point measures). Prints each
round's figure (latency: mean of the iterations, s; throughput: tokens/s), each side's
mean and spread over rounds, their difference, and the wall time of each side.
"""
from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from servelab.engines import offline_plan  # noqa: E402

DEFAULTS = {"latency": "--input-len 32 --output-len 16 --batch-size 8 --num-iters 10 --num-iters-warmup 2",
            "throughput": "--dataset-name random --random-input-len 32 --random-output-len 32 --num-prompts 64"}
FIRST = {"latency": ["--batch-size", "1"], "throughput": ["--num-prompts", "8"]}   # the point run before


def figure(tool: str, path: Path) -> float:
    result = json.loads(path.read_text())
    return result["avg_latency"] if tool == "latency" else result["tokens_per_second"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--tool", choices=["latency", "throughput"], default="latency")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--engine-args", default="--max-model-len 1024 --enforce-eager")
    p.add_argument("--point-args", default=None, help="the benchmark's own arguments of the point")
    args = p.parse_args()
    point = ["--model", args.model, *shlex.split(args.engine_args),
             *shlex.split(args.point_args or DEFAULTS[args.tool])]
    env_note = "(engine env from the caller: e.g. VLLM_CPU_KVCACHE_SPACE on a CPU)"
    print(f"point: vllm bench {args.tool} {shlex.join(point)} {env_note}", flush=True)
    alone, shared, walls = [], [], {"standalone": 0.0, "shared": 0.0}
    with tempfile.TemporaryDirectory(prefix="servelab-shared-") as tmp:
        tmp = Path(tmp)
        for r in range(args.rounds):
            out = tmp / f"alone{r}.json"
            started = time.monotonic()
            subprocess.run([sys.executable, "-m", "servelab.engines.vllm.cli", "bench", args.tool, *point,
                            "--output-json", str(out)], check=True, capture_output=True, cwd=REPO)
            walls["standalone"] += time.monotonic() - started
            alone.append(figure(args.tool, out))
            # the plan: another point first (the engine is built for it), then the point itself
            first = [*point, *FIRST[args.tool], "--output-json", str(tmp / f"first{r}.json")]
            offline_plan.write_plan(tmp / "plan.json", [("first", first),
                                                        ("point", [*point, "--output-json", str(tmp / f"shared{r}.json")])])
            status = tmp / f"status{r}.jsonl"
            started = time.monotonic()
            subprocess.run([sys.executable, "-m", "servelab.engines.vllm.offline", args.tool, str(tmp / "plan.json"),
                            str(status)], check=True, capture_output=True, cwd=REPO)
            walls["shared"] += time.monotonic() - started
            reused = offline_plan.read_status(status)[1]["engine_start_s"] == 0
            shared.append(figure(args.tool, tmp / f"shared{r}.json"))
            print(f"round {r + 1}: standalone {alone[-1]:.5g}, shared engine {shared[-1]:.5g} "
                  f"(engine reused: {reused})", flush=True)
    unit = "s per batch (mean of iterations)" if args.tool == "latency" else "tokens/s"
    spread = lambda xs: statistics.stdev(xs) if len(xs) > 1 else float("nan")   # noqa: E731
    m_alone, m_shared = statistics.mean(alone), statistics.mean(shared)
    print(f"standalone:    mean {m_alone:.5g} sd {spread(alone):.3g} {unit}; wall {walls['standalone']:.1f}s "
          f"({args.rounds} engine starts for {args.rounds} points)")
    print(f"shared engine: mean {m_shared:.5g} sd {spread(shared):.3g} {unit}; wall {walls['shared']:.1f}s "
          f"({args.rounds} engine starts for {2 * args.rounds} points)")
    print(f"difference: {100 * (m_shared - m_alone) / m_alone:+.1f}% of the standalone mean")


if __name__ == "__main__":
    main()
