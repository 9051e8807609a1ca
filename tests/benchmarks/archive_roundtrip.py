"""Size of the paper archive of a finished run, time to build it, time to verify and
rebuild every table and figure from it. Prints figures; asserts nothing.

    .venv/bin/python tests/benchmarks/archive_roundtrip.py WORKDIR [CONFIG ...]

WORKDIR: a git checkout that holds a finished run's results/ (e.g. the embedded
default's, or the e2e test's working copy); CONFIG: the config files it ran with
(default config/config.yaml config/local.yaml).
"""
import sys
import tempfile
import time
from pathlib import Path

import yaml
from snakemake.utils import update_config

from servelab.run import archive
from servelab.config.experiments import enabled_experiments

work = Path(sys.argv[1]).resolve()
config: dict = {}
for name in sys.argv[2:] or ["config/config.yaml", "config/local.yaml"]:
    update_config(config, yaml.safe_load((work / name).read_text()))
experiments = [e for e in enabled_experiments(config) if (work / "results" / e / "metrics.csv").exists()]
with tempfile.TemporaryDirectory() as tmp:
    out = Path(tmp) / "archive.zip"
    started = time.monotonic()
    summary = archive.build(work, config, experiments, out, allow_dirty=True)
    built = time.monotonic() - started
    started = time.monotonic()
    checked = archive.verify(out, Path(tmp) / "verify")
    verified = time.monotonic() - started
print(f"experiments: {len(experiments)}; files: {summary['files']}; archive: {summary['bytes'] / 2**20:.2f} MiB")
print(f"build: {built:.1f} s; verify + rebuild: {verified:.1f} s "
      f"({checked['tables']} tables, {checked['rows']} rows, {checked['figures']} figures)")
