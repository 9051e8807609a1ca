"""How each point is measured, and its defaults: written once, in config/schema.yaml (the
top-level `repeats`, `warmup_prompts`, ...), which Snakemake fills into the config; a session
given none of them (a test's, a script's) reads the same defaults from there."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml

SCHEMA = Path(__file__).resolve().parents[2] / "config" / "schema.yaml"
# the settings an experiment, or the config's top level, may set for its points
KEYS = ("repeats", "warmup_prompts", "reset_prefix_cache", "drift_check", "grace_s", "warmup_load_s",
        "repeat_until", "record_conditions")


@lru_cache(maxsize=1)
def defaults() -> dict:
    """{setting: its schema default (None where it has none: repeat_until)}."""
    properties = yaml.safe_load(SCHEMA.read_text())["properties"]
    return {key: properties[key].get("default") for key in KEYS}
