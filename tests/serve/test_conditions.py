"""The conditions recorded with each point: the engine's counters over its window, load
from outside the session, the prefix-cache reset (real processes, a real HTTP server)."""
import http.server
import subprocess
import sys
import threading
import time

import pytest

from conftest import REPO

from servelab.serve import conditions
from servelab.serve.store import PointStore

RECORDED_METRICS = (REPO / "tests/data/recorded_gpu/vllm026_h100_metrics.txt").read_text()


def vllm_metrics(queries, hits, drafts=0, draft_tokens=0, accepted=0, preemptions=0, kv=0.0, engines=1) -> str:
    lines = []
    for engine in range(engines):
        labels = f'{{engine="{engine}",model_name="m"}}'
        lines += [f"vllm:prefix_cache_queries_total{labels} {queries}", f"vllm:prefix_cache_hits_total{labels} {hits}",
                  f"vllm:spec_decode_num_drafts_total{labels} {drafts}",
                  f"vllm:spec_decode_num_draft_tokens_total{labels} {draft_tokens}",
                  f"vllm:spec_decode_num_accepted_tokens_total{labels} {accepted}",
                  f"vllm:num_preemptions_total{labels} {preemptions}", f"vllm:kv_cache_usage_perc{labels} {kv}",
                  f"vllm:prefix_cache_queries_created{labels} 1.79e+09"]
    return "\n".join(lines) + "\n"


def test_counters_of_a_real_vllm_metrics_page_are_read():
    totals = conditions.counter_totals(RECORDED_METRICS)   # vLLM 0.26 on an H100, just started
    assert totals["prefix_queries"] == 0 and totals["preemptions"] == 0
    assert conditions.kv_usage(RECORDED_METRICS) == 0.0


def test_a_points_counters_are_its_window_not_the_servers_lifetime():
    before = conditions.counter_totals(vllm_metrics(1000, 100, drafts=10, draft_tokens=30, accepted=12, engines=2))
    after = conditions.counter_totals(vllm_metrics(2000, 700, drafts=60, draft_tokens=180, accepted=102,
                                                   preemptions=3, engines=2))
    columns = conditions.counter_columns(before, after, 0.42)
    assert columns["prefix_cache_hit_rate"] == 1200 / 2000      # (700-100) x 2 engines / (2000-1000) x 2
    assert columns["spec_acceptance_rate"] == 180 / 300
    assert columns["spec_mean_accepted_len"] == 1 + 180 / 100
    assert columns["preemptions"] == 6 and columns["peak_kv_cache_usage"] == 0.42
    # no queries in the window (prefix caching off): no hit rate, not a zero one
    assert conditions.counter_columns(after, after, None)["prefix_cache_hit_rate"] is None


class MetricsHandler(http.server.BaseHTTPRequestHandler):
    pages: list = []
    resets: list = []

    def do_GET(self):
        body = (self.pages.pop(0) if len(self.pages) > 1 else self.pages[0]).encode()
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        self.resets.append(self.path)
        found = self.path == "/reset_prefix_cache"
        self.send_response(200 if found else 404)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"success": true}' if found else b"{}")

    def log_message(self, *args):
        pass


def serve(handler) -> tuple[http.server.HTTPServer, str]:
    server = http.server.HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def test_engine_counters_sample_the_peak_kv_usage_during_the_point():
    MetricsHandler.pages = [vllm_metrics(0, 0), vllm_metrics(10, 5, kv=0.9), vllm_metrics(20, 10, kv=0.1)]
    server, url = serve(MetricsHandler)
    try:
        with conditions.EngineCounters(url + "/metrics", interval_s=0.05) as counters:
            time.sleep(0.5)
        result = counters.result()
    finally:
        server.shutdown()
    assert result["prefix_cache_hit_rate"] == 0.5 and result["peak_kv_cache_usage"] == 0.9


def test_prefix_cache_reset_is_asked_of_every_engine_and_a_missing_endpoint_is_false():
    MetricsHandler.resets = []
    server, url = serve(MetricsHandler)
    try:
        assert conditions.reset_prefix_cache([url, url], "/reset_prefix_cache") is True
        assert conditions.reset_prefix_cache([url], "/flush_cache") is False
        assert conditions.reset_prefix_cache([url], None) is None
    finally:
        server.shutdown()
    assert MetricsHandler.resets == ["/reset_prefix_cache", "/reset_prefix_cache", "/flush_cache"]


@pytest.mark.quiet_host   # reads the whole host's load: runs before the default's first run starts
def test_cpu_time_of_a_process_outside_the_session_is_seen_and_our_own_is_not():
    spin = "import time\nt = time.time()\nwhile time.time() - t < 1.5: pass"
    # inside: a child of this process (as the in-process client's or lm-eval's work would be)
    with conditions.OutsideLoad([], {}) as inside:
        subprocess.run([sys.executable, "-c", spin], check=True)
    # outside: a process in its own session that is no descendant of ours
    with conditions.OutsideLoad([], {}) as outside:
        neighbour = subprocess.Popen(["setsid", "--fork", sys.executable, "-c", spin])
        neighbour.wait()
        time.sleep(1.8)
    ours = {name: probe.end[2] - probe.start[2] for name, probe in (("inside", inside), ("outside", outside))}
    print(f"\ninside: {inside.result()}, outside: {outside.result()}, session CPU s: {ours}")
    assert ours["inside"] > 1.0          # the child's spin is the session's own
    assert ours["outside"] < 0.5         # the neighbour's is not
    assert outside.result()["outside_cpu_cores"] > 0.3


def test_the_clients_cpu_is_its_own_in_process_waited_for_and_forked_by_the_zygote():
    """A point's client CPU: in this process (vLLM's client in-process), in a subprocess it
    waits for (AIPerf) and in a process the zygote forked for it (counted by the client
    object, `forked_cpu_s`), which is the session's CPU, not the outside's."""
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < {}: pass"

    class ForkedClient:
        forked_cpu_s = 0.0

    client = ForkedClient()
    with conditions.OutsideLoad([], {}, client=client) as load:
        exec(burn.format(0.4))                                                # in-process
        subprocess.run([sys.executable, "-c", burn.format(0.4)], check=True)  # a client subprocess
        client.forked_cpu_s += 0.5                                            # a forked one ended
    wall = load.end[0] - load.start[0]
    client_s = load.result()["client_cpu_cores"] * wall
    print(f"\nclient CPU {client_s:.2f} s over {wall:.2f} s: {load.result()}")
    assert 1.3 - 0.05 <= client_s <= 1.3 + 0.6   # the burns' 1.3 s, plus the interpreter's start-up
    assert load.end[2] - load.start[2] >= 1.3 - 0.05   # the session's CPU includes the forked client's
    with conditions.OutsideLoad([], {}) as no_client:
        pass
    assert "client_cpu_cores" not in no_client.result()   # an offline runner's points: no client


def test_gpu_processes_of_others_on_the_points_gpus_are_counted():
    gpus = "0, 00000000:18:00.0\n1, 00000000:2A:00.0\n"
    apps = "111, 00000000:18:00.0\n222, 00000000:2A:00.0\n333, 00000000:18:00.0\n"
    assert conditions.others_on_gpus(gpus, apps, {0}, ours={111}) == [333]
    assert conditions.others_on_gpus(gpus, apps, None, ours={111}) == [222, 333]


def test_annotate_adds_to_a_saved_record_and_keeps_its_raw_files(tmp_path):
    store = PointStore(tmp_path)
    raw = tmp_path / "bench.json"
    raw.write_text("{}")
    store.save("k", {"x": 1}, {"bench.json": raw})
    store.annotate("k", {"drift": {"p50_itl_ms": 0.05}})
    assert store.load("k") == {"x": 1, "drift": {"p50_itl_ms": 0.05}}
    assert (store.path("k") / "bench.json.gz").exists()


@pytest.mark.quiet_host   # reads the whole host's load: runs before the default's first run starts
def test_laps_give_each_point_of_one_process_the_load_from_outside_over_it_alone():
    # an offline runner measures its points one after another: a lap per reported point.
    # Against a first lap with nothing of ours running, so that the test holds on a busy host
    # (CI beside other work: a "quiet" lap there read 1.07 cores of others' load).
    spin = "import time\nt = time.time()\nwhile time.time() - t < 1.5: pass"
    with conditions.OutsideLoad([], {}) as outside:
        time.sleep(1.5)
        baseline = outside.lap()["outside_cpu_cores"]   # whatever else the host runs
        subprocess.Popen(["setsid", "--fork", sys.executable, "-c", spin]).wait()
        time.sleep(1.8)
        busy = outside.lap()["outside_cpu_cores"] - baseline     # the neighbour spun during this one
        time.sleep(1.5)
        quiet = outside.lap()["outside_cpu_cores"] - baseline    # and not during this one
    print(f"\nbaseline: {baseline:.2f} cores, busy: +{busy:.2f}, quiet: {quiet:+.2f}")
    assert busy > 0.3
    assert quiet < busy / 2


def sglang_metrics(prompt: float, cached_device: float, cached_host: float = 0.0) -> str:
    """SGLang's counters (--enable-metrics) as its /metrics writes them."""
    return ("# TYPE sglang:prompt_tokens_total counter\n"
            f'sglang:prompt_tokens_total{{is_streaming="true",model_name="m"}} {prompt}\n'
            "# TYPE sglang:cached_tokens_total counter\n"
            f'sglang:cached_tokens_total{{cache_source="device",model_name="m"}} {cached_device}\n'
            f'sglang:cached_tokens_total{{cache_source="host",model_name="m"}} {cached_host}\n')


def test_sglangs_radix_hit_rate_is_the_points_cached_over_prompt_tokens():
    before = conditions.counter_totals(sglang_metrics(10_000, 2_000))
    after = conditions.counter_totals(sglang_metrics(42_000, 26_000, cached_host=1_000))
    assert conditions.counter_columns(before, after, None)["prefix_cache_hit_rate"] == 25_000 / 32_000
    # radix cache off: cached tokens stay, the rate is zero, not unknown
    assert conditions.counter_columns(before, conditions.counter_totals(sglang_metrics(20_000, 2_000)),
                                      None)["prefix_cache_hit_rate"] == 0.0


def nixl_metrics(transfers: int, seconds: float, nbytes: float, buckets: dict[str, int], failed: int = 0) -> str:
    """A decode server's NIXL counters as vLLM 0.26's NixlPromMetrics exports them."""
    lines = ["# TYPE vllm:nixl_xfer_time_seconds histogram"]
    lines += [f'vllm:nixl_xfer_time_seconds_bucket{{engine="0",le="{le}",model_name="m"}} {n}'
              for le, n in buckets.items()]
    lines += [f'vllm:nixl_xfer_time_seconds_count{{engine="0",model_name="m"}} {transfers}',
              f'vllm:nixl_xfer_time_seconds_sum{{engine="0",model_name="m"}} {seconds}',
              f'vllm:nixl_bytes_transferred_sum{{engine="0",model_name="m"}} {nbytes}',
              f'vllm:nixl_bytes_transferred_count{{engine="0",model_name="m"}} {transfers}',
              f'vllm:nixl_num_failed_transfers_total{{engine="0",model_name="m"}} {failed}']
    return "\n".join(lines) + "\n"


def test_a_p_d_points_kv_transfers_are_its_own_count_time_p90_and_size():
    before = conditions.counter_totals(nixl_metrics(10, 0.05, 10 * 2**20, {"0.005": 10, "0.01": 10, "+Inf": 10}))
    # 24 more transfers in the point, 4.25 ms on average, 8 MiB each; 20 of them under 5 ms
    after = conditions.counter_totals(nixl_metrics(34, 0.05 + 0.102, 10 * 2**20 + 24 * 8 * 2**20,
                                                   {"0.005": 30, "0.01": 34, "+Inf": 34}, failed=1))
    columns = conditions.counter_columns(before, after, None)
    assert columns["kv_transfers"] == 24 and columns["kv_failed_transfers"] == 1
    assert abs(columns["kv_transfer_mean_ms"] - 4.25) < 1e-9
    assert columns["kv_transfer_mb"] == 8.0
    # p90: rank 21.6 of 24 lies in (5, 10] ms, 1.6 of its 4 transfers in: 5 + 5 x 0.4
    assert abs(columns["kv_transfer_p90_ms"] - 7.0) < 1e-9
    # a server with no transfers (one standard server) has no transfer columns
    plain = conditions.counter_columns({}, conditions.counter_totals(vllm_metrics(10, 1)), None)
    assert not any(k.startswith("kv_transfer") for k in plain)


def test_histogram_quantile_edges():
    assert conditions.histogram_quantile(0.9, {}) is None
    assert conditions.histogram_quantile(0.5, {0.01: 0, float("inf"): 0}) is None
    # all beyond the last finite bound: that bound
    assert conditions.histogram_quantile(0.5, {0.01: 0, float("inf"): 5}) == 0.01


def test_counters_of_data_parallel_replicas_are_summed_over_their_servers():
    # two SGLang replicas behind a router (week 9): the point's hit rate is over both
    class ReplicaA(MetricsHandler):
        pages = [sglang_metrics(0, 0), sglang_metrics(1_000, 900)]

    class ReplicaB(MetricsHandler):
        pages = [sglang_metrics(0, 0), sglang_metrics(3_000, 100)]

    (a, url_a), (b, url_b) = serve(ReplicaA), serve(ReplicaB)
    try:
        with conditions.EngineCounters([url_a + "/metrics", url_b + "/metrics"], interval_s=60) as counters:
            pass
        result = counters.result()
    finally:
        a.shutdown()
        b.shutdown()
    assert result["prefix_cache_hit_rate"] == (900 + 100) / (1_000 + 3_000)
