"""SGLang's benchmark client as servelab runs it:
`python -m servelab.engines.sglang.bench ARGS` is `python -m sglang.bench_serving ARGS`,
except that a point sized in time (servelab.engines.clients.time_bound's options in ARGS) is
bounded, its bound's count added to the last line of the client's JSONL output."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

from servelab.engines.clients import time_bound


def client_module():
    """The module that holds the client's schedule and request functions (SGLang moved it
    to sglang.benchmark.serving; sglang.bench_serving re-exports it)."""
    try:
        from sglang.benchmark import serving
    except ImportError:
        from sglang import bench_serving as serving
    return serving


def main(argv: list[str]) -> None:
    argv, bound = time_bound.split(argv)
    sys.argv = ["sglang.bench_serving", *argv]
    if bound is None:
        runpy.run_module("sglang.bench_serving", run_name="__main__", alter_sys=True)
        return
    client = client_module()
    with bound.around(client, client.RequestFuncOutput):
        runpy.run_module("sglang.bench_serving", run_name="__main__", alter_sys=True)
    if "--output-file" in argv:
        out = Path(argv[argv.index("--output-file") + 1])
        lines = out.read_text().strip().splitlines()
        lines[-1] = json.dumps({**json.loads(lines[-1]), "bound": bound.summary()})
        out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
