"""Config mistakes a newcomer makes, each refused in one line that names the key path and the
fix (servelab/config/schema_errors.py), and the workflow's dry run saying the same with no
schema dump."""
import pytest
import yaml

from conftest import make_workdir, snakemake
from servelab.config import schema_errors

MISTAKES = [
    # (what they wrote, the line's key path, the fix it must name)
    (lambda c: c.update(device="GPU"), "device: 'GPU' is not one of 'gpu', 'cpu'", "did you mean gpu"),
    (lambda c: c["experiments"]["week01"].update(figure={}), "experiments.week01: unknown key 'figure'",
     "did you mean figures?"),
    (lambda c: c["experiments"]["week01"].update(args={"max_num_seqs": 4}), "experiments.week01: unknown key 'args'",
     "it belongs one level down: experiments.week01.server.args or experiments.week01.client.args"),
    (lambda c: c["experiments"]["week01"].update(engine="vlm"), "experiments.week01.engine: 'vlm' is not",
     "did you mean vllm"),
    (lambda c: c["experiments"]["week01"]["figures"].update(   # a copy: the figure is a YAML anchor's
        ttft_vs_rate={**c["experiments"]["week01"]["figures"]["ttft_vs_rate"], "kind": "lines"}),
     "experiments.week01.figures.ttft_vs_rate.kind: 'lines' is not one of 'line', 'scatter'", "did you mean line"),
    (lambda c: c.update(grace_s=-1), "grace_s: -1 is not allowed", "give a number >= 0"),
    (lambda c: c["experiments"]["study_tuning_cpu"]["rounds"].update(least=1),
     "experiments.study_tuning_cpu.rounds.least: 1 is not allowed", "give a whole number >= 2"),
    (lambda c: c["experiments"]["week01"]["client"]["args"].update(request_rate="fast"),
     "experiments.week01.client.args.request_rate: 'fast' is not allowed", "give a number > 0 or 'inf'"),
    (lambda c: c.update(repeat_until={"metric": "output_throughput", "within": 0.03, "leas": 3}),
     "repeat_until: unknown key 'leas'", "did you mean least?"),
    (lambda c: c["engines"]["vllm"].update(env=["VLLM_CPU_KVCACHE_SPACE=4"]), "engines.vllm.env: ['VLLM_CPU",
     "give a mapping"),
]


@pytest.mark.parametrize("mutate, where, fix", MISTAKES)
def test_each_mistake_is_one_line_naming_its_key_and_the_fix(local_config, mutate, where, fix):
    mutate(local_config)
    found = schema_errors.problems(local_config)
    assert len(found) == 1 and "\n" not in found[0], found
    assert found[0].startswith(where) and fix in found[0], found[0]


def test_the_dry_run_says_every_mistake_a_line_each_and_no_schema(tmp_path):
    work = make_workdir(tmp_path / "wf")
    (work / "bad.yaml").write_text(yaml.safe_dump({"device": "cpuu", "experiments": {"week01": {
        "configs": {"a": {}}, "client": {"args": {"request_rate": "10"}}}}}))
    proc = snakemake(work, "--profile", "profiles/local", "--configfile", "config/config.yaml",
                     "config/local.yaml", "bad.yaml", "-n", check=False)
    out = proc.stderr + proc.stdout
    assert proc.returncode != 0
    assert "device: 'cpuu' is not one of 'gpu', 'cpu'; did you mean cpu" in out
    assert "experiments.week01: unknown key 'configs'; it belongs one level down: experiments.week01.server.configs" in out
    assert "experiments.week01.client.args.request_rate: '10' is not allowed: give a number > 0 or 'inf'" in out
    assert "$defs" not in out and "additionalProperties" not in out and len(out.splitlines()) < 20, out
    assert not (work / "results").exists()


def test_the_dry_run_names_a_misspelt_engine_flag_without_importing_the_engine(tmp_path):
    """README: a bad config key or vLLM flag stops the dry run (the shipped flag lists,
    servelab/checks/flag_lists.py), as `servelab validate` would after importing vLLM."""
    work = make_workdir(tmp_path / "wf")
    (work / "typo.yaml").write_text(yaml.safe_dump({"experiments": {"week01": {"server": {"args": {
        "max_num_batched_tokes": 512}}}}}))
    proc = snakemake(work, "--profile", "profiles/local", "--configfile", "config/config.yaml",
                     "config/local.yaml", "typo.yaml", "-n", check=False)
    out = proc.stderr + proc.stdout
    assert proc.returncode != 0
    assert ("experiments.week01.server.args.max_num_batched_tokes: not a flag of vllm serve" in out
            and "did you mean max_num_batched_tokens or" in out), out
    assert not (work / "results").exists()


def test_an_unknown_figure_column_gets_the_nearest_names_and_where_columns_are_listed(local_config):
    from servelab.checks.cross_checks import figure_problems

    exp = local_config["experiments"]["week01"]
    exp["figures"] = {"ttft_vs_rate": {**exp["figures"]["ttft_vs_rate"], "y": "ttft_p95_ms"}}
    found = figure_problems(local_config, "week01", exp, "experiments.week01")
    assert len(found) == 1 and found[0].startswith("experiments.week01.figures.ttft_vs_rate.y: unknown column "
                                                   "'ttft_p95_ms'; did you mean ttft_p99_ms or ttft_p90_ms")
    assert found[0].endswith("(the table's columns: docs/columns.md)")
