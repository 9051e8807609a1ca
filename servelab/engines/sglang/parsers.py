"""SGLang's own argument parsers, imported from the installed release: its server's, its
router's, and its bench client's options (servelab.checks.validate asks them through the face)."""

from __future__ import annotations

import sys


class SGLangParsers:
    """SGLang's own server parser (ServerArgs.add_cli_args) and its bench client's options."""

    def __init__(self):
        import argparse

        from sglang.srt.server_args import ServerArgs

        parser = argparse.ArgumentParser(prog="sglang.launch_server")
        ServerArgs.add_cli_args(parser)
        self.parse_server = parser.parse_args
        self.client_options: set[str] | None = None

    def serve(self, cmd: list[str]):
        return self.parse_server(cmd[cmd.index("sglang.launch_server") + 1:])

    def router(self, argv: list[str]):
        from sglang_router.launch_router import parse_router_args

        return parse_router_args(argv)

    def server_argv(self, cmd: list[str]) -> list[str]:
        return cmd

    def client(self, argv: list[str]):
        """The options `python -m sglang.bench_serving` defines, read from its source
        (importing it pulls in torchvision, which cannot import beside a CPU torch):
        unknown options are caught, value types are not."""
        if self.client_options is None:
            self.client_options = sglang_bench_options()
        unknown = [a for a in argv if a.startswith("--") and a.split("=")[0] not in self.client_options]
        if unknown:
            print(f"sglang.bench_serving: error: unrecognized arguments: {' '.join(unknown)}", file=sys.stderr)
            raise SystemExit(2)
        return argv


def sglang_bench_options() -> set[str]:
    import ast
    import importlib.util

    source = open(importlib.util.find_spec("sglang.benchmark.serving").origin).read()
    options = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            options |= {a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("--")}
    return options
