"""Start-ups paid once per compile key: sessions that would compile the same graph start
one after another, the first cold, the rest warm from the cache.

A vLLM start compiles what its caches lack (servelab.run.caches): torch.compile's graphs
for its compile key (engine, model shape, parallel layout and the flags that change the
compiled graph). Starts of one key side by side each pay the whole compile. So, before a
session claims its GPUs, it passes its key's gate (one lock file): the key's first start
compiles while the others of that key wait, holding no GPU, then start warm. On a lent
4x H100 (2026-11-27) week 5's second server of a key started in 48-51 s against the
first's 60-67 s (torch.compile 6-7 s against 17-28 s).

A key is warm once a start of it was healthy (a marker beside its lock, in the cache
directory: it lives and dies with the cache). A start that fails leaves no marker, and
the next in line compiles. `cold_at_once` (config `cold_starts_at_once`) caps cold starts
side by side where set. Not a level of its own: the stack (the JIT kernels every shape
shares). Gating each stack's first start made the whole box wait 417 s for a Mixtral's
cold start on that 4x H100, three GPUs idle; its kernels were then shared anyway (the
next Mixtral key compiled in 19 s, not 206).
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
    """Pass the gate of compile key `key` in `directory`: `wait()` before the GPUs are
    claimed, `warmed()` once the engine is healthy, `release()` at the end."""

    def __init__(self, directory: Path, key: str, cold_at_once: int | None = None,
                 poll_s: float = 0.5, progress=print):
        self.directory, self.key, self.cold_at_once = Path(directory), key, cold_at_once
        self.poll_s, self.progress = poll_s, progress
        self.handle = None          # the key's lock, held while this start compiles it
        self.slot = None
        self.cold = False
        self.waited_s = 0.0

    @property
    def marker(self) -> Path:
        return self.directory / f"{self.key}.warm"

    def wait(self) -> float:
        """Block until this start may go; the seconds waited."""
        started = time.monotonic()
        if not self.marker.exists():
            self.handle = self._lock(f"{self.key}.lock", f"the start compiling {self.key} to be healthy")
            if self.marker.exists():       # compiled while we waited: start warm
                self.handle.close()
                self.handle = None
            else:
                self.cold = True
                if self.cold_at_once:
                    self.slot = self._take_slot()
        self.waited_s = time.monotonic() - started
        if self.cold:
            self.progress(f"compile gate: cold ({self.key}), after {self.waited_s:.1f}s")
        elif self.waited_s >= 1:
            self.progress(f"compile gate: warm ({self.key}) after waiting {self.waited_s:.1f}s")
        return self.waited_s

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
        """The engine is healthy: its key is warm for the next starts."""
        if self.handle is not None:
            self.marker.write_text(f"{time.time()}\n")
        self.release()

    def release(self) -> None:
        for handle in (self.handle, self.slot):
            if handle is not None:
                handle.close()
        self.handle = self.slot = None
