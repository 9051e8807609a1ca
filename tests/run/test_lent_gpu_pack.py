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



def test_a_poll_brings_back_the_latest_pack_in_pieces_that_reassemble(tmp_path):
    home, out = tmp_path / "home", tmp_path / "out"
    point = home / "sl/results/week05/store/def456"
    point.mkdir(parents=True)
    (point / "bench.json").write_text('{"completed": 16}')
    (home / "sl/logs").mkdir(parents=True)
    (home / "keep").mkdir()
    (home / "keep/run.log").write_text("[Fri Nov 27 12:20:00 2026]\n7 of 145 steps (5%) done\n"
                                       "[servelab 12:20:01] week05/base: session wall 119s\n")
    (home / "keep/rc").write_text("0\n")               # the run ended: the poll waits no longer
    proc = subprocess.run(["bash", str(ROOT / "envs/lent-gpu/poll.sh"), "600"],
                          env={**os.environ, "HOME": str(home), "OUT": str(out)},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "run: ended, rc 0" in proc.stdout and "7 of 145 steps (5%) done" in proc.stdout
    pieces = sorted(out.glob("course.tgz.*"))
    assert [p.name for p in pieces] == ["course.tgz.0"]
    whole = tmp_path / "course.tgz"
    whole.write_bytes(b"".join(p.read_bytes() for p in pieces))
    with tarfile.open(whole) as tar:
        assert "results/week05/store/def456/bench.json" in tar.getnames()
