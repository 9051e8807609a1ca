"""Rule prebuild_jit: one FlashInfer JIT module built before a session that needs it holds a
GPU; the marker records what was built where (a failed build leaves it to the starts)."""
import sys

from servelab.run.joblog import tee_stderr
from servelab.serve import jit_prebuild

with tee_stderr(snakemake.log[0]):
    done = jit_prebuild.prebuild(snakemake.config, [snakemake.wildcards.module],
                                 progress=lambda line: print(line, file=sys.stderr, flush=True))
jit_prebuild.write_marker(snakemake.output[0], done)
