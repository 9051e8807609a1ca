"""The names and folders of an export, as llm-d-benchmark's analysis finds reports.

llm-d-benchmark finds reports by file name, not by content: a treatment (a configuration)
is a folder, its load stages are `benchmark_report_v0.2,_*.yaml` files in it. So an export
is, per experiment, one folder per server point holding one YAML report per load point:

    OUT/SERVER_POINT/benchmark_report_v0.2,_stage_I_LOAD.yaml          (one experiment)
    OUT/EXP/SERVER_POINT/benchmark_report_v0.2,_stage_I_LOAD.yaml      (several)

I numbers the server point's load points in the table's order; LOAD names the client knobs
that differ between the experiment's points. LLMD_GLOBS keeps the patterns llm-d's own code
globs, with where each is, so that a test holds the names against them.
"""

from __future__ import annotations

import re

PREFIX = "benchmark_report_v0.2,_"
SUFFIX = ".yaml"

# llm-d/llm-d-benchmark@8bc9f1ddd873a24f1657d6cca2e0d0fb6947dd36: (file:line, the folder it
# globs relative to, pattern)
LLMD_GLOBS = (
    ("llmdbenchmark/analysis/__init__.py:497", "treatment", "benchmark_report_v0.2,_*.yaml"),
    ("llmdbenchmark/analysis/cross_treatment.py:216", "treatment", "benchmark_report_v0.2*yaml"),
    ("llmdbenchmark/agent/score.py:42", "export", "**/benchmark_report_v0.2,_*.yaml"),
    ("llmdbenchmark/results_store/workspace.py:66", "treatment", "benchmark_report_v0.2*.yaml"),
    ("docs/analysis/aggregate_runs.py:58", "treatment", "benchmark_report_v0.2*.yaml"),
)
# llmdbenchmark/analysis/__init__.py:439: how a report's name gives its load stage
STAGE_PATTERN = re.compile(r".*stage_(\d+)", re.DOTALL)


def safe(text: str) -> str:
    """A file or folder name of letters, digits and `=._-` only (no separator, no comma)."""
    return re.sub(r"[^A-Za-z0-9=._-]+", "_", text).strip("_")[:120] or "point"


def report_name(stage: int, load: str) -> str:
    return f"{PREFIX}stage_{stage}{'_' + safe(load) if load else ''}{SUFFIX}"


def report_paths(points: list[tuple[str, str]]) -> list[str]:
    """[(server point, load text)] in the table's order -> each one's path within its
    experiment's folder; a server point's load points numbered as stages 0, 1, ..."""
    stages: dict[str, int] = {}
    paths = []
    for server_point, load in points:
        folder = safe(server_point)
        stage = stages.get(folder, 0)
        stages[folder] = stage + 1
        paths.append(f"{folder}/{report_name(stage, load)}")
    return paths
