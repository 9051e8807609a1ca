"""A point's raw benchmark result as the store keeps it: the client's saved JSON without
its generated texts, its per-request figures to the microsecond, gzipped (RAW). Every
stage reads it through read_raw, which also reads the plain `bench.json` of older stores."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

# a point's raw benchmark result as saved: compact (RAW), or as the client wrote it (older stores)
RAW, RAW_PLAIN = "bench.json.gz", "bench.json"
# the client's copy of every generated text: no table or figure reads it, and it is most of
# a long point's file (a 25 s GPU point: 8+ MiB)
DROPPED = ("generated_texts",)
# per-request times in seconds, kept to the microsecond (the clients' clocks' useful resolution)
DECIMALS = 6


def rounded(value):
    if isinstance(value, float):
        return round(value, DECIMALS)
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return value


def compact(result: dict) -> dict:
    """A saved result without the generated texts, its per-request lists to the microsecond
    (its scalar summary as the client computed it)."""
    return {k: (rounded(v) if isinstance(v, list) else v) for k, v in result.items() if k not in DROPPED}


def write_raw(src: Path, dest_dir: Path) -> None:
    """A client's saved JSON into a point's directory, compact and gzipped (RAW): 14x smaller
    on a recorded H100 point (263 KB -> 18 KB)."""
    result = json.loads(Path(src).read_text())
    text = json.dumps(compact(result), separators=(",", ":"))
    (dest_dir / RAW).write_bytes(gzip.compress(text.encode(), compresslevel=9, mtime=0))
    Path(src).unlink()


def raw_file(point_dir: Path) -> Path | None:
    """The raw result file of a point's directory, compact or plain; None where it has none."""
    return next((p for p in (point_dir / RAW, point_dir / RAW_PLAIN) if p.is_file()), None)


def read_raw(point_dir: Path) -> dict:
    """A point's raw benchmark result, from whichever form its store holds."""
    path = raw_file(Path(point_dir))
    if path is None:
        raise FileNotFoundError(f"{point_dir}: no {RAW} or {RAW_PLAIN} (a store entry without its raw result)")
    data = gzip.decompress(path.read_bytes()) if path.name == RAW else path.read_bytes()
    return json.loads(data)


# a point's record of its conditions, tick by tick (servelab.serve.point_record)
CONDITIONS = "conditions.json.gz"


def read_conditions(point_dir: Path) -> dict | None:
    """A point's record of its conditions; None where its store entry has none (recorded
    before servelab kept one, or a failed point)."""
    path = Path(point_dir) / CONDITIONS
    if not path.is_file():
        return None
    return json.loads(gzip.decompress(path.read_bytes()))
