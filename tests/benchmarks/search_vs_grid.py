"""Benchmark: the CPU search against the exhaustive grid on the same space (prints figures).

    .venv/bin/python tests/benchmarks/search_vs_grid.py [--workdir DIR] [--compare SEARCH_DIR GRID_DIR]

Runs `study_search_cpu` (config/local.yaml: a compass search, each configuration's
session bisecting the concurrency under the SLO) in one fresh copy of the workflow,
then the same experiment with `strategy: grid` (config/studies/search-grid-cpu.yaml) in
another, so that neither reuses the other's points. Prints each one's launches, wall
time, best configuration and goodput, and the search's goodput as a share of the grid's
best and its launches as a share of the grid's (goals: within 5 %, at most 40 %), and
the grid's goodput of the configuration the search chose. `--compare` only reads two
finished working copies.
"""
import argparse
import json
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conftest import make_workdir, snakemake  # noqa: E402
from servelab.search import progress  # noqa: E402

CONFIGS = ["config/config.yaml", "config/local.yaml"]


def run(workdir: Path, *overlay: str) -> float:
    started = time.monotonic()
    snakemake(workdir, "--profile", "profiles/local", "--configfile", *CONFIGS, *overlay,
              "--config", "run=[study_search_cpu]", timeout=7200)
    return time.monotonic() - started


def result(workdir: Path) -> tuple[dict, pd.DataFrame]:
    exp = workdir / "results/study_search_cpu/search"
    return json.loads((exp / "best.json").read_text()), pd.read_csv(exp / "tried.csv")


def report(search_dir: Path, grid_dir: Path, walls: dict) -> None:
    (sbest, stried), (gbest, gtried) = result(search_dir), result(grid_dir)
    for label, best, tried in (("search", sbest, stried), ("grid", gbest, gtried)):
        wall = f", wall {walls[label]:.0f}s" if label in walls else ""
        print(f"{label:>6}: {best['launches']} launches in {best['rounds']} round(s){wall}; best "
              f"{best.get('server_point')} at {best.get('max_load')}: {best.get('goodput_tps', 0):.1f} tok/s")
        if best.get("confirmation"):   # the frontier's repeats (servelab/search/confirm.py)
            print(progress.confirmation_line(best["confirmation"]).rstrip())
    share = sbest["goodput_tps"] / gbest["goodput_tps"]
    same = gtried.set_index("server_point")["goodput_tps"].get(sbest["server_point"])
    print(f"search's best = {share:.1%} of the grid's best (goal >= 95 %); launches {sbest['launches']}/"
          f"{gbest['launches']} = {sbest['launches'] / gbest['launches']:.0%} (goal <= 40 %)")
    print(f"the grid measured the search's choice at {same:.1f} tok/s "
          f"({same / gbest['goodput_tps']:.1%} of its best)")
    print("grid, every configuration (goodput tok/s, highest concurrency meeting the SLO):")
    print(gtried[["server_point", "goodput_tps", "max_load", "limited_by"]].to_string(index=False))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/servelab-search-vs-grid"))
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("SEARCH_DIR", "GRID_DIR"))
    args = parser.parse_args()
    if args.compare:
        report(*args.compare, {})
        return
    walls = {}
    for label, overlay in (("search", ()), ("grid", ("config/studies/search-grid-cpu.yaml",))):
        workdir = make_workdir(args.workdir / label)
        walls[label] = run(workdir, *overlay)
        print(f"{label} done in {walls[label]:.0f}s", flush=True)
    report(args.workdir / "search", args.workdir / "grid", walls)


if __name__ == "__main__":
    main()
