"""Checks the JSON schema cannot express: cross-references between config sections.

Run right after `validate(config, schema)`, so a bad name stops the workflow
before any job starts, and the message names the offending key.
"""

from __future__ import annotations

import hashlib
import json

from servelab.experiments import client_points, swept_knobs


class ConfigError(ValueError):
    pass


def check(config: dict) -> None:
    problems = []
    for name in config.get("run") or []:
        if name not in config["experiments"]:
            problems.append(f"run: unknown experiment {name!r} (known: {sorted(config['experiments'])})")
    for name, exp in config["experiments"].items():
        where = f"experiments.{name}"
        for section in ("model", "dataset", "engine"):
            table = {"model": "models", "dataset": "datasets", "engine": "engines"}[section]
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
        offline = exp.get("kind", "serve") == "offline"
        if offline and (exp["engine"] != "vllm" or "tool" not in exp):
            problems.append(f"{where}: kind offline needs engine vllm and a tool (throughput or latency)")
        if not offline and "tool" in exp:
            problems.append(f"{where}.tool: only offline experiments take a tool")
        needs_prompts = not offline or exp.get("tool") == "throughput"
        if needs_prompts and not any("num_prompts" in p for p in client_points(exp)):
            problems.append(f"{where}.client: num_prompts is missing (set it in args or grid)")
        columns = set(swept_knobs(exp)) | METRIC_COLUMNS
        for fig, spec in exp.get("figures", {}).items():
            ys = spec["y"] if isinstance(spec["y"], list) else [spec["y"]]
            for key, col in [("x", spec["x"]), *(("y", y) for y in ys),
                             *((k, spec[k]) for k in ("hue", "col") if k in spec)]:
                if col not in columns:
                    problems.append(f"{where}.figures.{fig}.{key}: unknown column {col!r}")
    if problems:
        raise ConfigError("invalid config:\n  " + "\n  ".join(problems))


def _metric_columns() -> set[str]:
    from servelab.metrics import LATENCIES, SCALARS, STATS

    lat = {f"{lat}_{stat}_ms" for lat in LATENCIES for stat in STATS}
    return lat | set(SCALARS.values()) | {"request_rate", "achieved_rate_rps", "server_startup_s",
                                          "samples_ttft", "samples_itl", "valid", "experiment",
                                          "server_point", "model", "latency_mean_s",
                                          "latency_p50_s", "latency_p90_s", "latency_p99_s"}


METRIC_COLUMNS = _metric_columns()


def config_hash(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def model_identity(config: dict, name: str) -> str:
    """What pins a model's weights: hub repo@revision, or the tiny recipe's hash."""
    spec = config["models"][name]
    if "hub" in spec:
        return f"{spec['hub']}@{spec['revision']}"
    return "tiny:" + hashlib.sha256(json.dumps(spec["tiny"], sort_keys=True).encode()).hexdigest()[:16]


def dataset_identity(config: dict, name: str) -> str:
    spec = config["datasets"][name]
    if "url" in spec:
        return f"{spec['url']}#sha256={spec.get('sha256')}"
    if "builtin" in spec:
        return f"builtin:{spec['builtin']}"
    return "generated:" + hashlib.sha256(json.dumps(spec["generate"], sort_keys=True).encode()).hexdigest()[:16]

