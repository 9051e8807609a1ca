"""What the rest of the package asks of an engine or a load client, as facts: no code
outside servelab/engines tests an engine's or a client's name. The engine classes of
servelab.engines.registry (ENGINES) inherit these; this module imports nothing from servelab,
so that every stage (config and fetch included) may read them: `of(name)` for an engine,
`client(name)` for a client a point's result names.

A name no engine has (a config the cross-checks refuse, before they have run) gets
NoEngine's facts: what the code assumed of such a name before these were facts."""

from __future__ import annotations

from dataclasses import dataclass

GIB_MIB = 1024


@dataclass(frozen=True)
class MemoryShare:
    """What an engine's memory knob gives a server on one GPU (servelab.fetch.capacity): the
    knob and its value, the GiB it budgets for weights and KV cache (and activations, where
    `reserved` holds them), and the KV cache's own GiB where a knob sets it outright."""
    knob: str
    fraction: float
    budget_gib: float
    reserved_gib: float
    kv_gib: float | None = None


# the memory rules' constants, named by the knob they belong to (vLLM's gpu_memory_utilization,
# SGLang's mem_fraction_static). What vLLM's profiling run holds beside weights and KV cache
# (activations at the batch budget, the sampler's logits, non-torch allocations), per GPU: the
# recordings' residue was 0.06-0.59 GiB for dense Llama-3.1-8B at TP 1/2/4, 1.43 GiB for Mixtral-8x7B at TP 2
ACTIVATION_GIB_IN_GPU_MEMORY_UTILIZATION = {"dense": 0.5, "moe": 1.5}
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
# SGLang's fraction applies to the memory free before it loads weights: on an H100 80GB
# 78.47 of 79.65 GiB (CUDA context and communicators hold the rest; recorded SGLang 0.5.17 logs)
IN_USE_BEFORE_MEM_FRACTION_STATIC_GIB = 1.18


def vllm_memory_share(memory_gib: float, knobs: dict, *, tp: int, pp: int, moe: bool) -> MemoryShare:
    """gpu_memory_utilization's share of all the GPU's memory, activations within it; and
    kv_cache_memory_bytes, where set, the KV cache's bytes outright (whatever the share)."""
    fraction = float(knobs.get("gpu_memory_utilization") or DEFAULT_GPU_MEMORY_UTILIZATION)
    reserved = ACTIVATION_GIB_IN_GPU_MEMORY_UTILIZATION["moe" if moe else "dense"]
    outright = float(knobs["kv_cache_memory_bytes"]) / 2 ** 30 if knobs.get("kv_cache_memory_bytes") else None
    return MemoryShare("gpu_memory_utilization", fraction, fraction * memory_gib, reserved, outright)


def sglang_own_fraction(memory_mib: float, knobs: dict, *, tp: int, pp: int) -> float:
    """The mem_fraction_static SGLang 0.5 picks where a point gives none: the GPU's memory
    less a reserve, in MiB, of 512, 1.5 a token of activations (its chunked prefill: 8192
    tokens on a GPU of 35 to 160 GiB, 2048 below, 16384 above; a P/D decode server, which
    prefills nothing, 2048), 2 a CUDA-graph batch size (up to 256) and 128 a GPU of the
    replica; at least 10 GiB on a GPU over 60 GiB. Its logs on an H100 80GB: 0.835, and
    0.874 for a decode server."""
    default_chunk = 2048 if memory_mib < 35 * GIB_MIB else 8192 if memory_mib < 160 * GIB_MIB else 16384
    chunk = 2048 if knobs.get("disaggregation_mode") == "decode" else \
        int(knobs.get("chunked_prefill_size") or default_chunk)
    if chunk <= 0:   # chunked prefill off: a whole prefill's tokens at once
        chunk = int(knobs.get("max_prefill_tokens") or 16384)
    reserve = 512 + 1.5 * max(chunk, 2048) + 2 * int(knobs.get("cuda_graph_max_bs") or 256) + 128 * tp * pp
    if memory_mib > 60 * GIB_MIB:
        reserve = max(reserve, 10 * GIB_MIB)
    return round((memory_mib - reserve) / memory_mib, 3)


def sglang_memory_share(memory_gib: float, knobs: dict, *, tp: int, pp: int, moe: bool) -> MemoryShare:
    """mem_fraction_static's share of the memory left once it has started, for the weights and
    the KV pool only (activations outside it); its own pick where a point gives none."""
    fraction = float(knobs.get("mem_fraction_static") or sglang_own_fraction(memory_gib * GIB_MIB, knobs, tp=tp, pp=pp))
    return MemoryShare("mem_fraction_static", fraction, fraction * (memory_gib - IN_USE_BEFORE_MEM_FRACTION_STATIC_GIB), 0.0)


class VLLMFacts:
    # it runs as a server that a client sends requests to (else: offline points only)
    serves = True
    # its server holds a KV cache in memory of its own, sized by a memory knob, that the
    # capacity plan sizes (servelab.fetch.capacity, `servelab plan`)
    kv_capacity_sized = True
    # its memory knob (SGLang's mem_fraction_static) is the share, of the memory left once it
    # has started, for the weights and the KV pool only, activations outside it (else:
    # gpu_memory_utilization's share of all the memory, activations within it, and
    # kv_cache_memory_bytes, where set, the KV cache's bytes outright)
    static_memory_fraction = False
    memory_share = staticmethod(vllm_memory_share)   # what its memory knob gives a server on one GPU
    # its client's generator of prompt groups sharing a prefix (a `shared_prefix` workload,
    # servelab.config.workloads): its --dataset-name, and the knob that carries each field
    shared_prefix_dataset = "prefix_repetition"
    shared_prefix_knobs = {"shared_len": "prefix_repetition_prefix_len", "suffix_len": "prefix_repetition_suffix_len",
                           "groups": "prefix_repetition_num_prefixes", "output_len": "prefix_repetition_output_len"}
    # its client reads another layout of trace (SGLang's mooncake mode), not wired here: a
    # `trace` dataset is refused for it (the cross-checks)
    trace_layout_unwired = False
    # the prefix of the knobs that put data-parallel replicas behind its router (SGLang's
    # router_*: servelab.config.topology_roles.replicas); None: it has none
    router_knob_prefix = None
    # the package its router comes from (data-parallel replicas or a P/D pair), which the
    # pre-flight asks for; None: none to install
    router_package = None
    # what installs that package (the pre-flight's advice)
    router_install = None
    # a P/D pair of it sits behind servelab's own proxy (servelab.engines.vllm.pd_proxy: its wheel
    # ships none); else behind its router package's P/D router
    pd_proxy = True
    # the variable each P/D role gets a free port in for its KV-transfer side channel (NIXL)
    pd_side_channel_env = "VLLM_NIXL_SIDE_CHANNEL_PORT"
    # the prefill role's knob for the free port its KV bootstrap server listens on
    pd_bootstrap_port_knob = None
    # servelab's module that runs its server command (its wheel's own CLI, with servelab's fixes),
    # and that command as a user types it (a search's outcome prints it so); None: its own
    own_cli = ("servelab.engines.vllm.cli", "vllm serve")
    # on the CPU, the variable that sizes its KV cache in host memory (GiB), and its default
    cpu_kv_cache = ("VLLM_CPU_KVCACHE_SPACE", 4)
    # its server can be started before the job holds its GPUs, and wait for them imported
    # (servelab.engines.prestart)
    defers_start = True
    # its server runs the torch profiler on request (the `torch_profile` monitor)
    torch_profiler = True
    # its flags are its installed release's (they come and go between releases): a refused
    # flag names that release
    release_flags = True
    # the module of servelab's own that runs its offline points (its parser checks their
    # flags); None: the engine's own benchmarks (`vllm bench throughput|latency`)
    own_offline_runner = None
    # the offline benchmarks an experiment of `kind: offline` may name as its `tool`
    offline_tools = ("throughput", "latency")
    # its offline benchmark's arguments are engine arguments that its own config classes
    # check before loading weights (servelab.engines.vllm.parsers.vllm_engine_config)
    offline_engine_config = True


class SGLangFacts:
    serves = True
    kv_capacity_sized = True
    static_memory_fraction = True
    memory_share = staticmethod(sglang_memory_share)
    shared_prefix_dataset = "generated-shared-prefix"
    shared_prefix_knobs = {"groups": "gsp_num_groups", "prompts_per_group": "gsp_prompts_per_group",
                           "shared_len": "gsp_system_prompt_len", "suffix_len": "gsp_question_len",
                           "output_len": "gsp_output_len"}
    trace_layout_unwired = True
    router_knob_prefix = "router_"
    router_package = "sglang_router"
    router_install = "pip install sglang-router==0.3.2"
    pd_proxy = False
    pd_side_channel_env = None
    pd_bootstrap_port_knob = "disaggregation_bootstrap_port"
    own_cli = None
    cpu_kv_cache = VLLMFacts.cpu_kv_cache   # not measured: no SGLang on the CPU here
    defers_start = False
    torch_profiler = False
    release_flags = True
    own_offline_runner = None
    offline_tools = ()
    offline_engine_config = False


class NoEngine:
    """A name no engine has: no server, router or offline runner of its own, and vLLM's
    client's workload names and memory rule (the branches the code took for any name but
    SGLang's)."""
    serves = False
    kv_capacity_sized = False
    static_memory_fraction = False
    memory_share = staticmethod(vllm_memory_share)
    shared_prefix_dataset = VLLMFacts.shared_prefix_dataset
    shared_prefix_knobs = VLLMFacts.shared_prefix_knobs
    trace_layout_unwired = False
    router_knob_prefix = None
    router_package = None
    router_install = None
    pd_proxy = False
    pd_side_channel_env = None
    pd_bootstrap_port_knob = None
    own_cli = None
    cpu_kv_cache = VLLMFacts.cpu_kv_cache
    defers_start = False
    torch_profiler = False
    release_flags = False
    own_offline_runner = None
    offline_tools = ()
    offline_engine_config = False


class TransformersFacts(NoEngine):
    """HF transformers' static batching: offline only, by servelab's own runner."""
    own_offline_runner = "servelab.engines.hf.static_batching"
    offline_tools = ("static_batch",)


FACTS = {"vllm": VLLMFacts(), "sglang": SGLangFacts(), "transformers": TransformersFacts()}
NO_ENGINE = NoEngine()


def of(engine: str | None):
    """The facts of the engine so named (NO_ENGINE's for a name no engine has)."""
    return FACTS.get(engine, NO_ENGINE)


class EngineClient:
    """The engine's own benchmark client (`vllm bench serve`, `sglang.bench_serving`)."""
    name = "engine"        # what a point's result names it (a row's `client`)
    program = None         # not a program of its own: the engine's
    distribution = None
    # one Python process: this busy, its event loop paces the load (the "client busy" warning)
    one_process = True


class AIPerfClient:
    """AIPerf (servelab.engines.clients.aiperf), a client in an install of its own."""
    name = "aiperf"          # what a point's result names it, and an llm-d report's tool
    program = "aiperf"       # its executable: the first word of a point's recorded client command
    distribution = "aiperf"  # its package, as provenance lists it
    # its load comes from processes of its own (workers, record processors): the CPU counted
    # as the point's client is not one event loop's, and warns of no busy client
    one_process = False


CLIENTS = {c.name: c for c in (EngineClient(), AIPerfClient())}


def client(name: str | None):
    """The client a point's result names (the engine's own where it names none or another)."""
    return CLIENTS.get(name, CLIENTS["engine"])


def client_of_program(argv0: str):
    """The client of its own whose executable `argv0` is (a path or a name); None: none."""
    program = argv0.rsplit("/", 1)[-1]
    return next((c for c in CLIENTS.values() if c.program is not None and c.program == program), None)
