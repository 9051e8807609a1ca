"""Pre-flight: which experiments need a package this environment lacks, said before any
job starts (a dry run included), one line per experiment: the package, the command that
installs it, and the overlay that leaves the experiment or its section out. Also which
needed packages every process will compile again (no bytecode, none written).

    servelab preflight config/config.yaml [overlay.yaml ...]
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from servelab.config import workloads
from servelab.config.experiments import all_client_points, server_points
from servelab.config import engine_facts as facts
from servelab.engines import environment
from servelab.engines.clients import aiperf as aiperf_client
from servelab.engines.registry import ENGINES
from servelab.serve.topology import replicas


@dataclass(frozen=True)
class Need:
    module: str          # what is imported
    install: str         # the command that installs it
    why: str             # what of the experiment needs it
    section: str | None  # the section an overlay can switch off instead of the experiment


LM_EVAL = Need("lm_eval", "pip install lm-eval==0.4.13", "eval (lm-eval)", "eval")
# each engine's package and what installs it, as its face says
ENGINE = {name: Need(e.import_module, e.install_hint, f"engine {name}", None) for name, e in ENGINES.items()}
# an engine's router package (facts.router_package) -> what installs it
ROUTERS = {f.router_package: Need(f.router_package, f.router_install, f"{name}'s router", None)
           for name, f in facts.FACTS.items() if f.router_package}
CONNECTORS = {"LMCacheConnectorV1": Need("lmcache", "pip install lmcache (built for your torch; torch 2.11: envs/gpu-torch2.11-cu13.txt)",
                                         "kv_transfer_config LMCacheConnectorV1", None),
              "NixlConnector": Need("nixl", "pip install nixl", "kv_transfer_config NixlConnector", None)}
SPECULATORS = {"suffix": Need("arctic_inference", "pip install arctic-inference",
                              "speculative_config method suffix", None)}
# a client in an install target of its own, found as an executable (aiperf_client.executable)
AIPERF = Need("aiperf", "envs/setup-local.sh makes .venv-aiperf; or set SERVELAB_AIPERF to an aiperf 0.13 "
                        "executable (a GPU node without internet: envs/offline-gpu/aiperf-0.13-py312.txt)",
              "AIPerf, the client of its multi-turn conversations or `client_tool: aiperf` points", None)


def uses_aiperf(config: dict, exp: dict) -> bool:
    """Whether some load point of the experiment is sent by AIPerf (aiperf_client.wanted)."""
    spec = (config.get("datasets") or {}).get(exp.get("dataset")) or {}
    if workloads.kind(spec) == "multi_turn":
        return True
    return any(aiperf_client.wanted(point) for point in all_client_points(exp))


def aiperf_found() -> bool:
    try:
        return bool(aiperf_client.executable())
    except FileNotFoundError:
        return False


def needs(exp: dict) -> list[tuple[Need, str | None]]:
    """The packages an experiment's jobs import, from its engine, knobs and sections, each
    with the named server configuration that alone needs it (None: the experiment does)."""
    found = [(ENGINE[exp["engine"]], None)]
    if exp.get("eval"):
        found.append((LM_EVAL, None))
    configs = exp.get("server", {}).get("configs", {})
    roles = [role.get("args", {}) for role in (exp.get("topology") or {}).values() if isinstance(role, dict)]
    for point, knobs in [*server_points(exp).items(), *((None, r) for r in roles)]:
        named = point if point in configs else None
        router = facts.of(exp["engine"]).router_package
        if router and (exp.get("topology") or replicas(exp["engine"], knobs)):
            found.append((ROUTERS[router], None))
        if connector := CONNECTORS.get((knobs.get("kv_transfer_config") or {}).get("kv_connector")):
            found.append((connector, named))
        if speculator := SPECULATORS.get((knobs.get("speculative_config") or {}).get("method")):
            found.append((speculator, named))
    return list(dict.fromkeys(found))


def engine_env(config: dict, exp: dict) -> dict:
    """The environment the experiment's engine processes get (`engines.<name>.env`)."""
    return (config.get("engines", {}).get(exp["engine"]) or {}).get("env") or {}


def missing(config: dict, names: list[str], has=environment.importable, aiperf=aiperf_found) -> list[str]:
    """One line per experiment of `names` that needs a package `has` does not find where
    its engine's processes look (`has(module, env)`: the engine's PYTHONPATH first), or
    AIPerf where `aiperf()` finds none."""
    lines = []
    for name in names:
        exp = config["experiments"][name]
        lacking = [(need, named) for need, named in needs(exp) if not has(need.module, engine_env(config, exp))]
        if uses_aiperf(config, exp) and not aiperf():
            lacking.append((AIPERF, None))
        if not lacking:
            continue
        packages = list(dict.fromkeys(need for need, _ in lacking))
        what = "; ".join(f"{n.module} for {n.why} ({n.install})" for n in packages)
        configs = sorted({named for _, named in lacking if named})
        # leaving out every server point is leaving out the experiment
        every_point = set(configs) == set(server_points(config["experiments"][name]))
        if all(named for _, named in lacking) and not every_point:
            nulls = ", ".join(f"{c}: null" for c in configs)
            skip = f"or leave out configuration(s) {', '.join(configs)} with an overlay " \
                   f"`experiments: {{{name}: {{server: {{configs: {{{nulls}}}}}}}}}`"
        elif all(n.section for n in packages):
            sections = ", ".join(f"{n.section}: null" for n in packages)
            skip = f"or leave that out with an overlay `experiments: {{{name}: {{{sections}}}}}`"
        else:
            skip = f"or leave the experiment out (`--config 'run=[...]'` without {name})"
        lines.append(f"{name}: needs {what}; {skip}")
    return lines


def uncompiled(module: str, env: dict | None = None) -> str | None:
    """A line when `module` has no bytecode for this Python and none will be written, so that
    every process importing it compiles its source again. An engine start imports the engine
    in two processes or more: on an H100 box (an image with PYTHONDONTWRITEBYTECODE=1,
    wheels installed with --no-compile) importing vLLM took 30.0 s, and 21.9 s once compiled."""
    spec = environment.module_spec(module, env)
    if spec is None or not spec.origin or not spec.origin.endswith("__init__.py"):
        return None
    root = Path(spec.origin).parent
    if spec.cached and Path(spec.cached).exists():
        return None
    if not sys.dont_write_bytecode and os.access(root, os.W_OK):
        return None     # written by the first import
    why = "PYTHONDONTWRITEBYTECODE is set" if sys.dont_write_bytecode else f"{root} is read-only"
    return (f"{module} at {root} has no bytecode for this Python and none will be written ({why}): "
            f"every process that imports it compiles it again; once: {sys.executable} -m compileall -q {root}")


def slow_imports(config: dict, names: list[str], has=environment.importable) -> list[str]:
    """One line per needed, installed package that every engine process would compile again."""
    modules = {}
    for name in names:
        exp = config["experiments"][name]
        for need, _ in needs(exp):
            modules.setdefault(need.module, engine_env(config, exp))
    return [line for module, env in modules.items() if has(module, env) and (line := uncompiled(module, env))]


def main(argv: list[str] | None = None) -> int:
    """Which experiments need a package that this environment (or the engine's own,
    engines.<name>.env.PYTHONPATH) lacks, with the command that installs it and the overlay
    that leaves it out; which packages every engine process would compile again. Exits 1
    when something is missing."""
    import argparse

    from servelab.config.yaml_bounds import read_config_files

    from servelab.checks.cross_checks import drop_nulled_sections
    from servelab.config.experiments import enabled_experiments

    parser = argparse.ArgumentParser(prog="servelab preflight", description=main.__doc__)
    parser.add_argument("configs", nargs="*", default=["config/config.yaml"], metavar="CONFIG",
                        help="config/config.yaml, then overlays, merged in order (default: config/config.yaml)")
    try:
        config = read_config_files(parser.parse_args(argv).configs)
    except ValueError as err:
        raise SystemExit(f"servelab preflight: {err}") from err
    drop_nulled_sections(config)
    names = enabled_experiments(config)
    lines = missing(config, names)
    for line in lines + slow_imports(config, names):
        print(f"servelab pre-flight: {line}")
    print(f"servelab pre-flight: {len(lines)} experiment(s) need a package this environment lacks")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
