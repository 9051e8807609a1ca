"""Benchmark: pipeline overhead of the embedded week 1 sweep (prints figures).

    .venv/bin/python tests/benchmarks/week01_overhead.py

Runs `snakemake --profile profiles/local --config run=[week01]` in a fresh copy of the workflow twice:
cold (tiny model and dataset built too) and sweep-only (results removed, model
kept). For each: wall time vs (server start-up + sum of benchmark durations),
the irreducible part. Target ratio <= 1.10.
"""
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conftest import make_workdir, snakemake  # noqa: E402
from servelab.raw_result import read_raw


def measure(workdir: Path, label: str) -> float:
    started = time.monotonic()
    snakemake(workdir, "--profile", "profiles/local", "--config", "run=[week01]")
    wall = time.monotonic() - started
    records = [json.loads(p.read_text()) for p in (workdir / "results/week01/store").glob("*/record.json")]
    startup = {r["session"]: r["server_startup_s"] for r in records}
    durations = [read_raw(p.parent)["duration"] for p in (workdir / "results/week01/store").glob("*/bench.json*")]
    floor = sum(startup.values()) + sum(durations)
    ratio = wall / floor
    print(f"{label:>10}: wall {wall:6.1f}s | server start-up {sum(startup.values()):5.1f}s "
          f"({len(startup)} launch) + benchmarks {sum(durations):5.1f}s ({len(durations)} points) "
          f"= {floor:6.1f}s | overhead ratio {ratio:.3f} (target <= 1.10)", flush=True)
    return ratio


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="servelab-bench-") as tmp:
        workdir = make_workdir(Path(tmp) / "servelab")
        measure(workdir, "cold")
        shutil.rmtree(workdir / "results")
        shutil.rmtree(workdir / "logs")
        measure(workdir, "sweep-only")


if __name__ == "__main__":
    main()
