"""How long a run must take at least on N GPUs, from an earlier run's sessions: before a
GPU box or a cluster allocation is booked, `servelab plan ... --timings DIR`.

Each session of the run (experiment x server point) is looked up in the earlier runs'
`timing.json` files (servelab.run.timing): its start-up and benchmark runs (client points,
warm-up, drift check) times the GPUs it holds. Their sum over N is the least run wall on N
GPUs, reached only if no GPU ever idles (the run line's 1.00). A session with no record
is estimated at the recorded median per GPU and named; a search counts the sessions it
launched there. The figure is a floor for the same engine, hardware and caches: a fresh
box's first starts compile and build what the recorded ones may have found cached.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path

from servelab.config.experiments import enabled_experiments, server_points
from servelab.run import timing
from servelab.serve.topology import topology_gpus


@dataclass
class TimePlan:
    gpus: int
    recorded: dict[tuple[str, str], float] = field(default_factory=dict)   # session -> GPU-s needed
    startup_gpu_s: float = 0.0          # of the recorded sessions
    estimated: dict[tuple[str, str], float] = field(default_factory=dict)  # no record: median x its GPUs
    median_gpu_s: float = 0.0           # a recorded session's GPU-s per GPU held
    too_wide: dict[tuple[str, str], int] = field(default_factory=dict)     # needs more GPUs than N
    host: bool = False                  # the CPU default: one session at a time on the whole host

    @property
    def gpu_s(self) -> float:
        return sum(self.recorded.values()) + sum(self.estimated.values())

    @property
    def least_wall_s(self) -> float:
        return self.gpu_s / self.gpus

    def lines(self, within_min: float | None = None) -> list[str]:
        def names(sessions) -> str:
            return ", ".join("/".join(s) for s in sessions)

        recorded = sum(self.recorded.values())
        unit, held = ("s", "session") if self.host else ("GPU-s", "GPU held")
        where = "on this host, one session at a time" if self.host else f"on {self.gpus} GPU(s)"
        out = [f"time {where}: {len(self.recorded)} of {len(self.recorded) + len(self.estimated)} "
               f"session(s) recorded: start-ups {self.startup_gpu_s:.0f} {unit}, benchmark runs "
               f"{recorded - self.startup_gpu_s:.0f} {unit}"]
        if self.estimated:
            out.append(f"  not recorded: {len(self.estimated)} session(s), estimated at the recorded median, "
                       f"{self.median_gpu_s:.0f} {unit} per {held}: ~{sum(self.estimated.values()):.0f} {unit} "
                       f"({names(self.estimated)})")
        if self.too_wide:
            out.append("  left out, wider than the box: " + ", ".join(
                f"{'/'.join(s)} ({n} GPUs)" for s, n in self.too_wide.items()))
        out.append("  at least " + ("" if self.host else f"{self.gpu_s:.0f} GPU-s / {self.gpus} = ")
                   + f"{self.least_wall_s:.0f} s ({self.least_wall_s / 60:.1f} min) of run wall, "
                   + ("sessions back to back" if self.host else "with no GPU ever idle"))
        if within_min is not None:
            budget = within_min * 60 * self.gpus
            verdict = (f"fits {within_min:g} min ({budget:.0f} {unit}) with {budget - self.gpu_s:.0f} {unit} to spare"
                       if self.fits(within_min) else
                       f"does not fit {within_min:g} min: {budget:.0f} {unit} {where}, "
                       f"{self.gpu_s - budget:.0f} {unit} short (start-ups recorded: {self.startup_gpu_s:.0f})")
            out.append(f"  {verdict}")
        return out

    def fits(self, within_min: float) -> bool:
        return self.gpu_s <= within_min * 60 * self.gpus


def session_gpus(config: dict, exp: dict, knobs: dict) -> int:
    return 1 if config.get("device") == "cpu" else topology_gpus(knobs, exp.get("topology"))


def recorded_sessions(paths: list[Path]) -> dict[tuple[str, str], dict]:
    """{(experiment, server point): its timing} over timing.json files; of two records of a
    session (a later run resuming it), the one that spent more (a resumed session that found
    every point measured records almost nothing)."""
    found: dict[tuple[str, str], dict] = {}
    for t in timing.load(paths):
        session = (t["experiment"], t["server_point"])
        if session not in found or held_gpu_s(t) > held_gpu_s(found[session]):
            found[session] = t
    return found


def held_gpu_s(t: dict) -> float:
    return timing.needed_s(t) * timing.gpus_held(t)


def timing_files(folders: list[Path]) -> list[Path]:
    """timing.json files under each folder: a run's working copy (results/*/store/sessions/*/)
    or a folder of them (a recording's timing/)."""
    files: list[Path] = []
    for folder in map(Path, folders):
        if not folder.is_dir():
            raise FileNotFoundError(f"--timings {folder}: no such folder")
        files += sorted(p for p in folder.rglob("*.json")
                        if p.name == "timing.json" or p.parent.name == "timing")
    return files


def plan(config: dict, records: dict[tuple[str, str], dict], gpus: int) -> TimePlan:
    if gpus < 1:
        raise ValueError(f"a time plan needs at least 1 GPU, not {gpus}")
    if not records:
        raise ValueError("no recorded session timings (timing.json) to plan from")
    result = TimePlan(gpus=gpus, host=config.get("device") == "cpu")
    per_gpu = [timing.needed_s(t) for t in records.values() if timing.needed_s(t) > 0]
    result.median_gpu_s = statistics.median(per_gpu) if per_gpu else 0.0
    for name in enabled_experiments(config):
        exp = config["experiments"][name]
        points = server_points(exp)
        if exp.get("search"):   # the sessions it launched there, else its launch budget
            launched = [(n, sp) for n, sp in records if n == name]
            budget = int((exp["search"].get("budget") or {}).get("launches", 1))
            wanted = {session: points.get(session[1], {}) for session in launched} or {
                (name, f"launch {i + 1} of {budget}"): {} for i in range(budget)}
        else:
            wanted = {(name, sp): knobs for sp, knobs in points.items()}
        for session, knobs in wanted.items():
            width = session_gpus(config, exp, knobs)
            if width > gpus:
                result.too_wide[session] = width
            elif session in records:
                t = records[session]
                result.recorded[session] = held_gpu_s(t)
                result.startup_gpu_s += t.get("startup_s", 0.0) * timing.gpus_held(t)
            else:
                result.estimated[session] = result.median_gpu_s * width
    return result
