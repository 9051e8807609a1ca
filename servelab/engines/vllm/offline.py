"""`vllm bench latency|throughput` for many points on one engine.

    python -m servelab.engines.vllm.offline TOOL PLAN.json STATUS.jsonl

Every point's argv is what `vllm bench TOOL` takes, and it runs vLLM's own benchmark
(`vllm.benchmarks.TOOL.main`) unchanged: its prompts, its warm-up iterations, its
timing, its JSON. The one difference from the standalone command is where the engine
comes from: both benchmarks build it with `LLM.from_engine_args(engine_args)`, which
here returns the engine already built when the point's engine arguments equal the
previous point's (the dataclass's repr compares every field), with its prefix cache
emptied, as a fresh engine's is. Points that differ only in what the benchmark sends
(batch size, lengths, prompt count) then pay one engine start between them.
servelab.engines.offline_plan describes the plan and status files.
"""

from __future__ import annotations

import importlib
import sys
import time

from servelab.engines import prestart
from servelab.engines.offline_plan import EngineCache, read_plan, run_plan

TOOLS = ("latency", "throughput")


def close_llm(llm) -> None:
    """Stop the engine core's process and free its memory before the next engine is built."""
    core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    if core is not None and hasattr(core, "shutdown"):
        core.shutdown()
    del llm
    import gc

    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:
        pass


def shared_engine_cache():
    """An EngineCache installed as vLLM's `LLM.from_engine_args` for this process."""
    from vllm import LLM

    build = LLM.from_engine_args   # the original, bound to the class
    cache = EngineCache(build=build, close=close_llm, reuse=lambda llm: llm.reset_prefix_cache())
    LLM.from_engine_args = staticmethod(lambda engine_args, *a, **kw: cache.get(repr(engine_args), engine_args, *a, **kw))
    return cache


def main(argv: list[str] | None = None, asked_at: float | None = None) -> int:
    """The runner; `asked_at`: when its session asked a zygote for it (its imports were the
    zygote's, so its start-up counts from the ask, the wait for a new zygote's imports
    included, as a new interpreter's counts its own imports)."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 3 or argv[0] not in TOOLS:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    tool, plan_path, status_path = argv
    from servelab.engines.vllm.cli import keep_start_method, patch_version_lookup

    patch_version_lookup()
    keep_start_method()   # the engine core forks from this process's imports where the env says fork
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    bench = importlib.import_module(f"vllm.benchmarks.{tool}")
    cache = shared_engine_cache()
    # pre-started (servelab.engines.prestart): where it waited for its GPUs, the imports above
    # ran while another job used them, and its start-up counts from the grant
    granted = time.monotonic() if prestart.wait_for_grant() else None

    def run_point(point_argv: list[str]) -> None:
        parser = FlexibleArgumentParser(prog=f"vllm bench {tool}")
        bench.add_cli_args(parser)
        args = parser.parse_args(point_argv)
        print(f"$ vllm bench {tool} {' '.join(point_argv)}", flush=True)
        bench.main(args)

    failed = run_plan(read_plan(plan_path), status_path, cache, run_point, started=granted or asked_at)
    print(f"servelab: {cache.builds} engine start(s) for the plan's points, {failed} failed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
