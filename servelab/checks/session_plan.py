"""What the workflow's session jobs read off a checked config (workflow/rules/common.smk):
each session's params (everything that defines its measurements: a change reruns it), the
files its engine and client read, the sessions that share its engine, its GPUs, its
priority in the scheduler and its minutes on a cluster.

A session is (experiment, server point). The rule files keep only what is Snakemake's own
(wildcards, ancient(), unpack()) and ask a SessionPlan for the rest."""

from __future__ import annotations

from servelab.checks import cross_checks
from servelab.config import engine_groups
from servelab.config import experiments as ex
from servelab.config import measurement, workloads
from servelab.fetch import dummy_weights
from servelab.serve.topology import topology_gpus

Session = tuple[str, str]   # (experiment, server point)

# minutes a session job may take (a cluster's time limit; the profile may override):
# a server's model load + CUDA graph capture + the whole load sweep, or offline
# benchmarks that each start an engine
SESSION_RUNTIME_MIN = {"serve": 240, "offline": 120}


class SessionPlan:
    def __init__(self, config: dict):
        self.config = config
        self.experiments = config["experiments"]
        self.server_points = {name: ex.server_points(exp) for name, exp in self.experiments.items()}
        self.hosts = self.sharing_sessions()   # {guest session: the session whose engine it shares}

    def knobs(self, name: str, server_point: str) -> dict:
        points = self.server_points[name]
        if server_point not in points:
            raise ValueError(f"{name} has no server point {server_point!r}; known: {sorted(points)}")
        return points[server_point]

    def dataset(self, exp: dict) -> str:
        """The experiment's workload (in a dummy-weights check, the one standing in for it)."""
        return dummy_weights.dataset(self.config, exp["dataset"])

    def files(self, name: str, server_point: str) -> dict:
        """What a session's engine and client read: its model (and draft), dataset, eval task."""
        config, exp, knobs = self.config, self.experiments[name], self.knobs(name, server_point)
        inputs = {"model": dummy_weights.model_dir(config, ex.point_model(exp, knobs))}
        for draft in dummy_weights.draft_models(config, knobs):
            inputs["draft_model"] = dummy_weights.model_dir(config, draft)
        dataset = self.dataset(exp)
        if workloads.has_file(config["datasets"][dataset]):
            inputs["dataset"] = f"{config['paths']['datasets']}/{dataset}.json"
        if "generated_task" in exp.get("eval", {}):
            inputs["eval_tasks"] = f"{config['paths']['datasets']}/lm_eval/{exp['eval']['generated_task']['name']}"
        return inputs

    def run_inputs(self) -> list[str]:
        """Every model, dataset and eval task a session of the run's experiments reads."""
        return sorted({f for name in ex.enabled_experiments(self.config) for sp in self.server_points[name]
                       for f in self.files(name, sp).values()})

    def guest_files(self, name: str, server_point: str) -> dict:
        """A guest session's own inputs besides the model (which it shares with its host)."""
        inputs = self.files(name, server_point)
        return {"dataset": inputs.get("dataset"), "eval_tasks": inputs.get("eval_tasks")}

    def client_points(self, name: str) -> dict | None:
        """{server point: the client points its session measures} of an experiment (a
        search's sessions choose their own: None)."""
        exp = self.experiments[name]
        if exp.get("search"):
            return None
        data = self.config["datasets"][self.dataset(exp)]
        return {sp: [workloads.with_workload(data, exp["engine"], p)
                     for p in dummy_weights.client_points(self.config, ex.session_points(exp, knobs))]
                for sp, knobs in self.server_points[name].items()}

    def params(self, name: str, server_point: str) -> dict:
        """Everything that defines one session's measurements."""
        config, exp = self.config, self.experiments[name]
        knobs = self.knobs(name, server_point)
        engine = config["engines"][exp["engine"]]
        model, dataset = ex.point_model(exp, knobs), self.dataset(exp)
        return {
            "engine": exp["engine"],
            "kind": exp["kind"],
            "tool": exp.get("tool"),
            "model_identity": cross_checks.model_identity(config, model),
            "dataset_identity": cross_checks.dataset_identity(config, dataset),
            "dataset_name": workloads.dataset_name(config["datasets"][dataset], exp["engine"]),
            "server_knobs": dummy_weights.served_knobs(config, model, ex.engine_flags(knobs)),
            # a workload kind's knobs (multi-turn, shared prefix, trace) in each load point
            "client_points": [workloads.with_workload(config["datasets"][dataset], exp["engine"], p) for p in
                              dummy_weights.client_points(config, ex.session_points(exp, knobs))],
            "startup_timeout_s": engine["startup_timeout_s"],
            "env": {**engine["env"], **exp.get("server", {}).get("env", {}), **ex.point_env(knobs)},
            # what of the environment defines the measurement (engine env: machine settings)
            "identity_env": {**exp.get("server", {}).get("env", {}), **ex.point_env(knobs)},
            "topology": exp.get("topology"),
            "monitors": cross_checks.active_monitors(config, exp),
            # how its points are measured: the experiment's setting, else the run's
            # (a named configuration may set its own record_conditions: the record's overhead)
            "measurement": {**{k: exp.get(k, config.get(k)) for k in measurement.KEYS if k in exp or k in config},
                            **({ex.RECORD_KNOB: knobs[ex.RECORD_KNOB]} if ex.RECORD_KNOB in knobs else {})},
            "load_search": ({**exp["search"]["load"], "slo": exp["search"]["slo"]} if exp.get("search") else None),
            # measured in interleaved rounds with the experiment's other configurations (servelab/serve/rounds.py)
            **({"rounds": {**exp["rounds"], "configurations": list(self.server_points[name])}}
               if exp.get("rounds") else {}),
        }

    def session_params(self, name: str, server_point: str) -> dict:
        """A session's params; one that hosts other experiments' sessions on its engine,
        theirs too (`guests`)."""
        params = self.params(name, server_point)
        if guests := self.guests_of((name, server_point)):
            params["guests"] = [{"experiment": g, "server_point": sp, "params": self.params(g, sp),
                                 **self.guest_files(g, sp)} for g, sp in guests]
        if members := self.round_members((name, server_point)):
            params["round_members"] = [{"server_point": sp, "params": self.params(name, sp),
                                        "model": self.files(name, sp)["model"], **self.guest_files(name, sp)}
                                       for sp in members]
        return params

    def round_host(self, session: Session) -> Session | None:
        """The session whose job measures `session`'s points in interleaved rounds (its
        experiment's first configuration), where that is another session."""
        name, server_point = session
        if not self.experiments[name].get("rounds"):
            return None
        first = next(iter(self.server_points[name]))
        return None if server_point == first else (name, first)

    def round_members(self, session: Session) -> list[str]:
        """The other configurations a rounds host measures (none for any other session)."""
        name, server_point = session
        if not self.experiments[name].get("rounds") or server_point != next(iter(self.server_points[name])):
            return []
        return [sp for sp in self.server_points[name] if sp != server_point]

    def round_files(self, session: Session) -> list[str]:
        """Every file the other configurations of a rounds host read (its job starts their servers)."""
        return sorted({f for sp in self.round_members(session) for f in self.files(session[0], sp).values()})

    def sharing_sessions(self) -> dict[Session, Session]:
        """{guest session: the session whose engine it shares} (servelab/config/engine_groups.py),
        over the enabled experiments in run order; {} unless `share_engines` is set."""
        if not self.config.get("share_engines"):
            return {}
        return engine_groups.hosts({(name, sp): self.params(name, sp) for name in ex.enabled_experiments(self.config)
                                    for sp in self.server_points[name]})

    def guests_of(self, session: Session) -> list[Session]:
        """The sessions that run on `session`'s engine, in run order."""
        return [guest for guest, host in self.hosts.items() if host == session]

    def gpus(self, name: str, server_point: str) -> int:
        """GPUs a server point needs (0 on the CPU default)."""
        if self.config["device"] == "cpu":
            return 0
        return topology_gpus(self.knobs(name, server_point), self.experiments[name].get("topology"))

    def priority(self, name: str, server_point: str) -> int:
        """Wider sessions first (the square: one TP 4 session outranks four TP 1 ones in the
        scheduler's sum), then the longest: a search's (each round waits for the last one's
        session: a chain), static batching's (one batch at a time: 311 s on an H100, the
        longest one-GPU session), then those with more points; 0 on the CPU."""
        gpus = self.gpus(name, server_point)
        if not gpus:
            return 0
        exp = self.experiments[name]
        if exp.get("search") or exp.get("tool") == "static_batch":
            return 100 * gpus ** 2 + 99
        points = sum(len(self.client_points(g)[sp] or []) if not self.experiments[g].get("search") else 4
                     for g, sp in [(name, server_point), *self.guests_of((name, server_point))])
        return 100 * gpus ** 2 + min(98, points)

    def runtime(self, name: str, server_point: str) -> int:
        """Its own session's minutes, and those of the sessions it hosts (their points run in
        its job: a cluster would otherwise end the host's job before its guests' points)."""
        session = (name, server_point)
        return sum(SESSION_RUNTIME_MIN[self.experiments[g]["kind"]] for g, _ in [session, *self.guests_of(session)]) \
            * (1 + len(self.round_members(session)))
