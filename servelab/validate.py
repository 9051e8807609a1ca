"""Check every command a config would launch against the engines' own parsers.

    python -m servelab.validate config/config.yaml [config/local.yaml ...]

Run it before submitting GPU jobs: a stale or mistyped flag is reported with
the experiment, server point and flag, and no GPU hour is spent on it.
(Importing vLLM's parsers takes ~10 s, so Snakemake's DAG build does not do it.)
"""

from __future__ import annotations

import contextlib
import io
import sys
from dataclasses import dataclass

from servelab import commands
from servelab.experiments import client_points, engine_flags, point_id, server_points


@dataclass
class Problem:
    experiment: str
    point: str
    command: str
    message: str

    def __str__(self) -> str:
        return f"{self.experiment} [{self.point}] {self.command}: {self.message}"


def vllm_serve_parser():
    from servelab.vllm_cli import patch_version_lookup

    patch_version_lookup()
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))


def parse_or_message(parser, argv: list[str]) -> str | None:
    """None if argv parses; else the parser's own error message."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parser.parse_args(argv)
    except SystemExit:
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        return lines[-1] if lines else "rejected by the parser"
    return None


def check_config(config: dict) -> list[Problem]:
    from servelab.vllm_bench import BenchServe

    serve_parser = vllm_serve_parser()
    bench = BenchServe()
    problems = []
    for name, exp in config["experiments"].items():
        for sp, knobs in server_points(exp).items():
            cmd = commands.vllm_serve_command("MODEL", 8000, engine_flags(knobs), f"servelab-{name}")
            msg = parse_or_message(serve_parser, cmd[cmd.index("serve") + 1:])
            if msg:
                problems.append(Problem(name, sp, "vllm serve", msg))
        for knobs in client_points(exp):
            builtin = config["datasets"][exp["dataset"]].get("builtin")
            argv = commands.vllm_bench_serve_args("MODEL", "served", 8000, builtin or "sharegpt",
                                                  None if builtin else "data.json", knobs, ".", "x.json")
            msg = parse_or_message(bench.parser(), argv)
            if msg:
                problems.append(Problem(name, point_id(knobs), "vllm bench serve", msg))
    return problems


def main(argv: list[str] | None = None) -> int:
    import yaml
    from snakemake.utils import update_config

    files = (argv if argv is not None else sys.argv[1:]) or ["config/config.yaml"]
    config: dict = {}
    for path in files:
        with open(path) as fh:
            update_config(config, yaml.safe_load(fh))
    problems = check_config(config)
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"servelab validate: {len(problems)} problem(s) in {len(config['experiments'])} experiment(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
