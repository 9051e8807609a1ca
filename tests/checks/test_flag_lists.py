"""Engine flags checked without the engine (servelab/checks/flag_lists.py): the shipped list of
the installed vLLM is its parser's, and a misspelt flag is named where it is set, with the
nearest flag, by the config check every Snakemake run makes (a dry run included)."""
import pytest

from servelab.checks import cross_checks, flag_lists


def test_the_shipped_list_of_the_installed_vllm_is_its_parsers():
    version = flag_lists.installed_release("vllm")
    shipped = flag_lists.LISTED["vllm"] / f"serve-{version}.txt"
    assert shipped.exists(), f"no list for the installed vllm {version}: python -m servelab.checks.flag_lists write vllm"
    assert shipped.read_text().split() == flag_lists.installed_flags("vllm")


@pytest.mark.parametrize("mutate, line", [
    (lambda e: e["server"]["args"].update(max_num_batched_tokes=512),
     "experiments.week01.server.args.max_num_batched_tokes: not a flag of vllm serve"),
    (lambda e: e["server"].setdefault("grid", {}).update(enable_prefix_cache=[True, False]),
     "experiments.week01.server.grid.enable_prefix_cache: not a flag of vllm serve"),
])
def test_a_misspelt_engine_flag_is_named_where_it_is_set_with_the_nearest_flag(local_config, mutate, line):
    from snakemake.utils import validate

    from conftest import REPO

    mutate(local_config["experiments"]["week01"])
    cross_checks.drop_nulled_sections(local_config)
    validate(local_config, str(REPO / "config/schema.yaml"))
    with pytest.raises(cross_checks.ConfigError) as refused:
        cross_checks.check(local_config)
    (found,) = [ln.strip() for ln in str(refused.value).splitlines() if "not a flag" in ln]
    assert found.startswith(line), found
    assert "did you mean" in found and "servelab validate" in found, found
    print(f"\n{found}")


def test_every_shipped_config_uses_only_listed_flags():
    """The course, its GPU check and the studies: nothing they set is refused by the lists."""
    from conftest import REPO, load_config

    for extra in ["config/local.yaml", "config/gpu-check.yaml",
                  *sorted(str(p.relative_to(REPO)) for p in (REPO / "config/studies").glob("*.yaml"))]:
        config = load_config(extra)
        cross_checks.drop_nulled_sections(config)
        for name, exp in config["experiments"].items():
            if "engine" not in exp:   # an overlay of an experiment another study defines
                continue
            assert flag_lists.problems(exp, f"experiments.{name}") == [], (extra, name)
