"""vLLM's own `vllm bench serve`, imported once: in the session's process, or in the zygote
that forked the session's CPU server (servelab.engines.vllm.forked_client).

`vllm bench serve ARGS` parses ARGS with `vllm.benchmarks.serve.add_cli_args`
and calls `vllm.benchmarks.serve.main`; BenchServe calls the same two functions with
the same arguments. Importing them costs 13-16 s on a 2-core CPU box: paid once per
session (overlapped with the server's start-up), not once per point.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from servelab.engines.clients import time_bound
from servelab.engines.vllm.sample_cache import SampleCache


class BenchServe:
    def __init__(self):
        from servelab.engines.vllm.version import patch_version_lookup

        patch_version_lookup()
        from vllm import platforms
        from vllm.benchmarks.serve import add_cli_args, main
        from vllm.utils.argparse_utils import FlexibleArgumentParser

        # as `vllm bench` does: a box with no accelerator benchmarks from the CPU platform
        if platforms.current_platform.is_unspecified():
            from vllm.platforms.cpu import CpuPlatform

            platforms.current_platform = CpuPlatform()
        self._add_cli_args = add_cli_args
        self._main = main
        self._parser_cls = FlexibleArgumentParser
        self.samples = SampleCache()   # prompts and tokenizer, kept for the session's next point

    def parser(self):
        parser = self._parser_cls(prog="vllm bench serve")
        self._add_cli_args(parser)
        return parser

    def parse(self, argv: list[str]):
        return self.parser().parse_args(argv)

    def run(self, argv: list[str], log: Path) -> dict:  # the result is also saved as JSON
        """Run one benchmark; its report and progress bar go to `log`."""
        with open(log, "a") as out, contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            print(f"$ vllm bench serve {' '.join(argv)}", flush=True)
            return self.call(argv)

    def call(self, argv: list[str]) -> dict:
        """Run one benchmark, its output where this process writes (a zygote's child); one
        sized in time (servelab.engines.clients.time_bound) with its bound's count in the result."""
        from vllm.benchmarks import serve as client

        from vllm.benchmarks.lib.endpoint_request_func import RequestFuncOutput

        argv, bound = time_bound.split(argv)
        args = self.parse(argv)
        with self.samples.around(client), \
                (bound.around(client, RequestFuncOutput) if bound else contextlib.nullcontext()):
            result = self._main(args)
        if bound is None:
            return result
        result["bound"] = bound.summary()
        if getattr(args, "save_result", False) and args.result_filename:
            saved = Path(args.result_dir or ".") / args.result_filename
            saved.write_text(json.dumps({**json.loads(saved.read_text()), "bound": result["bound"]}))
        return result

