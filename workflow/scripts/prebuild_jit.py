"""Rule prebuild_jit: one JIT module of an engine built before a session that needs it holds a
GPU; the marker records what was built where (a failed build leaves it to the starts)."""
import sys

from servelab.run.joblog import tee_stderr
from servelab.serve import jit_builds

with tee_stderr(snakemake.log[0]):
    jit_builds.build(snakemake.wildcards.engine, snakemake.config, snakemake.wildcards.module, snakemake.output[0],
                     progress=lambda line: print(line, file=sys.stderr, flush=True))
