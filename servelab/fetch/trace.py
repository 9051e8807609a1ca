"""Mooncake-style request traces: a generator with a stated reuse, validation, and the crop
to a window that a trace-replay workload sends.

A trace is JSONL, one request a line, in arrival order:
`{"timestamp": ms, "input_length": tokens, "output_length": tokens, "hash_ids": [ints]}`.
`hash_ids` name the prompt's blocks of `block_tokens` tokens each: two requests that share
their first k ids share their first k blocks, which a prefix cache can reuse. vLLM's client
(`vllm bench serve --dataset-name timed_trace`) expands each id into the same tokens within
one run and sends each request at its timestamp.

The generator writes sessions of several turns: turn t of a session repeats every block of
its turns before (the conversation so far) and appends `new_blocks` of its own, so that
turn t could reuse (t - 1) / t of its prompt, and a trace of sessions of T turns
(T - 1) / (T + 1) of its prompt blocks in all (`stated_reuse`; 1/2 at T = 3).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from servelab.atomic import atomic_path

FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")


def generate(sessions: int, turns: int, *, new_blocks: int, block_tokens: int, output_length: int,
             session_gap_ms: float, think_ms: float, seed: int) -> list[dict]:
    """Requests of `sessions` conversations of `turns` turns, sorted by timestamp: a session
    starts every `session_gap_ms` (exponential gaps), its turns `think_ms` apart (+- 20 %);
    turn t's prompt is t x new_blocks blocks, the first (t - 1) x new_blocks its turn before's."""
    if sessions < 1 or turns < 1 or new_blocks < 1:
        raise ValueError(f"sessions, turns and new_blocks must be >= 1 (got {sessions}, {turns}, {new_blocks})")
    rng = random.Random(seed)
    rows, next_id, start = [], 0, 0.0
    for session in range(sessions):
        blocks: list[int] = []
        at = start
        for turn in range(1, turns + 1):
            blocks = blocks + list(range(next_id, next_id + new_blocks))
            next_id += new_blocks
            rows.append({"timestamp": round(at), "input_length": len(blocks) * block_tokens,
                         "output_length": output_length, "hash_ids": list(blocks),
                         "session": session, "turn": turn})
            at += think_ms * rng.uniform(0.8, 1.2)
        start += rng.expovariate(1 / session_gap_ms) if session_gap_ms > 0 else 0
    return sorted(rows, key=lambda r: (r["timestamp"], r["session"], r["turn"]))


def stated_reuse(rows: list[dict]) -> float:
    """The share of the trace's prompt blocks that lead with a prefix an earlier request
    sent (what an unbounded prefix cache could serve, by block): (T - 1) / (T + 1) for the
    generator's sessions of T turns."""
    seen: set[tuple] = set()
    reused = total = 0
    for row in rows:
        ids = tuple(row["hash_ids"])
        k = 0
        while k < len(ids) and ids[:k + 1] in seen:
            k += 1
        reused, total = reused + k, total + len(ids)
        seen.update(ids[:i] for i in range(1, len(ids) + 1))
    return reused / total if total else 0.0


def reusable_tokens(rows: list[dict]) -> list[int]:
    """Each request's prompt tokens behind a prefix an earlier request sent (by block, as
    stated_reuse counts them): what an unbounded prefix cache could serve it."""
    seen: set[tuple] = set()
    out = []
    for row in rows:
        ids = tuple(row["hash_ids"])
        k = 0
        while k < len(ids) and ids[:k + 1] in seen:
            k += 1
        out.append(min(row["input_length"], round(k * row["input_length"] / len(ids))) if ids else 0)
        seen.update(ids[:i] for i in range(1, len(ids) + 1))
    return out


def write(rows: list[dict], out: str | Path) -> Path:
    with atomic_path(out) as tmp:
        tmp.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows))
    return Path(out)


def read(path: str | Path) -> list[dict]:
    """A trace's requests, each checked (`validate`)."""
    rows = []
    with open(path) as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}: line {n} is not JSON ({exc})") from None
    validate(rows, str(path))
    return rows


def validate(rows: list[dict], where: str = "trace", max_model_len: int | None = None) -> None:
    """Every field there and of its type, timestamps in order, each request within
    max_model_len: else a ValueError naming the line and the field."""
    if not rows:
        raise ValueError(f"{where}: no requests")
    last = None
    for n, row in enumerate(rows, 1):
        if not isinstance(row, dict):
            raise ValueError(f"{where}: line {n} is not an object")
        missing = [f for f in FIELDS if f not in row]
        if missing:
            raise ValueError(f"{where}: line {n} lacks field(s) {missing} (a Mooncake-style trace has {list(FIELDS)})")
        for field in ("input_length", "output_length"):
            if not isinstance(row[field], int) or row[field] < 1:
                raise ValueError(f"{where}: line {n}: {field} must be a positive integer, got {row[field]!r}")
        if not isinstance(row["timestamp"], (int, float)) or row["timestamp"] < 0:
            raise ValueError(f"{where}: line {n}: timestamp must be a number of ms >= 0, got {row['timestamp']!r}")
        if not isinstance(row["hash_ids"], list) or not all(isinstance(h, int) for h in row["hash_ids"]):
            raise ValueError(f"{where}: line {n}: hash_ids must be a list of integers")
        if last is not None and row["timestamp"] < last:
            raise ValueError(f"{where}: line {n}: timestamps not sorted ({row['timestamp']} ms after {last} ms)")
        last = row["timestamp"]
        if max_model_len and row["input_length"] + row["output_length"] > max_model_len:
            raise ValueError(f"{where}: line {n}: input_length + output_length = "
                             f"{row['input_length'] + row['output_length']} exceeds max_model_len {max_model_len}")


def crop(rows: list[dict], window_s: list | tuple | None) -> list[dict]:
    """The requests whose timestamps fall in [start, end) seconds, moved to start at 0."""
    if not window_s:
        return rows
    start_ms, end_ms = float(window_s[0]) * 1000, float(window_s[1]) * 1000
    kept = [r for r in rows if start_ms <= r["timestamp"] < end_ms]
    if not kept:
        raise ValueError(f"no request of the trace falls in the window {list(window_s)} s")
    first = kept[0]["timestamp"]
    return [{**r, "timestamp": r["timestamp"] - first} for r in kept]


# the trace the project ships (resources/traces/tiny_trace.jsonl): 6 sessions of 3 turns, each
# turn 4 new blocks of 32 tokens (prompts of 128, 256, 384 tokens), 16 output tokens, a
# session every ~1.5 s, 2 s of thinking between turns: 18 requests over ~12 s, half of whose
# prompt blocks an earlier request sent (stated_reuse: (3 - 1) / (3 + 1) = 0.5)
TINY = {"sessions": 6, "turns": 3, "new_blocks": 4, "block_tokens": 32, "output_length": 16,
        "session_gap_ms": 1500, "think_ms": 2000, "seed": 0}


def main(argv: list[str] | None = None) -> None:
    """`python -m servelab.fetch.trace OUT`: write the shipped trace (TINY) to OUT."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m servelab.fetch.trace", description=main.__doc__)
    parser.add_argument("out")
    rows = generate(**TINY)
    write(rows, parser.parse_args(argv).out)
    print(f"{len(rows)} requests over {rows[-1]['timestamp'] / 1000:.1f} s, stated reuse {stated_reuse(rows):.2f}")


if __name__ == "__main__":
    main()
