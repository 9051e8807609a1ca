"""A search's rounds as the workflow runs them: plan the next round from the views of
the rounds before it; at the end, the table of every configuration tried and the best.
"""

from __future__ import annotations

from pathlib import Path

from servelab.config.experiments import point_id
from servelab.search import outcome, strategy


def outcomes(search: dict, views: list[str], store_dir: str) -> dict[str, dict]:
    """{server point: its outcome} of the sessions the rounds launched."""
    return {Path(v).stem: outcome.config_outcome(outcome.read_view(v, store_dir), search["load"]["knob"],
                                                 search["slo"]) for v in views}


def budget(search: dict) -> int:
    """Launches a search may spend: its budget, else the size of the space."""
    size = 1
    for values in search["space"].values():
        size *= len(values)
    return min(search.get("budget", {}).get("launches", size), size)


def plan_round(number: int, search: dict, plans: list[dict], views: list[str], store_dir: str) -> dict:
    """Round `number`'s plan: {round, configs, last_reason, best_so_far}."""
    found = outcomes(search, views, store_dir)
    tried = [(config, found[point_id(config)]["goodput_tps"]) for plan in plans for config in plan["configs"]]
    configs, why = strategy.next_round(search.get("strategy", "coordinate"), search["space"], tried,
                                       budget(search) - len(tried), search.get("start"))
    best = strategy.best(tried)
    return {"round": number, "configs": configs, "last_reason": why,
            "best_so_far": None if best is None else {"config": best,
                                                      "goodput_tps": found[point_id(best)]["goodput_tps"]},
            "launches_so_far": len(tried)}


def summary(search: dict, plans: list[dict], views: list[str], store_dir: str) -> tuple[list[dict], dict]:
    """(one row per configuration tried, the best configuration)."""
    found = outcomes(search, views, store_dir)
    rows = outcome.rounds_table(plans, found)
    best = outcome.best_config(rows, found, {"strategy": "coordinate", **search})
    best["stopped"] = plans[-1]["last_reason"] if plans else ""
    return rows, best


def describe_round(experiment: str, plan: dict) -> str:
    so_far = plan["best_so_far"]
    head = f"search {experiment}, round {plan['round']}"
    if so_far:
        head += f" (best so far {point_id(so_far['config'])}: {so_far['goodput_tps']:.1f} tok/s)"
    if not plan["configs"]:
        return f"{head}: done, {plan['last_reason']}"
    return f"{head}: trying {', '.join(point_id(c) for c in plan['configs'])}"


def describe_best(experiment: str, best: dict) -> str:
    if not best["found"]:
        return f"search {experiment}: {best['reason']} ({best['launches']} launches)"
    return (f"search {experiment}: best {best['server_point']}, goodput {best['goodput_tps']:.1f} tok/s at "
            f"{best['max_load']} ({best['launches']} launches in {best['rounds']} rounds; {best['stopped']})\n"
            f"  {best['vllm_serve']}")
