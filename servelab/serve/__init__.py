"""How one server point is served and measured: the session (launch once, measure the
client points it lacks), the server's lifecycle, multi-process topologies, monitors,
peak memory, start-up facts from the log, failures as data, and the store of raw points."""
MAY_IMPORT = ("config", "fetch", "engines", "run", "search")
