"""`servelab plan --timings`: a run's least wall on N GPUs from an earlier run's sessions
(servelab/checks/time_plan.py), on the recorded 4x H100 slots and on small made-up records."""
import json
import subprocess
import sys

import pytest
import yaml

from conftest import REPO, load_config
from servelab.checks import time_plan
from servelab.checks.cross_checks import drop_nulled_sections
from servelab.run import timing

SLOTS = [REPO / "tests/data/recorded_gpu/h100x4_20261127e/timing", REPO / "tests/data/recorded_gpu/h100x4_20261128g/timing"]


def record(experiment: str, point: str, gpus: int, startup: float, points: float, warmup: float = 0.0) -> dict:
    return {"experiment": experiment, "server_point": point, "kind": "serve", "wall_s": startup + points + warmup + 5,
            "startup_s": startup, "warmup_s": warmup, "points_s": points, "drift_s": 0.0, "repeats_s": 0.0,
            "gpus": [str(g) for g in range(gpus)], "host": "box"}


def test_the_course_on_four_h100s_cannot_end_within_20_minutes_its_recorded_start_ups_alone_exceed_them():
    """The whole course (config.yaml + gpu-check.yaml), planned from the two slots that ran most of it."""
    config = drop_nulled_sections(load_config("config/config.yaml", "config/gpu-check.yaml"))
    records = time_plan.recorded_sessions(time_plan.timing_files(SLOTS))
    result = time_plan.plan(config, records, gpus=4)
    assert set(result.recorded) == set(records)          # every recorded session is one of the course's
    # the widest session holds its 4 GPUs for its whole start-up and benchmark runs
    tp4 = ("week13", "tensor_parallel_size=4")
    assert result.recorded[tp4] == pytest.approx(4 * timing.needed_s(records[tp4]))
    # what the slots did not reach is estimated, and named
    assert ("week02_profile", "base") in result.estimated and ("week04", "max_num_seqs=64") in result.estimated
    assert set(result.estimated).isdisjoint(records) and not result.too_wide
    assert result.startup_gpu_s > 20 * 60 * 4 and not result.fits(20)
    lines = result.lines(within_min=20)
    print("\n" + "\n".join(lines))
    assert lines[-1].startswith("  does not fit 20 min: 4800 GPU-s on 4 GPU(s)")
    assert result.fits(result.least_wall_s / 60 + 0.01)
    # on two GPUs the TP 4 session is left out by name, not planned
    two = time_plan.plan(config, records, gpus=2)
    assert two.too_wide == {tp4: 4} and tp4 not in two.recorded


def test_sessions_gpus_estimates_and_a_search_launches():
    config = {"device": "gpu", "run": ["a", "b", "s"], "experiments": {
        "a": {"engine": "vllm", "server": {"grid": {"tensor_parallel_size": [1, 2]}}},
        "b": {"engine": "vllm", "server": {"args": {}}},
        "s": {"engine": "vllm", "search": {"space": {"max_num_seqs": [8, 16, 32]}, "budget": {"launches": 2}}}}}
    records = time_plan.recorded_sessions([])
    assert records == {}
    found = {("a", "tensor_parallel_size=1"): record("a", "tensor_parallel_size=1", 1, 40, 20),
             ("a", "tensor_parallel_size=2"): record("a", "tensor_parallel_size=2", 2, 60, 40),
             ("s", "max_num_seqs=16"): record("s", "max_num_seqs=16", 1, 30, 50)}
    result = time_plan.plan(config, found, gpus=2)
    assert result.recorded == {("a", "tensor_parallel_size=1"): 60, ("a", "tensor_parallel_size=2"): 200,
                               ("s", "max_num_seqs=16"): 80}
    assert result.startup_gpu_s == 40 + 2 * 60 + 30
    # b has no record: the median of 60, 100 and 80 GPU-s per GPU held
    assert result.median_gpu_s == 80 and result.estimated == {("b", "base"): 80}
    assert result.gpu_s == 420 and result.least_wall_s == 210
    assert result.fits(3.5) and not result.fits(3.4)
    # a search without a record: its launch budget at the median
    del found[("s", "max_num_seqs=16")]
    unsearched = time_plan.plan(config, found, gpus=2)
    assert list(unsearched.estimated) == [("b", "base"), ("s", "launch 1 of 2"), ("s", "launch 2 of 2")]
    # one GPU: the TP 2 point is left out, named with its width
    assert time_plan.plan(config, found, gpus=1).too_wide == {("a", "tensor_parallel_size=2"): 2}
    with pytest.raises(ValueError, match="at least 1 GPU"):
        time_plan.plan(config, found, gpus=0)
    with pytest.raises(ValueError, match="no recorded session timings"):
        time_plan.plan(config, {}, gpus=2)


def test_of_two_records_of_a_session_the_one_that_measured_counts(tmp_path):
    """A later run that resumed the session found its points measured and spent nothing."""
    for run, (startup, points) in {"first": (50, 30), "resumed": (0, 0)}.items():
        folder = tmp_path / run / "results/a/store/sessions/base-1"
        folder.mkdir(parents=True)
        (folder / "timing.json").write_text(json.dumps(record("a", "base", 1, startup, points)))
    (tmp_path / "first/results/a/store/sessions/base-1/record.json").write_text("{}")   # not a timing
    files = time_plan.timing_files([tmp_path / "resumed", tmp_path / "first"])
    assert len(files) == 2
    kept = time_plan.recorded_sessions(files)
    assert {s: time_plan.held_gpu_s(t) for s, t in kept.items()} == {("a", "base"): 80}
    with pytest.raises(FileNotFoundError, match="no such folder"):
        time_plan.timing_files([tmp_path / "missing"])


def plan_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "servelab.cli", "plan", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120)


def test_plan_prints_the_time_plan_and_exits_1_past_the_minutes_given(tmp_path):
    overlay = tmp_path / "run.yaml"
    overlay.write_text(yaml.safe_dump({"run": ["week01", "week13"], "run_what_fits": False}))
    common = ["config/config.yaml", "config/gpu-check.yaml", str(overlay), "--gpu", "NVIDIA H100 80GB HBM3",
              "--gpus", "4", "--timings", *map(str, SLOTS)]
    late = plan_cli(*common, "--within", "5")
    assert late.returncode == 1, late.stderr
    assert "servelab plan: time on 4 GPU(s): 4 of 4 session(s) recorded" in late.stdout
    assert "does not fit 5 min" in late.stdout
    ok = plan_cli(*common, "--within", "30")
    assert ok.returncode == 0 and "fits 30 min (7200 GPU-s)" in ok.stdout, ok.stdout + ok.stderr
    bad = plan_cli("config/config.yaml", "--within", "20")
    assert bad.returncode == 2 and "--within needs --timings" in bad.stderr
    missing = plan_cli(*common[:-2], str(tmp_path / "nothing"))
    assert missing.returncode == 1 and "no such folder" in missing.stderr


def test_the_cpu_default_is_planned_as_one_host_running_one_session_at_a_time(tmp_path):
    """A working copy's own timings (results/*/store/sessions/*/timing.json), in seconds of the host."""
    session = tmp_path / "copy/results/week01/store/sessions/base-20261128T110000"
    session.mkdir(parents=True)
    (session / "timing.json").write_text(json.dumps(record("week01", "base", 0, 55, 189, 2)))
    overlay = tmp_path / "run.yaml"
    overlay.write_text(yaml.safe_dump({"run": ["week01", "week03"]}))
    out = plan_cli("config/config.yaml", "config/local.yaml", str(overlay), "--timings", str(tmp_path / "copy"),
                   "--within", "10")
    assert out.returncode == 0, out.stdout + out.stderr
    assert ("time on this host, one session at a time: 1 of 2 session(s) recorded: start-ups 55 s, "
            "benchmark runs 191 s") in out.stdout
    assert "not recorded: 1 session(s), estimated at the recorded median, 246 s per session" in out.stdout
    assert "at least 492 s (8.2 min) of run wall, sessions back to back" in out.stdout
    assert "GPU" not in out.stdout.split("time on this host")[1]
    assert "fits 10 min (600 s) with 108 s to spare" in out.stdout
