"""The checks of a whole config before any job starts, at the top of the package: the
cross-checks the JSON schema cannot express, with what the workflow reads off a checked
config (cross_checks), every command a config implies parsed by the engines' own parsers
(validate, with the parsers in engine_parsers), what this box leaves out and each point's
memory (box_fit, capacity_plan), a run's least wall (time_plan), and the packages an experiment needs that the environment lacks (preflight).
They ask the stages below them, so no stage imports them: only the entry point
(servelab/cli.py) and the workflow (its rule files and scripts)."""
MAY_IMPORT = ("config", "fetch", "engines", "serve", "search", "analysis", "run")
