"""envs/lent-gpu/pack-results.sh for real, on a stand-in for the lent machine's ~/sl (a
temporary HOME): what a run measured so far leaves the box whole, to be carried into the
next lent slot, where the store spares every packed point a new measurement."""
import os
import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_the_pack_holds_the_store_the_tables_and_the_runs_log(tmp_path):
    home, out = tmp_path / "home", tmp_path / "out"
    point = home / "sl/results/week01/store/abc123"
    point.mkdir(parents=True)
    (point / "bench.json").write_text('{"completed": 16}')
    (point / "record.json").write_text("{}")
    (home / "sl/results/week01/metrics.csv").write_text("point,valid\nrate=1,True\n")
    (home / "sl/logs/week01").mkdir(parents=True)
    (home / "sl/logs/week01/base.session.log").write_text("[servelab 12:00:00] session wall 1s\n")
    (home / "keep").mkdir()
    (home / "keep/run.log").write_text("servelab run-what-fits: on 4 GPU(s)\n")
    proc = subprocess.run(["bash", str(ROOT / "envs/lent-gpu/pack-results.sh"), str(out)],
                          env={**os.environ, "HOME": str(home)}, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert f"packed 1 measured point(s) into {out}/course.tgz" in proc.stdout
    assert sorted(p.name for p in out.iterdir()) == ["course.tgz"]     # written whole, then renamed
    with tarfile.open(out / "course.tgz") as tar:
        names = set(tar.getnames())
        assert {"results/week01/store/abc123/bench.json", "results/week01/store/abc123/record.json",
                "results/week01/metrics.csv", "logs/week01/base.session.log", "logs/course-run.log"} <= names
        assert tar.extractfile("logs/course-run.log").read().startswith(b"servelab run-what-fits")

