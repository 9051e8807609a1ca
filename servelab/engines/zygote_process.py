"""The zygote itself (servelab.engines.zygote): a process that imports vLLM's front end
(or, of kind "analysis", what the analysis scripts import) once, then forks a child per
request that runs a server, a benchmark client, an offline runner or a script.

    python -m servelab.engines.zygote_process SOCKET [KIND]   (started by zygote.ensure, not by hand)
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import select
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path

from servelab.engines.zygote import FORKED, IDLE_ENV, IDLE_S, OFFLINE

# imported once in the zygote besides vLLM's front end (servelab.engines.prestart.VLLM_SERVE_MODULES):
# the benchmark client, and the subcommands that vLLM's command line imports before it
# parses (vllm/entrypoints/cli/main.py), else each server imports them again
CLI_MODULES = tuple(f"vllm.entrypoints.cli.{name}" for name in (
    "benchmark.main", "collect_env", "download_kernels", "launch", "openai", "preload", "run_batch",
    "snapshot")) + ("vllm.benchmarks.serve", "servelab.engines.vllm.bench", OFFLINE)
# imported once in an analysis zygote: what the analysis scripts import, and what the
# preamble Snakemake writes into each script reads (its job, pickled)
ANALYSIS_MODULES = ("pandas", "matplotlib", "seaborn", "servelab.analysis.plots", "servelab.analysis.metrics",
                    "servelab.analysis.comparisons", "servelab.analysis.comparison_plot",
                    "servelab.analysis.search_plots", "servelab.search.progress", "snakemake.script",
                    "snakemake.logging", "snakemake.iocontainers")


def run_module(module: str, args: list[str], asked_at: float | None = None) -> int:
    """`python -m MODULE ARGS` in this process, which imported what it needs; its exit code.
    `asked_at`: when the session asked for it (an offline runner's start-up counts from there)."""
    if module == OFFLINE:
        from servelab.engines.vllm import offline as vllm_offline

        sys.argv = [module, *args]
        return vllm_offline.main(args, asked_at=asked_at or time.monotonic())
    if args[:2] == ["bench", "serve"]:   # as vLLM's command line runs it, without building
        from servelab.engines.vllm.bench import BenchServe   # every subcommand's parser

        BenchServe().call(args[2:])
        return 0
    from servelab.engines.vllm import cli as vllm_cli
    from vllm.entrypoints.cli.main import main

    sys.argv = ["vllm", *args]
    vllm_cli.keep_start_method()
    main()
    return 0


def run_script(script: str, args: list[str]) -> int:
    """`python SCRIPT ARGS` in this process, which imported what it needs; its exit code."""
    import runpy

    sys.argv = [script, *args]
    runpy.run_path(script, run_name="__main__")
    return 0


def run_child(request: dict) -> None:
    """In the forked child: become the server (never returns)."""
    code = 1
    try:
        os.setsid()
        for sig in (signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        out = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        print(f"{FORKED}{os.getppid()}: its imports made there", flush=True)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None   # the session's TMPDIR, not the one the zygote's imports saw
        argv = request["argv"]
        code = run_module(argv[1], argv[2:], request.get("asked_at")) if argv[0] == "-m" else run_script(argv[0], argv[1:])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve(path: Path, kind: str = "vllm") -> None:
    """Import vLLM's front end (or, of kind "analysis", the analysis scripts' modules), then
    fork a child per request until idle."""
    import importlib

    started = time.monotonic()
    if kind == "analysis":
        for name in ANALYSIS_MODULES:
            importlib.import_module(name)
    else:
        from servelab.engines import prestart
        from servelab.engines.vllm import cli as vllm_cli

        vllm_cli.patch_version_lookup()
        for name in (*prestart.VLLM_SERVE_MODULES, *CLI_MODULES):
            importlib.import_module(name)
        # vLLM titles its engine processes (VLLM::EngineCore, what a server's death watch looks
        # for) with setproctitle, which must find the process's environment where the
        # interpreter left it: it is set up here, before a child replaces the environment
        with contextlib.suppress(ImportError):
            import setproctitle

            setproctitle.setproctitle(setproctitle.getproctitle())
    # what the imports made stays out of every collection: a child's collections (vLLM's
    # benchmark client runs three at its start) would otherwise walk, and so copy, every
    # page the zygote's objects lie on (0.5 s a point on 2 cores)
    gc.collect()
    gc.freeze()
    print(f"zygote {os.getpid()} ({kind}): imported in {time.monotonic() - started:.1f}s; serving {path}", flush=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    bound = path.with_suffix(f".{os.getpid()}")
    listener.bind(str(bound))
    listener.listen(16)
    os.replace(bound, path)   # answering from the moment the socket exists
    ours = os.stat(path).st_ino
    children, codes, cpu, last, leaving = set(), {}, {}, time.monotonic(), False
    idle_s, owner = float(os.environ.get(IDLE_ENV, IDLE_S)), os.getcwd()
    while children or (not leaving and time.monotonic() - last < idle_s):
        for pid in list(children):
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                children.discard(pid)
                codes[pid] = os.waitstatus_to_exitcode(status)
                cpu[pid] = usage.ru_utime + usage.ru_stime   # a forked client's CPU: its caller's record
        if not select.select([listener], [], [], 0.2)[0]:
            continue
        conn, _ = listener.accept()
        last = time.monotonic()
        with conn:
            request = json.loads(conn.makefile().readline())
            if request["op"] == "start":
                pid = os.fork()
                if pid == 0:
                    listener.close()
                    conn.close()
                    run_child(request)
                children.add(pid)
                print(f"zygote: forked {pid}: {' '.join(request['argv'][:4])}", flush=True)
                answer = {"pid": pid}
            elif request["op"] == "status":
                answer = {"code": None if request["pid"] in children else codes.get(request["pid"], 1),
                          "cpu_s": cpu.get(request["pid"])}
            else:   # ping, or exit (once its children have)
                leaving = leaving or request["op"] == "exit"
                answer = {"pid": os.getpid(), "owner": owner}
            try:
                conn.sendall(json.dumps(answer).encode() + b"\n")
            except OSError:   # the asker left before its answer (a session stopped mid-request)
                if request["op"] == "start":   # nobody knows this child's pid: it must not run on alone
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                print(f"zygote: the asker of {request['op']} left before its answer", flush=True)
    listener.close()
    if path.exists() and os.stat(path).st_ino == ours:   # not a later zygote's
        path.unlink(missing_ok=True)
    print("zygote: idle, exiting", flush=True)


if __name__ == "__main__":
    serve(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "vllm")
