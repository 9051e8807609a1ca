"""The engines' own argument parsers, imported where they can be (vLLM's server, bench and
offline tools; SGLang's server and bench client; lm-eval's), and a command checked against
one: `parse_or_message` gives the parser's own refusal, or None. Used by servelab.checks.validate."""

from __future__ import annotations

import contextlib
import functools
import io
import sys


def vllm_serve_parser():
    from servelab.engines.vllm.cli import patch_version_lookup

    patch_version_lookup()
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))


def with_engine_version(engine: str, msg: str) -> str:
    """A flag the installed engine's parser does not know: name that engine's version,
    since the flag may be a misspelling or belong to another release (vLLM's flags come
    and go between releases: `--calculate-kv-scales` is gone, `--speculative-config` is new)."""
    from servelab.config import engine_facts as facts

    if "unrecognized arguments" not in msg or not facts.of(engine).release_flags:
        return msg
    from servelab.run import provenance
    from servelab.engines.registry import ENGINES

    version = provenance.package_version(*ENGINES[engine].distributions) or "unknown"
    return (f"{msg} (not a flag of the installed {engine} {version}: check its spelling, "
            f"or use a {engine} release that has it)")


def parse_or_message(parse, argv: list[str]) -> str | None:
    """None if `parse(argv)` accepts argv; else the parser's own error message."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parse(argv)
    except SystemExit:
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        return lines[-1] if lines else "rejected by the parser"
    return None


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


PARSERS = {"vllm": VLLMParsers, "sglang": SGLangParsers}


def vllm_offline_parser(tool: str):
    """`vllm bench throughput|latency`'s own parser (engine arguments included)."""
    import importlib

    from servelab.engines.vllm.cli import patch_version_lookup

    patch_version_lookup()
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog=f"vllm bench {tool}")
    importlib.import_module(f"vllm.benchmarks.{tool}").add_cli_args(parser)
    return parser.parse_args


def offline_parser(engine: str, tool: str):
    """(parse, the argv element after which its arguments start): the parser of servelab's
    own offline runner where the engine has one, else `vllm bench TOOL`'s."""
    import importlib

    from servelab.config import engine_facts as facts

    if runner := facts.of(engine).own_offline_runner:
        return importlib.import_module(runner).parser().parse_args, runner
    return vllm_offline_parser(tool), tool


class LMEvalParsers:
    """lm-eval's own CLI parser, the model_args local-completions accepts (it
    swallows unknown ones silently), and its task index."""

    def __init__(self):
        from lm_eval._cli import HarnessCLI

        self.cli = HarnessCLI()

    def parse(self, argv: list[str]):
        return self.cli._parser.parse_args(argv)

    def model_args(self) -> set[str]:
        import inspect

        import lm_eval.models  # noqa: F401  (registers the models)
        from lm_eval.api.registry import get_model

        known = set()
        for cls in get_model("local-completions").__mro__:
            if "__init__" in vars(cls):
                known |= set(inspect.signature(cls.__init__).parameters) - {"self", "args", "kwargs"}
        return known

    def tasks(self) -> frozenset[str]:
        return lm_eval_task_index()


@functools.cache
def lm_eval_task_index() -> frozenset[str]:
    """lm-eval's task names: its index reads every task's YAML (about 14,000 files, 18 s on
    2 cores), and it does not change while a process runs."""
    from lm_eval.tasks import TaskManager

    return frozenset(TaskManager().all_tasks)
