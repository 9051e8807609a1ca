"""Static batching with HF transformers `generate`: the baseline of weeks 4 and 7.

    python -m servelab.engines.hf.static_batching --model DIR --dataset-name sharegpt --dataset-path F \
        --num-prompts 300 --batch-size 16 --output-json out.json
    python -m servelab.engines.hf.static_batching plan PLAN.json STATUS.jsonl   # many points, one model load

Requests are taken in order, B at a time; each batch is padded on the left and
decodes until its longest request is done (EOS ignored, as `vllm bench
throughput` does), so short requests hold their slot idle. The JSON has the
keys of `vllm bench throughput` (elapsed_time, num_requests, total_num_tokens,
requests_per_second, tokens_per_second) plus the output-token figures and the
fraction of decode slots spent on padding.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="servelab.engines.hf.static_batching", description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="model directory (HF layout)")
    p.add_argument("--dataset-name", choices=["sharegpt", "random"], default="random")
    p.add_argument("--dataset-path", help="ShareGPT-format JSON, for --dataset-name sharegpt")
    p.add_argument("--num-prompts", type=int, required=True)
    p.add_argument("--batch-size", type=int, default=8, help="requests per static batch")
    # the random workload's options carry vllm bench's names, so one config serves both
    p.add_argument("--random-input-len", type=int, default=256, help="random: prompt tokens")
    p.add_argument("--random-output-len", type=int, default=128, help="random: output tokens")
    p.add_argument("--random-range-ratio", type=float, default=0.0,
                   help="random: lengths uniform in [len*(1-r), len*(1+r)], as vllm bench's option")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", default="auto", help="torch dtype of the weights (auto: the checkpoint's)")
    p.add_argument("--device", default="auto", help="cuda, cpu, or auto (cuda when present)")
    p.add_argument("--load-format", choices=["auto", "dummy"], default="auto",
                   help="dummy: random weights of the config's shape (as vLLM's --load-format dummy)")
    p.add_argument("--output-json", required=True)
    return p


def random_requests(n: int, input_len: int, output_len: int, ratio: float, *, vocab: int,
                    seed: int) -> list[tuple[list[int], int]]:
    """(prompt ids, output length) pairs with lengths uniform around the means."""
    if not 0 <= ratio < 1:
        raise ValueError(f"--random-range-ratio must be in [0, 1), got {ratio}")
    rng = random.Random(seed)

    def length(mean: int) -> int:
        return max(1, rng.randint(math.floor(mean * (1 - ratio)), math.ceil(mean * (1 + ratio))))

    top = min(vocab, 10000)
    return [([rng.randrange(100, top) for _ in range(length(input_len))], length(output_len))
            for _ in range(n)]


def sharegpt_requests(path: str, n: int, tokenizer, seed: int) -> list[tuple[list[int], int]]:
    """First human turn as the prompt, the first reply's token count as the output length."""
    convs = json.loads(Path(path).read_text())
    random.Random(seed).shuffle(convs)
    out = []
    for conv in convs:
        turns = conv.get("conversations") or []
        if len(turns) < 2:
            continue
        prompt = tokenizer(turns[0]["value"]).input_ids
        reply_len = len(tokenizer(turns[1]["value"]).input_ids)
        if len(prompt) >= 4 and reply_len >= 4:
            out.append((prompt, reply_len))
        if len(out) == n:
            return out
    raise ValueError(f"{path}: only {len(out)} usable conversations, {n} asked")


def batches(requests: list, size: int):
    for start in range(0, len(requests), size):
        yield requests[start:start + size]


def run_static(model, requests: list[tuple[list[int], int]], batch_size: int, pad_id: int,
               *, progress=print) -> dict:
    import torch

    device = next(model.parameters()).device
    total = math.ceil(len(requests) / batch_size)
    decode_slots = used_slots = 0
    started = time.perf_counter()
    for i, batch in enumerate(batches(requests, batch_size), 1):
        width = max(len(p) for p, _ in batch)
        longest = max(n for _, n in batch)
        ids = torch.tensor([[pad_id] * (width - len(p)) + p for p, _ in batch], device=device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p, _ in batch], device=device)
        with torch.inference_mode():
            model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=longest,
                           min_new_tokens=longest, do_sample=False, pad_token_id=pad_id)
        decode_slots += longest * len(batch)
        used_slots += sum(n for _, n in batch)
        progress(f"batch {i}/{total}: {len(batch)} requests, {longest} decode steps")
    elapsed = time.perf_counter() - started
    prompt_tokens = sum(len(p) for p, _ in requests)
    return {
        "elapsed_time": elapsed,
        "num_requests": len(requests),
        "total_num_tokens": prompt_tokens + used_slots,
        "total_output_tokens": used_slots,
        "requests_per_second": len(requests) / elapsed,
        "tokens_per_second": (prompt_tokens + used_slots) / elapsed,
        "output_tokens_per_second": used_slots / elapsed,
        "padding_fraction": 1 - used_slots / decode_slots,
        "batch_size": batch_size,
    }


def parse_args(argv: list[str]):
    args = parser().parse_args(argv)
    if args.dataset_name == "sharegpt" and not args.dataset_path:
        raise SystemExit("servelab.engines.hf.static_batching: --dataset-name sharegpt needs --dataset-path")
    return args


def load_model(args):
    """(model, tokenizer, device) as the arguments ask."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    if args.load_format == "dummy":
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(args.model)
        dtype = getattr(torch, args.dtype) if args.dtype != "auto" else torch.bfloat16
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(config, dtype=dtype).eval()
    else:
        model = AutoModelForCausalLM.from_pretrained(args.model, dtype=args.dtype).to(device).eval()
    return model, tokenizer, device


def engine_key(args) -> str:
    """What the loaded model depends on: points that agree share one load."""
    return repr((args.model, args.dtype, args.device, args.load_format))


def benchmark(args, model, tokenizer, device) -> dict:
    import torch

    torch.manual_seed(args.seed)
    if args.dataset_name == "sharegpt":
        requests = sharegpt_requests(args.dataset_path, args.num_prompts, tokenizer, args.seed)
    else:
        requests = random_requests(args.num_prompts, args.random_input_len, args.random_output_len,
                                   args.random_range_ratio, vocab=model.config.vocab_size, seed=args.seed)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
    result = run_static(model, requests, args.batch_size, pad_id,
                        progress=lambda m: print(m, file=sys.stderr, flush=True))
    result["device"] = device
    Path(args.output_json).write_text(json.dumps(result, indent=2))
    print(f"static batching: {result['requests_per_second']:.2f} requests/s, "
          f"{result['output_tokens_per_second']:.1f} output tokens/s, "
          f"{100 * result['padding_fraction']:.1f}% of decode slots idle", flush=True)
    return result


def run_plan_file(plan_path: str, status_path: str) -> int:
    """`plan PLAN STATUS`: every point of the plan (servelab.engines.offline_plan), the
    model loaded once for the points that agree on it."""
    from servelab.engines.offline_plan import EngineCache, read_plan, run_plan

    cache = EngineCache(build=load_model)

    def run_point(argv: list[str]) -> None:
        args = parse_args(argv)
        print(f"$ python -m servelab.engines.hf.static_batching {' '.join(argv)}", flush=True)
        benchmark(args, *cache.get(engine_key(args), args))

    run_plan(read_plan(plan_path), status_path, cache, run_point)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["plan"] and len(argv) == 3:
        return run_plan_file(argv[1], argv[2])
    args = parse_args(argv)
    benchmark(args, *load_model(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
