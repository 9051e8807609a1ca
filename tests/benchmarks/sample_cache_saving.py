"""Benchmark: what a session's kept prompts save its client per point (prints figures).

    .venv/bin/python tests/benchmarks/sample_cache_saving.py MODEL_DIR [PROMPTS] [INPUT_LEN]

vLLM's own tokenizer load and random sampling (as `vllm bench serve` does before its first
request), for a point of PROMPTS prompts of INPUT_LEN tokens (default 760 x 512: seed 002's
points on an H200's host): without servelab.engines.vllm.sample_cache, then through it, first and
again (what a repeat, or another load of the same dataset arguments, pays). MODEL_DIR: any
local model directory with a tokenizer (the tiny Llama the tests build will do).
"""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from vllm.benchmarks import serve as client  # noqa: E402

from servelab.engines.vllm import commands as vllm_commands  # noqa: E402
from servelab.engines.vllm.sample_cache import SampleCache  # noqa: E402
from servelab.engines.vllm.bench import BenchServe  # noqa: E402


def main() -> None:
    model = sys.argv[1]
    prompts = int(sys.argv[2]) if len(sys.argv) > 2 else 760
    input_len = int(sys.argv[3]) if len(sys.argv) > 3 else 512
    bench, cache = BenchServe(), SampleCache()
    knobs = {"num_prompts": prompts, "random_input_len": input_len, "random_output_len": 128, "seed": 0}

    def point() -> tuple[float, float]:
        args = bench.parse(vllm_commands.bench_serve_args(model, "m", 8000, "random", dataset_path=None, knobs=knobs,
                                                          result_dir="/tmp", result_file="x.json"))
        started = time.perf_counter()
        tokenizer = client.get_tokenizer(args.tokenizer, tokenizer_mode=args.tokenizer_mode,
                                         trust_remote_code=args.trust_remote_code)
        loaded = time.perf_counter()
        client.get_samples(args, tokenizer)
        return loaded - started, time.perf_counter() - loaded

    rows = [("no cache", *point())]
    with cache.around(client):
        rows += [("kept, first point", *point()), ("kept, next point", *point())]
    print(f"\n{prompts} random prompts of {input_len} tokens, {model}")
    print(f"{'client':<20} {'tokenizer s':>12} {'sampling s':>11}")
    for name, tokenizer_s, sampling_s in rows:
        print(f"{name:<20} {tokenizer_s:>12.2f} {sampling_s:>11.2f}")


if __name__ == "__main__":
    main()
