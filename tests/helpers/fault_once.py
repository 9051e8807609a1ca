"""A fault injected once into a real vLLM engine, for the tests of failed points.

`--logits-processors fault_once:RaiseOnce` (with tests/helpers on the engine's PYTHONPATH)
loads this processor into vLLM's sampler. It does nothing to the logits; but at the first
decoding step after the file named by SERVELAB_FAULT_FILE appears, it deletes that file and
raises, inside the engine core, as an engine bug would: the engine dies of an exception of
its own, while it serves a test's load. Without the file, the same configuration serves
normally, so a retry of the failed points measures them.
"""
import os

from vllm.v1.sample.logits_processor import LogitsProcessor

FAULT_FILE = "SERVELAB_FAULT_FILE"


class RaiseOnce(LogitsProcessor):
    def __init__(self, vllm_config, device, is_pin_memory):
        self.flag = os.environ.get(FAULT_FILE)

    def is_argmax_invariant(self) -> bool:
        return True

    def update_state(self, batch_update) -> None:
        pass

    def apply(self, logits):
        if self.flag and os.path.exists(self.flag):
            os.remove(self.flag)
            raise RuntimeError("servelab test fault: injected once into the sampler")
        return logits
