"""Workload kinds beyond independent prompts, declared under `datasets:` like the others:

- `multi_turn`: conversations of several turns, each turn sending the conversation so far
  (users = conversations in flight, turns, think time between turns, new tokens a turn, an
  optional shared system prompt). vLLM's client has no such mode: AIPerf runs it
  (servelab.engines.clients.aiperf).
- `shared_prefix`: groups of prompts sharing a prefix (groups, prompts per group, shared
  length): vLLM's `prefix_repetition`, SGLang's `generated-shared-prefix`.
- `trace`: a Mooncake-style JSONL replayed on its timestamps (servelab.fetch.trace), time-
  scaled and cropped to a window: vLLM's `timed_trace`.

Each kind says which dataset name the engine's client takes and which client knobs it adds
to every load point of a session (so that they are part of each point's identity).
"""

from __future__ import annotations

import hashlib
import json

from servelab.config import engine_facts as facts

KINDS = ("multi_turn", "shared_prefix", "trace")
# the client knob that carries a multi-turn workload to AIPerf (servelab.engines.clients.aiperf)
MULTI_TURN_KNOB = "multi_turn"
# the dataset name a multi-turn session runs (no engine client has it: AIPerf does)
MULTI_TURN_DATASET = "multi_turn"


def kind(spec: dict) -> str | None:
    """Which of KINDS a dataset is (None: a file or a client's builtin)."""
    return next((k for k in KINDS if k in spec), None)


def dataset_name(spec: dict, engine: str) -> str:
    """The `--dataset-name` of the engine's client for this dataset."""
    k = kind(spec)
    if k == "multi_turn":
        return MULTI_TURN_DATASET
    if k == "shared_prefix":
        return facts.of(engine).shared_prefix_dataset
    if k == "trace":   # vLLM's (SGLang's `mooncake` reads another layout: refused by the cross-checks)
        return "timed_trace"
    return spec.get("builtin", "sharegpt")


def has_file(spec: dict) -> bool:
    """Whether the session reads a dataset file (made by a fetch rule)."""
    return "builtin" not in spec and kind(spec) not in ("multi_turn", "shared_prefix")


def client_knobs(spec: dict, engine: str) -> dict:
    """The client knobs a workload adds to each of its load points."""
    k = kind(spec)
    if k == "multi_turn":
        return {MULTI_TURN_KNOB: dict(spec["multi_turn"])}
    if k == "shared_prefix":
        sp = spec["shared_prefix"]
        prompts = sp["groups"] * sp["prompts_per_group"]
        # each field under the name the engine's client gives it
        return {"num_prompts": prompts,
                **{knob: sp[field] for field, knob in facts.of(engine).shared_prefix_knobs.items()}}
    if k == "trace":
        tr = spec["trace"]
        # the trace's timestamps are ms; vLLM's client multiplies them into seconds
        return {"timed_trace_sec_multiplier": 0.001 * float(tr.get("time_scale", 1.0)),
                "timed_trace_chunk_hash_size": int(tr["block_tokens"])}
    return {}


def with_workload(spec: dict, engine: str, point: dict) -> dict:
    """A load point with its workload's knobs (the point's own win where both set one);
    lm-eval's point is left as it is."""
    if "lm_eval" in point:
        return point
    return {**client_knobs(spec, engine), **point}


def identity(spec: dict, trace_sha: str | None = None) -> str:
    """What defines a workload's requests (a trace: its file's content too)."""
    k = kind(spec)
    digest = hashlib.sha256(json.dumps(spec[k], sort_keys=True).encode()).hexdigest()[:16]
    return f"{k}:{digest}" + (f"#sha256={trace_sha[:16]}" if trace_sha else "")


def problems(name: str, spec: dict, max_model_lens: list[int], read_trace=None, check_trace=None) -> list[str]:
    """What is wrong with a workload dataset, each naming its key: a turn count of 0, a
    shared prefix or a conversation longer than the serving experiments' max_model_len, a
    trace that is not a sorted Mooncake-style JSONL (`read_trace(path)` raises on one;
    `check_trace(rows, where, max_model_len)` on a request longer than the model takes)."""
    where, k, out = f"datasets.{name}", kind(spec), []
    limit = min(max_model_lens) if max_model_lens else None
    if k == "multi_turn":
        mt = spec["multi_turn"]
        for key in ("turns", "users"):
            if mt.get(key, 1) < 1:
                out.append(f"{where}.multi_turn.{key}: must be >= 1 (got {mt[key]})")
        longest = mt.get("system_len", 0) + mt.get("turns", 1) * (mt["prompt_len"] + mt["output_len"])
        if limit and longest > limit:
            out.append(f"{where}.multi_turn: a conversation's last turn reaches {longest} tokens "
                       f"(system_len + turns x (prompt_len + output_len)), above max_model_len {limit}")
    elif k == "shared_prefix":
        sp = spec["shared_prefix"]
        for key in ("groups", "prompts_per_group", "shared_len"):
            if sp.get(key, 1) < 1:
                out.append(f"{where}.shared_prefix.{key}: must be >= 1 (got {sp[key]})")
        if limit and sp["shared_len"] > limit:
            out.append(f"{where}.shared_prefix.shared_len: {sp['shared_len']} is above max_model_len {limit}")
        elif limit and sp["shared_len"] + sp["suffix_len"] + sp["output_len"] > limit:
            out.append(f"{where}.shared_prefix: shared_len + suffix_len + output_len = "
                       f"{sp['shared_len'] + sp['suffix_len'] + sp['output_len']} is above max_model_len {limit}")
    elif k == "trace" and read_trace is not None:
        tr = spec["trace"]
        try:
            rows = read_trace(tr["file"])
            if limit and check_trace is not None:
                check_trace(rows, tr["file"], limit)
        except (OSError, ValueError) as err:
            out.append(f"{where}.trace.file: {err}")
    return out


def rooted_traces(config: dict, root) -> None:
    """A trace file named relative to the project (resources/traces/...) found from another
    working directory (`snakemake -d DIR`): made absolute where only the project holds it."""
    from pathlib import Path

    for spec in (config.get("datasets") or {}).values():
        file = (spec.get("trace") or {}).get("file") if isinstance(spec, dict) else None
        if file and not Path(file).is_absolute() and not Path(file).exists() and (Path(root) / file).exists():
            spec["trace"]["file"] = str(Path(root) / file)


def per_turn(spec: dict) -> bool:
    """Whether a workload's requests have turns (a turns table and figure)."""
    return kind(spec) in ("multi_turn", "trace")
