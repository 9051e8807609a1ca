"""Rule paper_archive: the measured results, workflow, config and environment in one archive."""
import sys
from pathlib import Path

from servelab.run import archive
from servelab.run.joblog import tee_stderr

with tee_stderr(snakemake.log[0]):
    summary = archive.build(Path.cwd(), snakemake.config, snakemake.params.experiments, Path(snakemake.output[0]),
                            allow_dirty=bool(snakemake.params.allow_dirty),
                            workflow_dir=Path(snakemake.params.workflow_dir))
    print(f"servelab archive: {snakemake.output[0]}: {summary['files']} files, "
          f"{summary['bytes'] / 2**20:.1f} MiB, workflow {summary['commit'][:12]}"
          f"{' (dirty)' if summary['dirty'] else ''}; check it with: servelab archive verify "
          f"{snakemake.output[0]} --rebuild DIR", file=sys.stderr)
