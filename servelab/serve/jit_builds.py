"""JIT modules that an engine's starts would build while holding their GPUs, built first with
none held (the engine's face says which and how: vLLM's FlashInfer modules,
servelab.engines.vllm.jit_prebuild). Each module leaves a marker: under SLURM the DAG's
`prebuild_jit` job writes it before the sessions that need it; on one machine a session builds
what has no marker itself, before it claims a GPU, while its pre-started server imports."""

from __future__ import annotations

import json
import time
from pathlib import Path

from servelab.atomic import atomic_path
from servelab.config.experiments import enabled_experiments, server_points
from servelab.engines.registry import ENGINES


def modules_for(config: dict) -> dict[str, list[str]]:
    """{engine: the modules its starts build}, over every server point of the run's experiments."""
    needed: dict[str, set[str]] = {}
    for name in enabled_experiments(config):
        exp = config["experiments"].get(name) or {}
        face = ENGINES.get(exp.get("engine"))
        if face is None or not exp.get("server"):
            continue
        for knobs in server_points(exp).values():
            needed.setdefault(exp["engine"], set()).update(face.jit_modules(config, exp, knobs))
    return {engine: [m for m in ENGINES[engine].jit_module_names if m in modules]
            for engine, modules in needed.items() if modules}


def write_marker(path: str | Path, done: dict) -> None:
    """A module's marker (rule prebuild_jit's output): what was built where."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(done, indent=1) + "\n")


def build(engine: str, config: dict, module: str, marker: str | Path, progress=print) -> dict:
    """Build one module of `engine` and write its marker (the DAG's job)."""
    done = ENGINES[engine].jit_build(config, [module], progress)
    write_marker(marker, done)
    return done


def build_before_claim(engine: str, config: dict, markers: dict[str, str], progress=print) -> float:
    """Build the modules of `markers` ({module: marker path}) whose marker is missing, and
    write their markers; the seconds it took (0 where every marker was there). Sessions
    starting together build a module once: the build takes the module's lock, and whoever
    comes second finds it built (ninja: nothing to do)."""
    missing = [module for module, path in markers.items() if not Path(path).exists()]
    if not missing:
        return 0.0
    start = time.monotonic()
    done = ENGINES[engine].jit_build(config, missing, progress)
    for module in missing:
        what = done["modules"][module]
        write_marker(markers[module], {**done, "ok": not what.startswith("FAILED"), "modules": {module: what}})
    return time.monotonic() - start


def main(argv: list[str] | None = None) -> int:
    """`servelab prebuild-jit`: every engine's modules for the config, built by hand."""
    import argparse

    from servelab.config.yaml_bounds import read_config_files

    parser = argparse.ArgumentParser(prog="servelab prebuild-jit", description=__doc__.split("\n\n")[0])
    parser.add_argument("configs", nargs="*", default=["config/config.yaml"], metavar="CONFIG",
                        help="config/config.yaml, then overlays, merged in order (as the run's --configfile)")
    parser.add_argument("--cache", help="the run's cache directory, where its working directory is "
                                         "elsewhere (default: the config's paths.cache)")
    known = sorted({m for face in ENGINES.values() for m in face.jit_module_names})
    parser.add_argument("--module", action="append", choices=known,
                        help="build this module (repeatable; default: what the config's starts build)")
    args = parser.parse_args(argv)
    try:
        config = read_config_files(args.configs)   # merged as the run's --configfile merges them
    except ValueError as err:
        raise SystemExit(f"servelab prebuild-jit: {err}") from err
    if args.cache:
        config.setdefault("paths", {})["cache"] = args.cache
    wanted = modules_for(config)
    if args.module:
        wanted = {name: [m for m in args.module if m in face.jit_module_names]
                  for name, face in ENGINES.items() if set(args.module) & set(face.jit_module_names)}
    if not any(wanted.values()):
        print("servelab prebuild-jit: no engine start of this config builds a JIT module")
        return 0
    return 0 if all([ENGINES[e].jit_build(config, mods)["ok"] for e, mods in wanted.items()]) else 1
