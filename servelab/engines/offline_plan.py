"""Many offline benchmark points in one process, the engine built once per engine configuration.

An offline benchmark (`vllm bench latency|throughput`, servelab.engines.hf.static_batching) builds
its engine inside its own process, so one process per point pays one engine start per
point. A runner (servelab.engines.vllm.offline, hf_static --plan) instead reads a plan:

    {"points": [{"key": "...", "argv": [...]}, ...]}

where each argv is exactly what the standalone benchmark takes, and runs them in order
with `run_plan`. Points whose engine configuration equals the previous point's reuse its
engine (`EngineCache`); a new configuration closes the old engine first. Each point's
outcome is appended to a status file as one JSON line as soon as it is known:

    {"key": K, "wall_s": 3.1, "engine_start_s": 0.0, "span": [T0, T1]}   measured (span: monotonic)
    {"key": K, "error": "ValueError: ...", "engine_start_s": 41.2}  failed (kept as data)

`wall_s` is the benchmark's own time: the engine start, when this point paid it, is
reported apart in `engine_start_s` (for the first point, the runner's imports included).
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path
from typing import Callable


POINT_MARK = "servelab offline point: "   # starts each point's part of the runner's output


# the runner's imports (vLLM's take ~10 s on a small CPU box) are part of its engine's start
RUNNER_STARTED = time.monotonic()


class EngineStartFailed(RuntimeError):
    """The engine of a configuration could not be built: every point of it fails alike."""


class EngineCache:
    """The engine of the last configuration asked for. `build(key)` makes one, `close(engine)`
    frees it (before the next configuration's is built), `reuse(engine)` readies a kept
    engine for its next point (e.g. empties its prefix cache, as a fresh engine's is)."""

    def __init__(self, build: Callable, close: Callable = lambda engine: None,
                 reuse: Callable = lambda engine: None):
        self._build, self._close, self._reuse = build, close, reuse
        self.key: str | None = None
        self.engine = None
        self.failed: dict[str, str] = {}   # configuration -> why its engine did not start
        self.start_s = 0.0                  # engine start paid by the current point
        self.builds = 0

    def get(self, key: str, *args):
        if key in self.failed:
            raise EngineStartFailed(self.failed[key])
        if self.engine is not None and key == self.key:
            self._reuse(self.engine)
            return self.engine
        self.drop()
        started = time.monotonic()
        try:
            self.engine = self._build(*args)
        except Exception as exc:
            self.start_s += time.monotonic() - started
            self.failed[key] = f"engine did not start: {type(exc).__name__}: {exc}"
            raise EngineStartFailed(self.failed[key]) from exc
        self.start_s += time.monotonic() - started
        self.key = key
        self.builds += 1
        return self.engine

    def drop(self) -> None:
        """Close the kept engine (also after a failed point: its state is not trusted)."""
        if self.engine is not None:
            engine, self.engine, self.key = self.engine, None, None
            self._close(engine)


def read_plan(path: str | Path) -> list[dict]:
    points = json.loads(Path(path).read_text())["points"]
    for p in points:
        if not isinstance(p.get("key"), str) or not isinstance(p.get("argv"), list):
            raise ValueError(f"{path}: every point needs a 'key' string and an 'argv' list, got {p}")
    return points


def write_plan(path: str | Path, points: list[tuple[str, list[str]]]) -> None:
    Path(path).write_text(json.dumps({"points": [{"key": k, "argv": argv} for k, argv in points]}, indent=1))


def run_plan(points: list[dict], status_path: str | Path, cache: EngineCache,
             run_point: Callable[[list[str]], None], *, started: float | None = None) -> int:
    """Run every point with `run_point(argv)` (which gets its engine from `cache`); return
    the number that failed. A failing point is reported and the run goes on. `started`:
    when the runner's start-up began (default: its imports'; a pre-started runner's: its grant)."""
    failed, first_start = 0, started
    with open(status_path, "a") as status:
        for n, point in enumerate(points, 1):
            print(f"[{n}/{len(points)}] {POINT_MARK}{point['key']}", flush=True)
            started = time.monotonic()
            imports_s = started - (first_start or RUNNER_STARTED) if n == 1 else 0.0
            cache.start_s = 0.0
            outcome: dict = {"key": point["key"]}
            try:
                run_point(point["argv"])
            except (Exception, SystemExit) as exc:   # argparse errors exit; a point's failure is data
                failed += 1
                traceback.print_exc()
                outcome["error"] = (str(exc) if isinstance(exc, EngineStartFailed)
                                    else f"{type(exc).__name__}: {exc}")
                if not isinstance(exc, EngineStartFailed):
                    cache.drop()
            else:
                outcome["wall_s"] = round(time.monotonic() - started - cache.start_s, 3)
            outcome["engine_start_s"] = round(cache.start_s + imports_s, 3)
            # the point's span on the machine's monotonic clock (one clock for every process),
            # after the engine's build where it paid one (the build comes first): its record of
            # conditions is cut to it (servelab.serve.offline_session)
            outcome["span"] = [round(started + cache.start_s, 3), round(time.monotonic(), 3)]
            status.write(json.dumps(outcome) + "\n")
            status.flush()
            sys.stdout.flush()
            sys.stderr.flush()
    cache.drop()
    return failed


def read_status(path: str | Path) -> list[dict]:
    """The complete lines written so far (a line being written is left for the next read)."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.split("\n")[:-1] if line.strip()]
