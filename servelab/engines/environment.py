"""Where an engine's packages are: the job's own Python, and before it the PYTHONPATH
that `engines.<name>.env` sets. One box can so hold engines that pin different
releases of a shared package (vLLM 0.26 and SGLang 0.5.17 pin flashinfer 0.6.14 and
0.6.15.post1), each installed into its own target (config/engines-own-targets.yaml); the job, its
pre-flight and its records look up each engine where its processes will import it."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from importlib import metadata
from pathlib import Path

from servelab.run import caches, provenance


def engine_paths(env: dict | None) -> list[str]:
    """The import path an engine's processes get from its env (in front of the job's)."""
    return [p for p in str((env or {}).get("PYTHONPATH", "")).split(os.pathsep) if p]


def module_spec(module: str, env: dict | None = None) -> importlib.machinery.ModuleSpec | None:
    """Where a process with `env` finds `module` (a top-level name), without importing it:
    its spec on the engine's path, else on the job's; None where it finds none."""
    paths = engine_paths(env)
    try:
        return (paths and importlib.machinery.PathFinder.find_spec(module, paths)) or importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None


def importable(module: str, env: dict | None = None) -> bool:
    """Whether a process with `env` finds `module` (a top-level name)."""
    return module_spec(module, env) is not None


def installed_version(names: tuple[str, ...] | list[str], env: dict | None = None) -> str | None:
    """The version of the first distribution of `names` that a process with `env` sees."""
    path = engine_paths(env) + sys.path
    for name in names:
        for dist in metadata.distributions(name=name, path=path):
            return dist.version
    return None


def engine_cache_env(engine: str, cache_root: str | Path, env: dict | None = None) -> dict[str, str]:
    """Engine caches under the workflow's cache directory, keyed by engine release, torch
    and device (servelab.run.caches): a next start of a shape on the same stack skips its
    compilation, and no other stack ever reads its entries."""
    from servelab.engines.registry import ENGINES   # the registry imports the engines, which import this

    device = (provenance.gpu_models() or [provenance.cpu_model()])[0]
    key = caches.stack_key(engine, installed_version(ENGINES[engine].distributions, env),
                           installed_version(("torch",), env), device)
    return caches.cache_env(cache_root, key)
