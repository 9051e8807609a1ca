"""servelab.engines.prestart with real processes: a gated process imports, stamps its log,
waits for its grant on stdin, and only then goes on, on the granted devices."""
import sys
import time

from servelab.engines import prestart
from servelab.engines import server_log
from servelab.engines.vllm import startup_log as vllm_log
from servelab.serve.server import Server

# what a gated server does: the gate, then its "engine" states what it was given
PROGRAM = ("from servelab.engines import prestart; import os, sys; "
           "waited = prestart.wait_for_grant(('json', 'email.parser')); "
           "print('waited' if waited else 'went on', os.environ.get('CUDA_VISIBLE_DEVICES'), "
           "'email.parser' in sys.modules, flush=True)")


def wait_for(path, text, timeout_s=60.0):
    deadline = time.monotonic() + timeout_s
    while text not in path.read_text():
        assert time.monotonic() < deadline, path.read_text()
        time.sleep(0.05)


def test_a_gated_process_imports_then_waits_for_its_devices(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")      # the machine's pool (fake GPUs)
    server = Server([sys.executable, "-c", PROGRAM], 0, tmp_path / "server.log", gated=True)
    with server:
        wait_for(server.log, prestart.IMPORTED)
        time.sleep(0.5)
        assert server.proc.poll() is None and prestart.GRANTED not in server.log.read_text()   # it waits
        launched_at = server.started_at
        server.grant(["1"])
        assert server.started_at > launched_at         # its start-up counts from the grant
        assert server.proc.wait(timeout=30) == 0
    text = server.log.read_text()
    assert text.rstrip().endswith("waited 1 True"), text          # on the granted GPU, imports kept
    lines = text.splitlines()
    assert lines[0].startswith(server_log.LAUNCH) and lines[1].startswith(prestart.IMPORTED)
    assert lines[2].startswith(prestart.GRANTED)
    assert 0 < vllm_log.timeline(text)["startup_imported_ahead_s"] < 30


def test_a_process_not_made_to_wait_goes_straight_on_and_a_closed_gate_ends_it(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with Server([sys.executable, "-c", PROGRAM], 0, tmp_path / "plain.log") as plain:
        assert plain.proc.wait(timeout=30) == 0
    assert plain.log.read_text().rstrip().endswith("went on 0 False")
    # granted at its launch (its GPU was free): it goes on once imported, on the granted GPU,
    # and its start-up counts from its launch (no imports ahead)
    at_once = Server([sys.executable, "-c", PROGRAM], 0, tmp_path / "at_once.log", gated=True)
    with at_once:
        at_once.grant(["1"])
        assert at_once.proc.wait(timeout=30) == 0
    text = at_once.log.read_text()
    assert text.rstrip().endswith("went on 1 True") and "startup_imported_ahead_s" not in vllm_log.timeline(text)
    never = Server([sys.executable, "-c", PROGRAM], 0, tmp_path / "never.log", gated=True)
    with never:
        wait_for(never.log, prestart.IMPORTED)
        never.proc.stdin.close()                       # the session ended before its turn
        assert never.proc.wait(timeout=30) == 0
    assert prestart.GRANTED not in never.log.read_text()


def test_a_gated_server_has_vllm_inspect_its_model_ahead(tmp_path, tiny_model, monkeypatch):
    """On an empty model-info cache (a fresh box) vLLM's API server inspects the model's class
    in a new interpreter: 19-20 s after the grant on an H200 box. A pre-started one has vLLM
    do it before its grant, so the lookup finds vLLM's own cache entry. The real vLLM registry,
    the tiny Llama."""
    assert prestart.inspect_model_ahead(str(tmp_path)) == []     # no config.json: nothing ahead
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv("VLLM_CACHE_ROOT", str(tmp_path / "vllm-cache"))
    program = ("from servelab.engines import prestart; import os, sys; "
               f"prestart.wait_for_grant(model={str(tiny_model)!r}); "
               "print('cached', sorted(os.listdir(os.environ['VLLM_CACHE_ROOT'] + '/modelinfos')), flush=True)")
    server = Server([sys.executable, "-c", program], 0, tmp_path / "server.log", gated=True)
    with server:
        wait_for(server.log, prestart.IMPORTED, timeout_s=240)
        assert list((tmp_path / "vllm-cache/modelinfos").glob("*llama*LlamaForCausalLM*")), \
            server.log.read_text()[-2000:]                      # cached before the grant
        server.grant(["0"])
        assert server.proc.wait(timeout=60) == 0
    assert "LlamaForCausalLM" in server.log.read_text().splitlines()[-1]
