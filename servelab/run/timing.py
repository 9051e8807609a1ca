"""Where a run's session time went, printed at its end: per experiment and in all, the
sessions' wall time against what they had to spend (server start-ups and benchmark runs:
the client points, their warm-ups and drift checks, each a run of the benchmark client),
so that servelab's own overhead is a number (each session's `timing.json`)."""

from __future__ import annotations

import json
from pathlib import Path


def load(paths: list[Path]) -> list[dict]:
    return [json.loads(Path(p).read_text()) for p in paths]


def summary(timings: list[dict], run_wall_s: float | None = None) -> str:
    """Lines: sessions, wall, start-ups, client points (with what repeats after the first
    cost: a repeat is a client point on the same engine, no new start), warm-ups, drift checks
    and stopping the engines' processes, and the
    ratio of wall time to start-ups + benchmark runs (1.00 = no overhead), time spent waiting
    for GPUs that other jobs held apart (`gpu_wait_s`: not the session's wall); with the run's
    own wall time, a last line for sessions side by side (`run_line`)."""
    if not timings:
        return ""
    by_exp: dict[str, list[dict]] = {}
    for t in timings:
        by_exp.setdefault(t["experiment"], []).append(t)

    def line(name: str, group: list[dict]) -> str:
        total = {k: sum(t.get(k, 0.0) for t in group) for k in ("wall_s", "startup_s", "points_s", "warmup_s",
                                                                  "drift_s", "teardown_s", "repeats_s", "gpu_wait_s", "gate_wait_s",
                                                                  "startup_jit_s", "jit_build_s")}
        starts = {c: sum(1 for t in group if t.get("compile") == c) for c in ("cold", "warm")}
        needed = needed_s(total)
        ratio = f"{total['wall_s'] / needed:.3f}" if needed else "-"
        shared = sum(1 for t in group if t.get("shared_engine"))
        on_shared = f" ({shared} on another session's engine)" if shared else ""
        jit = f" (FlashInfer JIT builds {total['startup_jit_s']:.0f}s)" if total["startup_jit_s"] >= 1 else ""
        return (f"  {name}: {len(group)} session(s){on_shared}, wall {total['wall_s']:.0f}s = start-ups "
                f"{total['startup_s']:.0f}s{jit} + client points {total['points_s']:.0f}s"
                + (f" (repeats after the first {total['repeats_s']:.0f}s)" if total["repeats_s"] else "")
                + " + warm-ups "
                f"{total['warmup_s']:.0f}s + drift checks {total['drift_s']:.0f}s + stopping {total['teardown_s']:.0f}s "
                f"+ other; "
                f"wall / (start-ups + benchmark runs) = {ratio}"
                # queueing for a GPU another job holds is the run's, not the session's overhead
                + (f"; waited {total['gpu_wait_s']:.0f}s for GPUs (not in wall)" if total["gpu_wait_s"] else "")
                + (f"; built FlashInfer's JIT {total['jit_build_s']:.0f}s before claiming GPUs, none held "
                   f"(not in wall)" if total["jit_build_s"] >= 1 else "")
                + (f"; starts {starts['cold']} cold, {starts['warm']} warm (compile gate), waited "
                   f"{total['gate_wait_s']:.0f}s for a warm cache (not in wall)" if any(starts.values()) else ""))

    lines = ["servelab: where the sessions' time went (this run):"]
    lines += [line(name, group) for name, group in sorted(by_exp.items())]
    lines.append(line("all", timings))
    if run_wall_s:
        lines.append(run_line(timings, run_wall_s))
    return "\n".join(lines)


def needed_s(t: dict) -> float:
    """What a session had to spend: its engine's start-up and its benchmark runs."""
    return sum(t.get(k, 0.0) for k in ("startup_s", "points_s", "warmup_s", "drift_s"))


def gpus_held(t: dict) -> int:
    """GPUs a session held (1 for a session on the CPU, which records none)."""
    return max(1, len(t.get("gpus") or ()))


def run_line(timings: list[dict], run_wall_s: float) -> str:
    """The run's wall against its sessions': on N GPUs the least a run can take is the
    sessions' start-ups + benchmark runs in GPU-seconds (a TP=2 session holds two) over N, so
    `run wall / that` is 1.00 when the GPUs never wait (and no session waits for its GPU)."""
    sessions = sum(t.get("wall_s", 0.0) for t in timings)
    text = (f"  run: wall {run_wall_s:.0f}s for {sessions:.0f}s of session wall "
            f"({sessions / run_wall_s:.2f} sessions at a time on average)")
    # a GPU is its host's (under SLURM every node has a GPU 0)
    gpus = {(t.get("host", ""), g) for t in timings for g in t.get("gpus", ())}
    if not gpus:
        return text
    names = sorted(g if len({h for h, _ in gpus}) == 1 else f"{h}:{g}" for h, g in gpus)
    gpu_s = sum(needed_s(t) * gpus_held(t) for t in timings)
    least = gpu_s / len(gpus)
    held = lambda key: sum(t.get(key, 0.0) * gpus_held(t) for t in timings)
    startup_gpu_s, jit_gpu_s = held("startup_s"), held("startup_jit_s")
    idle = len(gpus) * run_wall_s - gpu_s
    return (text + f"; on {len(gpus)} GPU(s) ({','.join(names)}): start-ups + benchmark runs "
            f"{gpu_s:.0f} GPU-s / {len(gpus)} = {least:.0f}s, run wall / that = {run_wall_s / least:.3f}; "
            f"GPU-s: start-ups {startup_gpu_s:.0f}"
            + (f" (waiting for FlashInfer JIT builds {jit_gpu_s:.0f})" if jit_gpu_s >= 1 else "")
            + f", benchmark runs {gpu_s - startup_gpu_s:.0f}, idle or other {idle:.0f} of {len(gpus) * run_wall_s:.0f}")


def this_runs(results: Path, since: float) -> list[Path]:
    """timing.json of the sessions that ended after `since` (a run's start, epoch seconds)."""
    return sorted(p for p in Path(results).glob("*/store/sessions/*/timing.json") if p.stat().st_mtime >= since)
