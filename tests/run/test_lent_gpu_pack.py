"""envs/lent-gpu/pack-results.sh for real, on a stand-in for the lent machine's ~/sl (a
temporary HOME): what a run measured so far leaves the box whole, to be carried into the
next lent slot, where the store spares every packed point a new measurement."""
import os
import subprocess
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).parents[2]


def poll(home: Path, out: Path, seconds: int, **env) -> subprocess.CompletedProcess:
    """envs/lent-gpu/poll.sh on a stand-in machine whose HOME is `home`."""
    return subprocess.run(["bash", str(ROOT / "envs/lent-gpu/poll.sh"), str(seconds)],
                          env={**os.environ, "HOME": str(home), "OUT": str(out), **env},
                          capture_output=True, text=True, timeout=60)


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


def test_a_file_too_big_to_come_back_stays_on_the_box_named_but_a_point_always_goes(tmp_path):
    """A torch-profiler trace is 7-11 MB gzipped even for the tiny model on a CPU (week 2),
    more for an 8B on a GPU: packed, such files can outlast a poll and overflow what a
    device call returns. They stay, named with their sizes; a point's
    bench.json goes whatever its size, as the next slot's store counts it."""
    home, out = tmp_path / "home", tmp_path / "out"
    session = home / "sl/results/week02_profile/store/sessions/base-1/torch_profile"
    session.mkdir(parents=True)
    (session / "rank0.pt.trace.json.gz").write_bytes(os.urandom(1536 * 1024))   # 1.5 MiB
    (session / "rank0.small.json").write_text("{}")
    point = home / "sl/results/week02_profile/store/abc123"
    point.mkdir(parents=True)
    (point / "bench.json").write_text('{"itl": [' + ",".join(["0.0123456"] * 200000) + "]}")   # 2 MiB
    (home / "keep").mkdir()
    proc = subprocess.run(["bash", str(ROOT / "envs/lent-gpu/pack-results.sh"), str(out)],
                          env={**os.environ, "HOME": str(home), "BIG_MIB": "1"}, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "left on the box, over 1 MiB each (1 file(s)" in proc.stdout
    assert "largest results/week02_profile/store/sessions/base-1/torch_profile/rank0.pt.trace.json.gz" in proc.stdout
    with tarfile.open(out / "course.tgz") as tar:
        names = set(tar.getnames())
        assert "results/week02_profile/store/abc123/bench.json" in names
        assert "results/week02_profile/store/sessions/base-1/torch_profile/rank0.small.json" in names
        assert not any(n.endswith("rank0.pt.trace.json.gz") for n in names)
        listed = tar.extractfile("logs/left-out-of-pack.txt").read().decode()
    assert listed == "1572864\tresults/week02_profile/store/sessions/base-1/torch_profile/rank0.pt.trace.json.gz\n"


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
    (home / "sl/.cache/vllm-0.26.0_x/flashinfer").mkdir(parents=True)
    (home / "sl/.cache/vllm-0.26.0_x/flashinfer/sampling.so").write_bytes(b"jit")
    proc = poll(home, out, 60, CACHES="1")
    assert proc.returncode == 0, proc.stderr
    assert "run: ended, rc 0" in proc.stdout and "7 of 145 steps (5%) done" in proc.stdout
    assert sorted(p.name for p in out.iterdir()) == ["caches.tgz.0", "course.tgz.0"]   # the last poll: caches too
    assert "a fresh pack did not finish" not in proc.stdout
    pieces = sorted(out.glob("course.tgz.*"))
    whole = tmp_path / "course.tgz"
    whole.write_bytes(b"".join(p.read_bytes() for p in pieces))
    with tarfile.open(whole) as tar:
        assert "results/week05/store/def456/bench.json" in tar.getnames()


def test_a_poll_returns_within_its_seconds_while_the_run_goes_on(tmp_path):
    """A poll killed at the device call's limit brings nothing back, and the machine goes
    back 30 s later: a poll ends by itself, keeping PACK_S of its seconds for the pack."""
    home, out = tmp_path / "home", tmp_path / "out"
    point = home / "sl/results/week13/store/aa11"
    point.mkdir(parents=True)
    (point / "bench.json").write_text('{"completed": 16}')
    (home / "keep").mkdir()
    (home / "keep/run.log").write_text("[servelab 18:46:09] GPU(s) 0,1,2,3 of 0,1,2,3 claimed for this job\n"
                                       "[servelab 18:46:20] waiting for server on port 34079: 10s of 1800s\n")
    began = time.monotonic()
    # no rc: the run goes on. 12 s kept for the pack (its own timeout is what is left less
    # 5 s: with 6 kept, a CI box under load once took over 1 s to pack and the poll failed)
    proc = poll(home, out, 20, PACK_S="12")
    took = time.monotonic() - began
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert 7 <= took <= 20, took                      # waited for the run, then packed within its seconds
    assert "run: going on" in proc.stdout and "claimed for this job" in proc.stdout
    assert "waiting for server on port" not in proc.stdout          # a start's heartbeat is noise here
    assert [p.name for p in out.iterdir()] == ["course.tgz.0"]


def test_a_status_poll_says_where_the_run_stands_and_brings_nothing_back(tmp_path):
    """PACK=0: the run's progress, no pack, no waiting for one."""
    home, out = tmp_path / "home", tmp_path / "out"
    (home / "sl/results/week13/store/aa11").mkdir(parents=True)
    (home / "keep").mkdir()
    (home / "keep/run.log").write_text("[servelab 07:25:30] study_phi4_search/x: load search on request_rate\n"
                                       "20 of 24 steps (83%) done\n")
    began = time.monotonic()
    proc = poll(home, out, 4, PACK="0")   # no rc: the run goes on
    assert proc.returncode == 0, proc.stderr
    assert 2 <= time.monotonic() - began <= 10
    assert "run: going on" in proc.stdout and "20 of 24 steps (83%) done" in proc.stdout
    assert "status only (PACK=0): nothing comes back" in proc.stdout
    assert not out.exists() or not any(out.iterdir())
    assert not (home / "keep/poll").exists()


def test_a_poll_on_a_machine_without_the_run_says_so_at_once(tmp_path):
    """The machine went back between two polls: the next call gets a fresh one, where no
    run will ever write its rc. The poll returns at once instead of waiting its seconds."""
    home, out = tmp_path / "home", tmp_path / "out"
    home.mkdir()
    began = time.monotonic()
    proc = poll(home, out, 120)
    assert proc.returncode == 2 and time.monotonic() - began < 10
    assert "no run on this machine" in proc.stdout


def test_a_poll_that_cannot_pack_afresh_brings_back_the_runs_own_pack(tmp_path):
    home, out = tmp_path / "home", tmp_path / "out"
    (home / "keep").mkdir(parents=True)
    (home / "keep/run.log").write_text("12 of 147 steps (8%) done\n")
    (home / "keep/rc").write_text("0\n")
    (home / "keep/course.tgz").write_bytes(b"the pack course-run.sh took two minutes ago")
    # no ~/sl: the fresh pack fails (as one cut at the poll's deadline would)
    proc = poll(home, out, 30)
    assert proc.returncode == 0, proc.stderr
    assert "a fresh pack did not finish in time: course-run.sh's of" in proc.stdout
    assert (out / "course.tgz.0").read_bytes() == b"the pack course-run.sh took two minutes ago"


def test_the_caches_pack_takes_the_dearest_first_and_what_fits(tmp_path):
    """FlashInfer's JIT builds, then vLLM's graphs with the gate's markers, then Triton's and
    Inductor's kernels, while the pack stays under its limit; a cache left out is named. The
    pack unpacks as course-run.sh unpacks it (`tar xzif`: gzip'd tars one after another)."""
    home, out = tmp_path / "home", tmp_path / "out"
    stack = home / "sl/.cache/vllm-0.26.0_torch-2.11.0_NVIDIA_H100"
    for sub, name in [("flashinfer", "jit/allreduce_fusion.so"), ("vllm", "torch_compile_cache/ab/model"),
                      ("gates", "efdcc15ccdce90b0.warm"), ("inductor", "fx/graph.py")]:
        (stack / sub / name).parent.mkdir(parents=True, exist_ok=True)
        (stack / sub / name).write_bytes(b"compiled " * 1000)
    (stack / "triton").mkdir()
    (stack / "triton/kernel.cubin").write_bytes(os.urandom(2 * 1024 * 1024))   # incompressible: over 1 MiB
    proc = subprocess.run(["bash", str(ROOT / "envs/lent-gpu/pack-caches.sh"), str(out), "1"],
                          env={**os.environ, "HOME": str(home)}, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"packed .cache/{stack.name}/flashinfer")
    assert lines[1].startswith(f"packed .cache/{stack.name}/vllm .cache/{stack.name}/gates")
    assert lines[2].startswith(f"left out .cache/{stack.name}/triton") and "over 1 MiB in all" in lines[2]
    assert lines[3].startswith(f"packed .cache/{stack.name}/inductor")
    unpacked = tmp_path / "next-slot"
    unpacked.mkdir()
    subprocess.run(["tar", "xzif", str(out / "caches.tgz")], cwd=unpacked, check=True)
    got = {p.relative_to(unpacked / ".cache" / stack.name).as_posix() for p in unpacked.rglob("*") if p.is_file()}
    assert got == {"flashinfer/jit/allreduce_fusion.so", "vllm/torch_compile_cache/ab/model",
                   "gates/efdcc15ccdce90b0.warm", "inductor/fx/graph.py"}
