"""servelab's llm-d reports held against llm-d-benchmark's own code (a documented check, not a
test: llm-d-benchmark is not a package servelab installs). Given a checkout of
llm-d/llm-d-benchmark (docs/export-and-import.md says which commit and how):

    python tests/export/llmd_check.py --llmd-src DIR [--write]     # the edge-case corpus
    python tests/export/llmd_check.py --llmd-src DIR --export OUT  # an export, through its analysis

The corpus (tests/data/llmd_corpus/cases.yaml): each case through llm-d's pydantic models
(load_benchmark_report) and servelab's validator; `--write` records llm-d's verdicts in the
file. An export: every report through llm-d's models, then llm-d's cross_treatment summary
over each experiment's folder, its figures compared with the reports'.
"""
from __future__ import annotations

import argparse
import copy
import csv
import sys
from pathlib import Path

import yaml

CORPUS = Path(__file__).parents[1] / "data/llmd_corpus"


def changed(base: dict, case: dict) -> dict:
    """base.yaml with the case's `set` and `delete` applied (dotted paths, numbers as indexes)."""
    report = copy.deepcopy(base)

    def parent_of(path: str):
        keys = [int(k) if k.isdigit() else k for k in path.split(".")]
        node = report
        for key in keys[:-1]:
            node = node[key] if isinstance(key, int) else node.setdefault(key, {})
        return node, keys[-1]

    for path, value in (case.get("set") or {}).items():
        node, key = parent_of(path)
        node[key] = value
    for path in case.get("delete") or []:
        node, key = parent_of(path)
        del node[key]
    return report


def llmd_verdict(load, report: dict) -> str:
    try:
        load(copy.deepcopy(report))
        return "accept"
    except Exception:   # pydantic's ValidationError, or llm-d's own ValueError
        return "refuse"


def check_corpus(load, llmd_src: Path, write: bool) -> int:
    from servelab.export import llmd_schema

    base = yaml.safe_load((CORPUS / "base.yaml").read_text())
    cases_file = CORPUS / "cases.yaml"
    cases = yaml.safe_load(cases_file.read_text())
    disagree = 0
    for case in cases:
        report = changed(base, case)
        theirs = llmd_verdict(load, report)
        ours = "refuse" if llmd_schema.errors(report) else "accept"
        mark = "" if theirs == ours else "   <-- DISAGREE"
        disagree += theirs != ours
        print(f"llm-d {theirs:6}  servelab {ours:6}  {case['name']}{mark}")
        case["llmd"] = theirs
    example = llmd_src / "llmdbenchmark/analysis/benchmark_report/br_v0_2_1_example.yaml"
    report = yaml.safe_load(example.read_text())
    theirs, ours = llmd_verdict(load, report), "refuse" if llmd_schema.errors(report) else "accept"
    disagree += theirs != ours
    print(f"llm-d {theirs:6}  servelab {ours:6}  llm-d's own example report ({example.name})")
    print(f"{len(cases) + 1} cases, {len(cases) + 1 - disagree} agree, {disagree} disagree")
    if write:
        text = cases_file.read_text()
        head = text[:text.index("- name:")]
        cases_file.write_text(head + yaml.safe_dump(cases, sort_keys=False, width=120))
    return disagree


def check_export(load, out: Path) -> int:
    from llmdbenchmark.analysis.cross_treatment import generate_cross_treatment_summary

    reports = sorted(out.rglob("benchmark_report_v0.2,_*.yaml"))
    refused = [p for p in reports if llmd_verdict(load, yaml.safe_load(p.read_text())) == "refuse"]
    print(f"{len(reports)} report(s); llm-d's models refuse {len(refused)}: {[str(p) for p in refused][:3]}")
    # cross_treatment reads RESULTS/TREATMENT/benchmark_report_v0.2*yaml: an experiment's folder
    folders = sorted({p.parent.parent for p in reports})
    read, wrong = 0, []
    for folder in folders:
        summary = out.parent / f"{out.name}-cross-treatment" / folder.name
        n = generate_cross_treatment_summary(folder, summary)
        read += n
        with open(summary / "treatment_comparison.csv") as f:
            for row in csv.DictReader(f):
                report = yaml.safe_load((folder / row["treatment"] / row["source_file"]).read_text())
                agg = report["results"].get("request_performance", {}).get("aggregate", {})
                want = {"ttft_mean_s": agg.get("latency", {}).get("time_to_first_token", {}).get("mean"),
                        "output_tps": agg.get("throughput", {}).get("output_token_rate", {}).get("mean"),
                        "total_requests": agg.get("requests", {}).get("total")}
                for column, value in want.items():
                    got = row.get(column)
                    if (value is None) != (got in (None, "")) or (value is not None and
                                                                 abs(float(got) - value) > 1e-9 * abs(value)):
                        wrong.append(f"{folder.name}/{row['treatment']}/{row['source_file']} {column}: {got} != {value}")
    print(f"cross_treatment read {read} of {len(reports)} report(s) in {len(folders)} experiment(s); "
          f"{len(wrong)} figure(s) differ" + ("".join(f"\n  {w}" for w in wrong[:10])))
    return len(refused) + len(wrong) + (len(reports) - read)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llmd-src", type=Path, required=True, help="a checkout of llm-d/llm-d-benchmark")
    parser.add_argument("--write", action="store_true", help="record llm-d's verdicts in the corpus")
    parser.add_argument("--export", type=Path, help="an export's folder (servelab export ... --out OUT)")
    args = parser.parse_args()
    sys.path.insert(0, str(args.llmd_src))
    from llmdbenchmark.analysis.benchmark_report.core import load_benchmark_report

    if args.export:
        return int(check_export(load_benchmark_report, args.export) > 0)
    return int(check_corpus(load_benchmark_report, args.llmd_src, args.write) > 0)


if __name__ == "__main__":
    sys.exit(main())
