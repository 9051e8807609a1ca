"""A session's `vllm bench serve` forked from the zygote that forked its CPU server
(servelab.engines.zygote): the session's process imports no vLLM at all, where
servelab.engines.vllm.bench.BenchServe would import it (13-16 s on 2 cores)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from servelab.engines import zygote


class ForkedBenchServe:
    """`vllm bench serve` forked by the zygote at `path`, in the server's environment `env`."""

    def __init__(self, path: Path, env: dict):
        self.path, self.env = path, env
        # CPU seconds of the clients it forked that ended: they are the zygote's children, not
        # the session's, so the session's measures of its own CPU add this (conditions.OutsideLoad)
        self.forked_cpu_s = 0.0

    def run(self, argv: list[str], log: Path) -> dict:
        """Run one benchmark, its report and progress bar in `log`; its saved result (a
        failure raises CalledProcessError, as a client process would). Interrupted (the
        engine died, Ctrl-C), the child is stopped before this returns."""
        with open(log, "a") as out:
            out.write(f"$ vllm bench serve {' '.join(argv)}\n")
        child = zygote.fork(self.path, ["-m", zygote.CLI, "bench", "serve", *argv], self.env, log)
        try:
            code = child.wait()
        finally:
            child.stop()
            self.forked_cpu_s += child.cpu_s or 0.0
        if code != 0:
            raise subprocess.CalledProcessError(code, ["vllm", "bench", "serve", *argv])
        saved = Path(argv[argv.index("--result-dir") + 1]) / argv[argv.index("--result-filename") + 1]
        return json.loads(saved.read_text())
