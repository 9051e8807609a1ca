"""What differs between engines, one folder each behind one face (registry.ENGINES names
them): vllm/ (its command lines, its own client in-process or forked, its offline runner,
the P/D proxy), sglang/ (its face and its own client), hf/ (static batching with HF
transformers, offline only); clients/ holds the clients that are no engine's own (AIPerf,
lm-eval) and the time bound the engines' clients share. At the top, what they share: knob
dicts to flags (commands), where an engine's packages are (environment), many offline points
on one engine (offline_plan), what a server's log and /metrics state at start-up
(server_log), the GPU gate (prestart) and the zygote that forks CPU servers. Each engine
inherits its facts from servelab.config.engine_facts, which the other stages ask instead of
its name. No lifecycle here: serve/ launches what these modules describe."""
MAY_IMPORT = ("config",)
