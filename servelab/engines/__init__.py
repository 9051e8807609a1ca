"""What differs between engines (vLLM, SGLang, HF transformers, lm-eval as a client): knob
dicts to command lines, the benchmark clients run in-process, the offline runners that
measure many points on one engine, the P/D proxy, and what a server's log and /metrics
state at start-up (server_log: the start-up's timeline, KV cache, weights), and each engine's
and client's facts that the other stages ask instead of its name (facts). No lifecycle
here: serve/ launches what these modules describe."""
MAY_IMPORT = ("config",)
BASE_MODULES = ("facts",)  # imports nothing from servelab: every stage asks it what an engine or client is
