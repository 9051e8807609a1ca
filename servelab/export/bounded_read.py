"""Reading a file another tool wrote, so that no input can hang, exhaust memory or crash
the import: only regular files are opened (never a named pipe or a device, which would
block), no file nor its inflated gzip stream may pass a size cap, a YAML document may not
expand its aliases (&anchor / *alias) past a budget, nesting is bounded, and a number that
is not finite is named. Every refusal is one ImportFailed line naming the file, and the
field where there is one.

The caps are generous for what the tools write (a `vllm bench serve --save-result` JSON of
10,000 requests with per-request ITLs is ~30 MB; an llm-d report a few KB) and small enough
that parsing what they admit stays under 1 GB and a few seconds (tests/export/test_import_hostile.py).
"""

from __future__ import annotations

import json
import math
import os
import stat
import zlib
from pathlib import Path

import yaml

from servelab.config import yaml_bounds
from servelab.export.import_failed import ImportFailed

MAX_BYTES = 32 * 2**20      # a file, or what its gzip inflates to (`servelab import --max-bytes`)
MAX_DEPTH = 64              # nested objects and lists (llm-d's reports nest 8 deep)
MAX_YAML_NODES = 1_000_000  # values a YAML document may hold once its aliases are expanded
MAX_CONTAINERS = 2_000_000  # objects and lists (a vllm bench JSON: one list a request)
# where infinity is a value, not an overflow: an unbounded rate or concurrency
UNBOUNDED_OK = {"request_rate", "rate_qps", "concurrency", "max_concurrency"}
KINDS = {stat.S_ISFIFO: "a named pipe", stat.S_ISSOCK: "a socket", stat.S_ISCHR: "a character device",
         stat.S_ISBLK: "a block device"}


def mib(n: int) -> str:
    return f"{n / 2**20:.3g} MiB" if n >= 2**20 else f"{n:,} bytes"


def regular_file_bytes(path: Path, max_bytes: int = MAX_BYTES) -> bytes:
    """The bytes of `path`, a regular file of at most `max_bytes`; refused otherwise."""
    try:
        info = os.stat(path)
    except FileNotFoundError as err:
        raise ImportFailed(f"{path}: no such file") from err
    except OSError as err:
        raise ImportFailed(f"{path} cannot be read: {err.strerror or err}") from err
    if stat.S_ISDIR(info.st_mode):
        raise ImportFailed(f"{path} is a directory, not a result file: name the file in it "
                           f"(e.g. {path}/profile_export_aiperf.json)")
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in KINDS.items() if test(info.st_mode)), "not a regular file")
        raise ImportFailed(f"{path} is {kind}, not a regular file: servelab imports only files "
                           f"(a pipe or a device could block the import forever)")
    if info.st_size > max_bytes:
        raise ImportFailed(f"{path} is {mib(info.st_size)}, over the {mib(max_bytes)} an import reads "
                           f"(--max-bytes raises the cap)")
    try:   # O_NONBLOCK: a file swapped for a pipe after the stat above still cannot block the open
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as err:
        raise ImportFailed(f"{path} cannot be read: {err.strerror or err}") from err
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise ImportFailed(f"{path} is no longer a regular file")
        try:
            data = f.read(max_bytes + 1)
        except OSError as err:
            raise ImportFailed(f"{path} cannot be read: {err.strerror or err}") from err
    if len(data) > max_bytes:
        raise ImportFailed(f"{path} grew past the {mib(max_bytes)} an import reads (--max-bytes raises the cap)")
    return data


def gunzip(data: bytes, path: Path, max_bytes: int = MAX_BYTES) -> bytes:
    """A gzip stream's content (every member), refused once it would inflate past `max_bytes`."""
    out = bytearray()
    while data:
        inflate = zlib.decompressobj(wbits=31)
        pending = data
        while not inflate.eof:
            room = max_bytes + 1 - len(out)
            try:
                out += inflate.decompress(pending, room)
            except zlib.error as err:
                raise ImportFailed(f"{path} is a damaged gzip file ({err})") from err
            if len(out) > max_bytes:
                raise ImportFailed(f"{path} inflates past {mib(max_bytes)} (a gzip of {mib(len(data))}): over what "
                                   f"an import reads (--max-bytes raises the cap)")
            pending = inflate.unconsumed_tail
            if not pending and not inflate.eof:
                raise ImportFailed(f"{path} is a damaged gzip file (it ends before its stream does)")
        data = inflate.unused_data
        if data and not data.startswith(b"\x1f\x8b"):
            if data.strip(b"\0"):   # gzip's own tools allow zero padding after the last member
                raise ImportFailed(f"{path} is a damaged gzip file ({len(data)} bytes of no gzip after its end)")
            break
    return bytes(out)


def yaml_loader():
    return yaml_bounds.loader()


def check_yaml_events(text: str, path: Path) -> None:
    """Refuse, before anything is built, a document nested too deep or whose aliases expand
    past MAX_YAML_NODES values (servelab.config.yaml_bounds)."""
    try:
        yaml_bounds.check_expansion(text, MAX_YAML_NODES, MAX_DEPTH)
    except yaml_bounds.YamlRefused as err:
        raise ImportFailed(f"{path} {err}" + (": not a result file" if "nests" in str(err) else "")) from err


def parse(text: str, path: Path, max_bytes: int = MAX_BYTES) -> object:
    """JSON, or YAML (llm-d writes its reports in YAML), within the bounds above."""
    check_size(text, path, max_bytes, yaml_text=False)
    try:
        return json.loads(text)
    except RecursionError as err:
        raise ImportFailed(f"{path} nests deeper than Python can follow: not a result file") from err
    except ValueError as err:   # JSONDecodeError, or an integer of over 4,300 digits
        if path.suffix in (".json", ".gz") or text.lstrip().startswith(("{", "[")):
            raise ImportFailed(f"{path} is not JSON: {str(err)[:200]}") from err
    check_size(text, path, max_bytes, yaml_text=True)
    if "*" in text:   # only an alias can expand (libyaml itself bounds nesting at 1,000)
        check_yaml_events(text, path)
    try:
        return yaml.load(text, Loader=yaml_loader())
    except RecursionError as err:
        raise ImportFailed(f"{path} nests deeper than Python can follow: not a result file") from err
    except ValueError as err:   # an integer of over 4,300 digits
        raise ImportFailed(f"{path} is neither JSON nor YAML servelab reads: {str(err)[:200]}") from err
    except yaml.YAMLError as err:
        if "nesting depth" in str(err):   # libyaml's own bound (1,000 levels)
            raise ImportFailed(f"{path} nests deeper than {MAX_DEPTH} levels: not a result file") from err
        where = getattr(err, "problem_mark", None)
        raise ImportFailed(f"{path} is neither JSON nor YAML: {getattr(err, 'problem', None) or err}"
                           + (f" (line {where.line + 1})" if where else "")) from err


def check_values(data: object, path: Path) -> None:
    """Refuse nesting past MAX_DEPTH and any number that is NaN or infinite (JSON's NaN and
    Infinity, YAML's .nan and .inf, or 1e400), naming the field; infinity is taken where it
    means unbounded (UNBOUNDED_OK). A walk with one iterator a level: no copy of the values."""
    def entries(value):
        return iter(value.items()) if isinstance(value, dict) else enumerate(value)

    if not isinstance(data, (dict, list)):
        return
    stack, keys = [entries(data)], []
    while stack:
        for key, value in stack[-1]:
            if isinstance(value, (dict, list)):
                if len(stack) >= MAX_DEPTH:
                    raise ImportFailed(f"{path} nests deeper than {MAX_DEPTH} levels: not a result file")
                stack.append(entries(value))
                keys.append(str(key))
                break
            if isinstance(value, float) and not math.isfinite(value):
                if math.isinf(value) and value > 0 and key in UNBOUNDED_OK:
                    continue
                raise ImportFailed(f"{path}: {'/'.join([*keys, str(key)])} is {value!r}, not a finite number")
        else:
            stack.pop()
            if keys:
                keys.pop()


def check_size(text: str, path: Path, max_bytes: int, yaml_text: bool) -> None:
    """What parsing costs before it is paid: a container is ~100 bytes of memory for 2 of
    text, and YAML takes ~40 bytes of memory and 0.4 us for each byte of text."""
    containers = text.count("{") + text.count("[")
    if containers > MAX_CONTAINERS:
        raise ImportFailed(f"{path} holds {containers:,} objects and lists, over the {MAX_CONTAINERS:,} an import "
                           f"parses (a result file holds one a request at most)")
    if yaml_text and len(text) > max_bytes // 4:
        raise ImportFailed(f"{path} is {mib(len(text))} of YAML, over the {mib(max_bytes // 4)} an import parses "
                           f"(a quarter of --max-bytes: YAML costs ten times JSON to parse; JSON is read up to "
                           f"{mib(max_bytes)})")


def read_object(path: str | Path, max_bytes: int = MAX_BYTES) -> dict:
    """A result file's object: JSON or YAML, plain or gzipped, within every bound above."""
    path = Path(path)
    data = regular_file_bytes(path, max_bytes)
    if data[:2] == b"\x1f\x8b":
        data = gunzip(data, path, max_bytes)
    if not data.strip():
        raise ImportFailed(f"{path} is empty")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ImportFailed(f"{path} is not text (neither JSON nor YAML, nor gzip): byte {err.start} "
                           f"is {data[err.start:err.start + 1]!r}") from err
    found = parse(text, path, max_bytes)
    if not isinstance(found, dict):
        raise ImportFailed(f"{path} holds a {'JSON ' if path.suffix == '.json' else ''}"
                           f"{type(found).__name__ if found is not None else 'nothing'}, "
                           f"not the object a run's result is")
    check_values(found, path)
    return found
