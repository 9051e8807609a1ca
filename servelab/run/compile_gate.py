"""Start-ups paid once per compile key: starts that would compile the same graphs go one
after another until the first is healthy; the rest start warm from what it cached.

A vLLM start compiles what its caches lack (servelab.run.caches): torch.compile's graphs,
Inductor's and Triton's kernels. Starts of one key side by side each pay the whole
compile. So, before a session claims its GPUs, it passes its key's gate (one lock file):
the key's first start compiles while the others of that key wait, holding no GPU (other
keys' sessions use the GPUs meanwhile), then start warm.

The key: engine, model identity, parallel layout and the knobs that set the compiled
shapes (token budget, sequences, lengths, dtypes, speculation, compilation config). The
rest share it: a second start of one key finds the first's graphs and kernels cached, and
a token budget's compile ranges are its own, so the budget is in the key (what each cost on
4x H100: docs/measurements.md, "Figures behind the code's choices").
An eager start (`enforce_eager`) compiles nothing and passes no gate. A key is warm once a
start of it was healthy (a marker beside its lock, in the cache directory: it lives and
dies with the cache). A start that fails leaves no marker, and the next in line compiles.
`cold_at_once` (config `cold_starts_at_once`) caps cold starts side by side where set.
Not a level of its own: the stack (every model's first start). Gating each stack's first
start made the whole box wait 417 s for that Mixtral's cold start, GPUs idle.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import time
from pathlib import Path

# what a start's compiled graphs and kernels depend on, beside engine and model
LAYOUT = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size")
COMPILED_SHAPES = ("max_num_batched_tokens", "max_num_seqs", "max_model_len", "enable_chunked_prefill",
                   "kv_cache_dtype", "dtype", "quantization", "speculative_config", "compilation_config")


def compile_key(engine: str, model_identity: str, knobs: dict) -> str | None:
    """A short name of what a start compiles, the same for starts that share their graphs
    and kernels; None for an eager start (it compiles nothing: no gate)."""
    if knobs.get("enforce_eager"):
        return None
    layout = {k: int(knobs.get(k) or 1) for k in LAYOUT}
    shapes = {k: knobs[k] for k in COMPILED_SHAPES if knobs.get(k) is not None}
    raw = json.dumps([engine, model_identity, layout, shapes], sort_keys=True, default=str)
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


class CompileGate:
    """Pass the gate of compile key `key` in `directory`: `wait()` before the GPUs are
    claimed, `warmed()` once the engine is healthy, `release()` at the end."""

    def __init__(self, directory: Path, key: str, cold_at_once: int | None = None,
                 poll_s: float = 0.5, *, progress=print):
        self.directory, self.key, self.cold_at_once = Path(directory), key, cold_at_once
        self.poll_s, self.progress = poll_s, progress
        self.handle = None          # the key's lock, held while this start compiles it
        self.cold_lock = None
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
                    self.cold_lock = self._take_cold_lock()
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

    def _take_cold_lock(self):
        started, told = time.monotonic(), -60.0
        while True:
            for n in range(self.cold_at_once):
                handle = open(self.directory / f"cold-start{n}.lock", "a+")
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return handle
                except BlockingIOError:
                    handle.close()
            waited = time.monotonic() - started
            if waited - told >= 60:
                self.progress(f"waiting: {self.cold_at_once} cold start(s) at once already running ({waited:.0f}s)")
                told = waited
            time.sleep(self.poll_s)

    def warmed(self) -> None:
        """The engine is healthy: its key is warm for the next starts."""
        if self.handle is not None:
            self.marker.write_text(f"{time.time()}\n")
        self.release()

    def release(self) -> None:
        for handle in (self.handle, self.cold_lock):
            if handle is not None:
                handle.close()
        self.handle = self.cold_lock = None
