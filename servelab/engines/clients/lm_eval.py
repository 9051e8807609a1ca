"""lm-eval against a running server: accuracy of the checkpoint a server point serves.

Week 12 pairs each checkpoint's serving throughput with its GSM8K accuracy. The
evaluation is one more point of the server's session: lm-eval's
`local-completions` model sends the task's prompts to the server's
/v1/completions, so the numbers come from the very engine and knobs measured.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from servelab.engines.commands import to_flags


def model_args_string(served_name: str, port: int, tokenizer: str, extra: dict) -> str:
    base = {"model": served_name, "base_url": f"http://127.0.0.1:{port}/v1/completions",
            "tokenizer": tokenizer, "tokenizer_backend": "huggingface"}
    return ",".join(f"{k}={v}" for k, v in {**base, **extra}.items())


def command(spec: dict, served_name: str, port: int, tokenizer: str, *, out_dir: str,
            include_path: str | None) -> list[str]:
    """`lm_eval run` for an experiment's `eval` section {tasks, args, model_args}."""
    cmd = [sys.executable, "-m", "lm_eval", "run", "--model", "local-completions",
           "--model_args", model_args_string(served_name, port, tokenizer, spec.get("model_args", {})),
           "--tasks", ",".join(spec["tasks"]), "--output_path", out_dir,
           *to_flags(spec.get("args", {}), false_flags=False, snake=True)]
    return cmd + (["--include_path", include_path] if include_path else [])


def newest_results(out_dir: str | Path) -> dict:
    """lm-eval writes OUT/<model>/results_<timestamp>.json; the newest is this run's."""
    files = sorted(Path(out_dir).rglob("results_*.json"), key=lambda p: p.stat().st_mtime)
    if not files:
        raise FileNotFoundError(f"lm-eval wrote no results_*.json under {out_dir}")
    return json.loads(files[-1].read_text())


def accuracy_columns(results: dict) -> dict:
    """{'<task>_<metric>_<filter>': value} from lm-eval's results, e.g.
    gsm8k_exact_match_strict_match (stderr columns end in _stderr)."""
    out = {}
    for task, metrics in results["results"].items():
        for key, value in metrics.items():
            if "," not in key or not isinstance(value, (int, float)):
                continue  # 'alias' and the like
            metric, filt = key.split(",", 1)
            stderr = metric.endswith("_stderr")
            metric = metric.removesuffix("_stderr")
            name = re.sub(r"[^A-Za-z0-9]+", "_", f"{task}_{metric}_{filt}") + ("_stderr" if stderr else "")
            out[name] = value
    for task, n in results.get("n-samples", {}).items():
        out[f"{task}_samples"] = n.get("effective")
    return out


def column_prefixes(spec: dict) -> tuple[str, ...]:
    """Columns an eval section adds start with its task names (for figure checks)."""
    return tuple(f"{t}_" for t in spec.get("tasks", []))
