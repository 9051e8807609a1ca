"""`servelab import FILE ... --out TABLE.csv`: runs made by other tools (`vllm bench serve
--save-result` JSON, AIPerf's profile_export_aiperf.json) as rows of a servelab table, beside
an experiment's own rows where `--beside results/EXP/metrics.csv` is given, and compared with
them (`--comparisons`: servelab.analysis.comparisons, the imported run against the baseline
at each load point both have).

    servelab import run.json --name other-box --beside results/week01/metrics.csv \
        --out week01-with-other-box.csv --comparisons week01-vs-other-box.csv

Every file is read and checked before anything is written; each output appears whole or not at all.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from servelab.atomic import atomic_path
from servelab.export.importers import ImportFailed, import_file

LOAD_KNOBS = ("request_rate", "max_concurrency")


def imported_table(files: list[Path], *, name: str | None, experiment: str, beside: Path | None = None):
    """The imported rows, after the rows of `beside` (a servelab table) where given."""
    import pandas as pd

    labels = point_labels(files)
    rows = [import_file(f, experiment=experiment,
                        server_point=name if name and len(files) == 1 else f"{name or 'imported'}:{label}")
            for f, label in zip(files, labels)]
    imported = pd.DataFrame(rows)
    if beside is None:
        return imported
    try:
        own = pd.read_csv(beside)
    except (OSError, ValueError) as err:
        raise ImportFailed(f"{beside} is not a readable table: {err}") from err
    if clash := set(imported["server_point"]) & set(own.get("server_point", [])):
        raise ImportFailed(f"{beside} already has the configuration(s) {sorted(clash)}: name the import otherwise "
                           f"(--name)")
    return pd.concat([own, imported[[c for c in imported.columns]]], ignore_index=True, sort=False)


def point_labels(files: list[Path]) -> list[str]:
    """Each file's name without its suffixes; with its folder where names repeat (llm-d's
    reports are all `benchmark_report_v0.2,_stage_N.yaml`, a folder a configuration)."""
    stems = [Path(f).name.split(".json")[0].split(".yaml")[0] for f in files]
    if len(set(stems)) == len(stems):
        return stems
    return [f"{Path(f).parent.name}/{stem}" for f, stem in zip(files, stems)]


def load_knobs_of(table) -> list[str]:
    return [k for k in LOAD_KNOBS if k in table.columns and table[k].notna().any()]


def run(files: list[Path], out: Path, *, name: str | None = None, experiment: str | None = None,
        beside: Path | None = None, comparisons_out: Path | None = None, baseline: str | None = None,
        load_knobs: list[str] | None = None) -> dict:
    import pandas as pd

    from servelab.analysis import comparisons

    if experiment is None:
        experiment = Path(beside).parent.name if beside else "imported"
    table = imported_table(files, name=name, experiment=experiment, beside=beside)
    compared = None
    if comparisons_out is not None:
        knobs = load_knobs or load_knobs_of(table)
        compared = comparisons.compare(table, knobs, baseline)
    with atomic_path(out) as tmp:
        table.to_csv(tmp, index=False)
    if compared is not None:
        with atomic_path(comparisons_out) as tmp:
            compared.to_csv(tmp, index=False)
    return {"rows": len(table), "imported": len(files), "comparisons": None if compared is None else len(compared),
            "table": pd.read_csv(out)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="servelab import", description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="vllm bench serve JSON (plain or .gz), AIPerf's "
                                                            "profile_export_aiperf.json, or llm-d 0.2.1 reports")
    parser.add_argument("--out", type=Path, required=True, help="the table to write (CSV)")
    parser.add_argument("--name", help="the imported run's configuration name (server_point column)")
    parser.add_argument("--experiment", help="the experiment column (default: --beside's experiment, or 'imported')")
    parser.add_argument("--beside", type=Path, help="a servelab table (results/EXP/metrics.csv) to put the rows beside")
    parser.add_argument("--comparisons", type=Path, help="also write the comparisons against --baseline (CSV)")
    parser.add_argument("--baseline", help="the configuration compared against (default: the table's first)")
    parser.add_argument("--load-knobs", nargs="+", help=f"the columns that make a load point (default: those of "
                                                       f"{list(LOAD_KNOBS)} the table has)")
    args = parser.parse_args(argv)
    try:
        result = run(args.files, args.out, name=args.name, experiment=args.experiment, beside=args.beside,
                     comparisons_out=args.comparisons, baseline=args.baseline, load_knobs=args.load_knobs)
    except (ImportFailed, ValueError) as err:
        print(f"servelab import: FAILED, nothing written: {' '.join(str(err).split())}", file=sys.stderr)
        return 1
    print(f"servelab import: {result['imported']} run(s) imported; {args.out} holds {result['rows']} row(s)"
          + (f"; {result['comparisons']} comparison(s) in {args.comparisons}" if args.comparisons else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
