"""Disjoint GPUs for the server jobs that run at once on one multi-GPU machine.

On a SLURM cluster the scheduler gives each job its GPUs (CUDA_VISIBLE_DEVICES per
job). On a single machine Snakemake's `gpu` resource only caps how many GPUs the
running jobs hold together, not which: without this, two servers would both start
on GPU 0. A session job therefore claims the GPUs it needs itself: an exclusive,
non-blocking `flock` on one lock file per device in a machine-wide directory, held
until the job exits (the kernel releases it even if the job is killed), and sets
CUDA_VISIBLE_DEVICES to what it holds. A TP=2 point claims two.

Waiting is first come, first served: a job that waits takes the queue lock and, holding
it, keeps each GPU that frees until it has its count; no job claims while one waits.
Claims that only took a whole set at once let narrower jobs take each GPU that freed and
starve a wide session (docs/measurements.md). At a run's start, a job narrower than the machine lets a wider job launched
with it claim first (`START_GRACE_S`).
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from servelab.machine import machine_gpus

LOCK_DIR = Path(os.environ.get("SERVELAB_GPU_LOCK_DIR", "/tmp/servelab-gpu-locks"))
# A job narrower than the machine that finds every GPU free (a run's start) waits this long
# before it claims, so that a wider job Snakemake launched in the same round claims first:
# a TP 2 job taking two GPUs of an empty 4-GPU box first would leave the TP 4 job waiting,
# keeping the other two idle until the TP 2 session ended.
START_GRACE_S = float(os.environ.get("SERVELAB_GPU_START_GRACE_S", "5"))


def scheduler_assigned(env: dict) -> bool:
    """SLURM (or another scheduler) already chose this job's GPUs."""
    return "SLURM_JOB_ID" in env and "CUDA_VISIBLE_DEVICES" in env


class GpuClaim:
    """Hold `count` of `devices` exclusively (context manager); `.devices` once held."""

    def __init__(self, devices: list[str], count: int, lock_dir: Path = LOCK_DIR,
                 poll_s: float = 2.0, *, progress=print, start_grace_s: float = 0.0):
        if count > len(devices):
            raise ValueError(f"the point needs {count} GPU(s); this machine has {len(devices)} "
                             f"({','.join(devices) or 'none'})")
        self.pool, self.count, self.lock_dir = devices, count, Path(lock_dir)
        self.poll_s, self.progress, self.start_grace_s = poll_s, progress, start_grace_s
        self.handles: list = []
        self.devices: list[str] = []

    def try_claim(self, keep: bool = False) -> bool:
        """Claim `count` free GPUs, or none (True when held); with `keep`, hold those free
        now and try for the rest at the next call (the queue's head, which alone may).

        `devices` only ever shows what the claim holds past this call: a claim that fails
        without `keep` never lists, even for an instant, the GPUs it locked on the way (a
        job or thread reading `devices` would take a passing attempt for a queued claim)."""
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        taken: list[tuple[str, object]] = []
        for device in self.pool:
            if len(self.devices) + len(taken) == self.count:
                break
            if device not in self.devices and (handle := self._lock(device)) is not None:
                taken.append((device, handle))
        if len(self.devices) + len(taken) < self.count and not keep:
            for _, handle in taken:
                handle.close()
            return False
        self.handles += [handle for _, handle in taken]
        self.devices += [device for device, _ in taken]
        return len(self.devices) == self.count

    def _lock(self, device: str):
        """The device's lock file, flocked exclusively, or None where another job holds it."""
        handle = open(self.lock_dir / f"gpu{device}.lock", "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        return handle

    def queue(self, blocking: bool):
        """The queue lock (held by the job waiting longest), or None where another holds it."""
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        handle = open(self.lock_dir / "queue.lock", "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            handle.close()
            return None
        return handle

    def release(self) -> None:
        for handle in self.handles:
            handle.close()  # closing the file drops its flock
        self.handles, self.devices = [], []

    def all_free(self) -> bool:
        """No GPU of the pool is held (a run's start). A shared lock: jobs asking at once do
        not take each other's question for a claim."""
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        for device in self.pool:
            with open(self.lock_dir / f"gpu{device}.lock", "a+") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except BlockingIOError:
                    return False
        return True

    def claim_if_free(self) -> bool:
        """Claim at once where the GPUs are free and no job waits for GPUs (a narrower job
        than the machine, on an empty machine, after `start_grace_s`: wider ones first)."""
        if self.start_grace_s and self.count < len(self.pool) and self.all_free():
            time.sleep(self.start_grace_s)
        queue = self.queue(blocking=False)
        if queue is None:
            return False
        with queue:
            return self.try_claim()

    def __enter__(self) -> "GpuClaim":
        if self.claim_if_free():
            return self
        self.progress(f"waiting for {self.count} free GPU(s) of {','.join(self.pool)} (locks in {self.lock_dir})")
        with self.queue(blocking=True):   # first come, first served; then keep each GPU that frees
            waited = 0.0
            while not self.try_claim(keep=True):
                time.sleep(self.poll_s)
                waited += self.poll_s
                if waited % 60 < self.poll_s:
                    self.progress(f"still waiting: holding {','.join(self.devices) or 'none'} of the "
                                  f"{self.count} GPU(s) it needs")
        return self

    def __exit__(self, *exc) -> None:
        self.release()


class JobGpus:
    """The GPUs of a session job needing `count`, claimed when first needed (`take`) on a
    machine where no scheduler chose them, and released when the job's context exits.

    Until `take`, a server may already be starting through servelab.engines.prestart, importing
    its engine while another job measures on the GPU this one waits for (`deferrable`).
    `take` blocks until the GPUs are held, exports CUDA_VISIBLE_DEVICES (so the servers and
    the point's provenance see it) and returns them, or None where nothing is to be chosen
    (no GPU needed, SLURM chose, or no GPU on the machine)."""

    def __init__(self, count: int, progress=print, lock_dir: Path | None = None):
        self.count, self.progress, self.lock_dir = count, progress, lock_dir or LOCK_DIR
        self.claim: GpuClaim | None = None
        env = dict(os.environ)
        self.pool = [] if count <= 0 or scheduler_assigned(env) else machine_gpus(env)

    def shortfall(self) -> str | None:
        """Why the job can never hold its GPUs here (more than the machine has), or None."""
        if self.pool and self.count > len(self.pool):
            return f"needs {self.count} GPUs, {len(self.pool)} present ({','.join(self.pool)})"
        return None

    @property
    def deferrable(self) -> bool:
        return bool(self.pool) and self.claim is None

    def take(self) -> list[str] | None:
        if not self.pool:
            return None
        if self.claim is None:
            # a short poll: a job that waits with its engine imported gets a freed GPU before
            # a job Snakemake starts in its place can ask for it
            self.held(GpuClaim(self.pool, self.count, self.lock_dir, poll_s=0.2, progress=self.progress,
                               start_grace_s=START_GRACE_S).__enter__())
        return self.claim.devices

    def take_if_free(self) -> bool:
        """Claim at once if the GPUs are free (True), else leave them (False)."""
        if self.claim is None and self.pool:
            claim = GpuClaim(self.pool, self.count, self.lock_dir, progress=self.progress, start_grace_s=START_GRACE_S)
            if claim.claim_if_free():
                self.held(claim)
        return self.claim is not None

    def held(self, claim: GpuClaim) -> None:
        self.claim = claim
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(claim.devices)
        self.progress(f"GPU(s) {os.environ['CUDA_VISIBLE_DEVICES']} of {','.join(self.pool)} claimed for this job")

    def __enter__(self) -> "JobGpus":
        return self

    def __exit__(self, *exc) -> None:
        if self.claim:
            self.claim.__exit__(*exc)
            self.claim = None

