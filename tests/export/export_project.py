"""A project to export from: a copy of two experiments' recorded results, and the user's own
files beside them (tests/export/test_export_folder.py, test_export_targets.py)."""
import shutil
from pathlib import Path

DATA = Path(__file__).parents[1] / "data"
WEEK12_H100 = DATA / "recorded_gpu/week12_h100"
PHI4_H200 = DATA / "recorded_gpu/h200_20261129d_path_whole/study_phi4_path"


def user_project(root: Path) -> Path:
    shutil.copytree(WEEK12_H100, root / "results/week12")
    shutil.copytree(PHI4_H200, root / "results/study_phi4_path")
    (root / "notes").mkdir()
    (root / "notes/paper.tex").write_text("\\section{Results}\n")
    (root / "plain.txt").write_text("mine\n")
    return root
