"""`python -m servelab`: the same as the `servelab` console script."""
import sys

from servelab.cli import main

sys.exit(main())
