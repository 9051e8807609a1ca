"""servelab: LLM-serving experiments as one Snakemake DAG. The subpackages follow its stages,
bottom (config) to top (checks), each with its rule file where it has rules:

    config/    what the config means: experiments expanded into points, shared engines
    fetch/     models (by recipe or by shape), datasets, eval tasks, the capacity model (fetch.smk)
    engines/   each engine's server command, benchmark client and result keys, the P/D proxy
    search/    a search's SLO, load bisection, strategy and outcomes (search.smk)
    serve/     how a point is served and measured: session, server lifecycle, topology,
               monitors, store, failures, FlashInfer's JIT prebuild (serve.smk)
    analysis/  what is made from measurements: tidy tables, the roofline, figures (analysis.smk)
    run/       where it runs and what it leaves: GPU claims, compile gate, timing, provenance, the archive
    checks/    a whole config before any job: cross-checks, the engines' parsers, what this box
               leaves out, capacity, pre-flight, and the session plan the rules read
               (session_plan: params, files, GPUs, priorities; workflow/rules/common.smk)

A stage imports only from the stages its `MAY_IMPORT` names (tests/test_layout.py holds
every module to that); `atomic` (write-then-rename), `machine` (GPUs, memory, CPU of this
box) and `stats` (intervals) are shared by all.
"""
