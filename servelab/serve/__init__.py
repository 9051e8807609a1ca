"""How one server point is served and measured: the session (launch once, measure the
client points it lacks), the server's lifecycle, multi-process topologies, monitors,
peak memory, failures as data, and the store of raw points."""
MAY_IMPORT = ("config", "fetch", "engines", "search")
# and run's base modules (GPU claims, caches, the compile gate, provenance), which any stage may use: not run's
# archive, which rebuilds the analysis that reads serve's store
