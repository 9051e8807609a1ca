"""A session's sampled prompts and loaded tokenizer, kept for its next point.

`vllm bench serve` loads its tokenizer and samples its prompts anew for every point (random
prompts are drawn, decoded and re-encoded one by one), while the engine idles: part of the
6-9 s that each 20 s point's client spent before its first request on an H200's host (seed
002's 732-799 prompts a point). In the session's process (servelab.engines.vllm.bench), a
repeat of a point, or any point with the same dataset arguments, takes the prompts sampled
before: the client samples with a fixed seed, so they are the prompts it would sample again.
The tokenizer is loaded once per name.
"""

from __future__ import annotations

import contextlib
import dataclasses

# arguments of `vllm bench serve` that shape the load or the saved result, not the prompts
LOAD_ONLY = {"request_rate", "burstiness", "max_concurrency", "result_dir", "result_filename", "metadata",
             "label", "save_result", "save_detailed", "append_result", "percentile_metrics", "metric_percentiles",
             "goodput", "profile", "disable_tqdm", "ramp_up_strategy", "ramp_up_start_rps", "ramp_up_end_rps",
             "host", "port", "base_url", "ready_check_timeout_sec",
             # new at each parse (a random default): a kept sample takes the current one
             "request_id_prefix"}
# samples kept at once: the newest (a rate sweep sized in time samples a new count per rate)
KEEP = 4


def sample_key(args) -> str:
    """What decides the prompts a client samples: every argument but the load's."""
    # repr, not JSON: some values are dicts keyed by tuples; an object whose repr differs from
    # one parse to the next only costs a new sample
    return repr([(k, v) for k, v in sorted(vars(args).items()) if k not in LOAD_ONLY])


def renamed(request, old: str, new: str):
    """A kept request under this point's request-id prefix (no two points share an id)."""
    rid = getattr(request, "request_id", None)
    if old == new or not isinstance(rid, str) or not rid.startswith(old) or not dataclasses.is_dataclass(request):
        return request
    return dataclasses.replace(request, request_id=new + rid[len(old):])


class SampleCache:
    def __init__(self):
        self.samples: dict[str, tuple[str, list]] = {}   # key -> (its request-id prefix, requests)
        self.tokenizers: dict[str, object] = {}
        self.hits = self.misses = 0

    @contextlib.contextmanager
    def around(self, client):
        """`client` (the module `vllm.benchmarks.serve`) sampling and loading its tokenizer
        through this cache for the duration."""
        get_samples, get_tokenizer = client.get_samples, client.get_tokenizer

        def samples(args, tokenizer):
            key, prefix = sample_key(args), getattr(args, "request_id_prefix", "") or ""
            if key in self.samples:
                self.hits += 1
                self.samples[key] = self.samples.pop(key)   # the newest again
            else:
                self.misses += 1
                self.samples[key] = (prefix, get_samples(args, tokenizer))
                while len(self.samples) > KEEP:
                    self.samples.pop(next(iter(self.samples)))
            sampled_with, kept = self.samples[key]
            return [renamed(r, sampled_with, prefix) for r in kept]   # a new list: the client may reorder it

        def tokenizer(*args, **kwargs):
            key = repr((args, sorted(kwargs.items())))
            if key not in self.tokenizers:
                self.tokenizers[key] = get_tokenizer(*args, **kwargs)
            return self.tokenizers[key]

        client.get_samples, client.get_tokenizer = samples, tokenizer
        try:
            yield self
        finally:
            client.get_samples, client.get_tokenizer = get_samples, get_tokenizer
