# Config validation and the helper functions every rule file uses.
import json
import os
import sys
import time
from pathlib import Path

from snakemake.utils import validate

# the servelab package sits beside the Snakefile; scripts and jobs import it from there
sys.path.insert(0, workflow.basedir)
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (workflow.basedir, os.environ.get("PYTHONPATH")) if p
)

from servelab.checks import box_fit, cross_checks, session_plan
from servelab.serve import failure
from servelab.config import experiments as ex
from servelab.checks import preflight
from servelab.config import engine_groups
from servelab.config import schema_errors, workloads
from servelab.run import timing
from servelab.engines import zygote

def profile_gpu_model(workflow):
    """The GPU jobs' `gpu_model` as the profile sets it (profiles/slurm: set-resources.session), if any."""
    settings = workflow.resource_settings
    for resources in (settings.overwrite_resources.get("session"), settings.default_resources):
        value = None
        try:
            value = resources.get("gpu_model") if hasattr(resources, "get") else None
        except (KeyError, TypeError):
            pass
        value = getattr(value, "raw", value)   # as written (a Resource's value is evaluated only in a rule)
        if isinstance(value, str) and value:
            return value.strip("'\"")
    return None


cross_checks.drop_nulled_sections(config)
workloads.rooted_traces(config, Path(workflow.main_snakefile).parent)
# every schema error a line: its key path, what is allowed, the nearest names (Snakemake's
# own message stops at the first and adds the whole schema)
if CONFIG_ERRORS := schema_errors.problems(config):
    raise cross_checks.ConfigError("\n".join(["config/schema.yaml refuses the config:", *CONFIG_ERRORS]))
validate(config, "../../config/schema.yaml")   # fills the schema's defaults
cross_checks.check(config)
# run_what_fits: what this box cannot run leaves the config here, one line each
# a dry run with no box given (gpus_here) previews the whole DAG and names what this box
# would leave out; with a box given, it previews that box's run
PREVIEW = box_fit.dry_run(sys.argv) and config.get("gpus_here") is None
LEFT_OUT = box_fit.fit(config, workflow.is_main_process, preview=PREVIEW)
if workflow.is_main_process and LEFT_OUT is not None:
    for line in box_fit.summary(config, LEFT_OUT, PREVIEW):
        print(f"servelab run-what-fits: {line}", file=sys.stderr)
if workflow.is_main_process and PREVIEW and LEFT_OUT is None:
    # a cluster's preview: what will not fit the profile's GPU model, and how to leave it out
    for line in box_fit.profile_misfits(config, profile_gpu_model(workflow)):
        print(f"servelab preview: {line}", file=sys.stderr)
if workflow.is_main_process:
    # before any job: which experiments need a package this environment lacks, and which
    # packages every engine process would compile again (not in jobs)
    enabled = ex.enabled_experiments(config)
    for line in preflight.missing(config, enabled) + preflight.slow_imports(config, enabled):
        print(f"servelab pre-flight: {line}", file=sys.stderr)

EXPERIMENTS = config["experiments"]
MODELS_DIR = config["paths"]["models"]
DATASETS_DIR = config["paths"]["datasets"]
# each session's params, files, engine sharing, GPUs, priority and minutes (servelab/checks/session_plan.py)
PLAN = session_plan.SessionPlan(config)
SERVER_POINTS = PLAN.server_points
ENGINE_HOSTS = PLAN.hosts
if workflow.is_main_process and ENGINE_HOSTS:
    sessions = sum(len(SERVER_POINTS[name]) for name in ex.enabled_experiments(config))
    print(f"servelab engines shared: {engine_groups.summary(ENGINE_HOSTS, sessions)}", file=sys.stderr)
GENERATED_EVAL_TASKS = cross_checks.generated_eval_tasks(config)


def names_regex(names):
    return "|".join(sorted(names)) or "(?!)"


def kind_of(section, key):
    return [name for name, spec in config[section].items() if key in spec]


wildcard_constraints:
    experiment=names_regex(EXPERIMENTS),
    server_point=r"[^/]+",
    figure=names_regex({f for exp in EXPERIMENTS.values() for f in exp.get("figures", {})}),


COMPARISON_OUTPUTS = ("comparisons.csv", "comparisons.png")
TURNS_OUTPUTS = ("turns.csv", "turns.png")
SEARCH_OUTPUTS = ("search/best.json", "search/tried.csv", "search/goodput.png", "search/frontier.png",
                  "search/pareto.png")


def experiment_outputs(name):
    exp = EXPERIMENTS[name]
    return [f"results/{name}/metrics.csv"] + [
        f"results/{name}/{figure}.png" for figure in exp.get("figures", {})
    ] + [f"results/{name}/{out}" for out in (SEARCH_OUTPUTS if exp.get("search") else ())] + [
        f"results/{name}/{out}" for out in (COMPARISON_OUTPUTS if ex.compares_configurations(exp) else ())] + [
        # cache reuse by turn (workflow/rules/workloads.smk)
        f"results/{name}/{out}" for out in (TURNS_OUTPUTS if workloads.per_turn(config["datasets"][exp["dataset"]]) else ())]


RUN_STARTED = time.time()


def report_failed_points():
    views = [f"results/{name}/sessions/{sp}.json" for name in EXPERIMENTS for sp in SERVER_POINTS[name]]
    if text := failure.summary(failure.failed_records(views)):
        print(text, file=sys.stderr)
    notes = [json.loads(p.read_text()) for p in Path("results").glob(f"*/store/sessions/*/{failure.TRANSIENT_NOTE}")
             if p.stat().st_mtime >= RUN_STARTED]
    if text := failure.transient_summary(notes):
        print(text, file=sys.stderr)


def stop_zygotes():
    """The CPU servers' zygotes this run's sessions started exit with the run, unless
    SERVELAB_ZYGOTE_KEEP=1 keeps them for the next run (servelab/engines/zygote.py)."""
    zygote.run_ended(Path.cwd())


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
    return PLAN.client_points(wildcards.experiment)


def server_knobs(wildcards):
    return PLAN.knobs(wildcards.experiment, wildcards.server_point)
