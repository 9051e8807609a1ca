"""A search's rounds as the workflow runs them: plan the next round from the views of
the rounds before it; at the end, the table of every configuration tried and the best.
"""

from __future__ import annotations

from pathlib import Path

from servelab.config.experiments import point_id
from servelab.search import confirm, outcome, strategy


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


def launches_left(search: dict, costs: list[float]) -> tuple[int, str]:
    """(launches the next round may use, why none when none): what is left of the launch
    budget, and of the time budget (`session_s`, server time summed over the launches)
    at the mean cost of the launches so far. The first round has no cost to go by and is
    not cut; a round is never cut short once planned, so a search may end past its time
    budget by the last round's overrun."""
    left, why = budget(search) - len(costs), "the launch budget is spent"
    limit = search.get("budget", {}).get("session_s")
    if limit is None or not costs:
        return left, why
    spent = sum(costs)
    mean = spent / len(costs)
    fits = int(max(limit - spent, 0) // mean) if mean > 0 else left
    if fits < left:
        left, why = fits, (f"the time budget is spent: {spent:.0f} s of {limit:.0f} s used, "
                           f"a launch has taken {mean:.0f} s")
    return left, why


def plan_round(number: int, search: dict, plans: list[dict], views: list[str], *, store_dir: str) -> dict:
    """Round `number`'s plan: {round, configs, last_reason, best_so_far, launches and
    server time so far}."""
    found = outcomes(search, views, store_dir)
    configs_tried = [config for plan in plans for config in plan["configs"]]
    tried = [(config, found[point_id(config)]["goodput_tps"]) for config in configs_tried]
    costs = [found[point_id(config)]["session_s"] for config in configs_tried]
    left, exhausted = launches_left(search, costs)
    configs, why = strategy.next_round(search.get("strategy", "coordinate"), search["space"], tried, left,
                                       start=search.get("start"), exhausted=exhausted)
    best = strategy.best(tried)
    # the last round: the frontier's two configurations are measured again before the summary
    frontier = [] if configs else confirm.frontier(search, tried, found)
    return {"round": number, "configs": configs, "last_reason": why,
            **({"confirm": frontier} if frontier else {}),
            "best_so_far": None if best is None else {"config": best,
                                                      "goodput_tps": found[point_id(best)]["goodput_tps"]},
            "launches_so_far": len(tried), "session_s_so_far": round(sum(costs), 1)}


def summary(search: dict, plans: list[dict], views: list[str], store_dir: str,
            *, confirm_views: list[str] = ()) -> tuple[list[dict], dict]:
    """(one row per configuration tried, the best configuration); `confirm_views`: the
    sessions that measured the frontier again (servelab.search.confirm)."""
    found = outcomes(search, views, store_dir)
    rows = outcome.rounds_table(plans, found)
    decision = None
    if confirm_views and plans and plans[-1].get("confirm"):
        measured = {Path(v).stem: confirm.samples(outcome.read_view(v, store_dir), search["slo"]) for v in confirm_views}
        decision = confirm.decide(plans[-1]["confirm"], measured, float(search.get("tie_within", outcome.TIE_WITHIN)))
    best = outcome.best_config(rows, found, {"strategy": "coordinate", **search}, decision)
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
            f"{best['max_load']} ({best['launches']} launches, {best['session_s']:.0f} s of server time, in "
            f"{best['rounds']} rounds; {best['stopped']})\n"
            + (f"  ties of the highest ({best['highest_goodput']['server_point']}), within {best['tie_within']:.0%}"
               f"{' or not distinguishable over the repeats' if best.get('confirmation') else ''}: "
               f"{', '.join(best['ties'])}; the cheapest wins\n" if len(best.get("ties", [])) > 1 else "")
            + (confirmation_line(best["confirmation"]) if best.get("confirmation") else "")
            + f"  {best['vllm_serve']}")


def confirmation_line(decision: dict) -> str:
    configs = "; ".join(f"{sp} {c['goodput_tps_mean']:.1f} tok/s over {c['repeats']} repeats (SLO met {c['slo_met']})"
                        for sp, c in decision["configs"].items())
    interval = (f", runner-up {decision['diff_pct']:+.1f} % [{decision['ci95_pct'][0]:+.1f}, "
                f"{decision['ci95_pct'][1]:+.1f}]" if "ci95_pct" in decision else "")
    return f"  frontier confirmed: {configs}{interval}: {decision['verdict']}\n"
