"""A paper archive of what was measured, and its offline verification.

    build:  the workflow at its git commit (a dirty tree refused, or marked with its
            diff), the merged config as it ran, the environment as a lock (pip freeze;
            `conda list --explicit` where conda exists), the machine, every point's raw
            benchmark JSON + record + the server's logs and commands, the session views,
            tables, figures, each point as an llm-d benchmark report (export/llmd/),
            the HTML report if made, a SHA-256 manifest, and Workflow
            Run RO-Crate metadata (ro-crate-metadata.json), zipped.
    verify: on any machine with the analysis packages (no engine): every checksum, then
            every table rebuilt from the raw JSON and compared with the archived one,
            every figure redrawn.

    servelab archive verify ARCHIVE.zip --rebuild DIR
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import yaml

from servelab.raw_result import CONDITIONS, RAW, RAW_PLAIN

MANIFEST = "MANIFEST.sha256"
# files of a session directory worth keeping: logs, commands, monitor timelines
SESSION_FILES = ("*.log", "*.txt", "*.csv")
# (the rocrate package adds Workflow RO-Crate itself, for the main workflow)
WORKFLOW_RUN_PROFILES = {
    "https://w3id.org/ro/wfrun/process/0.5": "Process Run Crate",
    "https://w3id.org/ro/wfrun/workflow/0.5": "Workflow Run Crate",
}


class ArchiveError(RuntimeError):
    pass


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def git(workflow_dir: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(workflow_dir), *args], capture_output=True, text=True,
                          check=True).stdout


def workflow_state(workflow_dir: Path, allow_dirty: bool) -> dict:
    """{commit, top (the checkout's root), dirty, diff}: a tree with uncommitted changes is
    refused unless allowed."""
    try:
        commit = git(workflow_dir, "rev-parse", "HEAD").strip()
        top = Path(git(workflow_dir, "rev-parse", "--show-toplevel").strip())
    except (subprocess.CalledProcessError, FileNotFoundError) as err:
        raise ArchiveError(f"{workflow_dir} is not a git checkout with a commit: the archive pins the "
                           f"workflow to one ({err})") from err
    changes = git(workflow_dir, "status", "--porcelain", "--untracked-files=no").strip()
    if changes and not allow_dirty:
        raise ArchiveError("the workflow has uncommitted changes; commit them, or archive with "
                           "--config archive_allow_dirty=True (the archive is then marked dirty and "
                           f"holds the diff):\n{changes}")
    return {"commit": commit, "top": top, "dirty": bool(changes),
            "diff": git(top, "diff", "HEAD") if changes else ""}


def environment_lock() -> dict[str, str]:
    """The Python environment the engines and analysis ran in, as exact versions."""
    files = {"python-packages.txt": subprocess.run([sys.executable, "-m", "pip", "freeze", "--all"],
                                                   capture_output=True, text=True).stdout}
    if shutil.which("conda"):
        files["conda-explicit.txt"] = subprocess.run(["conda", "list", "--explicit"], capture_output=True,
                                                     text=True).stdout
    return files


def experiment_files(results: Path, name: str) -> list[Path]:
    """What an experiment's result holds, relative to the project root: tables, figures,
    views, and for every point in the views its record, raw JSON, record of conditions and
    session logs (those of the session whose engine it shared too)."""
    exp_dir = results / name
    files = [*sorted(exp_dir.glob("*.csv")), *sorted(exp_dir.glob("*.png")), *sorted(exp_dir.glob("sessions/*.json")),
             *sorted(p for p in exp_dir.glob("search/*") if p.is_file()),   # round plans, tried.csv, best.json, figures
             *sorted(exp_dir.glob("search/confirm/*.json"))]                 # the frontier's repeats
    sessions = set()
    for view in sorted([*exp_dir.glob("sessions/*.json"), *exp_dir.glob("search/confirm/*.json")]):
        for record in json.loads(view.read_text()):
            point = exp_dir / "store" / record["key"]
            files += [p for p in (point / "record.json", point / RAW, point / RAW_PLAIN, point / CONDITIONS)
                      if p.is_file()]
            sessions.add((name, record.get("session")))
            if shared := record.get("shared_engine"):   # measured on another experiment's engine: its logs
                sessions.add((shared["experiment"], shared["session"]))
    for owner, session in sorted(s for s in sessions if s[1]):
        for pattern in SESSION_FILES:
            files += sorted((results / owner / "store" / "sessions" / session).rglob(pattern))
    return files


def expected_views(exp_dir: Path, exp: dict) -> list[Path]:
    """The session views a complete experiment holds: every server point's, or those its
    search's rounds launched (servelab/search), in the space's order."""
    from servelab.config.experiments import point_id, server_points

    points = list(server_points(exp))
    if exp.get("search"):
        launched = {point_id(c) for plan in exp_dir.glob("search/round*.json")
                    for c in json.loads(plan.read_text())["configs"]}
        if not (exp_dir / "search/best.json").is_file():
            return [exp_dir / "search/best.json"]    # the search has not ended
        points = [sp for sp in points if sp in launched]
    return [exp_dir / "sessions" / f"{sp}.json" for sp in points]


def build(project: Path, config: dict, experiments: list[str], out: Path, *, allow_dirty: bool = False,
          workflow_dir: Path | None = None) -> dict:
    """Write the archive `out` (a zip); return a summary {files, bytes, commit, dirty}."""
    from rocrate.model.contextentity import ContextEntity
    from rocrate.rocrate import ROCrate

    from servelab.run import provenance

    project, out = Path(project), Path(out)
    state = workflow_state(Path(workflow_dir or project), allow_dirty)
    with tempfile.TemporaryDirectory(prefix="servelab-archive-") as tmp:
        stage = Path(tmp) / "stage"
        (stage / "workflow").mkdir(parents=True)
        # the whole checkout at its commit (run from a subdirectory, git archive takes only that)
        tar = subprocess.run(["git", "-C", str(state["top"]), "archive", "--format=tar", state["commit"]],
                             capture_output=True, check=True).stdout
        subprocess.run(["tar", "xf", "-", "-C", str(stage / "workflow")], input=tar, check=True)
        if state["dirty"]:
            (stage / "workflow.diff").write_text(state["diff"])
        plain = json.loads(json.dumps(config, default=str))  # Snakemake's config may hold OrderedDicts
        (stage / "config.yaml").write_text(yaml.safe_dump(plain, sort_keys=False))
        (stage / "environment").mkdir()
        for name, text in environment_lock().items():
            (stage / "environment" / name).write_text(text)
        (stage / "environment" / "hardware.json").write_text(json.dumps(provenance.hardware(), indent=2))
        for name in experiments:
            views = expected_views(project / "results" / name, config["experiments"][name])
            if missing := [str(v.relative_to(project)) for v in views if not v.is_file()]:
                raise ArchiveError(f"experiment {name} is not complete (missing {missing}): run snakemake "
                                   f"to completion before archiving")
            for src in experiment_files(project / "results", name):
                dest = stage / src.relative_to(project)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest)
            export_reports(project / "results" / name, stage / "results" / name / "export" / "llmd")
        if (project / "report.html").is_file():
            shutil.copy2(project / "report.html", stage / "report.html")
        files = sorted(p for p in stage.rglob("*") if p.is_file())
        (stage / MANIFEST).write_text("".join(f"{sha256(p)}  {p.relative_to(stage)}\n" for p in files))

        crate = ROCrate(gen_preview=False)
        crate.name = f"servelab run of {', '.join(experiments)}"
        crate.description = ("LLM-serving measurements made with servelab: raw benchmark JSON, the records "
                             "(commands, versions, hardware), tables and figures")
        crate.root_dataset["conformsTo"] = [{"@id": url} for url in WORKFLOW_RUN_PROFILES]
        for url, title in WORKFLOW_RUN_PROFILES.items():
            crate.add(ContextEntity(crate, url, properties={"@type": "CreativeWork", "name": title}))
        workflow = crate.add_workflow(stage / "workflow" / "Snakefile", dest_path="workflow/Snakefile", main=True,
                                      lang="snakemake", properties={"version": state["commit"]})
        entities = {}
        for path in files + [stage / MANIFEST]:
            rel = str(path.relative_to(stage))
            if rel != "workflow/Snakefile":
                entities[rel] = crate.add_file(path, dest_path=rel)
        results = [e for rel, e in entities.items() if rel.startswith("results/") and rel.endswith((".csv", ".png"))]
        crate.add_action(workflow, identifier="#servelab-run", object=[entities["config.yaml"]], result=results,
                         properties={"name": crate.name, "endTime": datetime.datetime.now().astimezone().isoformat(),
                                     "description": f"workflow commit {state['commit']}"
                                                    f"{' with uncommitted changes (workflow.diff)' if state['dirty'] else ''}"})
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(f".{out.name}.partial")
        crate.write_zip(partial)
        partial.replace(out)
    return {"files": len(files), "bytes": out.stat().st_size, **{k: state[k] for k in ("commit", "dirty")}}


def export_reports(exp_dir: Path, out: Path) -> int:
    """Every point of the experiment as an llm-d benchmark report beside its table
    (servelab/export/llmd_export.py); how many."""
    from servelab.export import llmd_export

    try:
        return sum(llmd_export.export(exp_dir, out).values())
    except llmd_export.ExportError as err:
        raise ArchiveError(f"the llm-d reports of {exp_dir.name} could not be made: {err}") from err


def check_reports(root: Path) -> int:
    """Every archived llm-d report against the schema; how many."""
    import yaml

    from servelab.export import llmd_layout, llmd_schema

    reports = sorted(root.glob(f"results/*/export/llmd/*/{llmd_layout.PREFIX}*{llmd_layout.SUFFIX}"))
    for path in reports:
        if problems := llmd_schema.errors(yaml.safe_load(path.read_text())):
            raise ArchiveError(f"{path.relative_to(root)} breaks the llm-d {llmd_schema.VERSION} schema: "
                               + "; ".join(problems[:5]))
    return len(reports)


def check_manifest(root: Path) -> int:
    """Every file the manifest lists, by its checksum; returns how many were checked."""
    lines = (root / MANIFEST).read_text().splitlines()
    bad = [rel for digest, rel in (line.split("  ", 1) for line in lines)
           if not (root / rel).is_file() or sha256(root / rel) != digest]
    if bad:
        raise ArchiveError(f"{len(bad)} file(s) differ from {MANIFEST}: {bad[:10]}")
    return len(lines)


def rebuild(root: Path, out: Path) -> dict:
    """Every table from the archived raw JSON, compared with the archived table; every figure redrawn."""
    import pandas as pd

    from servelab.analysis import metrics, plots, search_plots
    from servelab.config.experiments import server_points

    config = yaml.safe_load((root / "config.yaml").read_text())
    tables = {}
    for exp_dir in sorted(p for p in (root / "results").iterdir() if p.is_dir()):
        name = exp_dir.name
        order = list(server_points(config["experiments"][name]))
        views = sorted(exp_dir.glob("sessions/*.json"), key=lambda v: order.index(v.stem))
        (out / name).mkdir(parents=True, exist_ok=True)
        metrics.table(views, exp_dir / "store").to_csv(out / name / "metrics.csv", index=False)
        rebuilt, archived = pd.read_csv(out / name / "metrics.csv"), pd.read_csv(exp_dir / "metrics.csv")
        try:
            pd.testing.assert_frame_equal(rebuilt, archived, check_exact=False, rtol=1e-9)
        except AssertionError as err:
            raise ArchiveError(f"results/{name}/metrics.csv rebuilt from the raw JSON differs from the "
                               f"archived one: {err}") from err
        tables[name] = rebuilt
    figures = 0
    for name in tables:
        for fig, spec in config["experiments"][name].get("figures", {}).items():
            joined = [tables[n] for n in [name, *spec.get("also_from", [])] if n in tables]
            plots.draw(pd.concat(joined, ignore_index=True), spec, out / name / f"{fig}.png", name=fig)
            figures += 1
        if (archived_comparisons := root / "results" / name / "comparisons.csv").is_file():
            figures += rebuild_comparisons(config["experiments"][name], tables[name], archived_comparisons,
                                           out / name)
        if search := config["experiments"][name].get("search"):
            archived = root / "results" / name / "search"
            search_plots.draw_all(out / name / "metrics.csv", archived / "tried.csv",
                                  json.loads((archived / "best.json").read_text()), search,
                                  outs={f: out / name / f"search_{f}.png" for f in ("goodput", "frontier", "pareto")})
            figures += 3
    return {"tables": len(tables), "rows": sum(len(t) for t in tables.values()), "figures": figures}


def rebuild_comparisons(exp: dict, table, archived: Path, out: Path) -> int:
    """The comparisons recomputed from the rebuilt table, equal to the archived ones; their
    figure redrawn (1)."""
    import pandas as pd

    from servelab.analysis import comparison_plot, comparisons
    from servelab.config.experiments import load_knobs

    rebuilt = comparisons.compare(table, load_knobs(exp), exp.get("baseline"),
                                  exp.get("equivalence_margin", comparisons.EQUIVALENCE_MARGIN))
    rebuilt.to_csv(out / "comparisons.csv", index=False)
    try:
        pd.testing.assert_frame_equal(pd.read_csv(out / "comparisons.csv"), pd.read_csv(archived),
                                      check_exact=False, rtol=1e-9)
    except AssertionError as err:
        raise ArchiveError(f"{archived.parent.name}/comparisons.csv recomputed differs from the archived one: "
                           f"{err}") from err
    comparison_plot.draw(rebuilt, out / "comparisons.png", exp.get("title", archived.parent.name))
    return 1


def verify(archive: Path, out: Path) -> dict:
    """Unpack `archive` into out/archive, check it, rebuild into out/rebuilt."""
    root = Path(out) / "archive"
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(root)
    crate = json.loads((root / "ro-crate-metadata.json").read_text())
    if not any("CreateAction" in str(e.get("@type")) for e in crate["@graph"]):
        raise ArchiveError("ro-crate-metadata.json holds no CreateAction (not a Workflow Run Crate)")
    return {"checked": check_manifest(root), "reports": check_reports(root), **rebuild(root, Path(out) / "rebuilt")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="servelab archive", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("verify", help="check the checksums and rebuild every table and figure",
                           description="Check a paper archive's checksums, then rebuild every table and figure from its "
                                       "raw JSON and compare them with the archived ones; exit 1 naming each "
                                       "that differs.")
    check.add_argument("archive", type=Path, help="the archive (.zip) a paper run made")
    check.add_argument("--rebuild", type=Path, required=True, help="where to unpack and rebuild")
    args = parser.parse_args(argv)
    try:
        summary = verify(args.archive, args.rebuild)
    except ArchiveError as err:
        print(f"servelab archive: FAILED: {err}", file=sys.stderr)
        return 1
    print(f"servelab archive: {summary['checked']} files match their checksums; {summary['tables']} tables "
          f"({summary['rows']} rows) rebuilt from the raw JSON equal the archived ones; "
          f"{summary['figures']} figures redrawn in {args.rebuild / 'rebuilt'}; {summary['reports']} llm-d "
          f"report(s) valid against their schema")
    return 0


if __name__ == "__main__":
    sys.exit(main())
