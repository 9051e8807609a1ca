# Config validation and the helper functions every rule file uses.
import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from snakemake.utils import validate

# the servelab package sits beside the Snakefile; scripts and jobs import it from there
sys.path.insert(0, workflow.basedir)
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (workflow.basedir, os.environ.get("PYTHONPATH")) if p
)

from servelab.checks import box_fit, cross_checks
from servelab.fetch import dummy_weights
from servelab.serve import failure
from servelab.config import experiments as ex
from servelab.checks import preflight
from servelab.config import engine_groups
from servelab.serve.topology import topology_gpus
from servelab.run import timing

cross_checks.drop_nulled_sections(config)
validate(config, "../../config/schema.yaml")
cross_checks.check(config)
# run_what_fits: what this box cannot run leaves the config here, one line each
# a dry run with no box given (gpus_here) previews the whole DAG and names what this box
# would leave out; with a box given, it previews that box's run
PREVIEW = box_fit.dry_run(sys.argv) and config.get("gpus_here") is None
LEFT_OUT = box_fit.fit(config, workflow.is_main_process, preview=PREVIEW)
if workflow.is_main_process and LEFT_OUT is not None:
    for line in box_fit.summary(config, LEFT_OUT, PREVIEW):
        print(f"servelab run-what-fits: {line}", file=sys.stderr)
if workflow.is_main_process:
    # before any job: which experiments need a package this environment lacks, and which
    # packages every engine process would compile again (not in jobs)
    enabled = ex.enabled_experiments(config)
    for line in preflight.missing(config, enabled) + preflight.slow_imports(config, enabled):
        print(f"servelab pre-flight: {line}", file=sys.stderr)

EXPERIMENTS = config["experiments"]
MODELS_DIR = config["paths"]["models"]
DATASETS_DIR = config["paths"]["datasets"]
SERVER_POINTS = {name: ex.server_points(exp) for name, exp in EXPERIMENTS.items()}
GENERATED_EVAL_TASKS = cross_checks.generated_eval_tasks(config)


def names_regex(names):
    return "|".join(sorted(names)) or "(?!)"


def kind_of(section, key):
    return [name for name, spec in config[section].items() if key in spec]


def experiments_of_kind(kind):
    return [name for name, exp in EXPERIMENTS.items() if exp["kind"] == kind]


wildcard_constraints:
    experiment=names_regex(EXPERIMENTS),
    server_point=r"[^/]+",
    figure=names_regex({f for exp in EXPERIMENTS.values() for f in exp.get("figures", {})}),


COMPARISON_OUTPUTS = ("comparisons.csv", "comparisons.png")
SEARCH_OUTPUTS = ("search/best.json", "search/tried.csv", "search/goodput.png", "search/frontier.png",
                  "search/pareto.png")


def experiment_outputs(name):
    exp = EXPERIMENTS[name]
    return [f"results/{name}/metrics.csv"] + [
        f"results/{name}/{figure}.png" for figure in exp.get("figures", {})
    ] + [f"results/{name}/{out}" for out in (SEARCH_OUTPUTS if exp.get("search") else ())] + [
        f"results/{name}/{out}" for out in (COMPARISON_OUTPUTS if ex.compares_configurations(exp) else ())]


RUN_STARTED = time.time()


def report_failed_points():
    views = [f"results/{name}/sessions/{sp}.json" for name in EXPERIMENTS for sp in SERVER_POINTS[name]]
    if text := failure.summary(failure.failed_records(views)):
        print(text, file=sys.stderr)
    notes = [json.loads(p.read_text()) for p in Path("results").glob(f"*/store/sessions/*/{failure.TRANSIENT_NOTE}")
             if p.stat().st_mtime >= RUN_STARTED]
    if text := failure.transient_summary(notes):
        print(text, file=sys.stderr)


def report_timing():
    """Where the sessions of this run spent their time (servelab/run/timing.py)."""
    sessions = timing.load(timing.this_runs(Path("results"), RUN_STARTED))
    if text := timing.summary(sessions, run_wall_s=time.time() - RUN_STARTED):
        print(text, file=sys.stderr)


def default_targets():
    return [out for name in ex.enabled_experiments(config) for out in experiment_outputs(name)]


def experiment_views(name):
    """The session views of an experiment: every server point's, or those its search
    launched (known round by round: servelab/search, workflow/rules/search.smk)."""
    points = SERVER_POINTS[name]
    if EXPERIMENTS[name].get("search"):
        launched = {sp for plan in search_rounds(name) for sp in plan_points(plan)}
        points = [sp for sp in points if sp in launched]   # in the space's order, as a grid's
    return [f"results/{name}/sessions/{point}.json" for point in points]


def session_views(wildcards):
    return experiment_views(wildcards.experiment)


def configured_points(wildcards):
    """{server point: the client points its session measures} of an experiment (a
    search's sessions choose their own: None)."""
    exp = EXPERIMENTS[wildcards.experiment]
    if exp.get("search"):
        return None
    return {sp: dummy_weights.client_points(config, ex.session_points(exp, knobs))
            for sp, knobs in SERVER_POINTS[wildcards.experiment].items()}


def server_knobs(wildcards):
    points = SERVER_POINTS[wildcards.experiment]
    if wildcards.server_point not in points:
        raise ValueError(
            f"{wildcards.experiment} has no server point {wildcards.server_point!r}; "
            f"known: {sorted(points)}"
        )
    return points[wildcards.server_point]


def experiment_dataset(exp):
    """The experiment's workload (in a dummy-weights check, the one standing in for it)."""
    return dummy_weights.dataset(config, exp["dataset"])


# On a GPU box checked with dummy weights, every session waits until every model and dataset
# of the run is made (seconds): the scheduler's first choice is then among all sessions, and
# the widest (highest priority) takes the empty box. Sessions made ready one model at a time
# let a Mixtral's TP 2 pair and a P/D pair take the units a TP 4 session needed, which then
# ran last, after the others drained (4x H100, 2026-11-27). ancient(): a marker remade
# for a new model reruns no session.
RUN_INPUTS_MARKER = f"{MODELS_DIR}/.run-inputs-made"


def sessions_start_together():
    return config["device"] != "cpu" and bool(config.get("dummy_weights"))


def run_inputs(wildcards=None):
    """Every model, dataset and eval task a session of the run's experiments reads."""
    return sorted({f for name in ex.enabled_experiments(config) for sp in SERVER_POINTS[name]
                   for f in session_files(SimpleNamespace(experiment=name, server_point=sp)).values()})


def start_marker():
    return {"run_inputs": ancient(RUN_INPUTS_MARKER)} if sessions_start_together() else {}


def session_files(wildcards):
    """What a session's engine and client read: its model (and draft), dataset, eval task."""
    exp = EXPERIMENTS[wildcards.experiment]
    knobs = server_knobs(wildcards)
    inputs = {"model": dummy_weights.model_dir(config, ex.point_model(exp, knobs))}
    for draft in dummy_weights.draft_models(config, knobs):
        inputs["draft_model"] = dummy_weights.model_dir(config, draft)
    if "builtin" not in config["datasets"][experiment_dataset(exp)]:
        inputs["dataset"] = f"{DATASETS_DIR}/{experiment_dataset(exp)}.json"
    if "generated_task" in exp.get("eval", {}):
        inputs["eval_tasks"] = f"{DATASETS_DIR}/lm_eval/{exp['eval']['generated_task']['name']}"
    return inputs


def session_inputs(wildcards):
    inputs = {**session_files(wildcards), **start_marker(), **jit_prebuilt(wildcards)}
    session = (wildcards.experiment, wildcards.server_point)
    if session in ENGINE_HOSTS:
        # after its host, whose job measures its points on the same engine: it then finds
        # nothing to measure. Not ancient(): Snakemake would then skip the guest's own
        # params check whenever its host reruns (a guest's change reruns both).
        inputs["engine_host"] = "results/{}/sessions/{}.json".format(*ENGINE_HOSTS[session])
    inputs["guest_files"] = [f for g in guests_of(session) for f in guest_files(*g).values() if f]
    return inputs


MEASUREMENT_KEYS = ("repeats", "warmup_prompts", "reset_prefix_cache", "drift_check")


def session_params(wildcards):
    """Everything that defines the session's measurements (a change reruns it); a session
    that hosts other experiments' sessions on its engine, theirs too (`guests`)."""
    params = params_of(wildcards.experiment, wildcards.server_point)
    guests = guests_of((wildcards.experiment, wildcards.server_point))
    if guests:
        params["guests"] = [{"experiment": name, "server_point": sp, "params": params_of(name, sp),
                             **guest_files(name, sp)} for name, sp in guests]
    return params


def params_of(name, server_point):
    exp = EXPERIMENTS[name]
    knobs = server_knobs(SimpleNamespace(experiment=name, server_point=server_point))
    engine = config["engines"][exp["engine"]]
    model, dataset = ex.point_model(exp, knobs), experiment_dataset(exp)
    return {
        "engine": exp["engine"],
        "kind": exp["kind"],
        "tool": exp.get("tool"),
        "model_identity": cross_checks.model_identity(config, model),
        "dataset_identity": cross_checks.dataset_identity(config, dataset),
        "dataset_name": config["datasets"][dataset].get("builtin", "sharegpt"),
        "server_knobs": dummy_weights.served_knobs(config, model, ex.engine_flags(knobs)),
        "client_points": dummy_weights.client_points(config, ex.session_points(exp, knobs)),
        "startup_timeout_s": engine["startup_timeout_s"],
        "env": {**engine["env"], **exp.get("server", {}).get("env", {}), **ex.point_env(knobs)},
        # what of the environment defines the measurement (engine env: machine settings)
        "identity_env": {**exp.get("server", {}).get("env", {}), **ex.point_env(knobs)},
        "topology": exp.get("topology"),
        "monitors": cross_checks.active_monitors(config, exp),
        # how its points are measured: the experiment's setting, else the run's
        "measurement": {k: exp.get(k, config[k]) for k in MEASUREMENT_KEYS},
        "load_search": ({**exp["search"]["load"], "slo": exp["search"]["slo"]} if exp.get("search") else None),
    }


def sharing_sessions():
    """{guest session: the session whose engine it shares} (servelab/config/engine_groups.py),
    over the enabled experiments in run order; {} unless `share_engines` is set."""
    if not config.get("share_engines"):
        return {}
    return engine_groups.hosts({(name, sp): params_of(name, sp) for name in ex.enabled_experiments(config)
                                for sp in SERVER_POINTS[name]})


def guests_of(session):
    """The sessions that run on `session`'s engine, in run order."""
    return [guest for guest, host in ENGINE_HOSTS.items() if host == session]


def guest_files(name, server_point):
    """A guest session's own inputs besides the model (which it shares with its host)."""
    inputs = session_files(SimpleNamespace(experiment=name, server_point=server_point))
    return {"dataset": inputs.get("dataset"), "eval_tasks": inputs.get("eval_tasks")}


def retry_failed_points(wildcards):
    """True for a session whose view holds failed points when `retry_failed` is set:
    its params change, so Snakemake reruns it (and only it)."""
    view = f"results/{wildcards.experiment}/sessions/{wildcards.server_point}.json"
    return bool(config["retry_failed"] and failure.failed_records([view]))


def session_conda_env(wildcards):
    """The engine's environment (HF transformers runs in vLLM's: same torch)."""
    engine = EXPERIMENTS[wildcards.experiment]["engine"]
    name = "sglang" if engine == "sglang" else "vllm"
    return os.path.join(workflow.basedir, "envs", f"{name}.yaml")


def gpus_for(wildcards):
    """GPUs a server point needs (0 on the CPU default)."""
    if config["device"] == "cpu":
        return 0
    return topology_gpus(server_knobs(wildcards), EXPERIMENTS[wildcards.experiment].get("topology"))


def session_priority(wildcards):
    """Wider sessions first (the square: one TP 4 session outranks four TP 1 ones in the
    scheduler's sum), then the longest: a search's (each round waits for the last one's
    session: a chain), static batching's (one batch at a time: 311 s on an H100, the
    longest one-GPU session), then those with more points; 0 on the CPU."""
    gpus = gpus_for(wildcards)
    if not gpus:
        return 0
    session = (wildcards.experiment, wildcards.server_point)
    exp = EXPERIMENTS[wildcards.experiment]
    if exp.get("search") or exp.get("tool") == "static_batch":
        return 100 * gpus ** 2 + 99
    points = sum(len(configured_points(SimpleNamespace(experiment=name))[sp] or [])
                 if not EXPERIMENTS[name].get("search") else 4 for name, sp in [session, *guests_of(session)])
    return 100 * gpus ** 2 + min(98, points)


# minutes a session job may take (a cluster's time limit; the profile may override):
# a server's model load + CUDA graph capture + the whole load sweep, or offline
# benchmarks that each start an engine
SESSION_RUNTIME_MIN = {"serve": 240, "offline": 120}


def session_runtime(wildcards):
    """Its own session's minutes, and those of the sessions it hosts (their points run in
    its job: a cluster would otherwise end the host's job before its guests' points)."""
    session = (wildcards.experiment, wildcards.server_point)
    return sum(SESSION_RUNTIME_MIN[EXPERIMENTS[name]["kind"]] for name, _ in [session, *guests_of(session)])


def model_shape(wildcards):
    return config["models"][wildcards.model]["shape"]


def tiny_recipe(wildcards):
    return config["models"][wildcards.model]["tiny"]


def hub_model(wildcards):
    return config["models"][wildcards.model]


def dataset_spec(wildcards):
    return config["datasets"][wildcards.dataset]


def figure_tables(wildcards):
    """The experiment's metrics table, then those of the experiments the figure joins."""
    spec = figure_spec(wildcards)
    return [f"results/{name}/metrics.csv" for name in [wildcards.experiment, *spec.get("also_from", [])]]


def figure_spec(wildcards):
    return EXPERIMENTS[wildcards.experiment]["figures"][wildcards.figure]


# after every function it calls is defined
ENGINE_HOSTS = sharing_sessions()
if workflow.is_main_process and ENGINE_HOSTS:
    sessions = sum(len(SERVER_POINTS[name]) for name in ex.enabled_experiments(config))
    print(f"servelab engines shared: {engine_groups.summary(ENGINE_HOSTS, sessions)}", file=sys.stderr)
