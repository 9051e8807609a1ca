"""A point's record of its conditions (servelab/serve/point_record.py) on real processes: a
process group whose members carry vLLM's process titles (each a real busy or idle Python
process), and a real HTTP server answering /metrics in vLLM's exposition format, its
counters moving. Each role's CPU is what /proc says those processes used; the series are
what the endpoint said; the record survives the store's gzip."""
import http.server
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from servelab.analysis import bound
from servelab.engines.registry import ENGINES
from servelab.raw_result import read_conditions
from servelab.serve import point_record

BUSY = "import time\nend = time.monotonic() + 30\nwhile time.monotonic() < end: pass"
IDLE = "import time\ntime.sleep(30)"


class Metrics(http.server.BaseHTTPRequestHandler):
    """/metrics of a server generating 100 tokens a second with 3 requests running."""
    started = time.monotonic()

    def do_GET(self):
        elapsed = time.monotonic() - self.started
        body = (f"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{engine=\"0\"}} 3.0\n"
                f"vllm:num_requests_waiting{{engine=\"0\"}} 1.0\nvllm:kv_cache_usage_perc{{engine=\"0\"}} 0.5\n"
                f"vllm:generation_tokens_total{{engine=\"0\"}} {100 * elapsed:.1f}\n"
                f"vllm:iteration_tokens_total_count{{engine=\"0\"}} {33.3 * elapsed:.1f}\n"
                f"vllm:iteration_tokens_total_sum{{engine=\"0\"}} {100 * elapsed:.1f}\n")
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


class SlowFirstAnswer(Metrics):
    """The same, its first answer held 0.6 s before its counters are read, as a busy
    engine's event loop holds a scrape."""
    answered = 0

    def do_GET(self):
        if SlowFirstAnswer.answered == 0:
            time.sleep(0.6)
        SlowFirstAnswer.answered += 1
        super().do_GET()


def serve(handler):
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}/metrics"


@pytest.fixture
def server_group():
    """A leader (the API server: idle) and two children titled as vLLM titles its engine
    processes: the engine core busy, a worker idle; all in the leader's process group."""
    script = (f"import subprocess, sys, time\n"   # each child's argv[0] its title, as vLLM sets it
              f"subprocess.Popen(['VLLM::EngineCore', '-c', {BUSY!r}], executable=sys.executable)\n"
              f"subprocess.Popen(['VLLM::Worker_TP0', '-c', {IDLE!r}], executable=sys.executable)\n"
              f"time.sleep(30)\n")
    leader = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    httpd, url = serve(Metrics)
    time.sleep(1.0)
    yield leader.pid, url
    httpd.shutdown()
    os.killpg(leader.pid, signal.SIGKILL)
    leader.wait()


@pytest.mark.quiet_host   # a spinning process's share of a core and a stand-in's step time: nothing beside it
def test_a_points_record_splits_cpu_by_role_and_keeps_the_engines_series(server_group, tmp_path):
    pgid, url = server_group
    engine = ENGINES["vllm"]
    with point_record.PointRecord([url], [pgid], engine.process_roles, engine.timeline_metrics, None,
                                  interval_s=0.25) as rec:
        time.sleep(2.5)
    record = rec.result()
    point_record.save(record, tmp_path / point_record.FILE)
    again = read_conditions(tmp_path)
    assert again == record and again["gpu_count"] == 0
    assert {"engine core", "worker", "API server", "client"} <= set(record["roles"])
    summary = bound.summary(again)
    # the spinning engine core takes what a core it shares gives it; the idle ones next to nothing
    assert summary["cpu_engine_core_cores"] > 0.3
    assert summary["cpu_engine_core_cores"] > 10 * (summary["cpu_worker_cores"] + summary["cpu_api_server_cores"])
    assert summary["running_mean"] == 3.0 and summary["waiting_mean"] == 1.0 and summary["kv_usage_mean"] == 0.5
    assert summary["step_ms"] == pytest.approx(30.0, rel=0.1)      # 33.3 steps a second
    assert summary["step_tokens_mean"] == pytest.approx(3.0, rel=0.05)
    # the machine's busy cores hold the spinning engine core; nothing stolen outside a VM's hypervisor
    assert summary["host_busy_cores"] > 0.3 and summary["host_steal_cores"] >= 0
    assert summary["wait_engine_core_share"] >= 0
    metric_ticks = [t for t in record["ticks"] if "metrics" in t]
    assert len(metric_ticks) >= 4 and len(record["ticks"]) >= 8   # 4 Hz here, /metrics every other tick


def test_a_slow_metrics_answer_is_timed_when_it_came_not_when_it_was_asked(tmp_path):
    """Steps per second divide by the time between two answers: the first answer, held
    0.6 s, must count from when it came (timed from its asking, 30 ms a step reads 38)."""
    httpd, url = serve(SlowFirstAnswer)
    try:
        with point_record.PointRecord([url], [], ENGINES["vllm"].process_roles,
                                      ENGINES["vllm"].timeline_metrics, None, interval_s=0.25) as rec:
            time.sleep(2.0)
    finally:
        httpd.shutdown()
    ticks = rec.result()["ticks"]
    assert ticks[0]["metrics_t"] - ticks[0]["t"] >= 0.6
    assert bound.summary(rec.result())["step_ms"] == pytest.approx(30.0, rel=0.05)


def test_roles_are_told_by_the_engines_titles():
    roles = ENGINES["vllm"].process_roles
    assert point_record.role_of("VLLM::EngineCore_DP0", roles) == "engine core"
    assert point_record.role_of("VLLM::APIServer_1", roles) == "API server"
    assert point_record.role_of("/usr/bin/python -m servelab.engines.vllm.cli serve", roles) == "API server"
    assert point_record.role_of("sglang::scheduler_TP0", ENGINES["sglang"].process_roles) == "engine core"


@pytest.mark.quiet_host   # two spinners share one CPU: a third process there would make them wait more
def test_a_process_sharing_its_cpu_is_seen_waiting_for_it():
    """Two spinning processes held on one CPU: each runs about half the time and waits,
    runnable, the other half; the kernel's schedstat says so, and the record reads it."""
    def pinned():
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

    spinners = [subprocess.Popen([sys.executable, "-c", BUSY], preexec_fn=pinned) for _ in range(2)]
    try:
        time.sleep(0.5)
        before, started = point_record.runqueue_wait_s(spinners[0].pid), time.monotonic()
        time.sleep(2.0)
        waited = point_record.runqueue_wait_s(spinners[0].pid) - before
        assert 0.25 < waited / (time.monotonic() - started) < 0.8
    finally:
        for p in spinners:
            p.kill()
            p.wait()


def test_a_lap_over_a_span_is_cut_from_the_tick_before_it_to_the_first_after_it():
    """An offline runner reports its points after the fact, several at one read: each
    point's record is cut to its own span on the monotonic clock, not to the read."""
    import time as clock

    from servelab.serve.point_record import PointRecord

    rec = PointRecord([], [], {}, {}, None, interval_s=1.0)
    rec.started = clock.monotonic() - 10
    rec.ticks = [{"t": float(t), "cpu_s": {"offline runner": 0.5 * t}} for t in range(6)]
    lap = rec.lap([rec.started + 1.5, rec.started + 3.5])
    assert [t["t"] for t in lap["ticks"]] == [0.0, 1.0, 2.0, 3.0]   # ticks 1..4, from its first
    assert [t["cpu_s"]["offline runner"] for t in lap["ticks"]] == [0.5, 1.0, 1.5, 2.0]
    assert len(rec.lap()["ticks"]) == 2   # without a span: since the last lap (its closing tick on)
