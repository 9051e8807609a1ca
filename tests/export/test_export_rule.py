"""The Snakemake target of the llm-d reports: rule export_llmd (workflow/rules/export.smk)."""
import re

from conftest import make_workdir, snakemake


def rules_planned(output: str) -> dict[str, str]:
    """{rule: its first job's block} of a dry run."""
    planned = {}
    for block in re.split(r"\n\s*\n", output):
        if match := re.search(r"^(?:local)?rule (\w+):", block, re.M):
            planned.setdefault(match.group(1), block)
    return planned


def test_the_reports_of_an_experiment_are_a_target_after_its_table(tmp_path):
    work = make_workdir(tmp_path / "wf")
    proc = snakemake(work, "--profile", "profiles/local", "-n", "results/week01/export/llmd")
    planned = rules_planned(proc.stdout + proc.stderr)
    assert {"export_llmd", "metrics_table", "session"} <= set(planned)
    assert "results/week01/metrics.csv" in planned["export_llmd"].split("output:")[0]
    assert "output: results/week01/export/llmd" in planned["export_llmd"]
