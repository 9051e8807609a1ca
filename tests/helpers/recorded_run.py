"""A recorded GPU run (tests/data/recorded_gpu/<run>/) as the replay tests read it."""
from pathlib import Path

import pandas as pd

from servelab.run import timing


def timings(run: Path) -> list[dict]:
    """Its sessions' timing.json, as servelab's run summary reads them."""
    return timing.load(sorted((run / "timing").glob("*.json")))


def tables(run: Path) -> dict[str, pd.DataFrame]:
    """Its experiments' metrics tables, by experiment."""
    return {p.name.split(".")[0]: pd.read_csv(p) for p in sorted(run.glob("*.metrics.csv"))}
