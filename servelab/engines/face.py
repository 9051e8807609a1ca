"""What every engine supplies in code, beside its facts (servelab.config.engine_facts): each
engine's class in servelab.engines.registry inherits this face, and overrides what it has.
These defaults are an engine's that has none of it."""

from __future__ import annotations

from pathlib import Path

from servelab.config import engine_facts


class EngineFace:
    name: str   # what an experiment's `engine` names it

    def __getattr__(self, key: str):
        """Its facts (servelab/engines/NAME/facts.yaml), read as its own attributes."""
        if key.startswith("_") or key == "name":
            raise AttributeError(key)
        return getattr(engine_facts.of(self.name), key)

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

    # its load generator, and each of its offline benchmarks, by the names llm-d gives them in a
    # benchmark report (base.WorkloadGenerator; servelab.export.llmd): else ENGINE-client, or the kind
    llmd_load_tool: str | None = None
    llmd_offline_tools: dict[str, str] = {}
    # the variable its compile cache's location is read from (servelab.run.caches puts it under
    # the workflow's cache), whose starts pass the compile gate (servelab.run.compile_gate): none
    compile_cache_var: str | None = None
    # the folder of its server's flag lists, one a release (`serve-RELEASE.txt`), that the dry
    # run checks a server's flags against without importing it (servelab.checks.flag_lists)
    flag_lists: Path | None = None
    # what silences its import chatter where its parsers are imported (servelab validate)
    quiet_env: dict[str, str] = {}

    def parsers(self):
        """Its own argument parsers (servelab.checks.validate): `serve(cmd)`, `server_argv(cmd)`,
        `router(argv)`, `client(argv)`, each raising SystemExit on a refusal. None: not checked."""
        return None

    def offline_parser(self, tool: str):
        """The parse function of its own offline benchmark `tool`."""
        raise NotImplementedError(f"{type(self).__name__} has no offline benchmark {tool!r}")

    def engine_config(self, parsed, model_dir: str) -> str | None:
        """What its own config classes refuse of parsed engine arguments on a model's
        config.json, before any weight is loaded; None: nothing (or not checked)."""
        return None

    def log_stats_interval_s(self, env: dict) -> float:
        """Seconds between the periodic stat lines its server logs (0: it logs none)."""
        return 0.0

    def spec_log_columns(self, log_part: str) -> dict:
        """Speculative decoding's acceptance over a point, from the stat lines its server logged
        during it, where /metrics has no speculation counters: {} where it logs none."""
        return {}

    def server_flags(self) -> list[str]:
        """Every option string of the installed release's server parser (imports the engine)."""
        return []
