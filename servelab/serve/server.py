"""Server lifecycle: free port, own process group, /health with a deadline, teardown.

The server runs in a new session (its own process group), so stopping it
reaches every process it spawned (vLLM's engine core, workers, compilers).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from datetime import datetime
from pathlib import Path

import requests

from servelab.engines import prestart
from servelab.serve import server_log


class ServerError(RuntimeError):
    """The server failed to start, or died while it was being measured. `exit_code`:
    the server's own exit code (negative: killed by that signal; None: still running,
    e.g. not healthy in time)."""

    def __init__(self, message: str, exit_code: int | None = None, log: Path | None = None):
        super().__init__(message)
        self.exit_code, self.log = exit_code, log


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
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
                 grace_seconds: float = 20.0, gated: bool = False):
        self.command = command
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
            self.proc = subprocess.Popen(
                self.command, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.PIPE if self.gated else subprocess.DEVNULL, env=env,
                start_new_session=True,
            )

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
        if code is not None:
            raise ServerError(
                f"server exited with code {code} {during}; log: {self.log}\n"
                f"--- last lines of the server log ---\n{log_tail(self.log)}",
                exit_code=code, log=self.log,
            )

    def wait_healthy(self, timeout_s: float, progress=print) -> float:
        """Poll /health until it answers 200; return seconds from launch."""
        deadline = self.started_at + timeout_s
        next_note = time.monotonic() + 15
        while time.monotonic() < deadline:
            self.check_alive("before it became healthy")
            try:
                if requests.get(f"{self.base_url}/health", timeout=2).status_code == 200:
                    self.healthy_after_s = time.monotonic() - self.started_at
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

    def __enter__(self) -> "Server":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False


def group_alive(pgid: int) -> bool:
    """True while any non-zombie process is left in the group."""
    for proc_dir in Path("/proc").iterdir():
        if not proc_dir.name.isdigit():
            continue
        try:
            fields = (proc_dir / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, group = fields[0], int(fields[2])
        if group == pgid and state != "Z":
            return True
    return False


def terminate_on_sigterm() -> None:
    """Turn SIGTERM (what Snakemake and SLURM send) into an exception, so
    `finally`/`with` blocks tear the server down as they do on Ctrl-C."""

    def handler(signum, frame):
        raise KeyboardInterrupt(f"received signal {signum}")

    signal.signal(signal.SIGTERM, handler)
