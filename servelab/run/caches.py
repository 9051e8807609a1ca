"""Engine caches under the workflow's cache directory (on a cluster, the shared one),
keyed so that another engine release, torch or GPU never reuses an entry: vLLM's
compile cache, Triton's kernels, TorchInductor's and FlashInfer's JIT artefacts. The
next start of a shape on the same stack then skips their compilation."""

from __future__ import annotations

import re
from pathlib import Path

# the variable each tool reads its cache location from
CACHE_VARS = {"VLLM_CACHE_ROOT": "vllm", "TRITON_CACHE_DIR": "triton",
              "TORCHINDUCTOR_CACHE_DIR": "inductor", "FLASHINFER_WORKSPACE_BASE": "flashinfer"}


def stack_key(engine: str, engine_version: str | None, torch_version: str | None, device: str) -> str:
    """A path-safe name of what a cache entry is valid for."""
    raw = f"{engine}-{engine_version or 'unknown'}_torch-{torch_version or 'unknown'}_{device}"
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", raw)


def cache_env(root: str | Path, key: str) -> dict[str, str]:
    """The environment that puts every engine cache under `root/key/`."""
    base = Path(root).resolve() / key
    return {var: str(base / name) for var, name in CACHE_VARS.items()}
