"""Inputs made to hang, exhaust, crash or fool `servelab import`, one per class, written under
a folder: the corpus of tests/export/test_import_hostile.py and of the benchmark
tests/benchmarks/import_hostile.py (which times each in a process of its own).

refused(d) -> {case: (argv after `servelab import`, what the one-line refusal says)}
impossible(d) -> {case: (file, what invalid_reason says)}: imported, never valid
"""
from __future__ import annotations

import gzip
import json
import os
import zlib
from pathlib import Path

import yaml

DATA = Path(__file__).parents[1] / "data"
VLLM_RATE4 = DATA / "vllm_bench_serve_rate4.json"
AIPERF_RATE4 = DATA / "aiperf_profile_export_rate4.json"
BASE_REPORT = DATA / "llmd_corpus/base.yaml"


def copy(data):
    return json.loads(json.dumps(data))


def vllm() -> dict:
    return json.loads(VLLM_RATE4.read_text())


def aiperf() -> dict:
    return json.loads(AIPERF_RATE4.read_text())


def report() -> dict:
    """An llm-d report as servelab exports it: it says of itself that it is valid."""
    r = yaml.safe_load(BASE_REPORT.read_text())
    r["results"]["observability"]["servelab_point"] = {"valid": True, "repeats": 1, "window": "whole run"}
    return r


def aggregate(r: dict) -> dict:
    return r["results"]["request_performance"]["aggregate"]


def edited(make, edit) -> dict:
    data = make()
    edit(data)
    return data


def put(d: Path, name: str, content) -> Path:
    path = d / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content)
    elif name.endswith(".yaml"):
        path.write_text(yaml.safe_dump(content))
    else:
        path.write_text(json.dumps(content))
    return path


def alias_bomb(levels: int = 9, width: int = 9, where: str = "string") -> str:
    """A 'billion laughs': `width`**`levels` values from a few hundred bytes, placed where a
    report has a string (run/uid) or as the whole document."""
    lines = ['a0: &a0 ["lol"]']
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
    body = "\n".join(f"  {line}" for line in lines)
    if where == "string":
        return f"version: 0.2.1\nbombs:\n{body}\nrun:\n  uid: *a{levels}\n  eid: x\n"
    return f"bombs:\n{body}\nall: *a{levels}\n"


def gzip_bomb(path: Path, inflated: int) -> Path:
    """A gzip of `inflated` zero bytes (~1/1000 of that on disk), written in chunks."""
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"\0" * 2**20
    with open(path, "wb") as f:
        for _ in range(inflated // len(chunk)):
            f.write(squeeze.compress(chunk))
        f.write(squeeze.flush())
    return path


def refused(d: Path) -> dict[str, tuple[list[str], str]]:
    d.mkdir(parents=True, exist_ok=True)
    out = str(d / "table.csv")

    def one(name, content, why, *extra):
        return [str(put(d, name, content)), "--out", out, *extra], why

    fifo = d / "pipe.json"
    if not fifo.exists():
        os.mkfifo(fifo)
    sparse = d / "sparse.json"
    with open(sparse, "wb") as f:
        f.truncate(100 * 2**20)   # 100 MiB on paper, no blocks on disk
    loop = d / "loop.json"
    if not loop.is_symlink():
        os.symlink(loop, loop)
    gzip_bomb(d / "bomb.json.gz", 128 * 2**20)
    (d / "results/e/store/k").mkdir(parents=True, exist_ok=True)
    (d / "results/e/metrics.csv").write_text("experiment,server_point,point_key\n")
    good = str(VLLM_RATE4)
    cases = {
        "YAML alias bomb where a string belongs": one("bomb.yaml", alias_bomb(), "expands past"),
        "YAML alias bomb as the document": one("bomb2.yaml", alias_bomb(where="document"), "expands past"),
        "a named pipe": ([str(fifo), "--out", out], "is a named pipe"),
        "a character device": (["/dev/zero", "--out", out], "is a character device"),
        "a file over the cap": ([str(sparse), "--out", out], "over the 32 MiB an import reads"),
        "a file over a lowered cap": ([good, "--out", out, "--max-bytes", "0.001"], "over the 1,048 bytes an import reads"),
        "a gzip bomb": ([str(d / "bomb.json.gz"), "--out", out], "inflates past 32 MiB"),
        "a symlink loop": ([str(loop), "--out", out], "cannot be read"),
        "JSON nested 100,000 deep": one("deep.json", "[" * 100_000 + "]" * 100_000, "nests deeper"),
        "JSON nested 80 deep": one("deep80.json", {"a": json.loads("[" * 80 + "]" * 80)}, "nests deeper"),
        "YAML nested 100,000 deep": one("deep.yaml", "a: " + "[" * 100_000 + "]" * 100_000, "nests deeper"),
        "YAML block nesting 100 deep": one("deep-block.yaml", "".join(f"{'  ' * i}k{i}:\n" for i in range(100))
                                           + "  " * 100 + "leaf: 1\n", "nests deeper"),
        "a count of Infinity": one("inf.json", json.dumps({**vllm(), "completed": float("inf")}),
                                   "completed is inf, not a finite number"),
        "a count of 1e400": one("e400.json", json.dumps(vllm()).replace('"completed": 40,', '"completed": 1e400,'),
                                "completed is inf, not a finite number"),
        "a count of 5000 digits": one("digits.json", json.dumps(vllm()).replace(
            '"completed": 40,', '"completed": ' + "9" * 5000 + ","),
                                      "is not JSON"),
        "a YAML integer of 5000 digits": one("digits.yaml", "version: 0.2.1\nn: " + "9" * 5000 + "\n",
                                             "neither JSON nor YAML"),
        "a NaN latency": one("nan.json", json.dumps({**vllm(), "p99_ttft_ms": float("nan")}),
                             "p99_ttft_ms is nan, not a finite number"),
        "a YAML .nan latency": one("nan.yaml", edited(report, lambda r: aggregate(r)["latency"][
            "time_to_first_token"].update(p90=float("nan"))), "time_to_first_token/p90 is nan"),
        "a -Infinity throughput": one("ninf.json", {**vllm(), "output_throughput": float("-inf")},
                                      "output_throughput is -inf"),
        "an AIPerf statistic of Infinity": one("aiperf-inf.json", edited(aiperf, lambda a: a[
            "request_latency"].update(p99=float("inf"))), "request_latency/p99 is inf"),
        "a numeric string of 1e400": one("str400.yaml", edited(report, lambda r: aggregate(r)["latency"][
            "time_to_first_token"].update(mean="1e400")), "time_to_first_token/mean is '1e400', not a finite"),
        "a TTFT of 1e308 s": one("e308.yaml", edited(report, lambda r: aggregate(r)["latency"][
            "time_to_first_token"].update(mean=1e308)), "ttft_mean_ms comes out as inf"),
        "a negative ISO duration": one("negdur.yaml", edited(report, lambda r: r["run"]["time"].update(
            duration="-PT8.5S")), "'-PT8.5S', not a duration servelab reads"),
        "a duration in years": one("year.yaml", edited(report, lambda r: r["run"]["time"].update(duration="P1Y")),
                                   "'P1Y', not a duration servelab reads"),
        "a duration of words": one("worddur.yaml", edited(report, lambda r: r["run"]["time"].update(
            duration="soon")), "'soon', not a duration"),
        "a Python tag in YAML": one("tag.yaml", "version: !!python/object:os.system {}\n", "neither JSON nor YAML"),
        "an unhashable YAML key": one("key.yaml", "? [a, b]\n: 1\n", "neither JSON nor YAML"),
        "UTF-16 text": one("utf16.json", json.dumps(vllm()).encode("utf-16"), "is not text"),
        "a report of version 9": one("v9.yaml", edited(report, lambda r: r.update(version="9" * 200)), "of version"),
        "a JSON string as the document": one("str.json", '"hello"', "holds a JSON str"),
        "a file given twice": ([good, str(VLLM_RATE4.parent / "." / VLLM_RATE4.name), "--out", out],
                               "is given twice"),
        "--out is a folder": ([good, "--out", str(d)], "is a folder"),
        "--out is .": ([good, "--out", "."], "is a folder"),
        "--out under /proc": ([good, "--out", "/proc/servelab-nowhere/t.csv"], "cannot be written"),
        "--out under a file": ([good, "--out", str(VLLM_RATE4) + "/t.csv"], "cannot be written"),
        "--out is an input": ([str(put(d, "in.json", vllm())), "--out", str(d / "in.json")], "an input of this import"),
        "--out in a store": ([good, "--out", str(d / "results/e/store/k/t.csv")], "which only the workflow writes"),
        "--beside a named pipe": ([good, "--out", out, "--beside", str(fifo)], "is a named pipe"),
        "--beside not a table": ([good, "--out", out, "--beside", str(put(d, "bin.csv", bytes(range(256))))],
                                 "is not a readable table"),
    }
    return cases


def impossible(d: Path) -> dict[str, tuple[Path, str]]:
    """Files whose figures cannot all be true, some saying of themselves they are valid."""
    d.mkdir(parents=True, exist_ok=True)

    def requests(**change):
        return edited(report, lambda r: aggregate(r)["requests"].update(change))

    def latency(field, **change):
        return edited(report, lambda r: aggregate(r)["latency"][field].update(change))

    def zero_duration(r):
        r["run"]["time"]["duration"] = "PT0S"

    return {
        "30 failed of 32, said valid": (put(d, "failed.yaml", requests(total=32, failures=30)), "30 failed requests"),
        "failures above the total": (put(d, "over.yaml", requests(total=32, failures=30, incomplete=20)),
                                     "completed is negative (-18"),
        "incomplete above the total": (put(d, "inc.yaml", requests(total=16, incomplete=40)), "completed is negative"),
        "a negative TTFT": (put(d, "negttft.yaml", latency("time_to_first_token", mean=-0.5, min=-1.0)),
                            "ttft_mean_ms is negative"),
        "a negative throughput": (put(d, "negthr.yaml", edited(report, lambda r: aggregate(r)["throughput"][
            "output_token_rate"].update(mean=-5.0))), "output_throughput_tps is negative"),
        "p99 below p50": (put(d, "p99.yaml", latency("time_to_first_token", p99=0.0001)), "above its p99"),
        "min above max": (put(d, "minmax.yaml", latency("request_latency", min=99.0)), "min (99) above its"),
        "541 tok/s over a duration of zero": (put(d, "zero.yaml", edited(report, zero_duration)),
                                              "over a duration of 0 s"),
        "a rate its count denies": (put(d, "rate.json", {**vllm(), "request_throughput": 400.0}),
                                    "request_throughput_rps 400 disagrees with completed"),
        "more completed than sent (vLLM)": (put(d, "more.json", {**vllm(), "completed": 80}),
                                            "exceed the 40 requests sent"),
        "a negative AIPerf latency": (put(d, "aiperf-neg.json", edited(aiperf, lambda a: a["time_to_first_token"]
                                                                       .update(avg=-3.0))), "ttft_mean_ms is negative"),
    }
