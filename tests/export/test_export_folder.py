"""Where an export may write (servelab/export/export_folder.py) and what it names its files
(llmd_layout.py): an export appears whole or not at all; llm-d-benchmark's own globs find
every report. Every refused `--out`, as a table: test_export_targets.py."""
import hashlib
from pathlib import Path

import pytest
import yaml

from export_project import user_project
from servelab.export import export_folder, llmd_layout
from servelab.export.llmd_export import ExportError, export



def snapshot(root: Path) -> dict[str, str]:
    """{path: sha256} of every file under root (what an export must not touch)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def project(tmp_path) -> Path:
    """A copy of two experiments' results, and a folder of the user's own beside them."""
    return user_project(tmp_path)


def test_an_earlier_export_is_replaced_but_not_a_file_the_user_put_in_it(project):
    out = project / "results/week12/export/llmd"   # inside the results folder, where rule export_llmd writes
    assert export(project / "results/week12", out) == {"week12": 3}
    export(project / "results/week12", out)          # its own earlier export: replaced whole
    assert (out / export_folder.MANIFEST).is_file()
    (out / "model=llama31_8b/my-analysis.ipynb").write_text("{}")
    before = snapshot(project)
    with pytest.raises(ExportError, match="1 file.* an earlier export did not write .*my-analysis.ipynb"):
        export(project / "results/week12", out)
    assert snapshot(project) == before


def test_an_export_that_fails_halfway_leaves_the_earlier_one_whole(project, monkeypatch):
    out = project / "llmd"
    export(project / "results", out)
    before = snapshot(out)
    calls = []

    def dies_on_the_third(path, text):   # the disk fills up while the reports are written
        calls.append(path)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        Path.write_text(path, text)

    monkeypatch.setattr(export_folder, "write_file", dies_on_the_third)
    with pytest.raises(OSError, match="No space left"):
        export(project / "results", out)
    assert snapshot(out) == before and len(calls) == 3
    assert not list(project.glob(".llmd.*"))
    calls.clear()
    with pytest.raises(OSError):
        export(project / "results", project / "new")
    assert not (project / "new").exists()   # never a folder that holds half the reports


def test_llm_ds_own_globs_find_every_report_and_its_stage(project):
    out = project / "all"
    written = export(project / "results", out)
    everything = sorted(p for p in out.rglob("*.yaml"))
    assert len(everything) == sum(written.values()) == 7
    treatments = [d for exp in out.iterdir() if exp.is_dir() for d in exp.iterdir() if d.is_dir()]
    for source, base, pattern in llmd_layout.LLMD_GLOBS:
        if base == "export":
            found = sorted(out.glob(pattern))
        else:   # each treatment (a server point's folder) globbed on its own, as cross_treatment does
            found = sorted(p for d in treatments for p in d.glob(pattern))
        assert found == everything, source
    for path in everything:
        report = yaml.safe_load(path.read_text())
        stage = int(llmd_layout.STAGE_PATTERN.match(path.name).group(1))
        assert report["scenario"]["load"]["standardized"]["stage"] == stage


def test_a_server_points_loads_are_its_stages_in_the_tables_order():
    paths = llmd_layout.report_paths([("base", "request_rate=1"), ("base", "request_rate=4"),
                                      ("fp8 kv", "request_rate=1"), ("base", "request_rate=inf")])
    assert paths == ["base/benchmark_report_v0.2,_stage_0_request_rate=1.yaml",
                     "base/benchmark_report_v0.2,_stage_1_request_rate=4.yaml",
                     "fp8_kv/benchmark_report_v0.2,_stage_0_request_rate=1.yaml",
                     "base/benchmark_report_v0.2,_stage_2_request_rate=inf.yaml"]
