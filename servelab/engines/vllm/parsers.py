"""vLLM's own argument parsers, imported from the installed release: its server's, its bench
client's, its offline benchmarks', and its engine config built from parsed arguments the way
vLLM builds it before it loads weights (servelab.checks.validate asks them through the face)."""

from __future__ import annotations

import contextlib
import io


def vllm_serve_parser():
    from servelab.engines.vllm.cli import patch_version_lookup

    patch_version_lookup()
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))


class VLLMParsers:
    def __init__(self):
        from servelab.engines.vllm.bench import BenchServe

        self.serve = vllm_serve_parser().parse_args
        self.bench = BenchServe()

    def engine_config(self, argv: list[str], model_dir: str) -> str | None:
        return vllm_engine_config(self.serve(argv), model_dir)

    def server_argv(self, cmd: list[str]) -> list[str]:
        return cmd[cmd.index("serve") + 1:]

    def router(self, argv: list[str]):
        from servelab.engines.vllm.pd_proxy import parser

        return parser().parse_args(argv)

    def client(self, argv: list[str]):
        return self.bench.parser().parse_args(argv)


def vllm_engine_config(args, model_dir: str) -> str | None:
    """What vLLM's own config classes say of parsed engine arguments (`vllm serve`'s, or an
    offline benchmark's), the way vLLM builds them before it loads weights (EngineArgs ->
    VllmConfig), on the model's config.json. Only their value checks (pydantic) are
    reported: other refusals here can be this machine's platform (a CPU build refusing a
    GPU-only quantization), which is not what this check judges."""
    import pydantic
    from vllm.engine.arg_utils import EngineArgs

    args.model = args.tokenizer = model_dir
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            EngineArgs.from_cli_args(args).create_engine_config()
    except pydantic.ValidationError as err:
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or err.title}: {e['msg'].removeprefix('Value error, ')}"
                         for e in err.errors())
    except Exception:  # noqa: BLE001
        return None
    return None


def vllm_offline_parser(tool: str):
    """`vllm bench throughput|latency`'s own parser (engine arguments included)."""
    import importlib

    from servelab.engines.vllm.cli import patch_version_lookup

    patch_version_lookup()
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog=f"vllm bench {tool}")
    importlib.import_module(f"vllm.benchmarks.{tool}").add_cli_args(parser)
    return parser.parse_args
