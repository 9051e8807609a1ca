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
import io
import os
import sys
from pathlib import Path

from servelab.atomic import atomic_path
from servelab.export import bounded_read, export_folder
from servelab.export.importers import ImportFailed, import_file
from servelab.export.spreadsheet import spreadsheet_safe

LOAD_KNOBS = ("request_rate", "max_concurrency")
# what makes two rows of one configuration the same load point
LOAD_POINT = ("request_rate", "max_concurrency", "num_prompts", "random_input_len", "random_output_len")


def imported_table(files: list[Path], *, name: str | None, experiment: str | None, beside: Path | None = None,
                   max_bytes: int = bounded_read.MAX_BYTES):
    """The imported rows, after the rows of `beside` (a servelab table) where given."""
    import pandas as pd

    seen: dict[str, Path] = {}
    for f in files:   # one run given twice would be two rows of one point
        real = os.path.realpath(f)
        if real in seen:
            raise ImportFailed(f"{f} is given twice (also as {seen[real]}): one run is one row; name it once")
        seen[real] = Path(f)
    own = None if beside is None else beside_table(beside, max_bytes)
    labels = point_labels(files)
    rows = [import_file(f, max_bytes=max_bytes) for f in files]
    default_experiment = experiment or (str(own["experiment"].iloc[0]) if own is not None and
                                        "experiment" in own and len(own) else "imported")
    for f, label, row in zip(files, labels, rows):
        who = row.pop("identity")
        row["experiment"] = experiment or who.get("experiment") or default_experiment
        row["server_point"] = configuration(name, who.get("server_point"), Path(f))
        row["point_key"] = who.get("point_key") or f"imported:{label}"
        row["_foreign"] = not who.get("point_key")
    apart_where_loads_collide(rows, labels, name)
    for row in rows:
        del row["_foreign"]
    imported = pd.DataFrame(rows)
    if own is None:
        return imported
    if clash := set(imported["server_point"]) & set(own.get("server_point", [])):
        raise ImportFailed(f"{beside} already has the configuration(s) {sorted(clash)}: name the import otherwise "
                           f"(--name)")
    return pd.concat([own, imported], ignore_index=True, sort=False)


def beside_table(beside: Path, max_bytes: int):
    """A servelab table read within the import's bounds (a regular file, capped)."""
    import pandas as pd

    data = bounded_read.regular_file_bytes(Path(beside), max_bytes)
    try:
        return pd.read_csv(io.BytesIO(data))
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as err:
        raise ImportFailed(f"{beside} is not a readable table: {' '.join(str(err).split())[:200]}") from err


def configuration(name: str | None, own: str | None, path: Path) -> str:
    """A row's configuration: the one its file names (servelab's export), under --name where
    given; else --name; else its folder's (a folder of runs is a configuration, as llm-d's
    treatments are)."""
    if own:
        return f"{name}:{own}" if name else own
    return name or f"imported:{path.resolve().parent.name or 'root'}"


def apart_where_loads_collide(rows: list[dict], labels: list[str], name: str | None) -> None:
    """Files of another tool that would be the same load point of one configuration (two runs
    at one rate in a folder) are each a configuration of their own, named by their file
    (servelab's own reports carry their point key: never the same point twice)."""
    seen: dict[tuple, list[int]] = {}
    for i, row in enumerate(rows):
        if not row["_foreign"]:
            continue
        load = tuple(str(row.get(k)) for k in LOAD_POINT)
        seen.setdefault((row["experiment"], row["server_point"], load), []).append(i)
    for same in seen.values():
        if len(same) > 1:
            for i in same:
                rows[i]["server_point"] = f"{name or 'imported'}:{labels[i]}"


def point_labels(files: list[Path]) -> list[str]:
    """Each file's name without its suffixes; with its folder where names repeat (llm-d's
    reports are all `benchmark_report_v0.2,_stage_N.yaml`, a folder a configuration); its
    whole path where even those repeat."""
    stems = [Path(f).name.split(".json")[0].split(".yaml")[0] for f in files]
    if len(set(stems)) == len(stems):
        return stems
    with_folder = [f"{Path(f).parent.name}/{stem}" for f, stem in zip(files, stems)]
    if len(set(with_folder)) == len(with_folder):
        return with_folder
    return [str(f) for f in files]


def load_knobs_of(table) -> list[str]:
    return [k for k in LOAD_KNOBS if k in table.columns and table[k].notna().any()]


def check_out(out: Path, inputs: list[Path]) -> None:
    """The table may be a new file or one to replace, never a folder, an input of the import,
    or anything inside a results folder's store/ or sessions/."""
    target = Path(os.path.abspath(out))
    if target.is_dir() or not target.name:
        raise ImportFailed(f"--out {out} is a folder: name the table's file (e.g. {out}/imported.csv)")
    if target.is_symlink():
        raise ImportFailed(f"--out {out} is a symlink: name the file itself (a write through it would land "
                           f"elsewhere)")
    if target.exists() and not target.is_file():
        raise ImportFailed(f"--out {out} exists and is not a regular file")
    for given in inputs:
        if given is not None and target.exists() and Path(given).exists() and os.path.samefile(target, given):
            raise ImportFailed(f"--out {out} is {given}, an input of this import: it would be replaced; name "
                               f"another file")
    try:
        export_folder.check_not_inside_results(target, f"--out {out}")
    except export_folder.UnsafeOut as err:
        raise ImportFailed(str(err)) from err


def write_csv(table, out: Path) -> None:
    try:
        with atomic_path(out) as tmp:
            spreadsheet_safe(table).to_csv(tmp, index=False)
    except OSError as err:
        raise ImportFailed(f"--out {out} cannot be written: {err.strerror or err}") from err


def run(files: list[Path], out: Path, *, name: str | None = None, experiment: str | None = None,
        beside: Path | None = None, comparisons_out: Path | None = None, baseline: str | None = None,
        load_knobs: list[str] | None = None, max_bytes: int = bounded_read.MAX_BYTES) -> dict:
    import pandas as pd

    from servelab.analysis import comparisons

    for target in (out, comparisons_out):
        if target is not None:
            check_out(target, [*files, beside])
    if comparisons_out is not None and os.path.abspath(comparisons_out) == os.path.abspath(out):
        raise ImportFailed(f"--comparisons {comparisons_out} is --out: name two files")
    table = imported_table(files, name=name, experiment=experiment, beside=beside, max_bytes=max_bytes)
    compared = None
    if comparisons_out is not None:
        knobs = load_knobs or load_knobs_of(table)
        compared = comparisons.compare(table, knobs, baseline)
    write_csv(table, out)
    if compared is not None:
        write_csv(compared, comparisons_out)
    return {"rows": len(table), "imported": len(files), "comparisons": None if compared is None else len(compared),
            "table": pd.read_csv(out)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="servelab import", description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="vllm bench serve JSON (plain or .gz), AIPerf's "
                                                            "profile_export_aiperf.json, or llm-d 0.2.1 reports")
    parser.add_argument("--out", type=Path, required=True, help="the table to write (CSV)")
    parser.add_argument("--name", help="the imported runs' configuration (server_point column); a configuration "
                                       "named in the files is kept under it (NAME:CONFIGURATION)")
    parser.add_argument("--experiment", help="the experiment column (default: the one the files name, else "
                                             "--beside's, else 'imported')")
    parser.add_argument("--beside", type=Path, help="a servelab table (results/EXP/metrics.csv) to put the rows beside")
    parser.add_argument("--comparisons", type=Path, help="also write the comparisons against --baseline (CSV)")
    parser.add_argument("--baseline", help="the configuration compared against (default: the table's first)")
    parser.add_argument("--load-knobs", nargs="+", help=f"the columns that make a load point (default: those of "
                                                       f"{list(LOAD_KNOBS)} the table has)")
    parser.add_argument("--max-bytes", type=mebibytes, default=bounded_read.MAX_BYTES, metavar="MIB",
                        help=f"the most a file, or what its gzip inflates to, may hold, in MiB "
                             f"(default {bounded_read.MAX_BYTES // 2**20})")
    args = parser.parse_args(argv)
    try:
        result = run(args.files, args.out, name=args.name, experiment=args.experiment, beside=args.beside,
                     comparisons_out=args.comparisons, baseline=args.baseline, load_knobs=args.load_knobs,
                     max_bytes=args.max_bytes)
    except (ImportFailed, ValueError) as err:
        print(f"servelab import: FAILED, nothing written: {one_line(err)}", file=sys.stderr)
        return 1
    except Exception as err:   # noqa: BLE001  a defect: still one line, and says so
        print(f"servelab import: FAILED, nothing written: an error servelab did not foresee, a defect to report "
              f"({type(err).__name__}: {one_line(err)})", file=sys.stderr)
        return 1
    print(f"servelab import: {result['imported']} run(s) imported; {args.out} holds {result['rows']} row(s)"
          + (f"; {result['comparisons']} comparison(s) in {args.comparisons}" if args.comparisons else ""))
    return 0


def mebibytes(text: str) -> int:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of MiB") from None
    if not 0 < value < 2**20:
        raise argparse.ArgumentTypeError(f"{text} MiB: give a size above 0 and below 1 TiB")
    return int(value * 2**20)


def one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text if len(text) <= 600 else text[:600] + "..."


if __name__ == "__main__":
    sys.exit(main())
