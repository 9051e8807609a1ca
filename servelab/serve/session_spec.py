"""What one session is given: the server point, its engine and model, its client
points, where its store is, and how each point is measured."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from servelab.config import measurement as settings
from servelab.engines.registry import ENGINES




@dataclass
class SessionSpec:
    experiment: str
    server_point: str
    engine: str
    model_path: str
    model_identity: str          # hub repo@revision, or the tiny recipe's hash
    dataset_name: str            # `sharegpt` (a file) or one of the client's built-in generators
    dataset_path: str | None
    dataset_identity: str
    server_knobs: dict
    client_points: list[dict]
    store_dir: str
    startup_timeout_s: float = 1800.0
    kind: str = "serve"          # serve, or offline (vllm bench throughput/latency, hf static batching)
    tool: str | None = None
    env: dict = field(default_factory=dict)
    config_hash: str = ""
    workflow_dir: str = "."
    eval_include_path: str | None = None   # a local lm-eval task directory (servelab.fetch.eval_task)
    topology: dict | None = None           # P/D roles and router (servelab.serve.topology)
    monitors: dict = field(default_factory=dict)  # servelab.serve.monitors: metrics, gpu, torch_profile, wrap
    identity_env: dict = field(default_factory=dict)  # the experiment's and the point's env (not the engine's)
    # how each point is measured: repeats, warmup_prompts, reset_prefix_cache, drift_check,
    # grace_s, warmup_load_s, repeat_until, record_conditions
    measurement: dict = field(default_factory=dict)
    # a search session: {knob, low, high, steps, slo}; its load points are bisected
    # (servelab.serve.load_search) from the first client point, not listed
    load_search: dict | None = None
    # the name its points address the server by, when they run on another experiment's
    # engine (servelab.config.engine_groups)
    served_as: str | None = None
    # an experiment measured in interleaved rounds (servelab.serve.rounds): {seed, least,
    # most, metric, within}; its configurations' jobs list the rounds it decided
    rounds: dict | None = None

    @classmethod
    def from_params(cls, experiment: str, server_point: str, params: dict, **given) -> "SessionSpec":
        """The spec of a session from its rule's params (what the workflow read off the config:
        every key that is a field here) and what only the job knows (`given`: its model and
        dataset paths, its store, its environment with the engine's caches)."""
        names = {f.name for f in fields(cls)} - set(given)
        return cls(experiment=experiment, server_point=server_point,
                   **{k: v for k, v in params.items() if k in names}, **given)

    def setting(self, key: str):
        return {**settings.defaults(), **self.measurement}[key]

    @property
    def warmup_prompts(self) -> int:
        """Requests that warm the engine before a measurement: a session's warm-up for a
        server; `vllm bench throughput`'s own `--num-warmups` before each offline
        throughput point (`vllm bench latency` warms itself: --num-iters-warmup)."""
        return self.setting("warmup_prompts") if self.kind == "serve" or self.tool == "throughput" else 0

    @property
    def resets_prefix_cache(self) -> bool:
        return self.kind == "serve" and bool(self.setting("reset_prefix_cache")) and \
            ENGINES[self.engine].reset_cache_path is not None

    @property
    def served_name(self) -> str:
        return self.served_as or f"servelab-{self.experiment}"
