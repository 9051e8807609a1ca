# A search (an experiment's `search` section, servelab/search): rounds of server
# configurations, each round chosen from what the rounds before it measured. A round's
# plan is a checkpoint; its configurations are session jobs like any other (run side by
# side on a cluster), each bisecting the load under the SLO; the next round is planned
# once they are in. Reruns replay the stored plans and points: an interrupted search
# resumes at the session it stopped in.
import json

from servelab.config.experiments import point_id


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
