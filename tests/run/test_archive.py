"""The paper archive, from a real GPU run's recorded results (week 12 on an H100,
tests/data/recorded_gpu/week12_h100): built from a git checkout, verified and rebuilt
offline. (tests/workflow/test_e2e_local.py does the same round trip from the embedded default's
results, through Snakemake's paper_archive rule.)"""
import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from conftest import REPO, load_config, make_workdir
from servelab.run import archive
from servelab.analysis import metrics
from servelab.config.experiments import server_points

RUN = Path(__file__).parents[1] / "data/recorded_gpu/week12_h100"


@pytest.fixture
def project(tmp_path):
    """A clone at a commit, with week 12's recorded results where the run put them."""
    work = make_workdir(tmp_path / "wf")
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]):
        subprocess.run(["git", *args], cwd=work, check=True, capture_output=True)
    results = work / "results/week12"
    shutil.copytree(RUN, results)
    config = load_config("config/config.yaml", "config/gpu-check.yaml")
    # as it ran on the lent GPU: no lm-eval there, so no accuracy and no pareto figure
    del config["experiments"]["week12"]["eval"], config["experiments"]["week12"]["figures"]["pareto"]
    order = list(server_points(config["experiments"]["week12"]))
    views = sorted((results / "sessions").glob("*.json"), key=lambda v: order.index(v.stem))
    metrics.table(views, results / "store").to_csv(results / "metrics.csv", index=False)
    return work, config


def test_build_verify_rebuild_round_trip(project, tmp_path):
    work, config = project
    out = work / "archive/paper.zip"
    summary = archive.build(work, config, ["week12"], out)
    assert summary["dirty"] is False and len(summary["commit"]) == 40
    names = set(zipfile.ZipFile(out).namelist())
    assert {"workflow/Snakefile", "workflow/servelab/run/archive.py", "config.yaml", "MANIFEST.sha256",
            "environment/python-packages.txt", "results/week12/metrics.csv"} <= names
    assert sum(n.startswith("results/") and n.endswith("/bench.json") for n in names) == 3
    crate = json.loads(zipfile.ZipFile(out).read("ro-crate-metadata.json"))
    graph = {e["@id"]: e for e in crate["@graph"]}
    assert {"@id": "https://w3id.org/ro/wfrun/workflow/0.5"} in graph["./"]["conformsTo"]
    assert graph["workflow/Snakefile"]["version"] == summary["commit"]
    checked = archive.verify(out, tmp_path / "check")
    assert checked == {"checked": summary["files"], "reports": 3, "tables": 1, "rows": 3, "figures": 1}
    # each point as an llm-d benchmark report beside the table (servelab/export/)
    assert sum(n.startswith("results/week12/export/llmd/") and "/benchmark_report_v0.2,_" in n and n.endswith(".yaml")
               for n in names) == 3
    rebuilt = pd.read_csv(tmp_path / "check/rebuilt/week12/metrics.csv")
    assert list(rebuilt["output_throughput_tps"]) == list(pd.read_csv(work / "results/week12/metrics.csv")[
        "output_throughput_tps"])


def test_a_dirty_tree_is_refused_or_archived_marked_with_its_diff(project):
    work, config = project
    (work / "config/config.yaml").write_text((work / "config/config.yaml").read_text() + "\n# edited\n")
    with pytest.raises(archive.ArchiveError, match="uncommitted changes"):
        archive.build(work, config, ["week12"], work / "archive/a.zip")
    summary = archive.build(work, config, ["week12"], work / "archive/a.zip", allow_dirty=True)
    assert summary["dirty"]
    assert "+# edited" in zipfile.ZipFile(work / "archive/a.zip").read("workflow.diff").decode()


def test_a_table_that_does_not_follow_from_the_raw_json_is_caught(project, tmp_path):
    work, config = project
    table = pd.read_csv(work / "results/week12/metrics.csv")
    table.loc[0, "output_throughput_tps"] *= 1.1        # a number edited by hand
    table.to_csv(work / "results/week12/metrics.csv", index=False)
    subprocess.run(["git", "status"], cwd=work, check=True, capture_output=True)
    out = work / "archive/a.zip"
    archive.build(work, config, ["week12"], out)
    with pytest.raises(archive.ArchiveError, match="rebuilt from the raw JSON differs"):
        archive.verify(out, tmp_path / "check")


def test_not_a_git_checkout_is_named(tmp_path):
    with pytest.raises(archive.ArchiveError, match="not a git checkout"):
        archive.build(tmp_path, {}, [], tmp_path / "a.zip")
    assert REPO.exists()


def test_a_point_measured_on_another_experiments_engine_brings_that_sessions_logs(tmp_path):
    results = tmp_path / "results"
    host = results / "week01/store/sessions/base-1"
    guest = results / "week12/store/sessions/bf16-2"
    for session in (host, guest):
        session.mkdir(parents=True)
    (host / "server.log").write_text("the engine's log\n")
    (guest / "bench.log").write_text("the guest's client\n")
    (results / "week12/store/k1").mkdir()
    (results / "week12/store/k1/record.json").write_text("{}")
    (results / "week12/sessions").mkdir()
    (results / "week12/sessions/bf16.json").write_text(json.dumps([{"key": "k1", "session": "bf16-2", "shared_engine": {
        "experiment": "week01", "server_point": "base", "session": "base-1"}}]))
    files = archive.experiment_files(results, "week12")
    assert host / "server.log" in files and guest / "bench.log" in files
    assert not [f for f in files if "week01" in str(f) and f.parent != host]
