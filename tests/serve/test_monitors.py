"""Sidecars of a session: /metrics timeline, GPU monitor, profiler knobs, nsys/ncu wrappers."""
import csv
import http.server
import os
import stat
import threading
import time
from pathlib import Path

import pytest

from servelab.serve import monitors

PROM = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny"} 3.0
vllm:kv_cache_usage_perc{engine="0",model_name="tiny"} 0.25
vllm:generation_tokens_total{engine="0",model_name="tiny"} 1234.0
python_gc_objects_collected_total{generation="0"} 99.0
"""


def test_prometheus_samples_of_interest_are_parsed():
    rows = monitors.parse_prometheus(PROM)
    assert ("vllm:num_requests_running", 'engine="0",model_name="tiny"', 3.0) in rows
    assert [r[0] for r in rows] == ["vllm:num_requests_running", "vllm:kv_cache_usage_perc",
                                    "vllm:generation_tokens_total"]


def test_scraper_writes_a_timeline_until_stopped(tmp_path):
    class Metrics(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(PROM.encode())

        def log_message(self, *a):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    out = tmp_path / "metrics.csv"
    with monitors.MetricsScraper(f"http://127.0.0.1:{server.server_port}/metrics", out, interval_s=0.05) as s:
        deadline = time.monotonic() + 20  # a loaded machine may answer slowly: wait for samples, not a fixed time
        while s.samples < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    server.shutdown()
    rows = list(csv.DictReader(out.open()))
    assert s.samples >= 3 and len(rows) == 3 * s.samples
    times = sorted({float(r["t_s"]) for r in rows})
    assert times[0] < times[-1]
    assert not s.thread.is_alive()


def test_gpu_monitor_runs_nvidia_smi_and_stops_it(tmp_path):
    """nvidia-smi is a FAKE here (no GPU): a script printing CSV lines in loop mode."""
    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho \"$@\" > \"$(dirname \"$0\")/args\"\n"
                    "while true; do echo '2026/11/22 10:00:00.000, 0, FAKE GPU, 97, 40, 70000, 81920, 350.1'; "
                    "sleep 0.05; done\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}"}
    mon = monitors.GpuMonitor(tmp_path / "gpu.csv", interval_ms=50, env=env)
    with mon:
        deadline = time.monotonic() + 20
        while len((tmp_path / "gpu.csv").read_text().splitlines()) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert mon.proc.poll() is not None
    lines = (tmp_path / "gpu.csv").read_text().splitlines()
    assert len(lines) >= 3 and lines[0].split(", ")[2] == "FAKE GPU"
    args = (fake.parent / "args").read_text()
    assert "--query-gpu=timestamp,index,name,utilization.gpu" in args and "-lms=50" in args


def test_gpu_monitor_without_nvidia_smi_is_a_clear_error(tmp_path):
    with pytest.raises(RuntimeError, match="needs nvidia-smi"):
        with monitors.GpuMonitor(tmp_path / "gpu.csv", env={"PATH": str(tmp_path)}):
            pass


def test_wrappers_and_profiler_knobs():
    cmd = ["python", "-m", "servelab.engines.vllm.cli", "bench", "latency"]
    nsys = monitors.wrap_command(cmd, {"tool": "nsys", "args": {"trace": "cuda,nvtx"}}, Path("/s"))
    assert nsys[:6] == ["nsys", "profile", "--output", "/s/nsys-%p", "--force-overwrite", "true"]
    assert nsys[6:8] == ["--trace", "cuda,nvtx"] and nsys[-5:] == cmd
    ncu = monitors.wrap_command(cmd, {"tool": "ncu", "args": {"launch_count": 5}}, Path("/s"))
    assert ncu[:3] == ["ncu", "--target-processes", "all"] and "--launch-count" in ncu
    assert monitors.wrap_command(cmd, None, Path("/s")) == cmd
    knobs = monitors.profiler_knobs({"torch_profile": {"torch_profiler_with_stack": True}}, Path("/s"))
    assert knobs == {"profiler_config": {"profiler": "torch", "torch_profiler_dir": "/s/torch_profile",
                                         "torch_profiler_with_stack": True}}
    assert monitors.profiler_knobs({"metrics": {}}, Path("/s")) == {}


def test_gpu_only_monitors_are_left_out_on_the_cpu_default(course_config, local_config):
    from servelab.checks.cross_checks import active_monitors

    exp = course_config["experiments"]["week02_profile"]
    assert set(active_monitors(course_config, exp)) == {"torch_profile", "gpu", "metrics"}
    assert set(active_monitors(local_config, local_config["experiments"]["week02_profile"])) == {
        "torch_profile", "metrics"}
