"""Check every command a config would launch against the engines' own parsers.

    servelab validate config/config.yaml [config/local.yaml ...]

Run it before submitting GPU jobs: a stale or mistyped flag is reported with
the experiment, server point and flag, and no GPU hour is spent on it.
(Importing vLLM's parsers takes ~10 s, so Snakemake's DAG build does not do it.)
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from dataclasses import dataclass

from servelab.checks.engine_parsers import LMEvalParsers, offline_parser, parse_or_message, with_engine_version
from servelab.config import workloads
from servelab.config import engine_facts as facts
from servelab.engines.clients import aiperf as aiperf_client
from servelab.config.experiments import (all_client_points, bench_knobs, client_points, enabled_experiments, engine_flags,
                                        point_id, point_model, server_points)


@dataclass
class Problem:
    experiment: str
    point: str
    command: str
    message: str

    def __str__(self) -> str:
        return f"{self.experiment} [{self.point}] {self.command}: {self.message}"


def check_offline(name: str, exp: dict, config: dict, parser, *, models: dict[str, str]) -> list[Problem]:
    from servelab.engines.registry import ENGINES

    from servelab.serve.monitors import profiler_knobs

    parse, after = parser
    builtin = config["datasets"][exp["dataset"]].get("builtin")
    profiling = profiler_knobs(exp.get("monitors", {}), Path("/tmp/session"))
    problems = []
    for sp, knobs in server_points(exp).items():
        for client in client_points(exp, knobs):
            client = {**bench_knobs(client), **({"profile": True} if profiling else {})}
            cmd = ENGINES[exp["engine"]].offline_command(exp["tool"], "MODEL", {**engine_flags(knobs), **profiling},
                                                         client,
                                                         dataset_name=builtin or "sharegpt", dataset_path=None if builtin else "d.json",
                                                         out_json="o.json")
            msg = parse_or_message(parse, cmd[cmd.index(after) + 1:])
            if msg:
                problems.append(Problem(name, f"{sp} {point_id(client)}", f"{exp['engine']} {exp['tool']}",
                                        with_engine_version(exp["engine"], msg)))
            elif facts.of(exp["engine"]).offline_engine_config and (model := models.get(point_model(exp, knobs))):
                if refused := ENGINES[exp["engine"]].engine_config(parse(cmd[cmd.index(after) + 1:]), model):
                    problems.append(Problem(name, sp, f"{exp['engine']} {exp['tool']} engine config", refused))
                break   # the engine's config is the server point's: one client point checks it
    return problems


def launch_commands(exp: dict, knobs: dict, served_name: str) -> list[tuple[str, list[str]]]:
    """(role, command) of every process a server point launches, ports made up."""
    from itertools import count

    from servelab.serve import topology
    from servelab.engines.registry import ENGINES

    engine = ENGINES[exp["engine"]]
    ports = count(9000)
    plan = topology.fleet_roles(exp["engine"], knobs, exp.get("topology"), lambda: next(ports))
    if plan is None:
        return [("server", engine.serve_command("MODEL", 8000, knobs, served_name))]
    rs, _, router = plan
    return [(r.name, engine.serve_command("MODEL", r.port, r.knobs, served_name)) for r in rs] + [("router", router)]


def check_eval(name: str, exp: dict, parsers: LMEvalParsers) -> list[Problem]:
    from servelab.fetch import eval_task
    from servelab.engines.clients import lm_eval as lm_eval_client

    spec = exp["eval"]
    where = (name, "eval")
    cmd = lm_eval_client.command(spec, "served", 8000, "MODEL", out_dir="/tmp/out", include_path=None)
    problems = []
    msg = parse_or_message(parsers.parse, cmd[cmd.index("lm_eval") + 1:])
    if msg:
        problems.append(Problem(*where, "lm_eval run", msg))
    unknown = sorted(set(spec.get("model_args", {})) - parsers.model_args())
    if unknown:
        problems.append(Problem(*where, "lm_eval run", f"unknown local-completions model_args {unknown}"))
    generated = spec.get("generated_task", {})
    if generated:
        try:
            eval_task.base_task_yaml(generated["base"])
        except FileNotFoundError as exc:
            problems.append(Problem(*where, "lm_eval run", str(exc)))
    missing = sorted(set(spec["tasks"]) - {generated.get("name")} - parsers.tasks())
    if missing:
        problems.append(Problem(*where, "lm_eval run", f"unknown task(s) {missing}"))
    return problems


@contextlib.contextmanager
def model_configs(config: dict):
    """{model: a directory holding its config.json} for the models whose architecture the
    config states (`shape`) or that were built here (`tiny`), for the engines' config checks."""
    import json
    import tempfile

    with tempfile.TemporaryDirectory(prefix="servelab-validate-") as tmp:
        dirs = {}
        for name, model in config.get("models", {}).items():
            built = Path(config.get("paths", {}).get("models", "resources/models")) / name / "config.json"
            if "shape" in model:
                (Path(tmp) / name).mkdir()
                (Path(tmp) / name / "config.json").write_text(json.dumps(model["shape"]["config"]))
                dirs[name] = str(Path(tmp) / name)
            elif built.is_file():
                dirs[name] = str(built.parent.resolve())
            if name in dirs and model.get("hub"):
                dirs[model["hub"]] = dirs[name]   # a draft model named by its hub id
        yield dirs


def local_drafts(knobs: dict, models: dict[str, str]) -> dict | None:
    """The knobs with a draft model named by hub id replaced by its local config (None:
    a draft whose architecture the config does not state, not checkable here)."""
    spec = knobs.get("speculative_config")
    if not isinstance(spec, dict) or "model" not in spec:
        return knobs
    if spec["model"] not in models:
        return None
    return {**knobs, "speculative_config": {**spec, "model": models[spec["model"]]}}


def engine_config_problems(name: str, sp: str, exp: dict, knobs: dict, *, parser, models: dict[str, str],
                           profiling: dict) -> list[Problem]:
    """The engine's own config checks of one server point's processes (vLLM only; a model
    or draft whose config.json is not known here is not checked)."""
    model = models.get(point_model(exp, knobs))
    local = local_drafts(engine_flags(knobs), models)
    if not hasattr(parser, "engine_config") or model is None or local is None:
        return []
    problems = []
    for role, cmd in launch_commands(exp, {**local, **profiling}, f"servelab-{name}"):
        if role != "router" and not parse_or_message(parser.serve, parser.server_argv(cmd)):
            if refused := parser.engine_config(parser.server_argv(cmd), model):
                problems.append(Problem(name, sp, f"{exp['engine']} {role} engine config", refused))
    return problems


def check_config(config: dict, engines: list[str] | None = None) -> list[Problem]:
    """Problems of every server and client command of the config's experiments
    (of `engines` only, if given)."""
    with model_configs(config) as models:
        return check_commands(config, engines, models)


def check_commands(config: dict, engines: list[str] | None, models: dict[str, str]) -> list[Problem]:
    from servelab.engines.registry import ENGINES

    parsers: dict = {}
    problems = []
    for name, exp in config["experiments"].items():
        if engines is not None and exp["engine"] not in engines:
            continue
        if exp.get("kind") == "offline":
            key = (exp["engine"], exp["tool"])
            if key not in parsers:
                parsers[key] = offline_parser(*key)
            problems += check_offline(name, exp, config, parsers[key], models=models)
            continue
        engine = ENGINES[exp["engine"]]
        if exp["engine"] not in parsers:
            parsers[exp["engine"]] = engine.parsers()
        parser = parsers[exp["engine"]]
        if parser is None:   # its face gives no parsers of its own (EngineFace.parsers)
            print(f"servelab validate: {name}: {engine.name} gives no parsers of its own: its server and "
                  f"client commands are not checked", file=sys.stderr)
            continue
        from servelab.serve.monitors import profiler_knobs

        profiling = profiler_knobs(exp.get("monitors", {}), Path("/tmp/session"))
        for sp, knobs in server_points(exp).items():
            for role, cmd in launch_commands(exp, {**engine_flags(knobs), **profiling}, f"servelab-{name}"):
                if role == "router":
                    msg = parse_or_message(parser.router, cmd[3:])  # after `python -m MODULE`
                else:
                    msg = parse_or_message(parser.serve, parser.server_argv(cmd))
                if msg:
                    problems.append(Problem(name, sp, f"{engine.name} {role}", with_engine_version(exp["engine"], msg)))
            problems += engine_config_problems(name, sp, exp, knobs, parser=parser, models=models, profiling=profiling)
        data = config["datasets"][exp["dataset"]]
        builtin, dataset = not workloads.has_file(data), workloads.dataset_name(data, exp["engine"])
        for knobs in all_client_points(exp):
            knobs = workloads.with_workload(data, exp["engine"], knobs)
            if aiperf_client.wanted(knobs):   # AIPerf's points: not the engine's client
                continue
            knobs = {**bench_knobs(knobs), **({"profile": True} if profiling else {})}
            argv = engine.client_args("MODEL", "served", 8000, dataset,
                                      dataset_path=None if builtin else "data.json", knobs=knobs, out_dir="/tmp")
            msg = parse_or_message(parser.client, argv)
            if msg:
                problems.append(Problem(name, point_id(knobs), f"{engine.name} benchmark client",
                                        with_engine_version(exp["engine"], msg)))
        if exp.get("eval"):
            if "lm_eval" not in parsers:
                parsers["lm_eval"] = LMEvalParsers()
            problems += check_eval(name, exp, parsers["lm_eval"])
    return problems


SCHEMA = Path(__file__).resolve().parents[2] / "config/schema.yaml"


def schema_problems(config: dict) -> list[str]:
    """Every place the config breaks config/schema.yaml, each named by its key path (the
    workflow's own check stops at the first); none: the schema's defaults filled in, as
    the workflow fills them."""
    from snakemake.utils import validate as snakemake_validate

    from servelab.config import schema_errors

    if found := schema_errors.problems(config):
        return found
    snakemake_validate(config, str(SCHEMA))
    return []


def config_problems(config: dict) -> list[str]:
    """What the workflow refuses before any job, in its order: the schema, then the
    cross-checks the schema cannot express (servelab.checks.cross_checks)."""
    from servelab.checks import cross_checks

    cross_checks.drop_nulled_sections(config)
    problems = schema_problems(config)
    if problems:
        return problems
    try:
        cross_checks.check(config)
    except cross_checks.ConfigError as err:
        return [line.strip() for line in str(err).splitlines()[1:]]
    return []


def load_configs(files: list[str]) -> dict:
    """config/config.yaml and overlays merged as Snakemake merges --configfile's; a file
    that is not YAML raises ValueError naming it, its line and column."""
    from servelab.config.yaml_bounds import read_config_files

    return read_config_files(files)


def main(argv: list[str] | None = None) -> int:
    """Check configs as the run would, before any GPU time: the schema, the cross-checks,
    then every server and client command against the engines' own parsers and vLLM's
    config classes. Exits 1 on any problem, 2 on a file that cannot be read."""
    import argparse

    parser = argparse.ArgumentParser(prog="servelab validate", description=main.__doc__)
    parser.add_argument("configs", nargs="*", default=["config/config.yaml"], metavar="CONFIG",
                        help="config/config.yaml, then overlays, merged in order (default: config/config.yaml)")
    parser.add_argument("--all", action="store_true",
                        help="check the commands of every experiment defined, not only those `run` names "
                             "(the schema and cross-checks cover every experiment either way)")
    args = parser.parse_args(argv)
    files = args.configs
    try:
        config = load_configs(files)
    except ValueError as err:  # not YAML: the file, its line and column
        print(f"servelab validate: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"servelab validate: {err}", file=sys.stderr)
        return 2
    problems: list = config_problems(config)
    checked = config.get("experiments", {})
    if not problems:
        if not args.all:   # what a run of these configs launches
            checked = {name: checked[name] for name in enabled_experiments(config)}
        with quiet_engine_imports():
            problems = check_config({**config, "experiments": checked})
    for problem in problems:
        print(problem, file=sys.stderr)
    which = "every experiment" if args.all or len(checked) == len(config.get("experiments", {})) else \
        "those `run` names; --all for every experiment"
    print(f"servelab validate: {len(problems)} problem(s) in {len(checked)} experiment(s) ({which})")
    return 1 if problems else 0


@contextlib.contextmanager
def quiet_engine_imports():
    """The engines' parsers without their import chatter (vLLM's platform and Triton
    warnings, transformers' notices, all through `logging`): what validate finds is then the
    only thing printed (its problems come back as values, not log records)."""
    import logging
    import os

    from servelab.engines.registry import ENGINES

    for face in ENGINES.values():
        for key, value in face.quiet_env.items():
            os.environ.setdefault(key, value)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


if __name__ == "__main__":
    sys.exit(main())
