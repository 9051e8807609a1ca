"""Workload datasets: download with checksum, or generate a small ShareGPT file.

Both paths produce the same ShareGPT JSON layout, so the benchmark client
reads them with the same `--dataset-name sharegpt`.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path

from servelab.atomic import atomic_path
from servelab.fetch.tiny_model import corpus_lines


def generate_sharegpt(out: str | Path, conversations: int, seed: int,
                      prompt_words: tuple[int, int], *, reply_words: tuple[int, int]) -> Path:
    """Write `conversations` human/gpt pairs drawn from the tiny model's corpus."""
    rng = random.Random(seed)
    words = " ".join(corpus_lines(seed, n_lines=2000)).split()

    def text(lo: int, hi: int) -> str:
        n = rng.randint(lo, hi)
        start = rng.randrange(0, len(words) - n)
        return " ".join(words[start:start + n])

    data = [
        {
            "id": f"servelab-{seed}-{i}",
            "conversations": [
                {"from": "human", "value": text(*prompt_words)},
                {"from": "gpt", "value": text(*reply_words)},
            ],
        }
        for i in range(conversations)
    ]
    with atomic_path(out) as tmp:
        tmp.write_text(json.dumps(data))
    return Path(out)


def sha256_of(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download(url: str, out: str | Path, sha256: str | None, progress=print) -> Path:
    """Stream `url` to `out`, verifying the checksum before the file appears.

    With no pinned checksum, the one recorded beside the file at its first
    download (`out.sha256`) is verified instead, and recorded if there is none.
    """
    import requests

    record = Path(f"{out}.sha256")
    expected = sha256 or (record.read_text().split()[0] if record.exists() else None)
    headers = {}
    token = os.environ.get("HF_TOKEN")
    if token and "huggingface.co" in url:
        headers["Authorization"] = f"Bearer {token}"
    with atomic_path(out) as tmp, requests.get(url, stream=True, timeout=60, headers=headers) as resp:
        resp.raise_for_status()
        total = int(resp.headers.get("content-length", 0))
        done = 0
        with open(tmp, "wb") as fh:
            for chunk in resp.iter_content(1 << 22):
                fh.write(chunk)
                done += len(chunk)
                if total:
                    progress(f"{out}: {done / total:6.1%} of {total / 1e6:.0f} MB")
        got = sha256_of(tmp)
        if expected and got != expected:
            raise ValueError(f"checksum mismatch for {url}: expected {expected}, got {got}")
    if not expected:
        record.write_text(f"{got}  {Path(out).name}\n")
        progress(f"{out}: no sha256 pinned; recorded {got} in {record} (pin it in the config)")
    return Path(out)
