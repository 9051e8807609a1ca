"""`servelab export RESULTS_DIR --format llmd-0.2.1 --out DIR`: every measured point of an
experiment (results/EXP) or of every experiment under results/ as an llm-d benchmark
report, one YAML file a point where llm-d-benchmark's analysis looks for them
(servelab/export/llmd_layout.py), each validated against the 0.2.1 schema before any is written.

The points are the table's rows (results/EXP/metrics.csv; rebuilt from the session views
and the store where the table is not there yet); each row's facts come from its store
records, a repeated point's percentiles from its repeats' requests (servelab/export/pooled.py).
A point whose record is missing, a report the schema refuses, or an `--out` that would
replace what the export did not write (servelab/export/export_folder.py) stops the export
naming why, and nothing is written: the reports appear together or not at all.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from servelab.export import export_folder, llmd, llmd_layout, llmd_schema
from servelab.raw_result import raw_file, read_raw

FORMATS = ("llmd-0.2.1",)


class ExportError(RuntimeError):
    pass


def experiment_dirs(results_dir: Path) -> list[Path]:
    """results/EXP itself, or each experiment under results/."""
    if (results_dir / "sessions").is_dir() or (results_dir / "metrics.csv").is_file():
        return [results_dir]
    found = sorted(p for p in results_dir.iterdir() if p.is_dir() and (p / "sessions").is_dir()) \
        if results_dir.is_dir() else []
    if not found:
        raise ExportError(f"{results_dir} holds no experiment's results (no sessions/ or metrics.csv, "
                          f"nor experiments with them)")
    return found


def table_rows(exp_dir: Path) -> list[dict]:
    """The experiment's table as row dicts: metrics.csv, or the table rebuilt from the views."""
    import pandas as pd

    from servelab.analysis import metrics

    table_file = exp_dir / "metrics.csv"
    if table_file.is_file():
        try:
            table = pd.read_csv(table_file)
        except (ValueError, pd.errors.ParserError) as err:
            raise ExportError(f"{table_file} is not a readable table: {err}") from err
    else:
        views = sorted((exp_dir / "sessions").glob("*.json"))
        try:
            table = metrics.table(views, exp_dir / "store")
        except FileNotFoundError as err:
            raise ExportError(f"{exp_dir}: a point of the session views has no raw result in the store: "
                              f"{err.filename or err}") from err
        except (OSError, ValueError, KeyError) as err:
            raise ExportError(f"{exp_dir}: its table could not be rebuilt from the session views and the store: "
                              f"{type(err).__name__}: {err}") from err
    missing = {"experiment", "server_point", "point_key"} - set(table.columns)
    if missing:
        raise ExportError(f"{table_file} is not a servelab table: it lacks the column(s) {sorted(missing)}")
    return table.to_dict("records")


def records_of(exp_dir: Path, row: dict) -> list[dict]:
    records = []
    for key in str(row["point_key"]).split(";"):
        path = exp_dir / "store" / key / "record.json"
        if not path.is_file():
            raise ExportError(f"{path} is missing: the table {exp_dir / 'metrics.csv'} names point {key} "
                              f"({row['server_point']}), whose record the store lacks")
        records.append(json.loads(path.read_text()))
    return records


def raws_of(exp_dir: Path, records: list[dict]) -> list[dict] | None:
    """The repeats' raw results; None where the store keeps none (a failed point)."""
    raws = []
    for record in records:
        point = exp_dir / "store" / record["key"]
        if raw_file(point) is None:
            return None
        try:
            raws.append(read_raw(point))
        except (OSError, ValueError, EOFError) as err:   # gzip.BadGzipFile is an OSError
            raise ExportError(f"{raw_file(point)} is not a readable raw result: {err}") from err
    return raws


def reports(exp_dir: Path) -> dict[str, dict]:
    """{path within the experiment's folder: report} of every row of its table, each validated."""
    rows = table_rows(exp_dir)
    records = [records_of(exp_dir, row) for row in rows]
    knobs = [r[0]["client_knobs"] for r in records]
    swept = {k for point in knobs for k in point if any(point.get(k) != other.get(k) for other in knobs)}
    loads = [llmd.load_text({k: v for k, v in k_.items() if k in swept}) if swept else "" for k_ in knobs]
    paths = llmd_layout.report_paths([(str(row["server_point"]), load) for row, load in zip(rows, loads)])
    out = {}
    for row, recs, path in zip(rows, records, paths):
        stage = int(llmd_layout.STAGE_PATTERN.match(path.rsplit("/", 1)[-1]).group(1))
        report = llmd.report(row, recs, raws_of(exp_dir, recs), stage=stage)
        try:
            json.dumps(report, allow_nan=False)
        except (TypeError, ValueError) as err:   # JSON holds no NaN or infinity, nor objects of Python's
            raise ExportError(f"the report of {exp_dir.name}/{row['server_point']} ({path}) is not JSON: {err}") from err
        if problems := llmd_schema.errors(report):
            raise ExportError(f"the report of {exp_dir.name}/{row['server_point']} ({path}) breaks the llm-d "
                              f"{llmd_schema.VERSION} schema: " + "; ".join(problems[:5]))
        out[path] = report
    return out


def as_yaml(report: dict) -> str:
    return yaml.safe_dump(report, sort_keys=False, allow_unicode=True, width=120)


def export(results_dir: str | Path, out: str | Path) -> dict[str, int]:
    """Write every experiment's reports under `out` (out/EXP/SERVER_POINT/ where several
    experiments are exported, else out/SERVER_POINT/); {experiment: reports written}."""
    results_dir, out = Path(results_dir), Path(out)
    exp_dirs = experiment_dirs(results_dir)
    try:
        export_folder.check_out(out, [results_dir, *exp_dirs])
    except export_folder.UnsafeOut as err:
        raise ExportError(str(err)) from err
    made = {d.name: reports(d) for d in exp_dirs}   # all built and validated before any is written
    files = {(f"{exp}/{path}" if len(exp_dirs) > 1 else path): as_yaml(report)
             for exp, found in made.items() for path, report in found.items()}
    export_folder.write_folder(out, files)
    return {exp: len(found) for exp, found in made.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="servelab export", description=__doc__.split("\n\n")[0])
    parser.add_argument("results_dir", type=Path, help="results/EXP (one experiment) or results/ (each one)")
    parser.add_argument("--format", choices=FORMATS, default=FORMATS[0],
                        help=f"the report format and its schema version (default {FORMATS[0]}: llm-d-benchmark's)")
    parser.add_argument("--out", type=Path, required=True, help="a new folder, or one an earlier export made (replaced whole)")
    args = parser.parse_args(argv)
    try:
        written = export(args.results_dir, args.out)
    except ExportError as err:
        print(f"servelab export: FAILED, nothing written: {' '.join(str(err).split())}", file=sys.stderr)
        return 1
    except OSError as err:   # a read-only parent, a full disk, a path under /proc
        where = f" ({err.filename})" if err.filename else ""
        print(f"servelab export: FAILED, nothing written: --out {args.out} cannot be written{where}: "
              f"{err.strerror or err}", file=sys.stderr)
        return 1
    print(f"servelab export: {sum(written.values())} report(s) in {args.out}, each valid against the llm-d "
          f"benchmark report {llmd_schema.VERSION} schema: " + ", ".join(f"{e} {n}" for e, n in written.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
