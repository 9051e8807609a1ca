"""The workflow's analysis scripts run by a process that imported pandas, matplotlib and
seaborn once (#60).

Each analysis job (a table, a figure, the comparisons) is a new interpreter that spends
longer importing pandas, matplotlib and seaborn than working (docs/measurements.md); the
CPU default runs dozens of them. A script that calls `run_warm` before
those imports is run again by a child of the analysis zygote (servelab.engines.zygote),
which has them imported: Snakemake's preamble in the script gives the child the same job.
The script's own process waits for the child, passes on what it printed, and exits with
its code; stopped (Snakemake's Ctrl-C or a job's kill), it stops the child first.

The script's body runs in the script's own process, as before, under SLURM (a job's
zygote would die with its job), with SERVELAB_ZYGOTE=0, and where no zygote could run it.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
from pathlib import Path

from servelab.engines import zygote

CHILD = "SERVELAB_WARM_CHILD"   # "1" in the child's environment: run the script's body


def wanted(env: dict) -> bool:
    return env.get(CHILD) != "1" and env.get(zygote.ENV) != "0" and "SLURM_JOB_ID" not in env


def run_warm(script: str) -> None:
    """Return where this process runs the script's body (it is the zygote's child, or none
    can be one); else run `script` (Snakemake's copy of it, `__real_file__`) in a child of
    the analysis zygote and exit with the child's code."""
    if not wanted(os.environ):
        return
    handle, name = tempfile.mkstemp(prefix="servelab-warm-", suffix=".log")
    os.close(handle)   # the child opens it by name
    out = Path(name)
    child = zygote.fork_script(script, {**os.environ, CHILD: "1"}, out, progress=lambda m: print(m, file=sys.stderr))
    if child is None:
        out.unlink(missing_ok=True)
        return
    signal.signal(signal.SIGTERM, signal.default_int_handler)   # a job killed stops its child too
    try:
        code = child.wait()
    except BaseException:
        child.stop(grace_s=2)
        raise
    finally:
        sys.stderr.write(out.read_text(errors="replace"))
        sys.stderr.flush()
        out.unlink(missing_ok=True)
    sys.exit(code)
