"""Where `servelab export` may write, as a table (servelab/export/export_folder.py's rules):
each refused target is refused in one line, exit 1, with no file, folder, link or mode
changed anywhere in the project and nothing hidden left behind; each allowed one gets the
export whole, everything beside it untouched."""
import os
import stat
from pathlib import Path

import pytest

from export_project import user_project

from servelab import cli
from servelab.export import export_folder
from servelab.export.llmd_export import export



def tree(root: Path) -> dict[str, tuple]:
    """Every entry under root, hidden ones included: its kind, mode, and content or link target."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            info = os.lstat(path)
            what = os.readlink(path) if path.is_symlink() else \
                path.read_bytes() if stat.S_ISREG(info.st_mode) else None
            out[str(path.relative_to(root))] = (stat.S_IFMT(info.st_mode), stat.S_IMODE(info.st_mode), what)
    return out


def earlier_export(p: Path, name: str) -> Path:
    out = p / name
    export(p / "results/week12", out)
    return out


def setups(p: Path) -> dict[str, tuple[str, str, str]]:
    """{case: (exported folder, --out, what the refusal says)}, each made in the project `p`."""
    (p / "results/week12/store/sessions").mkdir()   # a store nests a results folder's mark
    os.symlink(p / "results/week12/store", p / "link-to-store")
    os.symlink(p / "notes", p / "link-to-notes")
    os.symlink(p / "nowhere", p / "dangling")
    os.mkfifo(p / "pipe")
    (p / "empty-ro").mkdir()
    os.chmod(p / "empty-ro", 0o555)
    user_file = earlier_export(p, "ex-user-file")
    (user_file / "model=llama31_8b/analysis.ipynb").write_text("{}")
    earlier_export(p, "ex-user-folder")
    (p / "ex-user-folder/model=llama31_8b/plots").mkdir()
    earlier_export(p, "ex-empty-top-folder")
    (p / "ex-empty-top-folder/mine").mkdir()
    ro_file = earlier_export(p, "ex-ro-file")
    os.chmod(next(ro_file.rglob("*.yaml")), 0o444)
    ro_dir = earlier_export(p, "ex-ro-dir")
    os.chmod(next(d for d in ro_dir.iterdir() if d.is_dir()), 0o555)
    ro_top = earlier_export(p, "ex-ro-top")
    os.chmod(ro_top, 0o555)
    linked = earlier_export(p, "ex-link-inside")
    report = next(linked.rglob("*.yaml"))
    report.unlink()
    os.symlink(p / "plain.txt", report)
    garbled = earlier_export(p, "ex-garbled-manifest")
    (garbled / export_folder.MANIFEST).write_text("{not json")
    (p / "cwd-empty").mkdir()
    w12 = "results/week12"
    return {
        "the exported folder": (w12, w12, "is the results folder being exported"),
        "a folder holding it": (w12, "results", "holds the results folder"),
        "all results, over themselves": ("results", "results", "is the results folder being exported"),
        "the project root": ("results", ".", "holds the results folder"),
        "another experiment": (w12, "results/study_phi4_path", "holds the results folder"),
        "its store": (w12, f"{w12}/store", "which only the workflow writes"),
        "a new folder in its store": (w12, f"{w12}/store/newexport", "which only the workflow writes"),
        "deep in its store": (w12, f"{w12}/store/a/b", "which only the workflow writes"),
        "in a store's nested sessions/": (w12, f"{w12}/store/sessions/x", "which only the workflow writes"),
        "a point's folder in its store": (w12, f"{w12}/store/475a16e5ca4170344691/llmd", "only the workflow writes"),
        "another experiment's store": (w12, "results/study_phi4_path/store/x", "which only the workflow writes"),
        "its sessions": (w12, f"{w12}/sessions/new", "which only the workflow writes"),
        "a symlink to a store": (w12, "link-to-store", "is a symlink"),
        "a path through a symlink into a store": (w12, "link-to-store/x", "which only the workflow writes"),
        "a symlink to the user's folder": (w12, "link-to-notes", "is a symlink"),
        "a dangling symlink": (w12, "dangling", "is a symlink"),
        "the user's folder": (w12, "notes", "did not make"),
        "a file": (w12, "plain.txt", "is a file"),
        "a named pipe": (w12, "pipe", "is a file"),
        "an empty read-only folder": (w12, "empty-ro", "is a read-only folder"),
        "an export with the user's file in it": (w12, "ex-user-file", "an earlier export did not write"),
        "an export with the user's empty folder in it": (w12, "ex-user-folder", "an earlier export did not make"),
        "an export with an empty folder at its top": (w12, "ex-empty-top-folder", "an earlier export did not make"),
        "an export with a read-only report": (w12, "ex-ro-file", "is read-only"),
        "an export with a read-only folder": (w12, "ex-ro-dir", "is read-only"),
        "a read-only export": (w12, "ex-ro-top", "is read-only"),
        "an export with a symlink in it": (w12, "ex-link-inside", "holds a symlink"),
        "an export with a garbled manifest": (w12, "ex-garbled-manifest", "is unreadable"),
        "the folder it runs in": (w12, ".", "is the folder this command runs in"),   # run in cwd-empty
        "under a file": (w12, "plain.txt/llmd", "cannot be written"),
        "under /proc": (w12, "/proc/servelab-nowhere/llmd", "cannot be written"),
    }


@pytest.fixture
def project(tmp_path) -> Path:
    """A copy of two experiments' results, and the user's own files beside them."""
    yield user_project(tmp_path)
    for folder, dirs, _ in os.walk(tmp_path):   # let pytest remove what the cases made read-only
        for name in dirs:
            os.chmod(Path(folder) / name, 0o755)


def test_every_refused_target_changes_nothing_anywhere(project, capsys, monkeypatch):
    cases = setups(project)
    assert len(cases) >= 25
    before = tree(project)
    for case, (exported, out, why) in cases.items():
        monkeypatch.chdir(project / "cwd-empty" if case == "the folder it runs in" else project)
        source = os.path.relpath(project / exported)
        assert cli.main(["export", source, "--out", out]) == 1, case
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and why in err and "Traceback" not in err, (case, err)
        assert tree(project) == before, f"{case}: export --out {out} changed the project"


def test_each_allowed_target_gets_the_whole_export_and_nothing_else_changes(project, monkeypatch):
    monkeypatch.chdir(project)
    (project / "empty").mkdir()
    earlier = earlier_export(project, "earlier")
    stale = {p.name for p in earlier.rglob("*.yaml")}
    for out in ("new/deeper/llmd", "empty", "results/week12/export/llmd", "earlier"):
        def beside(k: str) -> bool:   # neither in the export nor one of the folders that hold it
            return not (k == out or k.startswith(out + "/") or out.startswith(k + "/"))
        before = {k: v for k, v in tree(project).items() if beside(k)}
        assert cli.main(["export", "results/study_phi4_path", "--out", out]) == 0, out
        assert {k: v for k, v in tree(project).items() if beside(k)} == before, out
        reports = sorted(p.relative_to(project / out) for p in (project / out).rglob("*.yaml"))
        assert len(reports) == 4
        if out == "earlier":   # week12's reports replaced whole by study_phi4_path's
            assert export_folder.written_files(project / out) == export_folder.written_files(project / "empty")
            assert stale and not stale & {p.name for p in (project / out).rglob("*.yaml")} - \
                {p.name for p in (project / "empty").rglob("*.yaml")}
            assert not [p for p in (project / out).iterdir() if p.name.startswith("model=")]
        assert export_folder.written_files(project / out) == {str(r) for r in reports} | {export_folder.MANIFEST}
    assert not [p for p in project.rglob(".*") if p.name != export_folder.MANIFEST]
