"""The workflow's analysis scripts run by a child of the analysis zygote, which imported
pandas, matplotlib and seaborn once (servelab.analysis.warm_script), with real processes."""
import json
import os
import socket
import subprocess
import sys
import time

import pytest
from conftest import REPO

from servelab.engines import zygote

SCRIPT = """
import json, os, sys
from servelab.analysis.warm_script import run_warm

run_warm(__file__)
preloaded = "seaborn" in sys.modules
import pandas
out = sys.argv[1] if len(sys.argv) > 1 else os.environ["OUT"]
with open(out, "w") as f:
    json.dump({"pid": os.getpid(), "ppid": os.getppid(), "preloaded": preloaded, "cwd": os.getcwd()}, f)
print("the job's own words", file=sys.stderr)
sys.exit(int(os.environ.get("EXIT", "0")))
"""


@pytest.fixture
def env(tmp_path):
    # this test's own zygote (MPLCONFIGDIR is read by its imports), leaving soon once idle
    return {**os.environ, "PYTHONPATH": str(REPO), "MPLCONFIGDIR": str(tmp_path / "mpl"), zygote.IDLE_ENV: "30"}


def run(tmp_path, env, name, **extra):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    out = tmp_path / f"{name}.json"
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                          env={**env, "OUT": str(out), **extra}, timeout=120)
    return proc, (json.loads(out.read_text()) if out.exists() else None)


def test_scripts_run_in_children_of_one_zygote_that_imported_their_libraries(tmp_path, env):
    path = zygote.socket_path(env, "analysis")
    try:
        started = time.monotonic()
        first_proc, first = run(tmp_path, env, "first")
        first_s = time.monotonic() - started
        started = time.monotonic()
        second_proc, second = run(tmp_path, env, "second")
        second_s = time.monotonic() - started
        assert first_proc.returncode == 0 and second_proc.returncode == 0, first_proc.stderr
        zygote_pid = zygote.ask(path, {"op": "ping"})["pid"]
        # both ran in the zygote's children, which found its libraries imported
        assert first["ppid"] == second["ppid"] == zygote_pid and first["pid"] != second["pid"]
        assert first["preloaded"] and second["preloaded"] and first["cwd"] == str(tmp_path)
        # what the child said reaches the script's own stderr
        assert "the job's own words" in second_proc.stderr
        print(f"\nanalysis script: {first_s:.1f} s with the zygote's start, {second_s:.1f} s forked")
        # the zygote does not import for the vLLM kind's key, nor the vLLM kind for this one
        assert zygote.socket_path(env, "analysis") != zygote.socket_path(env)
        # a failing script exits with its code and its words
        failed_proc, _ = run(tmp_path, env, "failed", EXIT="3")
        assert failed_proc.returncode == 3 and "the job's own words" in failed_proc.stderr
    finally:
        assert zygote.stop_owned(tmp_path) == 1   # the run's end stops it, as the Snakefile's does
    assert not path.exists()


@pytest.mark.parametrize("extra", [{"SLURM_JOB_ID": "7"}, {zygote.ENV: "0"}])
def test_under_slurm_or_asked_not_to_a_script_runs_in_its_own_process(tmp_path, env, extra):
    proc, ran = run(tmp_path, env, "own", **extra)
    assert proc.returncode == 0, proc.stderr
    assert not ran["preloaded"] and ran["ppid"] == os.getpid()   # this test started it, no zygote
    assert zygote.owned(tmp_path) == {}


def test_a_zygote_outlives_an_asker_that_left_and_stops_the_child_it_started_for_it(tmp_path, env):
    """A session stopped while it asked for a start (its engine died, Ctrl-C) closes the socket
    before the answer: the zygote goes on serving, and the child whose pid nobody learnt does
    not run on alone (CI of e9c8f30: the zygote died of the broken pipe, and a benchmark
    client it had just forked outlived its run)."""
    path = zygote.socket_path(env, "analysis")
    try:
        proc, _ = run(tmp_path, env, "first")    # the zygote, started for this directory
        assert proc.returncode == 0, proc.stderr
        pid = zygote.ask(path, {"op": "ping"})["pid"]
        child = tmp_path / "child.py"
        mark = tmp_path / "ran-on"
        child.write_text(f"import time\ntime.sleep(3)\nopen({str(mark)!r}, 'w').write('ran on')\n")
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(str(path))
            sock.sendall(json.dumps({"op": "start", "argv": [str(child)], "log": str(tmp_path / "child.log"),
                                     "cwd": str(tmp_path), "env": env}).encode() + b"\n")
        # gone without reading its answer
        time.sleep(6)
        assert zygote.ask(path, {"op": "ping"})["pid"] == pid       # still serving
        assert not mark.exists(), "the orphaned child ran on"
        log = path.with_suffix(".log").read_text()
        assert "the asker of start left before its answer" in log
        forked = int(log.split("zygote: forked ")[-1].split(":")[0])
        assert not zygote.alive(forked)
    finally:
        assert zygote.stop_owned(tmp_path) == 1
