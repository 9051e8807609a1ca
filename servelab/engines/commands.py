"""Turn knob dicts into engine flags (each engine's command line is in its folder: vllm/commands.py).

Knob names are the engines' own option names in snake_case: `max_num_seqs: 16`
becomes `--max-num-seqs 16`. True is a bare flag, False its `--no-` form,
a dict becomes the JSON string the engines expect (e.g. --speculative-config).
"""

from __future__ import annotations

import json
import math
import shlex

from servelab.config.experiments import format_value


def to_flags(knobs: dict, false_flags: bool = True, snake: bool = False) -> list[str]:
    """Flags of a knob dict. `false_flags`: False renders as `--no-KNOB` (vLLM's
    boolean options); engines with plain store_true flags (SGLang) omit it.
    `snake`: keep underscores in flag names (lm-eval's --num_fewshot)."""
    flags: list[str] = []
    for key, value in knobs.items():
        flag = "--" + (key if snake else key.replace("_", "-"))
        if value is None:
            continue
        if value is True:
            flags.append(flag)
        elif value is False:
            if false_flags:
                flags.append("--no-" + key.replace("_", "-"))
        elif isinstance(value, dict):
            flags += [flag, json.dumps(value, separators=(",", ":"), sort_keys=True)]
        elif isinstance(value, list):
            flags += [flag, *(format_value(v) for v in value)]
        elif isinstance(value, float) and math.isinf(value):
            flags += [flag, "inf"]
        else:
            flags += [flag, format_value(value)]
    return flags


def shell_line(cmd: list[str]) -> str:
    return shlex.join(cmd)
