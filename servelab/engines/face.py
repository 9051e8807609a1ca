"""What every engine supplies in code, beside its facts (servelab.config.engine_facts): each
engine's class in servelab.engines.registry inherits this face, and overrides what it has.
These defaults are an engine's that has none of it."""

from __future__ import annotations


class EngineFace:
    # the modules its starts JIT-build on first use while they hold their GPUs, which a build
    # before any GPU claim spares them (servelab.serve.jit_builds): none
    jit_module_names: tuple[str, ...] = ()

    def jit_modules(self, config: dict, exp: dict, knobs: dict) -> list[str]:
        """The modules one server point's start would build (of jit_module_names)."""
        return []

    def jit_build(self, config: dict, modules: list[str], progress=print) -> dict:
        """Build `modules` with no GPU held: {"ok": every one built (or none needed),
        "modules": {module: what happened}, "seconds"}."""
        return {"ok": True, "modules": {}, "seconds": 0.0}
