"""A session's sampled prompts kept for its next point (servelab.engines.vllm.sample_cache), on
vLLM's own sampling of random prompts with the tiny Llama's tokenizer: a repeat, or another
load of the same dataset arguments, gets the very prompts a new sample would give, under
its own request ids; other dataset arguments sample anew."""

from vllm.benchmarks import serve as client

from servelab.engines.vllm import commands as vllm_commands
from servelab.engines.vllm.sample_cache import SampleCache
from servelab.engines.vllm.bench import BenchServe


def parsed(bench: BenchServe, tiny_model, **knobs):
    knobs = {"num_prompts": 12, "random_input_len": 24, "random_output_len": 4, "seed": 0, **knobs}
    argv = vllm_commands.bench_serve_args(str(tiny_model), "tiny", 8000, "random", dataset_path=None, knobs=knobs,
                                          result_dir="/tmp", result_file="x.json")
    return bench.parse(argv)


def sampled(args):
    tokenizer = client.get_tokenizer(args.tokenizer, tokenizer_mode=args.tokenizer_mode,
                                     trust_remote_code=args.trust_remote_code)
    return client.get_samples(args, tokenizer), tokenizer


def test_a_points_prompts_are_sampled_once_and_given_again_under_its_own_ids(tiny_model):
    bench, cache = BenchServe(), SampleCache()
    fresh, _ = sampled(parsed(bench, tiny_model, request_rate=2))   # what the client samples itself
    with cache.around(client):
        first, tokenizer = sampled(parsed(bench, tiny_model, request_rate=2))
        again_args = parsed(bench, tiny_model, request_rate=8, max_concurrency=4)   # another load
        again, tokenizer_again = sampled(again_args)
        other, _ = sampled(parsed(bench, tiny_model, request_rate=2, seed=1))       # other prompts
    assert (cache.misses, cache.hits) == (2, 1) and tokenizer_again is tokenizer
    assert [r.prompt for r in first] == [r.prompt for r in fresh] == [r.prompt for r in again]
    assert [r.prompt for r in other] != [r.prompt for r in first]
    # every point's requests carry its own id prefix, as a new sample's would
    assert all(r.request_id.startswith(again_args.request_id_prefix) for r in again)
    assert {r.request_id for r in again}.isdisjoint(r.request_id for r in first)
    assert client.get_samples is not cache.around and client.get_samples.__name__ == "get_samples"   # put back
