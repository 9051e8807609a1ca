"""Failed points as data: which failures are kept, the engine's own reason, the summary.

A point fails *deterministically* when the engine or a client exits on its own with
an error: a configuration the engine refuses at start-up (vLLM: "FP8 KV cache on CPU
requires x86 with AVX-512 or AMX"), a server that exits non-zero under load, a
benchmark client or offline benchmark that reports an error. Such a point is stored
with its reason (a row with `valid` false) and not measured again unless the user asks
(`retry_failed: true`). A *transient* failure (killed by a signal: a time limit,
preemption, Ctrl-C, the OOM killer; a start-up that outlasts its timeout) fails the
job, so that a rerun or Snakemake's retries measure the point. So does an engine process
(vLLM's engine core or workers, SGLang's scheduler) that dies by a signal or vanishes
without an exception of its own, and any death whose cause cannot be told: a rerun costs
a start, a wrong failed row costs a wrong table.

The reason is always the failing process's own exception, never a wrapper pointing back
at it ("See root cause above") nor a traceback logged at WARNING (vLLM 0.26 logs an
optional import's ModuleNotFoundError on every start).
"""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

# a traceback's last line, e.g. "ValueError: ...", maybe behind vLLM's process tag
# "(EngineCore pid=12) " and its logger's "ERROR 11-22 21:47:47 [core.py:1510] "
# (a bare `raise AssertionError` prints the class alone: its own exception too)
EXCEPTION = re.compile(r"^(?:\((\S+) pid=\d+\)\s+)?(?:[A-Z]+ \d\d-\d\d [\d:]+ \[[^\]]*\]\s+)?"
                       r"((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception))(?:: (.+))?$")
# vLLM tags each line with its process: its API server's are not the engine's own
FRONT_PROCESSES = ("APIServer",)
# wrappers that only point back at the root cause printed before them (or that an engine
# died without one: vLLM's EngineDeadError after its engine core was killed)
WRAPPERS = ("See root cause above", "Engine core initialization failed", "See stack trace (above)",
            "EngineCore encountered an issue")
# a line logged below ERROR is never the reason, whatever exception it quotes
QUIET_LINE = re.compile(r"^(?:\(\S+ pid=\d+\)\s+)?(?:WARNING|INFO|DEBUG)\s")
# argparse's refusal, "vllm: error: unrecognized arguments: --foo" (exit code 2)
ARGPARSE_ERROR = re.compile(r"^(?:\(\S+ pid=\d+\)\s+)?[\w.-]+: error: (.+)$")
ERROR_LINE = re.compile(r"\bERROR\b")
# pydantic's "1 validation error for SpeculativeConfig": the reason is on the next line
PYDANTIC_HEADER = re.compile(r"^\d+ validation errors? for \w+$")
PROCESS_TAG = re.compile(r"^\(\S+ pid=\d+\)\s*")


class PointFailed(Exception):
    """A deterministic failure at a point (or at the server all its points need)."""

    def __init__(self, stage: str, reason: str, log: str | Path | None = None, exit_code: int | None = None):
        super().__init__(f"{stage}: {reason}")
        self.stage, self.reason, self.exit_code = stage, reason, exit_code
        self.log = str(log) if log else None

    def as_record(self) -> dict:
        return {"stage": self.stage, "reason": self.reason, "exit_code": self.exit_code, "log": self.log}


def is_deterministic(exit_code: int | None) -> bool:
    """An exit on its own with an error code; None (still running, timed out) and
    negative codes (killed by a signal) are transient."""
    return exit_code is not None and exit_code > 0


def own_exceptions(text: str) -> list[tuple[str | None, str]]:
    """(process tag, reason) of each exception a process of the log raised of its own, in
    order: not a wrapper pointing elsewhere, not quoted in a WARNING or INFO line; and
    argparse's refusals."""
    lines, found = text.splitlines(), []
    for n, raw in enumerate(lines):
        line = raw.strip()
        if QUIET_LINE.match(line):
            continue
        if m := EXCEPTION.match(line):
            message = m[3] or ""
            if any(w in message for w in WRAPPERS):
                continue
            reason = f"{m[2]}: {message}" if message else f"{m[2]} (no message)"
            if PYDANTIC_HEADER.match(message) and n + 1 < len(lines):
                detail = PROCESS_TAG.sub("", lines[n + 1].strip()).split(" [type=")[0]
                reason += f": {detail}"
            found.append((m[1], reason))
        elif m := ARGPARSE_ERROR.match(line):
            found.append((None, f"argument error: {m[1]}"))
    return found


def own_exception(text: str) -> str | None:
    """The first exception a process of the log raised of its own, or None."""
    found = own_exceptions(text)
    return found[0][1] if found else None


def engine_reason(text: str) -> str | None:
    """The engine's own reason in a log: its own exception, else its last ERROR line."""
    if reason := own_exception(text):
        return reason
    errors = [line.strip() for line in text.splitlines() if ERROR_LINE.search(line) and not QUIET_LINE.match(line.strip())]
    return errors[-1] if errors else None


class TransientFault(RuntimeError):
    """A fault of the moment (a process killed, a death with no cause of its own): the job
    fails, nothing is stored, a plain rerun measures the points it lost."""


def server_reason(log_text: str, exit_code: int | None, engine_died: str | None) -> str | None:
    """The engine's own reason when a server's death is data (it raised, or refused its
    configuration), None when it is transient: its front killed by a signal, not healthy in
    time with its engine alive, or no exception of its own in the log (`log_text`: the
    part written since the points it failed began, for a death under load)."""
    if exit_code is not None and exit_code < 0:
        return None
    if exit_code is None and not engine_died:
        return None
    found = own_exceptions(log_text)
    if engine_died:
        # the engine's death is caused by an exception of an engine process, not by one its
        # API server logged for a request before the engine was killed
        found = [(tag, reason) for tag, reason in found if not (tag or "").startswith(FRONT_PROCESSES)]
    return found[0][1] if found else None


def exit_words(code: int) -> str:
    """'exited with code 1', or 'was killed by SIGKILL' for a negative code."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def transient_words(gone: tuple[str, int] | None, exit_words: str, during: str) -> str:
    """What a transient death was, e.g. 'vLLM engine core pid 8467 killed (no exception of
    its own; SIGKILL/OOM?) during client point request_rate=1'."""
    if gone:
        name, pid = gone
        return f"{name} pid {pid} killed (no exception of its own; SIGKILL/OOM?) {during}"
    return f"server {exit_words} {during} with no exception of its own"


def log_reason(path: str | Path, fallback: str) -> str:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return fallback
    return engine_reason(text) or fallback


def failed_records(view_files: list[str | Path]) -> list[dict]:
    """The failed points' records of some session views (those that exist)."""
    out = []
    for view in view_files:
        if Path(view).is_file():
            out += [r for r in json.loads(Path(view).read_text()) if r.get("failure")]
    return out


def summary(records: list[dict]) -> str:
    """A few lines for the end of a run: what failed and why, one line per reason."""
    if not records:
        return ""
    by_reason: dict[tuple, list[str]] = {}
    for r in records:
        by_reason.setdefault((r["experiment"], r["failure"]["stage"], r["failure"]["reason"]), []).append(
            r["server_point"])
    lines = [f"servelab: {len(records)} point(s) failed and are in the tables as valid=false "
             f"(kept; measure them again with --config retry_failed=True):"]
    for (exp, stage, reason), points in sorted(by_reason.items()):
        names = ", ".join(sorted(set(points)))
        lines.append(f"  {exp} [{names}] {stage}: {reason}")
    return "\n".join(lines)


# a session's note of the transient fault that failed its job (beside its server log)
TRANSIENT_NOTE = "transient.json"


def transient_summary(notes: list[dict]) -> str:
    """A few lines for the end of a run: the jobs a transient fault failed, and what a rerun does."""
    if not notes:
        return ""
    lines = [f"servelab: {len(notes)} session(s) failed by a transient fault (not stored as failed points; "
             f"a plain rerun measures the {sum(n['lost_points'] for n in notes)} point(s) they lost):"]
    lines += [f"  {n['experiment']} [{n['server_point']}] {n['what']}" for n in notes]
    return "\n".join(lines)
