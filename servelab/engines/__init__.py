"""What differs between engines (vLLM, SGLang, HF transformers, lm-eval as a client): knob
dicts to command lines, the benchmark clients run in-process, the offline runners that
measure many points on one engine, the P/D proxy, and what a server's log and /metrics
state at start-up (server_log: the start-up's timeline, KV cache, weights). Each engine of
the registry inherits its facts from servelab.config.engine_facts, which the other stages
ask instead of its name. No lifecycle here: serve/ launches what these modules describe."""
MAY_IMPORT = ("config",)
