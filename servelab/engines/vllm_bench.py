"""vLLM's own `vllm bench serve`, imported once: in the session's process, or in the zygote
that forked the session's CPU server (servelab.engines.forked_client).

`vllm bench serve ARGS` parses ARGS with `vllm.benchmarks.serve.add_cli_args`
and calls `vllm.benchmarks.serve.main`; BenchServe calls the same two functions with
the same arguments. Importing them costs 13-16 s on a 2-core CPU box: paid once per
session (overlapped with the server's start-up), not once per point.
"""

from __future__ import annotations

import contextlib
from pathlib import Path


class BenchServe:
    def __init__(self):
        from servelab.engines.vllm_cli import patch_version_lookup

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
        """Run one benchmark, its output where this process writes (a zygote's child)."""
        return self._main(self.parse(argv))

