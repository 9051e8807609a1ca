"""What is made from measurements, with no engine running: one tidy row per point
(metrics), the hardware's floor (roofline), and the figures declared in config (plots)."""
MAY_IMPORT = ("config", "fetch", "engines", "search")
BASE_MODULES = ("repeats",)  # imports nothing from servelab: a search's confirmation uses its statistics
