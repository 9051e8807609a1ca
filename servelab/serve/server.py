"""Server lifecycle: free port, own process group, /health with a deadline, teardown.

The server runs in a new session (its own process group), so stopping it reaches every
process it spawned (vLLM's engine core, workers, compilers)."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import threading
import time
from datetime import datetime
from pathlib import Path

import requests

from servelab.engines import prestart, zygote
from servelab.engines import server_log
from servelab.serve.failure import exit_words
from servelab.serve.process_tree import (group_alive, group_processes, parent_pid, signal_group,
                                           start_time, still_running)


# after an engine's fatal line, how long its server may take to exit on its own (and log
# its last words) before it is stopped: a hung engine is not waited for to its timeout
FATAL_GRACE_S = 10.0


class ServerError(RuntimeError):
    """The server failed to start, or died while it was being measured. `exit_code`:
    the server's own exit code (negative: killed by that signal; None: still running,
    e.g. not healthy in time). `engine_died`: what showed its engine dead (a fatal line
    of its log, an engine process gone) while its front process may still have run;
    `gone`: (name, pid) of the engine process seen alive that vanished; `during`: when."""

    def __init__(self, message: str, exit_code: int | None = None, log: Path | None = None,
                 engine_died: str | None = None, *, gone: tuple[str, int] | None = None,
                 during: str = "", log_offset: int = 0):
        super().__init__(message)
        self.exit_code, self.log, self.engine_died = exit_code, log, engine_died
        self.gone, self.during, self.log_offset = gone, during, log_offset

    def log_text(self) -> str:
        """The server log from where the failed stage began (its health, under load)."""
        try:
            with open(self.log, "rb") as f:
                f.seek(self.log_offset)
                return f.read().decode(errors="replace")
        except (OSError, TypeError):
            return ""


# where each server start and its time to health, and each session's measuring time, is
# noted, when set (the test suite's account of where its time went: tests/conftest.py)
START_LOG = "SERVELAB_START_LOG"


def note_event(event: str) -> None:
    if path := os.environ.get(START_LOG):
        with open(path, "a") as out:
            out.write(f"{os.environ.get('PYTEST_CURRENT_TEST', '-')}\t{event}\n")


def ephemeral_low() -> int:
    """The lowest port the kernel hands to outgoing connections (Linux's default 32768)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A port free now, below the kernel's ephemeral range: a server binds it only after its
    imports (15-30 s on 2 cores), and an ephemeral port could meanwhile be taken by any
    outgoing connection of the host (a client's, another server's): "Address already in use"
    (CI of 57ce2ed). Below the range only another listener can take it."""
    rng = random.SystemRandom()
    low = ephemeral_low()
    for _ in range(50 if low > 4096 else 0):
        port = rng.randrange(4096, low)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:   # all tried were taken
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def log_tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class Server:
    """A server process started by `command`, its output written to `log`."""

    def __init__(self, command: list[str], port: int, log: str | Path, env: dict | None = None,
                 *, grace_seconds: float = 20.0, gated: bool = False, fatal_lines: tuple = (),
                 engine_processes: tuple = ()):
        self.command = command
        # the engine's own signs of death (servelab.engines.registry): lines, process titles
        # (a {title prefix: name} map, e.g. {"VLLM::EngineCore": "vLLM engine core"})
        self.fatal_lines = tuple(fatal_lines)
        self.process_names = dict(engine_processes) if isinstance(engine_processes, dict) else \
            {title: title for title in engine_processes}
        self.engine_processes = tuple(self.process_names)
        self.gone: tuple[str, int] | None = None   # (name, pid) of an engine process that vanished
        self.death: str | None = None
        self.death_lock = threading.Lock()
        self.healthy_log_offset = 0   # the log's size at health: what an under-load death wrote follows
        self.log_offset = 0
        self.seen_engine: dict[int, str] = {}   # pid -> title of its engine processes seen alive
        self.descendants: dict[int, str] = {}   # pid -> start time of every process it started
        # pre-started (servelab.engines.prestart): it imports, then waits on stdin for `grant`
        self.gated = gated
        self.port = port
        self.log = Path(log)
        self.env = env
        self.grace_seconds = grace_seconds
        self.proc: subprocess.Popen | None = None
        self.started_at = 0.0
        self.healthy_after_s: float | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "wb") as out:
            out.write(server_log.launch_line())   # the imports' start, for the start-up's breakdown
            out.flush()
            self.started_at = time.monotonic()
            env = {**(self.env or os.environ), prestart.GATE_ENV: "1"} if self.gated else self.env
            # a CPU server forked from a process that imported vLLM already (engines.zygote)
            self.proc = zygote.fork_server(self.command, env, self.log) \
                if not self.gated and zygote.usable(self.command, env) else None
        if self.proc is None:
            with open(self.log, "ab") as out:
                self.proc = subprocess.Popen(
                    self.command, stdout=out, stderr=subprocess.STDOUT,
                    stdin=subprocess.PIPE if self.gated else subprocess.DEVNULL, env=env,
                    start_new_session=True,
                )
        note_event(f"start\t{self.proc.pid}\t{' '.join(self.command[1:4])}")

    def grant(self, devices: list[str]) -> None:
        """Let a gated server go on, on `devices`; its start-up is counted from here."""
        if not self.gated or self.proc.stdin.closed:
            return
        try:
            self.proc.stdin.write(f"{','.join(devices)}\t{datetime.now():{prestart.TIME_FORMAT}}\n".encode())
            self.proc.stdin.close()
        except BrokenPipeError:   # it died while importing: check_alive reports it
            pass
        self.started_at = time.monotonic()

    def wait_for_line(self, text: str, poll_s: float = 0.2) -> None:
        """Until its log holds `text` (or it has exited: check_alive then says why)."""
        while self.proc.poll() is None and text not in self.log.read_text(errors="replace"):
            time.sleep(poll_s)

    def check_alive(self, during: str) -> None:
        code = self.proc.poll() if self.proc else None
        died = self.engine_death() if self.proc else None
        if code is None and died:
            # give it a moment to exit on its own (its exit code, its root cause logged)
            deadline = time.monotonic() + FATAL_GRACE_S
            while self.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
            code = self.proc.poll()
            if code is None:
                self.stop()   # hung: nothing of it may keep holding the GPUs
        if code is not None or died:
            what = f"server {exit_words(code)}" if code is not None else "server stopped"
            raise ServerError(
                f"{what} {during}{f' (engine dead: {died})' if died else ''}; log: {self.log}\n"
                f"--- last lines of the server log ---\n{log_tail(self.log)}",
                exit_code=code, log=self.log, engine_died=died, gone=self.gone, during=during,
                log_offset=self.healthy_log_offset if self.healthy_after_s is not None else 0,
            )

    def engine_death(self) -> str | None:
        """What shows the engine dead while its front process runs: a fatal line new in its
        log since the last look, or one of its engine processes seen before now gone. Once
        seen, it is kept (the death watch and the session both ask); safe from two threads."""
        with self.death_lock:
            if self.death is None:
                self.death = self._look_for_death()
            return self.death

    def _look_for_death(self) -> str | None:
        gone = None
        if self.engine_processes:   # first: a process gone is named even after its fatal line
            alive = group_processes(self.proc.pid)
            for pid, title in alive.items():
                # not a helper an engine process forked, which bears its title until it execs or exits
                if title.startswith(self.engine_processes) and alive.get(parent_pid(pid)) != title:
                    self.seen_engine[pid] = title
            self.descendants.update({pid: start_time(pid) for pid in alive})
            for pid, title in self.seen_engine.items():
                if pid not in alive:
                    self.gone = (next(n for t, n in self.process_names.items() if title.startswith(t)), pid)
                    gone = f"engine process {title} (pid {pid}) is gone"
                    break
        if self.fatal_lines:
            try:
                with open(self.log, "rb") as f:
                    f.seek(self.log_offset)
                    chunk = f.read()
            except OSError:
                chunk = b""
            # only whole lines; a partial last line is read again next time
            whole = chunk[:chunk.rfind(b"\n") + 1]
            self.log_offset += len(whole)
            for line in whole.decode(errors="replace").splitlines():
                if any(marker in line for marker in self.fatal_lines):
                    return f"fatal line: {line.strip()[:300]}" + (f"; {gone}" if gone else "")
        return gone

    def wait_healthy(self, timeout_s: float, progress=print) -> float:
        """Poll /health until it answers 200; return seconds from launch."""
        deadline = self.started_at + timeout_s
        next_note = time.monotonic() + 15
        while time.monotonic() < deadline:
            self.check_alive("before it became healthy")
            try:
                if requests.get(f"{self.base_url}/health", timeout=2).status_code == 200:
                    self.healthy_after_s = time.monotonic() - self.started_at
                    self.healthy_log_offset = self.log.stat().st_size
                    note_event(f"healthy\t{self.proc.pid}\t{self.healthy_after_s:.2f}")
                    return self.healthy_after_s
            except requests.RequestException:
                pass
            if time.monotonic() > next_note:
                progress(f"waiting for server on port {self.port}: "
                         f"{time.monotonic() - self.started_at:.0f}s of {timeout_s:.0f}s")
                next_note += 15
            time.sleep(0.25)
        raise ServerError(
            f"server not healthy within {timeout_s:.0f}s (server.startup_timeout_s); "
            f"log: {self.log}\n--- last lines ---\n{log_tail(self.log)}",
            log=self.log,
        )

    def stop(self) -> None:
        """SIGTERM the whole process group, SIGKILL whatever outlives the grace period."""
        if self.proc is None:
            return
        pgid = self.proc.pid  # leader of its own session: pgid == pid
        # every server, watched or not: what it started, also in a session of its own (a
        # router's workers), while its parents still tie it to the group
        self.descendants.update({pid: start_time(pid) for pid in group_processes(pgid)})
        if signal_group(pgid, signal.SIGTERM):
            deadline = time.monotonic() + self.grace_seconds
            while time.monotonic() < deadline and group_alive(pgid):
                self.proc.poll()
                time.sleep(0.1)
            signal_group(pgid, signal.SIGKILL)
        self.proc.wait()
        # children re-parented to init may take a moment to be reaped
        deadline = time.monotonic() + 5
        while group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
        # a process it started that left its group (a new session) is still its own; the kill
        # lands when the kernel next schedules it (late on a busy host): wait for that
        killed = []
        for pid, started in self.descendants.items():
            if started is not None and start_time(pid) == started:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append((pid, started))
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 5
        while any(still_running(pid, started) for pid, started in killed) and time.monotonic() < deadline:
            time.sleep(0.05)
        # one started after the first look (a multiprocessing spawn as the front died; seen
        # once in CI, left alive): kill what the group and its descendants still hold
        deadline = time.monotonic() + 5
        while (late := group_processes(pgid)) and time.monotonic() < deadline:
            for pid in late:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)

    def __enter__(self) -> "Server":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def terminate_on_sigterm() -> None:
    """Turn SIGTERM (what Snakemake and SLURM send) into an exception, so
    `finally`/`with` blocks tear the server down as they do on Ctrl-C."""

    def handler(signum, frame):
        raise KeyboardInterrupt(f"received signal {signum}")

    signal.signal(signal.SIGTERM, handler)
