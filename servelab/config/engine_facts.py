"""What the rest of the package asks of an engine or a load client, as facts: no code
outside servelab/engines tests an engine's or a client's name. Each engine declares its facts
once, in its folder (servelab/engines/NAME/facts.yaml), checked against `EngineFacts` below
(a key it does not know is refused by name); the engine classes of servelab.engines.registry
(ENGINES) read them as their own attributes. This module imports nothing from servelab and
reads those files as data, so that every stage (config and fetch included) may ask them:
`of(name)` for an engine, `client(name)` for a client a point's result names.

A name no engine has (a config the cross-checks refuse, before they have run) gets
EngineFacts' defaults: no server, router or offline runner of its own, and vLLM's client's
workload names and memory rule (what the code assumed of such a name before these were facts)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path

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
# recordings' residue was 0.06-0.59 GiB for dense Llama-3.1-8B at TP 1/2/4, 1.43 GiB for
# Mixtral-8x7B at TP 2
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


ENGINES_DIR = Path(__file__).resolve().parents[1] / "engines"
# what each memory knob gives a server on one GPU (servelab.fetch.capacity), by its knob
MEMORY_RULES = {"gpu_memory_utilization": vllm_memory_share, "mem_fraction_static": sglang_memory_share}


@dataclass(frozen=True)
class EngineFacts:
    name: str = ""
    # it runs as a server that a client sends requests to (else: offline points only)
    serves: bool = False
    # its server holds a KV cache in memory of its own, sized by a memory knob, that the
    # capacity plan sizes (servelab.fetch.capacity, `servelab plan`)
    kv_capacity_sized: bool = False
    # its memory knob, whose rule (MEMORY_RULES) says what it budgets on one GPU:
    # gpu_memory_utilization, a share of all the memory, activations within it (and
    # kv_cache_memory_bytes, where set, the KV cache's bytes outright); or mem_fraction_static,
    # the share of the memory left once it has started, for the weights and the KV pool only
    memory_knob: str = "gpu_memory_utilization"
    # its client's generator of prompt groups sharing a prefix (a `shared_prefix` workload,
    # servelab.config.workloads): its --dataset-name, and the knob that carries each field
    shared_prefix_dataset: str = "prefix_repetition"
    shared_prefix_knobs: dict = field(default_factory=lambda: {
        "shared_len": "prefix_repetition_prefix_len", "suffix_len": "prefix_repetition_suffix_len",
        "groups": "prefix_repetition_num_prefixes", "output_len": "prefix_repetition_output_len"})
    # its client reads another layout of trace (SGLang's mooncake mode), not wired here: a
    # `trace` dataset is refused for it (the cross-checks)
    trace_layout_unwired: bool = False
    # the prefix of the knobs that put data-parallel replicas behind its router (SGLang's
    # router_*: servelab.config.topology_roles.replicas); None: it has none
    router_knob_prefix: str | None = None
    # the package its router comes from (data-parallel replicas or a P/D pair), which the
    # pre-flight asks for, and what installs it; None: none to install
    router_package: str | None = None
    router_install: str | None = None
    # a P/D pair of it sits behind servelab's own proxy (servelab.engines.vllm.pd_proxy: its wheel
    # ships none); else behind its router package's P/D router
    pd_proxy: bool = False
    # the variable each P/D role gets a free port in for its KV-transfer side channel (NIXL)
    pd_side_channel_env: str | None = None
    # the prefill role's knob for the free port its KV bootstrap server listens on
    pd_bootstrap_port_knob: str | None = None
    # servelab's module that runs its server command (its wheel's own CLI, with servelab's fixes),
    # and that command as a user types it (a search's outcome prints it so); None: its own
    own_cli: tuple | None = None
    # on the CPU, the variable that sizes its KV cache in host memory (GiB), and its default;
    # None: the capacity plan takes 4 GiB
    cpu_kv_cache: tuple | None = None
    # its server can be started before the job holds its GPUs, and wait for them imported
    # (servelab.engines.prestart)
    defers_start: bool = False
    # its server runs the torch profiler on request (the `torch_profile` monitor)
    torch_profiler: bool = False
    # its flags are its installed release's (they come and go between releases): a refused
    # flag names that release
    release_flags: bool = False
    # the module of servelab's own that runs its offline points (its parser checks their
    # flags); None: the engine's own benchmarks
    own_offline_runner: str | None = None
    # the offline benchmarks an experiment of `kind: offline` may name as its `tool`
    offline_tools: tuple = ()
    # its offline benchmark's arguments are engine arguments that its own config classes
    # check before loading weights (the face's engine_config)
    offline_engine_config: bool = False

    @property
    def static_memory_fraction(self) -> bool:
        """Its memory knob budgets only weights and KV pool, activations outside it."""
        return self.memory_knob == "mem_fraction_static"

    @property
    def memory_share(self):
        """What its memory knob gives a server on one GPU (MEMORY_RULES)."""
        return MEMORY_RULES[self.memory_knob]


def load_facts(path: Path) -> EngineFacts:
    """One engine's facts.yaml, every key a field of EngineFacts (lists read as tuples)."""
    import yaml

    data = yaml.safe_load(path.read_text()) or {}
    if not data.get("name"):
        raise ValueError(f"{path}: no name (what an experiment's `engine` calls it)")
    known = {f.name: f for f in fields(EngineFacts)}
    if unknown := sorted(set(data) - set(known)):
        raise ValueError(f"{path}: {', '.join(unknown)} not a fact servelab knows "
                         f"(servelab.config.engine_facts.EngineFacts: {', '.join(sorted(known))})")
    if data.get("memory_knob", "gpu_memory_utilization") not in MEMORY_RULES:
        raise ValueError(f"{path}: memory_knob {data['memory_knob']!r} has no rule (one of {sorted(MEMORY_RULES)})")
    return EngineFacts(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


FACTS = {f.name: f for f in map(load_facts, sorted(ENGINES_DIR.glob("*/facts.yaml")))}
NO_ENGINE = EngineFacts()


def of(engine: str | None) -> EngineFacts:
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
