"""Failed points as data: which failures are kept, the engine's own reason, the summary.

A point fails *deterministically* when the engine or a client exits on its own with
an error: a configuration the engine refuses at start-up (vLLM: "FP8 KV cache on CPU
requires x86 with AVX-512 or AMX"), a server that exits non-zero under load, a
benchmark client or offline benchmark that reports an error. Such a point is stored
with its reason (a row with `valid` false) and not measured again unless the user asks
(`retry_failed: true`). A *transient* failure (killed by a signal: a time limit,
preemption, Ctrl-C, the OOM killer; a start-up that outlasts its timeout) fails the
job, so that a rerun or Snakemake's retries measure the point.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

# a traceback's last line, e.g. "ValueError: ...", maybe behind vLLM's process tag
# "(EngineCore pid=12) " and its logger's "ERROR 11-22 21:47:47 [core.py:1510] "
EXCEPTION = re.compile(r"^(?:\(\S+ pid=\d+\)\s+)?(?:[A-Z]+ \d\d-\d\d [\d:]+ \[[^\]]*\]\s+)?"
                       r"((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception)): (.+)$")
# wrappers that only point back at the root cause printed before them
WRAPPERS = ("See root cause above", "Engine core initialization failed")
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


def engine_reason(text: str) -> str | None:
    """The engine's own reason in a log: its first exception line that is not a
    wrapper pointing elsewhere, else its last ERROR line."""
    errors = []
    lines = text.splitlines()
    for n, raw in enumerate(lines):
        line = raw.strip()
        if m := EXCEPTION.match(line):
            if any(w in m[2] for w in WRAPPERS):
                continue
            reason = f"{m[1]}: {m[2]}"
            if PYDANTIC_HEADER.match(m[2]) and n + 1 < len(lines):
                detail = PROCESS_TAG.sub("", lines[n + 1].strip()).split(" [type=")[0]
                reason += f": {detail}"
            return reason
        if ERROR_LINE.search(line):
            errors.append(line)
    return errors[-1] if errors else None


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
