"""Pre-start: a server that imports its engine before it holds a GPU (#18).

When a machine runs more session jobs than it has GPUs (the single-node profile with
`--resources gpu=2N`: servelab.run.gpu_claims), a job still waiting for a GPU starts its
server through this gate. The process imports the engine's front end (vLLM's API server
or its offline benchmark: the modules vLLM itself loads before it touches CUDA), stamps
its log, then blocks on its stdin. Once the session holds its GPUs it writes their ids
there (`grant`); the process sets CUDA_VISIBLE_DEVICES (nothing has initialised CUDA yet)
and goes on as the engine's own command line. A start then pays no imports: they ran
while the GPU still measured the job before.

The log's two stamps (IMPORTED; GRANTED, the session's time of the grant) give the
imports done ahead of a grant that came later, and the start-up counted from it (servelab.engines.vllm.startup_log.timeline). servelab.serve.server
starts such a process and grants it its GPUs.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from datetime import datetime
from pathlib import Path

GATE_ENV = "SERVELAB_GATED"      # set in a gated server's environment
IMPORTED = "servelab: imported ahead at "
GRANTED = "servelab: GPU(s) granted at "
# the modules vLLM's API server process loads before its engine process starts (it never
# initialises CUDA itself; its engine process is spawned, or forked where
# VLLM_WORKER_MULTIPROC_METHOD=fork, as config/gpu-check.yaml sets)
VLLM_SERVE_MODULES = ("vllm.entrypoints.cli.main", "vllm.entrypoints.cli.serve",
                      "vllm.entrypoints.openai.api_server")


TIME_FORMAT = "%Y-%m-%d %H:%M:%S.%f"


def stamp(prefix: str) -> datetime:
    now = datetime.now()
    print(f"{prefix}{now:{TIME_FORMAT}}", flush=True)
    return now


def cuda_initialised() -> bool:
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_initialized())


def inspect_model_ahead(model: str | None) -> list[str]:
    """Have vLLM's registry inspect the served model's architectures (its config.json) now:
    where its model-info cache (VLLM_CACHE_ROOT/modelinfos) has no entry, as on a fresh box,
    vLLM inspects the class in a new interpreter (so as not to initialise CUDA) and caches
    what it found. The API server's own lookup then finds the entry. Returns the classes
    inspected; none where the model, its config or the registry says nothing."""
    try:
        architectures = json.loads((Path(model) / "config.json").read_text()).get("architectures") or []
        from vllm.model_executor.models.registry import ModelRegistry
    except Exception:   # no local model directory (a hub name), or another vLLM: nothing ahead
        return []
    inspected = []
    for arch in architectures:
        registered = ModelRegistry.models.get(arch)
        try:
            registered.inspect_model_cls()
        except Exception:   # the server's own lookup will say what is wrong
            continue
        inspected.append(arch)
    return inspected


def wait_for_grant(modules: tuple[str, ...] = (), model: str | None = None) -> bool:
    """In a gated server process (GATE_ENV set): import `modules` and have vLLM inspect the
    `model`'s architecture, then wait for the session's grant on stdin and make it the
    process's CUDA_VISIBLE_DEVICES. True where it waited for the grant (its start-up then
    counts from now), False where the grant came before its imports were done (its start-up
    counts from its launch), and elsewhere.

    The model's inspection (inspect_model_ahead): on a fresh box the API server's lookup of
    the architecture inspects it in a new interpreter, a large part of a first start after
    the grant (docs/measurements.md); done ahead, it finds vLLM's cache entry."""
    if not os.environ.pop(GATE_ENV, None):
        return False
    for name in modules:
        importlib.import_module(name)
    inspect_model_ahead(model)
    imported = stamp(IMPORTED)
    grant = sys.stdin.readline().strip()
    if not grant:   # the session ended before it held a GPU (stdin closed)
        sys.exit(0)
    devices, _, granted_at = grant.partition("\t")   # the session's clock: when it held them
    os.environ["CUDA_VISIBLE_DEVICES"] = devices
    print(f"{GRANTED}{granted_at}", flush=True)
    if cuda_initialised():   # a module touched CUDA with the old devices: start afresh on the granted ones
        print("servelab: CUDA was initialised before the grant; restarting the process", flush=True)
        os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])
    try:
        return datetime.strptime(granted_at, TIME_FORMAT) >= imported
    except ValueError:
        return False
