"""A command checked against an engine's own parser (each engine's face gives its parsers:
servelab/engines/NAME/parsers.py), lm-eval's parsers, and the parser's own refusal
(`parse_or_message`), or None. Used by servelab.checks.validate."""

from __future__ import annotations

import contextlib
import functools
import io


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


def offline_parser(engine: str, tool: str):
    """(parse, the argv element after which its arguments start): the parser of servelab's
    own offline runner where the engine has one, else the engine's own benchmark TOOL's."""
    import importlib

    from servelab.config import engine_facts as facts
    from servelab.engines.registry import ENGINES

    if runner := facts.of(engine).own_offline_runner:
        return importlib.import_module(runner).parser().parse_args, runner
    return ENGINES[engine].offline_parser(tool), tool


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
