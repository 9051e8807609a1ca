"""`servelab plan`: before any start, does every server point of a run fit its GPUs? For
each: the weights per GPU, the KV cache's bytes per token, the KV tokens its memory
fraction leaves, how many max_model_len sequences fit (servelab.fetch.capacity).

    servelab plan config/config.yaml config/gpu-check.yaml [--gpu "NVIDIA H100 80GB HBM3"] [--gpus 4]
        [--timings DIR ...] [--within MINUTES]

GPU memory: `--gpu` (a name as nvidia-smi gives it), else nvidia-smi on this machine, else
the SLURM profile's `gpu_model` (`--profile profiles/slurm`); the CPU default
(`device: cpu`) plans against this host's memory. Exit 1 naming each point that cannot fit.
With `--timings` (an earlier run's working copy, or a recording's timing/ folder), also the
least run wall on the box's GPUs (servelab.checks.time_plan); exit 1 where it exceeds
`--within` minutes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from servelab.config.experiments import client_points, enabled_experiments, point_model, server_points
from servelab import machine
from servelab.config import engine_facts as facts
from servelab.fetch import capacity
from servelab.serve.rounds import round_order, shares_problem
from servelab.serve.topology import topology_gpus


def first_order(exp: dict, names) -> list[str]:
    """The order the servers of an experiment in rounds start in: its first round's."""
    return round_order(int((exp.get("rounds") or {}).get("seed", 0)), 0, list(names))


def memory_of(args, config: dict) -> tuple[str, float, str, int | None]:
    """(name, GiB per device, "gpu" or "cpu", GPUs here or None) the plan is made against."""
    if config.get("device") == "cpu":
        return "host memory", machine.host_memory_gib(), "cpu", None
    here = machine.visible_gpus()
    name = args.gpu or (here[0][0] if here else None) or profile_gpu(args.profile)
    if not name:
        raise SystemExit("servelab plan: which GPU? No nvidia-smi here: give --gpu 'NVIDIA H100 80GB HBM3' "
                         "(as nvidia-smi names it) or --profile profiles/slurm (its gpu_model)")
    mib = here[0][1] if here and not args.gpu else capacity.gpu_memory_mib(name)
    if mib is None:
        raise SystemExit(f"servelab plan: GPU {name!r} is not in resources/gpus.yaml; add its memory_mib there")
    return name, mib / 1024, "gpu", args.gpus or (len(here) or None)


def profile_gpu(profile: str | None) -> str | None:
    if not profile:
        return None
    text = yaml.safe_load((Path(profile) / "config.yaml").read_text())
    for block in [text.get("default-resources") or {}, *(text.get("set-resources") or {}).values()]:
        if isinstance(block, dict) and block.get("gpu_model"):
            return str(block["gpu_model"])
    return None


def rounds_problem(exp: dict, up_at_once: dict[str, capacity.PointPlan], gib: float) -> str | None:
    """Why an experiment's servers cannot be up at once on one GPU in rounds (None: they can):
    their shares (the rounds job's own rule, for engines sized by a share), then their memory
    in the first round's start order."""
    shares = [knobs.get("gpu_memory_utilization") for knobs in server_points(exp).values()]
    if not facts.of(exp["engine"]).static_memory_fraction and (why := shares_problem(shares)):
        return why
    if len(up_at_once) > 1 and (why := capacity.together(up_at_once, gib, first_order(exp, up_at_once))):
        return (f"{why}; give each server a smaller share or KV cache, a larger GPU, or measure the "
                f"configurations in sequence (no rounds:)")
    return None


def plan_lines(config: dict, memory: tuple[str, float, str, int | None]) \
        -> tuple[list[dict], list[str], list[tuple[str, bool]]]:
    """(a row per server point, a line per point that cannot fit, a line per experiment in
    rounds with whether its servers fit one GPU together)."""
    name, gib, device, gpus_here = memory
    rows, refused, together = [], [], []
    for exp_name in enabled_experiments(config):
        if exp_name not in config["experiments"]:
            raise SystemExit(f"servelab plan: run names {exp_name!r}, which is not under experiments:")
        exp = config["experiments"][exp_name]
        if not facts.of(exp["engine"]).kv_capacity_sized:
            continue
        up_at_once = {}   # in rounds, every configuration's server is up at once on the job's GPU
        for sp, knobs in server_points(exp).items():
            model = point_model(exp, knobs)
            row = {"experiment": exp_name, "server point": sp, "engine": exp["engine"]}
            plan = capacity.point_plan(config, exp, knobs, name, memory_gib=gib, device=device)
            if plan is None:
                rows.append({**row, "fits": f"not planned: {model} has no shape here (models.{model}.shape, "
                                            f"or fetch it first)"})
                continue
            need = topology_gpus(knobs, exp.get("topology"))   # a P/D pair: both servers' GPUs
            if device == "gpu" and gpus_here and need > gpus_here:
                plan.fits, plan.why = False, f"needs {need} GPUs, {gpus_here} here"
            rows.append({**row, "GPUs": need if device == "gpu" else 0, "weights GiB/GPU": plan.weights_gib,
                         "KV B/token/GPU": plan.kv_bytes_per_token, "KV cache GiB": plan.kv_cache_gib,
                         "KV tokens": f"{plan.kv_cache_tokens:,}",
                         "sequences": f"{plan.sequences} x {plan.max_model_len}",
                         "fits": ("yes" + (f" (warning: {plan.warning})" if plan.warning else "")) if plan.fits
                         else "NO (below)"})
            if not plan.fits:
                refused.append(f"{exp_name} [{sp}]: {plan.why}")
            elif exp.get("rounds") and device == "gpu":
                up_at_once[sp] = plan
        if up_at_once and (why := rounds_problem(exp, up_at_once, gib)):
            together.append((f"{exp_name} in rounds: {why}", False))
        elif up_at_once:
            held = sum(p.held_gib for p in up_at_once.values())
            together.append((f"{exp_name} in rounds: its {len(up_at_once)} servers up at once hold {held:.1f} GiB "
                             f"of {gib:.1f} GiB: fit together; {pass_time(config, exp)}", True))
    return rows, refused, together


def pass_time(config: dict, exp: dict) -> str:
    """What a pass of an experiment in rounds holds the GPU for, beside its servers' starts: each
    round measures every configuration's points once, each sent for its duration and cut
    `grace_s` later, and each server is warmed at its load once."""
    from servelab.config import measurement

    setting = {**measurement.defaults(), **{k: config[k] for k in measurement.KEYS if k in config},
               **{k: exp[k] for k in measurement.KEYS if k in exp}}
    design = exp["rounds"]
    points = [p for knobs in server_points(exp).values() for p in client_points(exp, knobs)]
    if not points or any(p.get("duration_s") is None for p in points):
        return "its points are not sized in time (client duration_s): no pass time told"
    per_round = sum(float(p["duration_s"]) + float(setting["grace_s"] or 0) for p in points)
    warm = len(server_points(exp)) * float(setting["warmup_load_s"] or 0)
    least, most = int(design.get("least", 3)), int(design.get("most", design.get("least", 3)))
    minutes = [(n * per_round + warm) / 60 for n in (least, most)]
    return (f"a round sends {len(points)} points for {per_round:.0f} s in all (duration_s plus grace_s): "
            f"{least} rounds hold the GPU at least {minutes[0]:.1f} minutes, {most} rounds {minutes[1]:.1f} "
            f"(warm-ups included), beside the servers' start")


COLUMNS = ["experiment", "server point", "engine", "GPUs", "weights GiB/GPU", "KV B/token/GPU", "KV cache GiB",
           "KV tokens", "sequences", "fits"]
POINT_WIDTH = 44   # a long server point's name (a speculative config's) is cut to this, its end kept


def table(rows: list[dict]) -> list[str]:
    """The rows as an aligned table: a header, then a line per server point; `sequences`:
    how many max_model_len sequences the KV cache holds."""
    def cell(row, column):
        text = str(row.get(column, "-"))
        if column == "server point" and len(text) > POINT_WIDTH:
            text = "..." + text[-(POINT_WIDTH - 3):]
        return text

    cells = [COLUMNS] + [[cell(r, c) for c in COLUMNS] for r in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS) - 1)]
    return ["  ".join(text.ljust(w) for text, w in zip(line, widths)) + "  " + line[-1] for line in cells]


def main(argv: list[str] | None = None) -> int:
    import argparse

    from servelab.checks.cross_checks import drop_nulled_sections
    from servelab.config.yaml_bounds import read_config_files

    parser = argparse.ArgumentParser(prog="servelab plan", description=__doc__.split("\n\n")[0])
    parser.add_argument("configs", nargs="*", default=["config/config.yaml"], metavar="CONFIG",
                        help="config/config.yaml, then overlays, merged in order (default: config/config.yaml)")
    parser.add_argument("--gpu", help="the GPU's name as nvidia-smi gives it, e.g. 'NVIDIA H100 80GB HBM3'")
    parser.add_argument("--gpus", type=int, help="GPUs on the machine (default: nvidia-smi's count, else no limit)")
    parser.add_argument("--profile", help="a SLURM profile directory whose gpu_model names the GPU")
    parser.add_argument("--timings", nargs="+", metavar="DIR", type=Path,
                        help="earlier runs' session timings (a working copy, or a recording's timing/): "
                             "plan the run's least wall on the box's GPUs")
    parser.add_argument("--within", type=float, metavar="MINUTES",
                        help="with --timings: exit 1 where the run cannot end within this many minutes")
    args = parser.parse_args(argv)
    if args.within is not None and not args.timings:
        parser.error("--within needs --timings (the recorded sessions to plan from)")
    try:
        config = read_config_files(args.configs)
    except ValueError as err:
        raise SystemExit(f"servelab plan: {err}") from err
    drop_nulled_sections(config)
    memory = memory_of(args, config)
    if config.get("run_what_fits"):   # what the run will leave out is no refusal
        from servelab.checks import box_fit

        name, gib, device, gpus = memory
        box = box_fit.Box(gpus=gpus if gpus is not None else 10 ** 6, gpu_name=name if device == "gpu" else None,
                          gpu_memory_gib=gib if device == "gpu" else None)
        decision = box_fit.decide(config, box)
        for line in decision.lines():
            print(f"servelab plan: left out (run_what_fits): {line}")
        try:
            box_fit.apply(config, decision)
        except ValueError as err:   # nothing of the run fits
            print(f"servelab plan: {err}", file=sys.stderr)
            return 1
    rows, refused, together = plan_lines(config, memory)
    print(f"servelab plan: each server point against {memory[0]} "
          + (f"({memory[1]:.1f} GiB a GPU):" if memory[2] == "gpu" else f"({memory[1]:.1f} GiB):"))
    for line in table(rows):
        print(f"  {line}")
    for line in [line for line, fits in together if fits]:
        print(f"servelab plan: {line}")
    print(f"servelab plan: {len(rows) - len(refused)} of {len(rows)} server point(s) fit")
    apart = [line for line, fits in together if not fits]
    for line in refused + apart:
        print(f"servelab plan: cannot fit: {line}", file=sys.stderr)
    late = bool(args.timings) and not time_lines(config, memory, args.timings, args.within)
    return 1 if refused or apart or late else 0


def time_lines(config: dict, memory: tuple[str, float, str, int | None], folders: list[Path],
               within_min: float | None) -> bool:
    """Print the time plan; False where it does not fit `within_min`."""
    from servelab.checks import time_plan

    gpus = 1 if memory[2] == "cpu" else memory[3]
    if not gpus:
        raise SystemExit("servelab plan: --timings plans a number of GPUs: give --gpus N (none counted here)")
    try:
        result = time_plan.plan(config, time_plan.recorded_sessions(time_plan.timing_files(folders)), gpus)
    except (FileNotFoundError, ValueError) as err:
        raise SystemExit(f"servelab plan: {err}")
    for line in result.lines(within_min):
        print(f"servelab plan: {line}")
    return within_min is None or result.fits(within_min)


if __name__ == "__main__":
    sys.exit(main())
