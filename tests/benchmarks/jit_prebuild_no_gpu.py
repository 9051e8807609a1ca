"""`servelab prebuild-jit` with no GPU: how long nvcc takes for each FlashInfer module, and
that a start coming after it finds nothing to build. Prints figures; asserts nothing.

    FLASHINFER_CUDA_ARCH_LIST=9.0 PYTHONPATH=FLASHINFER_SITE \\
      .venv/bin/python tests/benchmarks/jit_prebuild_no_gpu.py CACHE [MODULE ...]

FLASHINFER_SITE: flashinfer-python (vLLM 0.26 pins 0.6.14) and what it imports;
FLASHINFER_CUDA_ARCH_LIST stands for the GPU the starts would detect (9.0: an H100, whose
starts build into .../90a). nvcc must be on PATH with CUDA's cuRAND headers, and the
linker must find a libcuda.so (the driver's, or on a machine with none a stand-in: an empty
shared object on LIBRARY_PATH, which only the link needs). CACHE: a
cache directory to build under (the run's paths.cache). Each module is built twice: by
the prebuild (cold), then as a vLLM start would meet it, in a process of its own with
another TMPDIR and the session's engine variables (FlashInfer's build(): write the ninja
file, run ninja).
"""
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from servelab.checks.validate import load_configs
from servelab.engines.vllm import jit_prebuild

ROOT = Path(__file__).resolve().parents[2]
cache, modules = sys.argv[1], sys.argv[2:] or list(jit_prebuild.MODULES)
config = load_configs([str(ROOT / "config/config.yaml")])
config["paths"]["cache"] = cache
started = time.monotonic()
ok = jit_prebuild.prebuild(config, modules)["ok"]
print(f"prebuild: {time.monotonic() - started:.0f} s wall on {os.cpu_count()} cores, {'all built' if ok else 'FAILED'}")
env = jit_prebuild.build_env(config)
for module in modules:
    with tempfile.TemporaryDirectory() as tmp:
        started = time.monotonic()
        _, built, what = jit_prebuild.build_one(module, {**env, "TMPDIR": tmp, "VLLM_SERVER_DEV_MODE": "1"})
        if not built:
            print(f"{module}: as a start meets it: FAILED: {what}")
            continue
        build_dir = what.split(", in ")[-1]
        dry = subprocess.run(["ninja", "-C", build_dir, "-n"], capture_output=True, text=True).stdout.strip()
        print(f"{module}: as a start meets it: {time.monotonic() - started:.1f} s ({what}); "
              f"ninja -n: {dry.splitlines()[-1] if dry else '?'}")
