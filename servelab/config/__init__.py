"""What the config means, at the bottom of the package: `experiments` expands experiments
into server and client points, `engine_groups` finds sessions that can share one engine,
`topology_roles` reads a multi-process point's roles, `engine_facts` says what each engine
and load client is (what the stages ask instead of its name).
Every stage builds on it, so it imports no other stage; the checks of a whole config,
which ask the stages above, are a stage of their own (servelab/checks)."""
MAY_IMPORT = ()
BASE_MODULES = ("experiments", "engine_facts")  # import nothing from servelab: every stage may use them
