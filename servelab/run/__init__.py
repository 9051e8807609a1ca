"""Where a run executes and what it leaves behind: disjoint GPUs on one machine
(gpu_slots), provenance of every point, job logs, and the paper archive. All but `archive`
import nothing from servelab, so every stage may use them; `archive` rebuilds the analysis."""
MAY_IMPORT = ("config", "analysis")
BASE_MODULES = ("gpu_slots", "provenance", "joblog")
