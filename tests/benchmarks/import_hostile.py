"""Time and peak memory of `servelab import` on every hostile input of
tests/export/hostile_inputs.py, and on the largest inputs of at most 10 MB that a user could
give it (a JSON and a YAML of ~10 MB, gzips that inflate to just under the 32 MiB cap),
each in a process of its own. Prints a table and the worst of each; asserts nothing.
The goal (issue 89): at most 1 GB and 10 s for any input of at most 10 MB.

    .venv/bin/python tests/benchmarks/import_hostile.py        (or: servelab bench import_hostile)
"""
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).parents[1] / "export"))
import hostile_inputs  # noqa: E402


def large(d: Path) -> dict[str, tuple[list[str], str]]:
    """Big inputs of at most 10 MB that are not hostile, only large."""
    out = str(d / "table.csv")
    vllm = hostile_inputs.vllm()
    vllm["itls"] = [[0.0123456789] * 100 for _ in range(7000)]          # per-request ITLs, ~10 MB
    big_json = hostile_inputs.put(d, "big.json", vllm)
    report = hostile_inputs.report()
    report["results"]["observability"]["servelab_point"]["samples"] = list(range(550_000))   # ~8 MB of YAML, under its cap
    big_yaml = hostile_inputs.put(d, "big.yaml", yaml.safe_dump(report))
    too_much_yaml = hostile_inputs.put(d, "toobig.yaml", yaml.safe_dump({**report, "more": list(range(100_000))}))
    near_cap = {**hostile_inputs.vllm(), "itls": [[0.5] * 1000 for _ in range(6_000)]}   # ~30 MiB inflated
    gz = d / "near-cap.json.gz"
    gz.write_bytes(gzip.compress(json.dumps(near_cap).encode(), 6))
    objects = d / "objects.json.gz"   # the costliest shape per byte: an empty object every 3 bytes
    objects.write_bytes(gzip.compress(b'{"completed": 1, "x": [' + b"{}," * (1_999_000) + b'{}]}', 6))
    return {f"large: {p.name} ({p.stat().st_size / 1e6:.1f} MB)": ([str(p), "--out", out], "imported")
            for p in (big_json, big_yaml, too_much_yaml, gz, objects)}


def measure(argv: list[str]) -> tuple[float, float, int]:
    """(seconds, peak RSS in MB, exit status) of `servelab import ARGV` in a process of its own."""
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "servelab", "import", *argv],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    return time.monotonic() - started, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def corpus(d: Path) -> dict[str, list[str]]:
    """{case: argv} of every input, written under d."""
    cases = {**hostile_inputs.refused(d / "hostile"), **large(d / "large")}
    cases.update({f"impossible: {k}": ([str(p), "--out", str(d / "t.csv")], why)
                  for k, (p, why) in hostile_inputs.impossible(d / "impossible").items()})
    return {case: argv for case, (argv, _why) in cases.items()}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        # written by a process of its own: a child's peak RSS starts at its parent's (Linux
        # carries it across fork and exec), so this one stays small
        made = subprocess.run([sys.executable, __file__, "--write", tmp], check=True, capture_output=True, text=True)
        cases = json.loads(made.stdout)
        print(f"{'input':<48} {'input MB':>9} {'s':>6} {'peak MB':>8} {'exit':>4}")
        worst_s = worst_mb = 0.0
        for case, argv in cases.items():
            first = Path(argv[0])
            size = first.stat().st_size / 1e6 if first.is_file() else 0.0
            seconds, peak, code = measure(argv)
            worst_s, worst_mb = max(worst_s, seconds), max(worst_mb, peak)
            print(f"{case[:48]:<48} {size:>9.2f} {seconds:>6.2f} {peak:>8.0f} {code:>4}")
        print(f"worst: {worst_s:.2f} s, {worst_mb:.0f} MB peak RSS over {len(cases)} inputs "
              f"(goal: at most 10 s and 1000 MB each); baseline: `servelab --help` "
              f"{measure(['--help'])[1]:.0f} MB")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--write"]:
        print(json.dumps(corpus(Path(sys.argv[2]))))
    else:
        main()
