"""What a point is: its identity (all that decides its value, nothing incidental) and the
store key of it, its name among the session's points, and the record stored with it."""

from __future__ import annotations

import sys

from servelab.config.experiments import DURATION_KNOB
from servelab.engines import environment
from servelab.fetch import model_facts
from servelab.run import provenance
from servelab.serve.session_spec import SessionSpec
from servelab.serve.store import identity_hash


def point_identity(spec: SessionSpec, client: dict, engine_version: str | None, hardware: dict,
                   *, repeat: int = 0) -> dict:
    """Everything that decides a measurement's value, and nothing incidental (ports, paths).
    Repeat k > 0 of a point is a point of its own: raising `repeats` measures only the new ones."""
    measured_as = {"warmup_prompts": spec.warmup_prompts, "reset_prefix_cache": spec.resets_prefix_cache,
                   # a point sized in time: the grace its requests in flight get; a warm-up at its load
                   **({"grace_s": spec.setting("grace_s")} if DURATION_KNOB in client else {}),
                   **({"warmup_load_s": spec.setting("warmup_load_s")} if spec.setting("warmup_load_s") else {}),
                   # a point measured without its record of conditions is another measurement
                   **({} if spec.setting("record_conditions") else {"record_conditions": False}),
                   # one measured in interleaved rounds too: its turns, beside which configurations, in
                   # which orders (servelab.serve.rounds), are part of what it measured
                   **({"rounds": {"seed": spec.rounds.get("seed", 0),
                                  "configurations": spec.rounds.get("configurations")}} if spec.rounds else {})}
    return {
        "engine": spec.engine,
        "engine_version": engine_version,
        "model": spec.model_identity,
        "dataset": spec.dataset_identity,
        **({"kind": f"offline:{spec.tool}"} if spec.kind == "offline" else {}),
        **({"topology": spec.topology} if spec.topology else {}),
        **({"monitors": spec.monitors} if spec.monitors else {}),
        **({"env": spec.identity_env} if spec.identity_env else {}),
        "server": spec.server_knobs,
        "client": client,
        "hardware": hardware,
        **({"measurement": measured_as} if spec.kind == "serve" else {}),
        **({"measurement": {"warmup_prompts": spec.warmup_prompts}} if spec.kind == "offline" and spec.warmup_prompts
           else {}),
        **({"repeat": repeat} if repeat else {}),
    }


def knobs_swept(knobs: dict, spec: SessionSpec) -> dict:
    """The client knobs that differ between this session's points (for names)."""
    varying = {k for p in spec.client_points for k in p if any(p.get(k) != q.get(k) for q in spec.client_points)}
    return {k: v for k, v in knobs.items() if k in varying}


def identified(identity: dict) -> tuple[str, dict]:
    """(store key, identity) of a point."""
    return identity_hash(identity), identity


def point_record(spec: SessionSpec, key: str, identity: dict, knobs: dict, *, session_name: str,
                 hardware: dict, distributions: tuple, command: str, client_command: str,
                 startup_s: float | None, wall_s: float | None, facts: dict) -> dict:
    return {
        "key": key,
        "identity": identity,
        "experiment": spec.experiment,
        "server_point": spec.server_point,
        "client_knobs": knobs,
        "session": session_name,
        "server_startup_s": startup_s,
        "client_wall_s": wall_s,
        "server_facts": facts,   # KV cache size, weight memory (servelab.engines.server_log)
        "model_size": model_facts.model_size(spec.model_path),
        "provenance": {
            "serve_command": command,
            # what servelab set in the engine's environment (engine, experiment and point
            # `env`): e.g. the GPU check's VLLM_WORKER_MULTIPROC_METHOD, which its start-ups show
            "server_env": {k: str(v) for k, v in spec.env.items()},
            "bench_args": client_command,
            "python": sys.version.split()[0],
            "packages": {p: environment.installed_version((p,), spec.env)
                         for p in (*distributions, "torch", "transformers")},
            "hardware": hardware,
            "job_env": provenance.job_environment(),
            "config_hash": spec.config_hash,
            "git_commit": provenance.git_commit(spec.workflow_dir),
        },
    }
