"""Tuning by search instead of a grid: the window in which a point's load held and its
figures there (steady_window), the SLO a point meets (slo), the highest load a
server configuration sustains under it, bisected inside one session (load_bisection),
the configurations each round tries (strategy), each configuration's outcome from its
stored points (outcome), the frontier measured again before a winner is crowned
(confirm), and the rounds as the workflow plans and sums them up (progress)."""
MAY_IMPORT = ("config",)
BASE_MODULES = ("steady_window", "slo", "load_bisection", "strategy")  # import nothing from servelab: serve and analysis use them
