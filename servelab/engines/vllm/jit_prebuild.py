"""FlashInfer's JIT modules that vLLM's starts would build on first use, built before any
session holds a GPU (`servelab prebuild-jit`, servelab.serve.jit_builds). nvcc needs no GPU, and a start that finds
its module built (ninja: nothing to do) loads it at once.

On a fresh box, vLLM 0.26 on CUDA builds, while holding its GPUs:
- `trtllm_comm`, the all-reduce fusion of a start with tensor parallelism under
  VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm (config/config.yaml sets it): 189 s of a TP 4
  start (4 x 189 GPU-s) and 203 s of a TP 2 on 4x H100 boxes, 0 s once cached
  (`startup_allreduce_fusion_s`). One build serves every TP size.
- `sampling`, most likely: vLLM's FlashInfer top-k/top-p sampler (on unless
  VLLM_USE_FLASHINFER_SAMPLER=0) first runs in the sampler warm-up after CUDA graph
  capture, the silent 99-114 s of a cold start (`startup_warmup_s`; 0-1 s warm). Read
  from vLLM 0.26's code path, not yet measured on a GPU.

On one machine (no SLURM) each vLLM session builds what its start needs itself, before it
claims a GPU, while its pre-started server imports (servelab.serve.jit_builds): the imports and
the build overlap, and a fresh box's first start no longer waits for both in turn. Under
SLURM a job holds its GPUs from its start, so the DAG's `prebuild_jit` jobs build first.

Built with the sessions' own environment (servelab.engines.environment.engine_cache_env: the
same FLASHINFER_WORKSPACE_BASE under the workflow's cache, keyed by vLLM, torch and GPU)
and for the architectures the starts detect (nvidia-smi's compute capabilities, or
FLASHINFER_CUDA_ARCH_LIST where set), so the modules land where the starts look. Run it
on the box the sessions run on: the cache key names its GPU.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from servelab.config.experiments import point_env
from servelab.engines.environment import engine_cache_env, importable
from servelab.run import provenance

# module name -> (its FlashInfer generator's module, function)
MODULES = {"sampling": ("flashinfer.jit.sampling", "gen_sampling_module"),
           "trtllm_comm": ("flashinfer.jit.comm", "gen_trtllm_comm_module")}

# run in the engine's Python: JitSpec.build() takes the module's lock and runs ninja in
# the directory the runtime's build_and_load() uses (flashinfer/jit/core.py)
BUILD = """
import importlib, sys, time
start = time.monotonic()
spec = getattr(importlib.import_module(sys.argv[1]), sys.argv[2])()
spec.build(verbose=False)
print(f"{spec.build_dir}\\t{time.monotonic() - start:.0f}")
"""


def off(value) -> bool:
    return str(value).strip().lower() in ("0", "false", "no", "off")


def point_modules(config: dict, exp: dict, knobs: dict) -> list[str]:
    """The modules one server point's vLLM start builds: `sampling` unless FlashInfer's
    sampler is off in its environment; `trtllm_comm` where it has tensor parallelism
    under the trtllm all-reduce backend."""
    engine_env = (config.get("engines", {}).get("vllm") or {}).get("env") or {}
    env = {**engine_env, **(exp["server"].get("env") or {}), **point_env(knobs)}
    needed = []
    if not off(env.get("VLLM_USE_FLASHINFER_SAMPLER", "1")):
        needed.append("sampling")
    if int(knobs.get("tensor_parallel_size") or 1) > 1 and str(env.get("VLLM_FLASHINFER_ALLREDUCE_BACKEND")) == "trtllm":
        needed.append("trtllm_comm")
    return needed


def build_env(config: dict) -> dict[str, str]:
    """The environment of a vLLM session's engine, as far as FlashInfer's build reads it."""
    engine_env = {k: str(v) for k, v in ((config.get("engines", {}).get("vllm") or {}).get("env") or {}).items()}
    cache_root = config.get("paths", {}).get("cache", ".cache")
    env = {**os.environ, **engine_cache_env("vllm", cache_root, engine_env), **engine_env}
    # the architectures a start detects (FlashInfer normalises "9.0" to 90a as it does a
    # detected 9.0), named so that the build never opens a CUDA context: the run's first
    # sessions may be starting beside it
    if "FLASHINFER_CUDA_ARCH_LIST" not in env and (caps := provenance.gpu_compute_capabilities()):
        env["FLASHINFER_CUDA_ARCH_LIST"] = " ".join(caps)
    return env


def build_one(module: str, env: dict, python: str = sys.executable) -> tuple[str, bool, str]:
    """(module, built, what happened): its build directory and seconds, or why it failed."""
    gen_module, gen_function = MODULES[module]
    proc = subprocess.run([python, "-c", BUILD, gen_module, gen_function], env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        tail = [line for line in (proc.stderr or proc.stdout).strip().splitlines() if line.strip()][-3:]
        return module, False, " | ".join(tail) or f"exit {proc.returncode}"
    build_dir, seconds = proc.stdout.strip().splitlines()[-1].split("\t")
    return module, True, f"{seconds} s, in {build_dir}"


def prebuild(config: dict, modules: list[str], progress=print) -> dict:
    """Build `modules` side by side. Returns what happened:
    {"ok": every module built (or none needed), "modules": {module: what}, "workspace",
    "seconds"}; a module that failed here is built by the starts themselves."""
    env = build_env(config)
    done = {"ok": True, "modules": {}, "workspace": env.get("FLASHINFER_WORKSPACE_BASE"), "seconds": 0.0}
    if not modules:
        progress("servelab prebuild-jit: no vLLM start of this config builds a FlashInfer module")
        return done
    if not importable("flashinfer", env):
        progress("servelab prebuild-jit: flashinfer is not importable where vLLM runs here: nothing to build "
                 "(vLLM's CPU build has none)")
        done["modules"] = {m: "not built: flashinfer not importable" for m in modules}
        return done
    progress(f"servelab prebuild-jit: building FlashInfer {', '.join(modules)} under "
             f"{env['FLASHINFER_WORKSPACE_BASE']} (no GPU is held; each takes minutes the first time)")
    start = time.monotonic()
    with ThreadPoolExecutor(len(modules)) as pool:
        for module, built, what in pool.map(lambda m: build_one(m, env), modules):
            progress(f"servelab prebuild-jit:   {module}: {'built' if built else 'FAILED'}: {what}")
            done["modules"][module] = f"{'built' if built else 'FAILED'}: {what}"
            done["ok"] &= built
    done["seconds"] = round(time.monotonic() - start, 1)
    progress(f"servelab prebuild-jit: done in {done['seconds']:.0f} s"
             + ("" if done["ok"] else "; the starts build what failed here themselves"))
    return done
