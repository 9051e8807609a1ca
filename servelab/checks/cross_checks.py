"""Checks the JSON schema cannot express: cross-references between config sections.

Run right after `validate(config, schema)`, so a bad name stops the workflow
before any job starts, and the message names the offending key.
"""

from __future__ import annotations

import sys

import difflib
import hashlib
import json
import re

from servelab.config import workloads
from servelab.fetch import dummy_weights, trace
from servelab.config.experiments import (DURATION_KNOB, ENV_KNOB, all_client_points, client_points,
                                         enabled_experiments, point_model, server_points, swept_knobs)
from servelab.config import engine_facts as facts
from servelab.engines.clients.lm_eval import column_prefixes
from servelab.checks import flag_lists, rounds_checks
from servelab.checks.search_checks import search_problems
from servelab.analysis.columns import METRIC_COLUMNS

# which engines serve
SERVING_ENGINES = tuple(name for name, engine in facts.FACTS.items() if engine.serves)


class ConfigError(ValueError):
    pass


# sections of an experiment (and single figures and named configurations) an overlay may switch off by setting
# them to null: Snakemake merges config files key by key, so an overlay cannot delete one
OPTIONAL_SECTIONS = ("eval", "topology", "monitors", "figures")


def drop_nulled_sections(config: dict) -> dict:
    for name, exp in (config.get("experiments") or {}).items():
        if not isinstance(exp, dict):
            continue
        eval_dropped = "eval" in exp and exp["eval"] is None
        for key in OPTIONAL_SECTIONS:
            if key in exp and exp[key] is None:
                del exp[key]
        if eval_dropped:   # what the pre-flight suggests where lm-eval is missing: a valid config
            drop_eval_figures(name, exp)
        figures = exp.get("figures") or {}
        for name in [n for n, spec in figures.items() if spec is None]:
            del figures[name]
        configs = (exp.get("server") or {}).get("configs") or {}
        for name in [n for n, spec in configs.items() if spec is None]:
            del configs[name]
    # `--config retry_failed=true`: Snakemake reads only True/False as booleans
    for flag in ("retry_failed", "archive_allow_dirty", "run_what_fits"):
        if str(config.get(flag)).lower() in ("true", "false"):
            config[flag] = str(config[flag]).lower() == "true"
    return config


def drop_eval_figures(name: str, exp: dict) -> None:
    """An experiment whose eval section an overlay switched off: its figures that read a
    column only lm-eval gives are left out, each with a note."""
    known = METRIC_COLUMNS | set(swept_knobs(exp))
    for fig, spec in list((exp.get("figures") or {}).items()):
        if not spec:
            continue
        ys = spec["y"] if isinstance(spec["y"], list) else [spec["y"]]
        needs = [c for c in [spec["x"], *ys, *(spec[k] for k in ("hue", "col", "size") if spec.get(k))]
                 if c not in known]
        if needs:
            del exp["figures"][fig]
            print(f"servelab: {name}.figures.{fig} left out: it reads {', '.join(needs)}, which only "
                  f"lm-eval gives ({name}.eval is off)", file=sys.stderr)


def repeat_rule_problems(rule: dict | None, where: str) -> list[str]:
    """A target interval's repeats: at least two to judge a spread, its most not below its least."""
    if not rule:
        return []
    least, most = rule.get("least", 3), rule.get("most", 6)
    return [f"{where}.repeat_until: most ({most}) is below least ({least})"] if most < least else []


def check(config: dict) -> None:
    """Every problem of the config the schema cannot see, named by its key; ConfigError
    with all of them, before any job runs."""
    problems = [f"run: unknown experiment {name!r} (known: {sorted(config['experiments'])})"
                for name in config.get("run") or [] if name not in config["experiments"]]
    tasks_seen: dict = {}
    for name, exp in config["experiments"].items():
        where = f"experiments.{name}"
        try:
            server_points(exp)
        except ValueError as err:
            problems.append(f"{where}.server: {err}")
            continue
        problems += definition_problems(config, exp, where)
        problems += duplicates(exp, where)
        problems += repeat_rule_problems(exp.get("repeat_until", config.get("repeat_until")), where)
        problems += kind_problems(config, exp, where)
        problems += eval_problems(exp, where, tasks_seen)
        problems += duration_problems(exp, where, exp.get("kind", "serve") == "offline")
        if exp.get("search"):
            problems += search_problems(exp, f"{where}.search", config)
        problems += lmcache_problems(exp, where)
        problems += rounds_checks.problems(config, exp, where)
        problems += flag_lists.problems(exp, where)
        problems += figure_problems(config, name, exp, where)
    problems += workload_problems(config)
    if problems:
        raise ConfigError("invalid config:\n  " + "\n  ".join(problems))
    problems += dummy_weights.problems(config, {
        name: {point_model(config["experiments"][name], k) for k in server_points(config["experiments"][name]).values()}
        for name in enabled_experiments(config) if name in config["experiments"]})
    if problems:
        raise ConfigError("invalid config:\n  " + "\n  ".join(problems))


def definition_problems(config: dict, exp: dict, where: str) -> list[str]:
    """Its model, dataset and engine (and a grid's models) defined; no knob both fixed and swept."""
    problems = []
    for section, table in (("model", "models"), ("dataset", "datasets"), ("engine", "engines")):
        if exp[section] not in config[table]:
            problems.append(f"{where}.{section}: {exp[section]!r} is not defined under {table} "
                            f"(defined: {sorted(config[table])})")
    for model in exp.get("server", {}).get("grid", {}).get("model", []):
        if model not in config["models"]:
            problems.append(f"{where}.server.grid.model: {model!r} is not defined under models "
                            f"(defined: {sorted(config['models'])})")
    for side in ("server", "client"):
        part = exp.get(side, {})
        both = set(part.get("args", {})) & set(part.get("grid", {}))
        if both:
            problems.append(f"{where}.{side}: knob(s) {sorted(both)} are both fixed in args and swept in grid")
    return problems


def kind_problems(config: dict, exp: dict, where: str) -> list[str]:
    """What a served or an offline experiment may take: its tool, a server, restarts, a
    topology, lm-eval, the profiler, a random dataset's lengths, num_prompts."""
    problems = []
    offline = exp.get("kind", "serve") == "offline"
    tools = facts.of(exp["engine"]).offline_tools
    if offline and exp.get("tool") not in tools:
        problems.append(f"{where}: kind offline with engine {exp['engine']} needs tool one of {list(tools)} "
                        f"(got {exp.get('tool')!r})")
    if not offline and "tool" in exp:
        problems.append(f"{where}.tool: only offline experiments take a tool")
    if not offline and exp["engine"] not in SERVING_ENGINES:
        problems.append(f"{where}: engine {exp['engine']} has no server; use kind offline")
    if "torch_profile" in exp.get("monitors", {}) and not facts.of(exp["engine"]).torch_profiler:
        problems.append(f"{where}.monitors.torch_profile: vLLM's profiler only (engine is {exp['engine']})")
    if offline and any("restart" in p for p in all_client_points(exp)):
        problems.append(f"{where}.client.restart: restarts are of a server; kind offline has none")
    if exp.get("topology") and offline:
        problems.append(f"{where}.topology: a P/D topology serves; kind offline has none")
    if exp.get("eval") and offline:
        problems.append(f"{where}.eval: lm-eval runs against a server; kind offline has none")
    random_data = config["datasets"].get(exp["dataset"], {}).get("builtin") == "random"
    if exp.get("tool") == "throughput" and random_data:
        for knob in ("input_len", "output_len", "prefix_len"):
            if any(knob in p for p in all_client_points(exp)):
                problems.append(f"{where}.client.{knob}: vllm bench throughput ignores it on the random "
                                f"dataset (its random_{knob} default wins); use random_{knob}")
    needs_prompts = not offline or exp.get("tool") in ("throughput", "static_batch")
    # a workload kind sizes its own requests (conversations x turns, groups, the trace)
    needs_prompts = needs_prompts and not workloads.kind(config["datasets"].get(exp["dataset"], {}))
    if needs_prompts and not any("num_prompts" in p for p in all_client_points(exp)):
        problems.append(f"{where}.client: num_prompts is missing (set it in args or grid)")
    return problems


def eval_problems(exp: dict, where: str, tasks_seen: dict) -> list[str]:
    """A generated lm-eval task among the experiment's tasks, and one definition per name
    across experiments (`tasks_seen`: name -> the first definition)."""
    generated = exp.get("eval", {}).get("generated_task")
    problems = []
    if generated and generated["name"] not in exp["eval"]["tasks"]:
        problems.append(f"{where}.eval.generated_task: {generated['name']!r} is not among eval.tasks "
                        f"{exp['eval']['tasks']}")
    if generated and tasks_seen.setdefault(generated["name"], generated) != generated:
        problems.append(f"{where}.eval.generated_task: another experiment defines {generated['name']!r} "
                        f"differently")
    return problems


def figure_problems(config: dict, name: str, exp: dict, where: str) -> list[str]:
    """Each figure's columns: metric columns (servelab.analysis.columns), the knobs swept in
    it or the experiments it joins, lm-eval's columns."""
    problems = []
    for fig, spec in exp.get("figures", {}).items():
        joined = [o for o in spec.get("also_from", []) if o in config["experiments"]]
        for other in set(spec.get("also_from", [])) - set(joined):
            problems.append(f"{where}.figures.{fig}.also_from: unknown experiment {other!r}")
        columns = METRIC_COLUMNS | {c for e in [name, *joined] for c in swept_knobs(config["experiments"][e])}
        prefixes = tuple(p for e in [name, *joined] for p in column_prefixes(config["experiments"][e].get("eval", {})))
        ys = spec["y"] if isinstance(spec["y"], list) else [spec["y"]]
        for key, col in [("x", spec["x"]), *(("y", y) for y in ys),
                         *((k, spec[k]) for k in ("hue", "col", "size") if k in spec)]:
            if col not in columns and not col.startswith(prefixes or ("\0",)):
                near = difflib.get_close_matches(col, sorted(columns), n=3, cutoff=0.6)
                problems.append(f"{where}.figures.{fig}.{key}: unknown column {col!r}"
                                + (f"; did you mean {' or '.join(near)}?" if near else "")
                                + " (the table's columns: docs/columns.md)")
    return problems


def workload_problems(config: dict) -> list[str]:
    """Each workload dataset (servelab.config.workloads) against the max_model_len of the
    experiments that serve it: a turn count of 0, a shared prefix longer than the model
    takes, a trace with a missing field or unsorted timestamps."""
    out = []
    for name, spec in config["datasets"].items():
        if not workloads.kind(spec):
            continue
        lens = [int(k["max_model_len"]) for exp in config["experiments"].values() if exp.get("dataset") == name
                for k in server_points(exp).values() if k.get("max_model_len")]
        out += workloads.problems(name, spec, lens, read_trace=trace.read, check_trace=trace.validate)
        out += [f"experiments.{exp_name}.dataset: {name!r} is a trace; SGLang's client reads another trace "
                f"layout (its mooncake mode), not wired here: engine vllm replays it (docs/workloads.md)"
                for exp_name, exp in config["experiments"].items()
                if exp.get("dataset") == name and workloads.kind(spec) == "trace"
                and facts.of(exp.get("engine")).trace_layout_unwired]
    return out


def duration_problems(exp: dict, where: str, offline: bool) -> list[str]:
    """`duration_s` sizes a served load held at a rate or a concurrency: nothing else."""
    timed = [p for p in all_client_points(exp) if DURATION_KNOB in p]
    if timed and offline:
        return [f"{where}.client.{DURATION_KNOB}: a duration sizes a served load; kind offline has none"]
    if any(p.get("request_rate") in (None, "inf", float("inf")) and not p.get("max_concurrency") for p in timed):
        return [f"{where}.client.{DURATION_KNOB}: needs a request_rate or a max_concurrency (prompts sent all at "
                f"once are one burst, not a load held for a duration)"]
    return []


def lmcache_problems(exp: dict, where: str) -> list[str]:
    """LMCache settings that run but measure nothing, found on an H100 (LMCache 0.5.6,
    vLLM 0.26), refused before any GPU time is spent:
    - across a restart, chunk keys differ unless PYTHONHASHSEED is set: the hash chain
      starts from vLLM's NONE_HASH, random per process (0 hit tokens after the restart);
    - LMCACHE_LOCAL_DISK "None" does not switch the disk tier off: it is a directory;
    - an `fs://` remote URL without host and port (fs:///path) fails LMCache's URL parser:
      the tier never connects and its health check bypasses it (fs://localhost:0/path works)."""
    problems = []
    for name, knobs in server_points(exp).items():
        if (knobs.get("kv_transfer_config") or {}).get("kv_connector") != "LMCacheConnectorV1":
            continue
        env = {**exp.get("server", {}).get("env", {}), **knobs.get(ENV_KNOB, {})}
        if any(p.get("restart", 0) for p in client_points(exp, knobs)) and "PYTHONHASHSEED" not in env:
            problems.append(f"{where}.server.env [{name}]: LMCache's chunk keys change with every process "
                            f"unless PYTHONHASHSEED is set, so nothing cached before a restart is found after "
                            f"it; set PYTHONHASHSEED (and LMCACHE_PRE_CACHING_HASH_ALGORITHM: sha256_cbor)")
        if str(env.get("LMCACHE_LOCAL_DISK", "")).lower() in ("none", "null", "false", "off"):
            problems.append(f"{where}.server.env [{name}]: LMCACHE_LOCAL_DISK {env['LMCACHE_LOCAL_DISK']!r} is "
                            f"read by LMCache as a directory of that name; switch the disk tier off with "
                            f"LMCACHE_MAX_LOCAL_DISK_SIZE: 0")
        url = str(env.get("LMCACHE_REMOTE_URL", "")).replace("{session_dir}", "/session")
        if url.startswith("fs://") and not re.match(r"fs://[^/:]+:\d+/", url):
            problems.append(f"{where}.server.env [{name}]: LMCACHE_REMOTE_URL {env['LMCACHE_REMOTE_URL']!r} needs a "
                            f"host and port before the path (LMCache's URL parser asserts both; without them "
                            f"the tier is bypassed): fs://localhost:0/ABSOLUTE/PATH")
    return problems


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def duplicates(exp: dict, where: str) -> list[str]:
    """A value listed twice in a grid, or two named configurations that are the same: both
    would measure one point twice under two names (or overwrite it), so say which."""
    problems = []
    server, client = exp.get("server", {}), exp.get("client", {})
    grids = {f"{where}.server.grid": server.get("grid", {}), f"{where}.server.env_grid": server.get("env_grid", {}),
             f"{where}.client.grid": client.get("grid", {}),
             **{f"{where}.client.workloads.{w}.grid": spec.get("grid", {})
                for w, spec in client.get("workloads", {}).items()},
             **{f"{where}.server.configs.{c}.client.grid": spec.get("client", {}).get("grid", {})
                for c, spec in server.get("configs", {}).items()}}
    for path, grid in grids.items():
        for knob, values in grid.items():
            seen = [canonical(v) for v in values]
            if twice := sorted({v for v in seen if seen.count(v) > 1}):
                problems.append(f"{path}.{knob}: {', '.join(twice)} listed more than once")
    configs: dict[str, str] = {}
    for name, spec in server.get("configs", {}).items():
        same = configs.setdefault(canonical(spec), name)
        if same != name:
            problems.append(f"{where}.server.configs.{name}: the same configuration as {same!r} (for an A/A "
                            f"check, give each an env of its own, e.g. env: {{SERVELAB_ARM: {name}}})")
    return problems




GPU_ONLY_MONITORS = ("gpu", "wrap")


def active_monitors(config: dict, exp: dict) -> dict:
    """An experiment's monitors on this device: nvidia-smi, nsys and ncu need a GPU
    node, so the CPU default leaves them out (an overlay cannot delete keys)."""
    mons = exp.get("monitors", {})
    if config.get("device") != "cpu":
        return mons
    return {k: v for k, v in mons.items() if k not in GPU_ONLY_MONITORS}


def generated_eval_tasks(config: dict) -> dict[str, dict]:
    """{task name: generated_task spec} over all experiments (check() made names unique)."""
    return {exp["eval"]["generated_task"]["name"]: exp["eval"]["generated_task"]
            for exp in config["experiments"].values() if "generated_task" in exp.get("eval", {})}


def config_hash(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def model_identity(config: dict, name: str) -> str:
    """What pins a model's weights: hub repo@revision, the tiny recipe's hash, or (random
    weights) the shape's hash."""
    spec = config["models"][name]
    if dummy_weights.served_from_shape(config, name):
        return dummy_weights.shape_identity(spec["shape"])
    if "hub" in spec:
        return f"{spec['hub']}@{spec['revision']}"
    return "tiny:" + hashlib.sha256(json.dumps(spec["tiny"], sort_keys=True).encode()).hexdigest()[:16]


def dataset_identity(config: dict, name: str) -> str:
    spec = config["datasets"][name]
    if "url" in spec:
        return f"{spec['url']}#sha256={spec.get('sha256')}"
    if "builtin" in spec:
        return f"builtin:{spec['builtin']}"
    if workloads.kind(spec):
        return workloads.identity(spec)
    return "generated:" + hashlib.sha256(json.dumps(spec["generate"], sort_keys=True).encode()).hexdigest()[:16]

