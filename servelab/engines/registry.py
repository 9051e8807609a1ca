"""The engines servelab can serve or run offline, by the name an experiment's `engine` gives.

Each lives in its own folder behind one face (docs/adding-an-engine.md): its server command,
its benchmark client and saved result, its offline runners, what its log, processes and
/metrics are called; its facts come from servelab.config.engine_facts, which the other
stages ask instead of its name. The clients that are not an engine's own (AIPerf, lm-eval)
are in servelab.engines.clients.
"""

from __future__ import annotations

from servelab.engines.hf.engine import Transformers
from servelab.engines.sglang.engine import SGLang
from servelab.engines.vllm.engine import VLLM

ENGINES = {"vllm": VLLM(), "sglang": SGLang(), "transformers": Transformers()}
