# A search (an experiment's `search` section, servelab/search): rounds of server
# configurations, each round chosen from what the rounds before it measured. A round's
# plan is a checkpoint; its configurations are session jobs like any other (run side by
# side on a cluster), each bisecting the load under the SLO; the next round is planned
# once they are in. Reruns replay the stored plans and points: an interrupted search
# resumes at the session it stopped in. Its frontier measured again (search_confirm) and its
# figures (search_figures) are here too: every rule of a search in one file.
import json

from servelab.config.experiments import point_id
from servelab.search import confirm as search_confirm


def plan_points(plan):
    return [point_id(config) for config in plan["configs"]]


def search_rounds(name, upto=None):
    """The plans of an experiment's rounds so far: before round `upto`, or up to the last
    (the round that tries nothing)."""
    plans = []
    while upto is None or len(plans) < upto:
        plan_file = checkpoints.search_round.get(experiment=name, round=str(len(plans))).output[0]
        plans.append(json.loads(Path(plan_file).read_text()))
        if not plans[-1]["configs"]:
            break
    return plans


def search_inputs(name, plans):
    """The plan files of some rounds and the session views they launched."""
    return {"plans": [f"results/{name}/search/round{r}.json" for r in range(len(plans))],
            "views": [f"results/{name}/sessions/{sp}.json" for plan in plans for sp in plan_points(plan)]}


def search_round_inputs(wildcards):
    """What planning a round reads: the rounds before it."""
    return search_inputs(wildcards.experiment, search_rounds(wildcards.experiment, upto=int(wildcards.round)))


def confirm_views(name, plans):
    """The sessions that measure the frontier again (servelab/search/confirm.py): named in
    the last round's plan."""
    return [f"results/{name}/search/confirm/{c['server_point']}.json" for c in plans[-1].get("confirm", [])]


def search_all_inputs(wildcards):
    plans = search_rounds(wildcards.experiment)
    return {**search_inputs(wildcards.experiment, plans), "confirms": confirm_views(wildcards.experiment, plans)}


def search_spec(wildcards):
    return EXPERIMENTS[wildcards.experiment]["search"]


checkpoint search_round:
    input:
        unpack(search_round_inputs),
    output:
        "results/{experiment}/search/round{round}.json",
    wildcard_constraints:
        round=r"\d+",
    params:
        search=search_spec,
        store="results/{experiment}/store",
    log:
        "logs/{experiment}/search_round{round}.log",
    localrule: True
    script:
        "../scripts/search_round.py"


rule search_summary:
    input:
        unpack(search_all_inputs),
    output:
        best="results/{experiment}/search/best.json",
        tried=report("results/{experiment}/search/tried.csv", category="{experiment}"),
    params:
        search=search_spec,
        store="results/{experiment}/store",
    log:
        "logs/{experiment}/search_summary.log",
    localrule: True
    script:
        "../scripts/search_summary.py"


# A search's frontier measured again (servelab/search/confirm.py, planned in search.smk):
# a session of a configuration the search launched, at its goodput load only.
def confirm_params(wildcards):
    """A frontier configuration's session: its goodput load only, `confirm_repeats` times
    (the search's own point is the first repeat, found in the store), no bisection."""
    name, sp = wildcards.experiment, wildcards.server_point
    search = EXPERIMENTS[name]["search"]
    entry = next(c for c in search_rounds(name)[-1]["confirm"] if c["server_point"] == sp)
    params = PLAN.params(name, sp)
    return {**params, "load_search": None,
            "client_points": [{**params["client_points"][0], search["load"]["knob"]: entry["load"]}],
            "measurement": {**params["measurement"], "repeats": search_confirm.repeats(search), "drift_check": False}}


def confirm_inputs(wildcards):
    return {**session_files(wildcards), **start_marker()}


rule search_confirm:
    input:
        unpack(confirm_inputs),
    output:
        "results/{experiment}/search/confirm/{server_point}.json",
    params:
        spec=confirm_params,
        cache=config["paths"]["cache"],
        retry_failed=False,
        jit=jit_in_session,   # as a session's (the round that measured the point built them)
    log:
        "logs/{experiment}/{server_point}.confirm.log",
    resources:
        gpu=gpus_for,
        runtime=session_runtime,
    conda:
        session_conda_env
    script:
        "../scripts/serve_session.py"


rule search_figures:
    input:
        metrics="results/{experiment}/metrics.csv",
        tried="results/{experiment}/search/tried.csv",
        best="results/{experiment}/search/best.json",
    output:
        goodput=report("results/{experiment}/search/goodput.png", caption="../report/search.rst", category="{experiment}"),
        frontier=report("results/{experiment}/search/frontier.png", caption="../report/search.rst", category="{experiment}"),
        pareto=report("results/{experiment}/search/pareto.png", caption="../report/search.rst", category="{experiment}"),
    params:
        search=search_spec,
    log:
        "logs/{experiment}/search_figures.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/plot_search.py"
