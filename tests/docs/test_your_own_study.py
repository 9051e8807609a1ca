"""docs/your-own-study.md's recipe, run as written on a fresh copy of the project: the file
it writes, then each command of its blocks, in order, through bash; the study must end with
a verdict for every comparison."""
import os
import re
import subprocess

import pandas as pd

from conftest import REPO, make_workdir
from servelab.analysis import comparisons

DOC = REPO / "docs/your-own-study.md"


def recipe() -> list[tuple[str, str]]:
    """(marker, block) of each fenced block the doc marks `<!-- recipe: ... -->`."""
    return re.findall(r"<!-- recipe: (\S+) -->\n```\w*\n(.*?)```", DOC.read_text(), re.S)


def test_the_doc_is_a_recipe_of_a_file_and_commands():
    steps = recipe()
    assert [m for m, _ in steps] == ["my-study.yaml", "run", "run", "run"]
    assert "experiments:" in steps[0][1] and "run: [my_study]" in steps[0][1]


def test_your_own_study_runs_as_written(tmp_path):
    work = make_workdir(tmp_path / "clone")
    os.symlink(REPO / ".venv", work / ".venv")   # the README's set-up, done once
    env = {k: v for k, v in os.environ.items() if k != "SNAKEMAKE_PROFILE"}
    outputs = []
    for marker, block in recipe():
        if marker != "run":
            (work / marker).write_text(block)
            continue
        for line in block.strip().splitlines():
            proc = subprocess.run(["bash", "-c", line], cwd=work, capture_output=True, text=True, timeout=900, env=env)
            assert proc.returncode == 0, f"{line}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
            outputs.append(proc.stdout)
    table = pd.read_csv(work / "results/my_study/metrics.csv")
    assert list(table["server_point"]) == ["baseline", "seqs4"] and table["valid"].all()
    verdicts = pd.read_csv(work / "results/my_study/comparisons.csv")
    assert set(verdicts["configuration"]) == {"seqs4"} and len(verdicts) == 5
    # a verdict on each metric; on ITL none where the client's figure contradicts the engine's step
    # (tokens in bursts on 2 loaded cores: servelab.analysis.checks)
    assert set(verdicts["verdict"]) <= {"better", "worse", "undecided", "equivalent within +-5 %",
                                        comparisons.CONTRADICTED}, verdicts["verdict"].tolist()
    throughput = verdicts.set_index("metric").loc["output_throughput_tps", "verdict"]
    assert throughput in {"better", "worse", "undecided", "equivalent within +-5 %"}
    # the last command prints the verdicts, a line each
    assert outputs[-1].splitlines()[0].split() == ["configuration", "metric", "diff_pct", "ci95_low_pct",
                                                   "ci95_high_pct", "verdict"]
    assert (work / "results/my_study/throughput.png").stat().st_size > 10_000
