"""Measured points kept under their identity, outside Snakemake's outputs.

A session job's outputs are views of this store: when Snakemake reruns a job
(because a client point was added) it deletes the view, not the measurements,
and the session measures only the identities the store lacks.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import NamedTuple

from servelab.atomic import atomic_path
from servelab.raw_result import RAW_PLAIN, read_raw, write_raw

class Point(NamedTuple):
    """A client point of a session: its store key, its client knobs, its identity."""
    key: str
    knobs: dict
    identity: dict


def identity_hash(identity: dict) -> str:
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:20]


class PointStore:
    """One directory per measured point: record.json (+ the raw result, RAW)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def path(self, key: str) -> Path:
        return self.root / key

    def has(self, key: str) -> bool:
        return (self.path(key) / "record.json").is_file()

    def load(self, key: str) -> dict:
        return json.loads((self.path(key) / "record.json").read_text())

    def raw(self, key: str) -> dict:
        return read_raw(self.path(key))

    def save(self, key: str, record: dict, raw_files: dict[str, Path]) -> dict:
        """Move raw files in and write the record, all or nothing; the benchmark result
        (`bench.json`) compact (write_raw)."""
        with atomic_path(self.path(key)) as tmp:
            tmp.mkdir(parents=True)
            for name, src in raw_files.items():
                if name == RAW_PLAIN:
                    write_raw(src, tmp)
                else:
                    Path(src).replace(tmp / name)
            (tmp / "record.json").write_text(json.dumps(record, indent=2, sort_keys=True, default=str))
        return record

    def annotate(self, key: str, fields: dict) -> dict:
        """Add facts learnt after a point was saved (the session's drift check) to its record."""
        record = {**self.load(key), **fields}
        with atomic_path(self.path(key) / "record.json") as tmp:
            tmp.write_text(json.dumps(record, indent=2, sort_keys=True, default=str))
        return record
