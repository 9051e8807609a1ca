"""servelab: LLM-serving experiments as one Snakemake DAG. The subpackages follow its stages:

    config/    what the config means: schema cross-checks, expansion into points, the engines' parsers
    fetch/     what is fetched or built: models (by recipe or by shape), datasets, eval tasks
    engines/   each engine's server command, benchmark client and result keys
    serve/     how a point is served and measured: session, server lifecycle, topology, monitors, store
    analysis/  what is made from measurements: tidy tables, the roofline, figures
    run/       where it runs and what it leaves: GPU claims, provenance, job logs, the paper archive

A stage imports only from the stages its `MAY_IMPORT` names (tests/test_layout.py holds
every module to that); `atomic` (write-then-rename) is shared by all.
"""
