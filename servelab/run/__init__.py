"""Where a run executes and what it leaves behind: disjoint GPUs on one machine
(gpu_claims), engine caches keyed by stack (caches) and the gate that compiles each key once
(compile_gate), provenance of every point, job logs,
where the time went (timing), and the paper archive. All but `archive` import nothing
from servelab, so every stage may use them; `archive` rebuilds the analysis and carries
each point's llm-d report (export)."""
MAY_IMPORT = ("config", "analysis", "export")
BASE_MODULES = ("gpu_claims", "provenance", "joblog", "caches", "compile_gate", "timing")
