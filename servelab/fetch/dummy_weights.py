"""The dummy-weights check (`dummy_weights:` in the config, config/gpu-check.yaml): every
model is served from its shape with random weights, downloads are replaced by generated
workloads and each client point is cut to a few prompts, so a GPU box or cluster can run
the whole course in minutes before any checkpoint is downloaded.
"""

from __future__ import annotations

import hashlib
import json

LOAD_FORMAT = {"load_format": "dummy"}   # vLLM's and SGLang's flag alike


def enabled(config: dict) -> bool:
    return config.get("dummy_weights") is not None


def served_from_shape(config: dict, model: str) -> bool:
    spec = config["models"][model]
    return "shape" in spec and (enabled(config) or "hub" not in spec and "tiny" not in spec)


def model_dir(config: dict, model: str) -> str:
    """Where a model's files are: shapes apart from downloads, so a check never touches them."""
    base = config["paths"]["models"]
    return f"{base}/shapes/{model}" if served_from_shape(config, model) else f"{base}/{model}"


def shape_identity(shape: dict) -> str:
    return "shape:" + hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:16]


def shape_of_hub_id(config: dict, hub_id: str) -> str | None:
    """The model (by name) with this hub id and a shape, in dummy mode (a draft model that
    a speculative_config names by hub id)."""
    if not enabled(config):
        return None
    return next((name for name, spec in config["models"].items()
                 if spec.get("hub") == hub_id and "shape" in spec), None)


def draft_models(config: dict, knobs: dict) -> list[str]:
    spec = knobs.get("speculative_config")
    if isinstance(spec, dict) and isinstance(spec.get("model"), str):
        name = shape_of_hub_id(config, spec["model"])
        return [name] if name else []
    return []


def served_knobs(config: dict, model: str, knobs: dict) -> dict:
    """The engine flags of a server point: a shape's random weights and its serve_args,
    and a draft model named by hub id replaced by its shape's directory."""
    if not served_from_shape(config, model):
        return knobs
    out = {**LOAD_FORMAT, **config["models"][model]["shape"].get("serve_args", {}), **knobs}
    for draft in draft_models(config, knobs):
        out["speculative_config"] = {**knobs["speculative_config"], "model": model_dir(config, draft)}
    return out


def dataset(config: dict, name: str) -> str:
    return (config.get("dummy_weights") or {}).get("datasets", {}).get(name, name)


def client_points(config: dict, points: list[dict]) -> list[dict]:
    """Each client point with num_prompts cut to the check's cap; a point that sends its
    prompts in static batches (`batch_size` with `num_prompts`: HF generate) sends one whole
    batch instead, so that its batch is the size it is labelled with (16 prompts at batch
    size 64 would measure a batch of 16) and batch size 1 generates once, not 16 times."""
    cap = (config.get("dummy_weights") or {}).get("num_prompts")
    if cap is None:
        return points

    def cut(point: dict) -> dict:
        if "num_prompts" not in point:
            return point
        if "batch_size" in point:
            return {**point, "num_prompts": int(point["batch_size"])}
        return {**point, "num_prompts": min(int(point["num_prompts"]), cap)}

    return [cut(p) for p in points]


def problems(config: dict, models_used: dict[str, set[str]]) -> list[str]:
    """{experiment: models} that cannot run in dummy mode: a model with no shape."""
    if not enabled(config):
        return []
    out = []
    for exp, models in models_used.items():
        for model in sorted(models):
            spec = config["models"].get(model, {})
            if "shape" not in spec and "tiny" not in spec:
                out.append(f"experiments.{exp}: model {model!r} has no `shape:` to serve with dummy weights "
                           f"(add its config.json under models.{model}.shape, or leave {exp} out of `run`)")
    for name, stand_in in (config["dummy_weights"].get("datasets") or {}).items():
        if stand_in not in config["datasets"]:
            out.append(f"dummy_weights.datasets.{name}: {stand_in!r} is not defined under datasets")
    return out
