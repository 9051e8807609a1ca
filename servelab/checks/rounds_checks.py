"""What an experiment in interleaved rounds may be (servelab/serve/rounds.py), checked with the
config before any job (servelab.checks.cross_checks)."""

from __future__ import annotations

from servelab.config.experiments import RESTART_KNOB, all_client_points, server_points


def problems(config: dict, exp: dict, where: str) -> list[str]:
    """Interleaved rounds (servelab/serve/rounds.py) pair the configurations of a served
    experiment round by round: they need several, and their servers up at once (on a GPU,
    shares of its memory: the rounds' job checks them before any start, rounds.gpu_shares)."""
    design = exp.get("rounds")
    if not design:
        return []
    where = f"{where}.rounds"
    points = server_points(exp)
    problems = []
    if len(points) < 2:
        problems.append(f"{where}: rounds compare configurations; this experiment has one (add server.configs "
                        f"or a server.grid)")
    if exp.get("kind", "serve") != "serve" or exp.get("search") or exp.get("topology"):
        problems.append(f"{where}: rounds run served experiments without a search or a topology")
    if exp.get("repeat_until") or config.get("repeat_until") and "repeat_until" not in exp:
        problems.append(f"{where}: rounds decide their own count (least, most, within); leave repeat_until out")
    if design.get("most", 6) < design.get("least", 3):
        problems.append(f"{where}.most: {design['most']} is below least ({design.get('least', 3)})")
    if any(RESTART_KNOB in p for p in all_client_points(exp)):
        problems.append(f"{where}: a restart sweep measures one server cold and warm; it cannot take turns")
    return problems
