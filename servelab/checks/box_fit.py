"""Run what this box can (`run_what_fits: true`): of the experiments in `run` (else all),
leave out each part the box cannot run, with one line saying why, instead of a failed job
or a run list written by hand:
- a server point that needs more GPUs than the box has ("week13 [tensor_parallel_size=4]:
  needs 4 GPUs, 2 here"), or more memory than its GPU holds (the capacity plan's reason);
- an experiment whose engine or a package it needs is not importable where its processes
  will import it (`engines.<name>.env`), with the command that installs it; a section an
  experiment can run without (eval) is switched off instead, and a named configuration
  that alone needs the package is left out alone;
- an experiment whose profiler (nsys, ncu) is not on PATH.
What is left out is removed from the config before the DAG is built (points through
`server.leave_out`; a figure that joins a left-out experiment draws without it).

The main Snakemake process decides once and hands its decision to every job through the
environment (`DECISION_ENV`): a job on a SLURM node sees other GPUs and must not decide again.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field

from servelab.checks import preflight
from servelab.config.experiments import LEAVE_OUT, enabled_experiments, server_points
from servelab.engines import environment
from servelab.serve.topology import topology_gpus

DECISION_ENV = "SERVELAB_LEFT_OUT"


@dataclass
class Box:
    """What the experiments are fitted to."""
    gpus: int                          # GPUs here (or per node: `gpus_here`)
    gpu_name: str | None = None        # as nvidia-smi names it: its memory plans each point
    gpu_memory_gib: float | None = None


@dataclass
class Decision:
    experiments: dict[str, str] = field(default_factory=dict)            # name: why left out
    points: dict[str, dict[str, str]] = field(default_factory=dict)      # name: {server point: why}
    sections: dict[str, dict[str, str]] = field(default_factory=dict)    # name: {section: why}
    box: str = ""                                                         # what it was fitted to

    def lines(self) -> list[str]:
        out = [f"{name}: {why}" for name, why in self.experiments.items()]
        out += [f"{name} [{sp}]: {why}" for name, points in self.points.items() for sp, why in points.items()]
        out += [f"{name}.{section} off: {why}" for name, sections in self.sections.items()
                for section, why in sections.items()]
        return out

    def to_json(self) -> str:
        return json.dumps({"experiments": self.experiments, "points": self.points, "sections": self.sections,
                           "box": self.box})

    @classmethod
    def from_json(cls, text: str) -> "Decision":
        return cls(**json.loads(text))


def this_box(config: dict) -> Box:
    """The GPUs of this machine (nvidia-smi, or CUDA_VISIBLE_DEVICES), or `gpus_here` where
    the config gives it (a cluster's nodes, seen from a login node without GPUs)."""
    from servelab import machine
    from servelab.fetch import capacity

    listed = machine.visible_gpus()
    name = config.get("gpu_here") or (listed[0][0] if listed else None)
    gib = None
    if name:
        mib = listed[0][1] if listed and not config.get("gpu_here") else capacity.gpu_memory_mib(name)
        gib = mib / 1024 if mib else None
    count = config.get("gpus_here")
    if count is None:
        count = len(machine.machine_gpus(dict(os.environ)))
    return Box(gpus=int(count), gpu_name=name, gpu_memory_gib=gib)


def gpu_reason(need: int, box: Box) -> str | None:
    if need <= box.gpus:
        return None
    if box.gpus == 0:
        return f"needs {need} GPU(s), none here (on a cluster give the GPUs of a node: --config gpus_here=N)"
    return f"needs {need} GPUs, {box.gpus} here"


def decide(config: dict, box: Box, has=environment.importable, which=shutil.which) -> Decision:
    """What of the enabled experiments this box leaves out, and why."""
    from servelab.fetch.capacity import point_plan

    gpu = config.get("device", "gpu") == "gpu"
    decision = Decision(box=(f"{box.gpus} GPU(s)" + (f" ({box.gpu_name})" if box.gpu_name else "")) if gpu else "CPU")
    for name in enabled_experiments(config):
        exp = config["experiments"][name]
        env = preflight.engine_env(config, exp)
        lacking = [(need, named) for need, named in preflight.needs(exp) if not has(need.module, env)]
        whole = [need for need, named in lacking if named is None and need.section is None]
        if whole:
            decision.experiments[name] = "needs " + "; ".join(f"{n.module} ({n.install})" for n in dict.fromkeys(whole))
            continue
        tool = ((exp.get("monitors") or {}).get("wrap") or {}).get("tool")
        if tool and not which(tool):
            decision.experiments[name] = f"needs {tool} (its profiler) on PATH"
            continue
        for need, named in lacking:
            if named is None:
                decision.sections.setdefault(name, {})[need.section] = f"needs {need.module} ({need.install})"
        points = {}
        for sp, knobs in server_points(exp).items():
            why = next((f"needs {n.module} ({n.install})" for n, named in lacking if named == sp), None)
            if why is None and gpu:
                why = gpu_reason(topology_gpus(knobs, exp.get("topology")), box)
            if why is None and gpu and box.gpu_memory_gib:
                plan = point_plan(config, exp, knobs, box.gpu_name, memory_gib=box.gpu_memory_gib)
                why = None if plan is None or plan.fits else f"does not fit one {box.gpu_name}: {plan.why}"
            if why:
                points[sp] = why
        if len(points) == len(server_points(exp)):
            reasons = list(dict.fromkeys(points.values()))
            decision.experiments[name] = reasons[0] if len(reasons) == 1 else "; ".join(
                f"[{sp}] {why}" for sp, why in points.items())
        elif points:
            decision.points[name] = points
    return decision


def apply(config: dict, decision: Decision) -> None:
    """Remove what the decision leaves out from the config, in place."""
    from servelab.checks.cross_checks import drop_eval_figures

    experiments = config["experiments"]
    kept = [n for n in enabled_experiments(config) if n not in decision.experiments]
    if not kept:   # (an empty `run` means every experiment)
        raise ValueError("run_what_fits: this box runs none of the experiments:\n  " + "\n  ".join(decision.lines()))
    config["run"] = kept
    for name, points in decision.points.items():
        server = experiments[name].setdefault("server", {})
        server[LEAVE_OUT] = sorted(set(server.get(LEAVE_OUT) or []) | set(points))
    for name, sections in decision.sections.items():
        for section in sections:
            experiments[name].pop(section, None)
            if section == "eval":
                drop_eval_figures(name, experiments[name])
    for name in kept:
        for spec in (experiments[name].get("figures") or {}).values():
            if spec and spec.get("also_from"):
                spec["also_from"] = [o for o in spec["also_from"] if o not in decision.experiments]


DRY_RUN_FLAGS = {"-n", "--dry-run", "--dryrun", "--just-print"}


def dry_run(argv: list[str]) -> bool:
    """Snakemake was asked for a dry run (-n, also inside a cluster of short flags: -np).
    Read from the command line: the workflow knows it only after the Snakefile is parsed."""
    return any(a in DRY_RUN_FLAGS or (a[:1] == "-" and a[1:2] != "-" and a[1:].isalpha() and "n" in a[1:])
               for a in argv[1:])


def fit(config: dict, main_process: bool, box: Box | None = None, *, preview: bool = False,
        **probes) -> Decision | None:
    """Where `run_what_fits` is set: decide (the main process) or take the main process's
    decision (a job), apply it to `config`, and return it; None where it is not set. A
    preview (a dry run) decides but keeps the whole config: a laptop or a login node with no
    GPU previews the GPU course's whole DAG, and the lines say what this box would leave out."""
    if not config.get("run_what_fits"):
        return None
    if not main_process and os.environ.get(DECISION_ENV):
        decision = Decision.from_json(os.environ[DECISION_ENV])
    else:
        decision = decide(config, box or this_box(config), **probes)
        os.environ[DECISION_ENV] = decision.to_json()
    if not preview:
        apply(config, decision)
    return decision


def summary(config: dict, decision: Decision, preview: bool = False) -> list[str]:
    """What the run keeps and, a line each, what it leaves out (config already fitted); in a
    preview, the whole config's DAG and what a run on this box would leave out."""
    kept = enabled_experiments(config)
    sessions = sum(len(server_points(config["experiments"][n])) for n in kept)
    left = decision.lines()
    if preview:
        return [f"dry run: the whole DAG, {len(kept)} experiment(s), {sessions} server point(s); a run on "
                f"{decision.box} would leave out {len(left)}:", *(f"  {line}" for line in left)]
    return [f"on {decision.box}: runs {len(kept)} experiment(s), {sessions} server point(s); leaves out {len(left)}:",
            *(f"  {line}" for line in left)]


def profile_misfits(config: dict, gpu_model: str | None) -> list[str]:
    """A cluster's preview (a dry run whose profile names the GPU jobs' `gpu_model`, with
    `run_what_fits` off): each server point that will not fit one such GPU, and the setting
    that leaves them out. The number of GPUs a node has is the cluster's: not checked here."""
    from servelab.fetch.capacity import gpu_memory_mib, point_plan

    named = "gpu_here" if config.get("gpu_here") else "the profile's gpu_model"
    gpu_model = config.get("gpu_here") or gpu_model   # the card named exactly, over the profile's gres type
    if not gpu_model or config.get("device", "gpu") != "gpu" or config.get("run_what_fits"):
        return []
    mib = gpu_memory_mib(gpu_model)
    if mib is None:
        return [f"{named} {gpu_model!r} is not in resources/gpus.yaml: no point was planned against "
                f"it (add its memory_mib there, or run `servelab plan --gpu NAME`)"]
    gib = mib / 1024
    misfits = []
    for name in enabled_experiments(config):
        exp = config["experiments"][name]
        for sp, knobs in server_points(exp).items():
            plan = point_plan(config, exp, knobs, gpu_model, memory_gib=gib)
            if plan is not None and not plan.fits:
                misfits.append(f"  {name} [{sp}]: {plan.why}")
    if not misfits:
        return [f"every server point fits one GPU ({named} {gpu_model!r}, planned as {gib:.1f} GiB)"]
    return [f"{len(misfits)} server point(s) will not fit one GPU ({named} {gpu_model!r}, planned "
            f"as {gib:.1f} GiB by resources/gpus.yaml) and would be submitted to fail:", *misfits,
            f"leave them out: --config run_what_fits=true 'gpu_here={gpu_model}' gpus_here=N (N: the GPUs of a "
            f"node); or name the card exactly as the plan should read it (e.g. gpu_here='NVIDIA A100-SXM4-80GB')"]
