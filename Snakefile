# servelab: LLM-serving experiments as one reproducible DAG.
#   snakemake --profile profiles/local            the embedded CPU default
#   snakemake --profile profiles/slurm -n         preview the course on a GPU cluster
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/fetch.smk"
include: "workflow/rules/serve.smk"
include: "workflow/rules/search.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/workloads.smk"
include: "workflow/rules/export.smk"


rule all:
    default_target: True
    input:
        default_targets(),


# the run ends with what failed and why (failed points are rows with valid=false)
onsuccess:
    report_failed_points()
    report_timing()
    stop_zygotes()


onerror:
    report_failed_points()
    report_timing()
    stop_zygotes()
