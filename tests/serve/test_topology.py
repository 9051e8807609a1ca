"""P/D topologies (week 16): roles, ports, devices, router commands, the proxy's protocol."""
import asyncio
import itertools
import json

import pytest

from servelab.engines.vllm import pd_proxy
from servelab.serve import topology
from servelab.checks.validate import launch_commands

PD = {"kind": "pd",
      "prefill": {"args": {"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_producer"}},
                  "env": {"X": 1}},
      "decode": {"args": {"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_consumer"},
                          "tensor_parallel_size": 2}}}


def test_roles_overlay_the_point_and_need_their_gpus_summed():
    rs = topology.roles({"max_model_len": 8192}, PD)
    assert [r.name for r in rs] == ["prefill", "decode"]
    assert rs[0].knobs["max_model_len"] == rs[1].knobs["max_model_len"] == 8192
    assert rs[0].knobs["kv_transfer_config"]["kv_role"] == "kv_producer" and rs[0].env == {"X": "1"}
    assert topology.topology_gpus({}, PD) == 3          # 1 prefill + 2 decode (TP=2)
    assert topology.topology_gpus({"tensor_parallel_size": 4}, None) == 4


def test_devices_are_split_in_order_and_too_few_is_an_error():
    assert topology.split_devices("4,5,6", [1, 2]) == ["4", "5,6"]
    assert topology.split_devices(None, [1, 1]) == [None, None]
    with pytest.raises(ValueError, match="sees 1 device"):
        topology.split_devices("0", [1, 1])


def test_side_ports_differ_between_roles_and_routers_point_at_them():
    ports = itertools.count(7000)
    rs = topology.roles({}, PD)
    topology.assign_ports("vllm", rs, lambda: next(ports))
    side = [r.env["VLLM_NIXL_SIDE_CHANNEL_PORT"] for r in rs]
    assert len(set(side + [str(r.port) for r in rs])) == 4
    cmd = topology.router_command("vllm", rs, 7100, {}, free_port=lambda: next(ports))
    assert cmd[1:3] == ["-m", "servelab.engines.vllm.pd_proxy"]
    assert cmd[cmd.index("--prefill") + 1] == f"http://127.0.0.1:{rs[0].port}"
    sg = topology.roles({}, {"kind": "pd", "prefill": {"args": {"disaggregation_mode": "prefill"}},
                             "decode": {"args": {"disaggregation_mode": "decode"}}})
    topology.assign_ports("sglang", sg, lambda: next(ports))
    router = topology.router_command("sglang", sg, 7200, {"policy": "round_robin"}, free_port=lambda: next(ports))
    at = router.index("--prefill")
    assert router[at + 1:at + 3] == [f"http://127.0.0.1:{sg[0].port}", str(sg[0].knobs["disaggregation_bootstrap_port"])]
    assert "--pd-disaggregation" in router and router[-2:] == ["--policy", "round_robin"]


def test_every_process_of_the_course_p_d_weeks_parses(course_config):
    """The two servers and the router of weeks 16 (vLLM) and 16 (SGLang), by their own parsers."""
    from servelab.checks.validate import check_config

    exps = course_config["experiments"]
    assert check_config({**course_config, "experiments": {k: exps[k] for k in ("week16", "week16_sglang", "week09_dp")}}) == []
    roles = [r for r, _ in launch_commands(exps["week16_sglang"], {}, "s")]
    assert roles == ["prefill", "decode", "router"]
    exps["week16_sglang"]["topology"]["router"]["args"]["policy"] = "least_load"
    exps["week16"]["topology"]["decode"]["args"]["kv_rank"] = 1     # gone from vLLM
    problems = [str(p) for p in check_config({**course_config, "experiments": {
        k: exps[k] for k in ("week16", "week16_sglang")}})]
    assert any("week16_sglang" in p and "sglang router" in p and "least_load" in p for p in problems), problems
    assert any("week16 [base] vllm decode" in p and "kv-rank" in p for p in problems), problems


def test_sglang_data_parallel_points_are_replicas_behind_its_router(tmp_path, monkeypatch, course_config):
    """week 9's dp_size + router_* knobs: one sglang.launch_server per replica, each on its
    own device, and sglang_router.launch_router in front (not sglang_router.launch_server,
    which cannot import beside SGLang 0.5.17)."""
    from servelab.serve import launch
    from servelab.serve.session_spec import SessionSpec

    exp = course_config["experiments"]["week09_dp"]
    knobs = {"dp_size": 2, "router_policy": "round_robin", "mem_fraction_static": 0.8}
    assert topology.topology_gpus(knobs, exp.get("topology")) == 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    spec = SessionSpec(experiment="week09_dp", server_point="round_robin", engine="sglang", model_path="/m",
                       model_identity="x", dataset_name="random", dataset_path=None, dataset_identity="random",
                       server_knobs=knobs, client_points=[], store_dir=str(tmp_path))
    fleet, lines = launch.launch_plan(spec, tmp_path, launch.server_env(spec, str(tmp_path)))
    *workers, router = fleet.servers
    assert [s.log.name for s in fleet.servers] == ["replica0.log", "replica1.log", "router.log"]
    for worker, device in zip(workers, ["4", "5"]):
        assert worker.command[1:3] == ["-m", "sglang.launch_server"] and worker.env["CUDA_VISIBLE_DEVICES"] == device
        assert "--dp-size" not in worker.command and "--router-policy" not in worker.command
        assert worker.command[worker.command.index("--mem-fraction-static") + 1] == "0.8"
    assert router.command[1:3] == ["-m", "sglang_router.launch_router"] and "--pd-disaggregation" not in router.command
    at = router.command.index("--worker-urls")
    assert router.command[at + 1:at + 3] == [w.base_url for w in workers]
    assert router.command[router.command.index("--policy") + 1] == "round_robin"
    assert int(router.command[router.command.index("--prometheus-port") + 1]) not in {w.port for w in fleet.servers}
    assert fleet.counted == workers and fleet.front is router
    # week 9's points parse by SGLang's own parsers; a router policy it lacks is refused by name
    from servelab.checks.validate import check_config

    assert [r for r, _ in launch_commands(exp, knobs, "s")] == ["replica0", "replica1", "router"]
    bad = {**exp, "server": {**exp["server"], "grid": {"router_policy": ["cache_aware", "least_load"]}}}
    problems = [str(p) for p in check_config({**course_config, "experiments": {"week09_dp": bad}})]
    assert len(problems) == 1 and "sglang router" in problems[0] and "least_load" in problems[0], problems


def test_proxy_requests_follow_the_kv_transfer_protocol():
    body = {"model": "m", "prompt": "hi", "max_tokens": 64, "stream": True, "min_tokens": 8,
            "stream_options": {"include_usage": True}}
    first = pd_proxy.prefill_request(body)
    assert first["max_tokens"] == 1 and first["stream"] is False
    assert "min_tokens" not in first and "stream_options" not in first
    assert first["kv_transfer_params"]["do_remote_decode"] is True
    params = {"remote_engine_id": "e1", "remote_block_ids": [1, 2], "remote_host": "h", "remote_port": 5}
    second = pd_proxy.decode_request(body, {"kv_transfer_params": params})
    assert second["kv_transfer_params"] == params and second["max_tokens"] == 64 and second["min_tokens"] == 8
    assert "kv_transfer_params" not in pd_proxy.decode_request(body, {"kv_transfer_params": None})
    assert body["max_tokens"] == 64  # the client's request is not modified


def test_proxy_relays_prefill_params_to_decode_over_http():
    """Two recording stand-ins for a NIXL pair (NIXL needs GPUs/its package, absent here)."""
    from aiohttp import web
    from aiohttp.test_utils import TestClient, TestServer

    seen = {"prefill": [], "decode": []}

    def backend(role):
        async def completions(request):
            body = await request.json()
            seen[role].append((body, request.headers.get("X-Request-Id")))
            if role == "prefill":
                return web.json_response({"choices": [{"text": "x"}], "kv_transfer_params": {"remote_engine_id": "p0"}})
            return web.json_response({"choices": [{"text": "decoded"}]})

        async def health(request):
            return web.Response(text="ok")

        app = web.Application()
        app.router.add_post("/v1/completions", completions)
        app.router.add_get("/health", health)
        return app

    async def scenario():
        async with TestServer(backend("prefill")) as p, TestServer(backend("decode")) as d:
            app = pd_proxy.make_app(str(p.make_url("")).rstrip("/"), str(d.make_url("")).rstrip("/"))
            async with TestClient(TestServer(app)) as client:
                assert (await client.get("/health")).status == 200
                resp = await client.post("/v1/completions", json={"model": "m", "prompt": "p", "max_tokens": 5},
                                         headers={"X-Request-Id": "r1"})
                return resp.status, json.loads(await resp.text())

    status, answer = asyncio.run(scenario())
    assert status == 200 and answer["choices"][0]["text"] == "decoded"
    (pre, pre_id), = seen["prefill"]
    (dec, dec_id), = seen["decode"]
    assert pre["max_tokens"] == 1 and dec["max_tokens"] == 5
    assert dec["kv_transfer_params"] == {"remote_engine_id": "p0"}
    assert pre_id == dec_id == "r1"


MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_multicast_off_reaches_every_process_of_a_p_d_pair(tmp_path, monkeypatch, engine):
    # a host that keeps NVLink multicast off says so in the job's environment: each role,
    # its router and a one-server point inherit it, whatever env the roles add
    from servelab.serve import launch
    from servelab.serve.session_spec import SessionSpec

    for name, value in MULTICAST_OFF.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
    spec = SessionSpec(
        experiment="week16", server_point="base", engine=engine, model_path="/m", model_identity="x",
        dataset_name="random", dataset_path=None, dataset_identity="random", server_knobs={},
        client_points=[], store_dir=str(tmp_path), topology=PD if engine == "vllm" else {
            "kind": "pd", "prefill": {"args": {"disaggregation_mode": "prefill"}, "env": {"X": "1"}},
            "decode": {"args": {"disaggregation_mode": "decode"}}})
    env = launch.server_env(spec, str(tmp_path))
    fleet, _ = launch.launch_plan(spec, tmp_path, env)
    assert len(fleet.servers) == 3
    for server in fleet.servers:
        assert {k: server.env[k] for k in MULTICAST_OFF} == MULTICAST_OFF, server.log.name
    single, _ = launch.launch_plan(SessionSpec(**{**spec.__dict__, "topology": None}), tmp_path, env)
    assert {k: single.servers[0].env[k] for k in MULTICAST_OFF} == MULTICAST_OFF
    # the engine's signs of death are watched on each engine process, not on the router
    assert all(s.fatal_lines for s in fleet.servers[:-1])


def test_the_proxy_drops_idle_connections_before_vllm_closes_them():
    """vLLM's API server closes a connection idle for VLLM_HTTP_TIMEOUT_KEEP_ALIVE (5 s); a
    proxy that reused one it had just closed failed the request ("Connection reset by
    peer", 2 of week 16's 30 requests in a CI run). The proxy's session keeps idle
    connections for less (aiohttp names the setting only privately)."""
    import asyncio

    import vllm.envs

    async def keepalive() -> float:
        app = pd_proxy.make_app("http://127.0.0.1:1", "http://127.0.0.1:2")
        ctx = app.cleanup_ctx[0](app)
        await ctx.__anext__()
        try:
            return app[pd_proxy.session_key()].connector._keepalive_timeout
        finally:
            await app[pd_proxy.session_key()].close()

    assert asyncio.run(keepalive()) == pd_proxy.KEEPALIVE_S < vllm.envs.VLLM_HTTP_TIMEOUT_KEEP_ALIVE
