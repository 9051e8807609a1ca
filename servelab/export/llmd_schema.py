"""The llm-d benchmark report, version 0.2.1, as a JSON Schema written for servelab.

Written by hand from its public definition: the pydantic models of the GitHub repository
llm-d/llm-d-benchmark, `llmdbenchmark/analysis/benchmark_report/` (`schema_v0_2.py`,
`schema_v0_2_1.py`, `schema_v0_2_components.py`, `base.py`), read at commit
8bc9f1ddd873a24f1657d6cca2e0d0fb6947dd36 (2026-08-21; the 0.2.1 schema last changed in
d61bdbc85f00a6ddde791e805fc5f1b300cd88f3). What those models enforce is enforced here:
unknown keys refused wherever they set `extra="forbid"` (everywhere but `observability` and
a `generic` component; a Statistics ignores keys of its own), the required fields, the
bounds (`ge`, `gt`), the enumerations, and each Statistics' units as their unit validators
allow them per field. What pydantic's lax mode takes, this takes too: numbers as numeric
strings or booleans, a whole float where an integer belongs, "yes"/"no" and their kin as
booleans, a time as ISO 8601 or a Unix time; and it refuses a time that is neither
("yesterday"). tests/data/llmd_corpus holds the edge cases with llm-d's own verdicts.
Sections servelab never writes (time series, session performance, multi-modal payloads,
pod start-up times, replica status, profiling) are checked as objects only.
"""

from __future__ import annotations

import datetime
import re

VERSION = "0.2.1"
SOURCE = ("llm-d/llm-d-benchmark@8bc9f1ddd873a24f1657d6cca2e0d0fb6947dd36:"
          "llmdbenchmark/analysis/benchmark_report/schema_v0_2_1.py")

# base.py: Units, and the lists of units each kind of quantity accepts
QUANTITY = ["count", "pixels"]
PORTION = ["percent", "fraction"]
TIME = ["ms", "s"]
MEMORY = ["bytes", "MB", "GB", "TB", "MiB", "GiB", "TiB"]
GEN_LATENCY = ["ms/token", "s/token"]
GEN_THROUGHPUT = ["tokens/s"]
REQUEST_THROUGHPUT = ["queries/s"]
MEDIA_THROUGHPUT = ["images/s", "videos/s", "audios/s"]
POWER = ["Watts"]
ALL_UNITS = sorted({*QUANTITY, *PORTION, "ratio", *TIME, *MEMORY, "Mbit/s", "Gbit/s", "Tbit/s", "GiB/s", "MB/s",
                    "GB/s", "TB/s", *GEN_LATENCY, *GEN_THROUGHPUT, *REQUEST_THROUGHPUT, *MEDIA_THROUGHPUT, *POWER})

NUMBER = {"type": "number"}
STRING = {"type": "string"}
OBJECT = {"type": "object"}
DATETIME = {"type": ["string", "number"], "format": "date-time"}
PERCENTILES = ("mode", "min", "p0p1", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "p99p9", "max")


def closed(properties: dict, required: tuple = ()) -> dict:
    """An object of exactly these keys (pydantic's extra="forbid"); None allowed where optional."""
    props = {k: (v if k in required else {"anyOf": [v, {"type": "null"}]}) for k, v in properties.items()}
    return {"type": "object", "properties": props, "required": list(required), "additionalProperties": False}


def integer(minimum: int | None = None) -> dict:
    return {"type": "integer", **({} if minimum is None else {"minimum": minimum})}


def stats(units: list[str] = ALL_UNITS) -> dict:
    """schema_v0_2.Statistics: units and mean required; the units those of its field; keys
    of its own ignored (it sets no `extra="forbid"`)."""
    return {**closed({"units": {"enum": units}, "mean": NUMBER, "stddev": {"type": "number", "minimum": 0},
                      **{p: NUMBER for p in PERCENTILES if p != "stddev"}}, required=("units", "mean")),
            "additionalProperties": True}


def native() -> dict:
    return closed({"args": OBJECT, "envars": OBJECT, "config": {}})


SEQUENCE_LENGTH = closed({"distribution": {"enum": ["fixed", "gaussian", "uniform", "other"]},
                          "value": {"type": "number", "minimum": 0}, "std_dev": {"type": "number", "minimum": 0},
                          "min": integer(0), "max": integer(1)}, required=("distribution", "value"))

GENERIC_COMPONENT = {"type": "object", "required": ["kind", "tool", "tool_version"],
                     "properties": {"kind": {"const": "generic"}, "tool": STRING, "tool_version": STRING}}
INFERENCE_ENGINE = closed({
    "kind": {"const": "inference_engine"}, "tool": STRING, "tool_version": STRING,
    "role": {"enum": ["replica", "prefill", "decode"]}, "replicas": integer(1),
    "model": closed({"name": STRING}, required=("name",)),
    "accelerator": closed({
        "model": STRING, "count": integer(0),
        "parallelism": closed({"tp": integer(0), "dp": integer(0), "dp_local": integer(0), "workers": integer(0),
                               "ep": integer(1), "pp": integer(1)}),
    }, required=("model", "count", "parallelism")),
}, required=("kind", "tool", "tool_version", "role", "replicas", "model", "accelerator"))

COMPONENT = closed({
    "metadata": closed({"schema_version": STRING, "label": STRING, "cfg_id": STRING, "description": STRING},
                       required=("label", "cfg_id")),
    "standardized": {"oneOf": [GENERIC_COMPONENT, INFERENCE_ENGINE]},
    "native": native(),
}, required=("metadata", "standardized", "native"))

LOAD = closed({
    "metadata": closed({"schema_version": STRING, "cfg_id": STRING, "description": STRING}),
    "standardized": closed({
        "tool": STRING, "tool_version": STRING, "parallelism": integer(1),
        "source": {"enum": ["random", "sampled", "unknown"]}, "stage": integer(0),
        "input_seq_len": SEQUENCE_LENGTH, "output_seq_len": SEQUENCE_LENGTH,
        "prefix": closed({"prefix_len": SEQUENCE_LENGTH, "num_groups": integer(1), "num_users_per_group": integer(1),
                          "num_prefixes": integer(1)}, required=("prefix_len", "num_groups", "num_users_per_group",
                                                                 "num_prefixes")),
        "multi_turn": closed({"enabled": {"type": "boolean"}, "max_turns": SEQUENCE_LENGTH}),
        "rate_qps": {"type": "number", "exclusiveMinimum": 0},
        # an integer, or .inf (YAML holds it, JSON cannot: servelab leaves an unbounded concurrency out)
        "concurrency": {"anyOf": [integer(1), {"const": float("inf")}]},
    }, required=("tool", "tool_version", "source", "input_seq_len")),
    "native": native(),
}, required=("metadata", "standardized", "native"))

REQUEST_PERFORMANCE = closed({
    "aggregate": closed({
        "requests": closed({"total": integer(0), "failures": integer(0), "incomplete": integer(0),
                            "input_length": stats(QUANTITY), "output_length": stats(QUANTITY),
                            "request_size": stats(MEMORY), "multimodal": OBJECT}, required=("total",)),
        "latency": closed({"time_to_first_token": stats(TIME), "normalized_time_per_output_token": stats(GEN_LATENCY),
                           "time_per_output_token": stats(GEN_LATENCY), "inter_token_latency": stats(GEN_LATENCY),
                           "request_latency": stats(TIME)}),
        "throughput": closed({"input_token_rate": stats(GEN_THROUGHPUT), "output_token_rate": stats(GEN_THROUGHPUT),
                              "total_token_rate": stats(GEN_THROUGHPUT), "request_rate": stats(REQUEST_THROUGHPUT),
                              **{f"{m}_rate": stats(MEDIA_THROUGHPUT) for m in ("image", "video", "audio")}}),
    }),
    "time_series": OBJECT,
})

RESOURCE_METRICS = closed({
    **{k: stats(PORTION) for k in ("kv_cache_usage", "cache_hit_rate", "gpu_cache_usage", "cpu_cache_usage",
                                   "gpu_utilization", "cpu_utilization")},
    **{k: stats(MEMORY) for k in ("gpu_memory_usage", "cpu_memory_usage", "storage_usage")},
    "power_consumption": stats(POWER),
    **{k: stats(QUANTITY) for k in ("running_requests", "waiting_requests", "swapped_requests", "preemptions")},
})

OBSERVABILITY = {   # extra="allow": keys of a tool's own beside the standard ones
    "type": "object",
    "properties": {
        "components": {"anyOf": [{"type": "null"}, {"type": "array", "items": closed({
            "component_label": STRING, "replica_id": STRING, "aggregate": RESOURCE_METRICS, "time_series": OBJECT,
            "raw_data_path": STRING, "graph_path": STRING}, required=("component_label",))}]},
        "drop_rate": {"anyOf": [{"type": "null"}, stats(PORTION)]},
        "pod_startup_times": {"anyOf": [{"type": "null"}, OBJECT]},
        "replica_status": {"anyOf": [{"type": "null"}, OBJECT]},
    },
}

COMPONENT_HEALTH = closed({
    "component_label": STRING, "total_restarts": integer(0), "failed_replicas": integer(0),
    "replica_health": {"type": "array", "items": closed({"replica_id": STRING, "restarts": integer(0),
                                                         "healthy": {"type": "boolean"}, "logs": STRING},
                                                        required=("replica_id",))},
}, required=("component_label",))

SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": f"Benchmark Report v{VERSION} (servelab's transcription of {SOURCE})",
    **closed({
        "version": {"const": VERSION},
        "run": closed({
            "uid": STRING, "eid": STRING, "cid": STRING, "pid": STRING,
            "time": closed({"start": DATETIME, "end": DATETIME, "duration": STRING}),
            "user": STRING, "description": STRING, "keywords": {"type": "array", "items": STRING},
        }, required=("uid",)),
        "scenario": closed({"stack": {"type": "array", "items": COMPONENT}, "load": LOAD}),
        "results": closed({"request_performance": REQUEST_PERFORMANCE, "session_performance": OBJECT,
                           "observability": OBSERVABILITY, "profiling": {},
                           "component_health": {"type": "array", "items": COMPONENT_HEALTH}}),
    }, required=("version", "run", "results")),
}


# pydantic's lax mode: what it turns into a number, an integer, a boolean
NUMERIC = re.compile(r"\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*")
INTEGRAL = re.compile(r"\s*[+-]?\d+(\.0*)?\s*")
TRUTHY = {"1", "on", "t", "true", "y", "yes"}
FALSY = {"0", "off", "f", "false", "n", "no"}


def as_number(value):
    return float(value) if isinstance(value, str) else value


def is_number(_checker, value) -> bool:
    return isinstance(value, (int, float)) or (isinstance(value, str) and NUMERIC.fullmatch(value) is not None)


def is_integer(_checker, value) -> bool:
    if isinstance(value, float):
        return value.is_integer()
    return isinstance(value, int) or (isinstance(value, str) and INTEGRAL.fullmatch(value) is not None)


def is_boolean(_checker, value) -> bool:
    return isinstance(value, bool) or value in (0, 1) or \
        (isinstance(value, str) and value.strip().lower() in TRUTHY | FALSY)


def is_datetime(value) -> bool:
    """An ISO 8601 date and time (`T` or a space between), or a Unix time, as pydantic parses them."""
    if isinstance(value, (int, float)) or (isinstance(value, str) and NUMERIC.fullmatch(value)):
        return True
    try:
        datetime.datetime.fromisoformat(value)
        return True
    except (TypeError, ValueError):
        return False


def validator_class():
    """Draft 2020-12 with pydantic's lax types, and bounds that read numeric strings."""
    import jsonschema
    from jsonschema import validators

    base = jsonschema.Draft202012Validator

    def bound(op, text):
        def check(validator, limit, instance, _schema):
            if validator.is_type(instance, "number") and not op(as_number(instance), limit):
                yield jsonschema.ValidationError(f"{instance!r} is {text} {limit}")
        return check

    types = base.TYPE_CHECKER.redefine_many({"number": is_number, "integer": is_integer, "boolean": is_boolean})
    return validators.extend(base, type_checker=types, validators={
        "minimum": bound(lambda v, m: v >= m, "less than the minimum of"),
        "exclusiveMinimum": bound(lambda v, m: v > m, "less than or equal to the minimum of")})


def errors(report: dict) -> list[str]:
    """Every way `report` breaks the schema, each as `path: message` (none: it validates)."""
    import jsonschema

    checker = jsonschema.FormatChecker(formats=())
    checker.checks("date-time")(is_datetime)
    validator = validator_class()(SCHEMA, format_checker=checker)
    found = [deepest(e) for e in validator.iter_errors(report)]
    return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {short(e.message)}"
            for e in sorted(found, key=lambda e: list(map(str, e.absolute_path)))]


def deepest(error):
    """The error inside an anyOf/oneOf (an optional field's value, or null) that says what is
    wrong, not that no branch matched: the branch that got furthest into the value."""
    while error.context:
        error = max(error.context, key=lambda e: (len(e.absolute_path), e.validator not in ("type", "const")))
    return error


def short(message: str, limit: int = 160) -> str:
    return message if len(message) <= limit else message[:limit] + "..."
