"""Start-ups paid once: sessions that would compile the same thing start one after another.

A vLLM start compiles what its caches lack (servelab.run.caches): torch.compile's graphs
for its compile key (engine, model shape, parallel layout and the flags that change the
compiled graph), and once per stack (engine, torch, GPU) the JIT kernels every shape
shares. Starts of one key side by side each pay the whole compile, and slow each other:
on a fresh 4x H100 (2026-11-27) four cold starts at once took 222-366 s to be healthy
where the same shapes took 65-75 s once the caches were warm.

So, before a session claims its GPUs, it passes a gate of one lock file per level:
- the stack: the first start on a fresh stack runs alone; the rest wait for it;
- its compile key: a key's first start compiles; the others of that key wait for it
  to be healthy, then start warm (from the cache);
- at most `cold_at_once` cold starts at once (slots), where set.
A level is warm once a start behind it was healthy (a marker beside its lock, in the cache
directory: it lives and dies with the cache). A start that fails leaves no marker, and the
next in line compiles. Waiting holds no GPU, so other work uses them meanwhile.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import time
from pathlib import Path

# flags that change no compiled graph or JIT kernel: sessions differing only in these share a key
NOT_COMPILED = {"gpu_memory_utilization", "enable_prefix_caching", "disable_log_requests", "disable_log_stats",
                "seed", "served_model_name", "swap_space", "kv_transfer_config", "load_format",
                "enable_chunked_prefill", "scheduling_policy"}


def compile_key(engine: str, kind: str, model_identity: str, knobs: dict) -> str:
    """A short name of what a start compiles: the same for sessions that share a graph."""
    compiled = {k: v for k, v in sorted(knobs.items()) if k not in NOT_COMPILED}
    raw = json.dumps([engine, kind, model_identity, compiled], sort_keys=True, default=str)
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


class CompileGate:
    """Pass the levels `keys` (e.g. ["stack", <compile key>]) in `directory`: `wait()` before
    the GPUs are claimed, `warmed()` once the engine is healthy, `release()` at the end."""

    def __init__(self, directory: Path, keys: list[str], cold_at_once: int | None = None,
                 poll_s: float = 0.5, progress=print):
        self.directory, self.keys, self.cold_at_once = Path(directory), keys, cold_at_once
        self.poll_s, self.progress = poll_s, progress
        self.held: list = []        # (key, handle) of the levels this start compiles
        self.slot = None
        self.cold: list[str] = []   # the levels it found cold
        self.waited_s = 0.0

    def _lock(self, name: str, what: str):
        """An exclusive lock on directory/name, waited for (a message a minute)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        handle = open(self.directory / name, "a+")
        started, told = time.monotonic(), -60.0
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return handle
            except BlockingIOError:
                waited = time.monotonic() - started
                if waited - told >= 60:
                    self.progress(f"waiting for {what} ({waited:.0f}s; lock {self.directory / name})")
                    told = waited
                time.sleep(self.poll_s)

    def warm(self, key: str) -> bool:
        return (self.directory / f"{key}.warm").exists()

    def wait(self) -> float:
        """Block until this start may go; the seconds waited."""
        started = time.monotonic()
        for key in self.keys:
            if self.warm(key):
                continue
            handle = self._lock(f"{key}.lock", f"the start compiling {key} to be healthy")
            if self.warm(key):       # it was compiled while we waited: start warm
                handle.close()
                continue
            self.held.append((key, handle))
            self.cold.append(key)
        if self.cold and self.cold_at_once:
            self.slot = self._take_slot()
        self.waited_s = time.monotonic() - started
        if self.cold:
            self.progress(f"compile gate: cold ({', '.join(self.cold)}), after {self.waited_s:.1f}s")
        elif self.waited_s >= 1:
            self.progress(f"compile gate: warm after waiting {self.waited_s:.1f}s")
        return self.waited_s

    def _take_slot(self):
        started, told = time.monotonic(), -60.0
        while True:
            for n in range(self.cold_at_once):
                handle = open(self.directory / f"cold-slot{n}.lock", "a+")
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return handle
                except BlockingIOError:
                    handle.close()
            waited = time.monotonic() - started
            if waited - told >= 60:
                self.progress(f"waiting for one of {self.cold_at_once} cold-start slot(s) ({waited:.0f}s)")
                told = waited
            time.sleep(self.poll_s)

    def warmed(self) -> None:
        """The engine is healthy: the levels it compiled are warm for the next starts."""
        for key, _ in self.held:
            (self.directory / f"{key}.warm").write_text(f"{time.time()}\n")
        self.release()

    def release(self) -> None:
        for _, handle in self.held:
            handle.close()
        if self.slot:
            self.slot.close()
        self.held, self.slot = [], None
