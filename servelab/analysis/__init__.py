"""What is made from measurements, with no engine running: one tidy row per point
(metrics), the hardware's floor (roofline), and the figures declared in config (plots);
the workflow's analysis scripts run by a process that imported their libraries once
(warm_script)."""
MAY_IMPORT = ("config", "fetch", "engines", "search")
BASE_MODULES = ("repeats", "paired")  # import nothing from servelab but its stats: a search's confirmation uses them
