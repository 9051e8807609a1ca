"""YAML read so that no document can hang or exhaust memory: aliases (&anchor / *alias) may
not expand past a budget of values (a "billion laughs" is a few hundred bytes and billions of
values), nesting is bounded, and only a regular file of bounded size is opened (a named pipe
would block the read forever). Config files (servelab validate, plan, preflight) and imported
results (servelab.export.bounded_read) are read through it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import yaml

MAX_CONFIG_BYTES = 4 * 2**20   # a config file (config/config.yaml is ~60 KB)


class YamlRefused(ValueError):
    """A document refused before it was built: what is wrong, without the file's name."""


def loader():
    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def check_expansion(text: str, max_values: int, max_depth: int) -> None:
    """Refuse, before anything is built, a document nested deeper than `max_depth` or whose
    aliases expand past `max_values` values. A YAML error is left to the load that follows
    (it says what is wrong, with its line)."""
    sizes: dict[str, int] = {}
    stack: list[list] = [[None, 0]]   # [anchor, values so far] of each open collection
    total = 0
    try:
        for event in yaml.parse(text, Loader=loader()):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                stack.append([event.anchor, 1])
                if len(stack) - 1 > max_depth:
                    raise YamlRefused(f"nests deeper than {max_depth} levels")
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                anchor, size = stack.pop()
                if anchor is not None:
                    sizes[anchor] = size
                stack[-1][1] += size
            elif isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent)):
                size = sizes.get(event.anchor, 1) if isinstance(event, yaml.AliasEvent) else 1
                if isinstance(event, yaml.ScalarEvent) and event.anchor is not None:
                    sizes[event.anchor] = 1
                stack[-1][1] += size
                total += size
                if total > max_values:
                    raise YamlRefused(f"expands past {max_values:,} values through its YAML aliases (*name): "
                                      f"refused (a few bytes can expand to billions)")
    except yaml.YAMLError as err:
        if "depth" in str(err):   # libyaml's own bound on nesting (1,000)
            raise YamlRefused(f"nests deeper than {max_depth} levels") from err


def read_config_file(path: str | Path, max_bytes: int = MAX_CONFIG_BYTES) -> dict:
    """One config file (config/config.yaml or an overlay) as a dict; ValueError naming the
    file, and its line where YAML says one, for anything else."""
    path = Path(path)
    try:
        info = os.stat(path)
    except OSError as err:
        raise ValueError(f"{path}: cannot be read ({err.strerror or err})") from err
    if stat.S_ISDIR(info.st_mode):
        raise ValueError(f"{path} is a directory, not a config file (name a YAML file in it)")
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"{path} is not a regular file (a pipe or a device could block the read forever)")
    if info.st_size > max_bytes:
        raise ValueError(f"{path} is {info.st_size:,} bytes, over the {max_bytes:,} a config file may be")
    text = path.read_text()
    try:
        if "*" in text:   # only an alias can expand
            check_expansion(text, max_values=100_000, max_depth=64)
        data = yaml.load(text, Loader=loader())
    except YamlRefused as err:
        raise ValueError(f"{path} {err}") from err
    except yaml.YAMLError as err:
        raise ValueError(f"{path} is not valid YAML:\n{err}") from err
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"{path} holds a YAML {type(data).__name__}, not a mapping of config keys")
    return data


def read_config_files(paths) -> dict:
    """config/config.yaml and overlays merged in order, as Snakemake merges --configfile's."""
    from snakemake.utils import update_config

    config: dict = {}
    for path in paths:
        update_config(config, read_config_file(path))
    return config
