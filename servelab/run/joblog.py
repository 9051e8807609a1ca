"""Job logs: everything a job says on stderr also goes to its Snakemake log."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path


class _Tee:
    def __init__(self, *streams):
        self.streams = streams

    def write(self, text):
        for stream in self.streams:
            stream.write(text)
            stream.flush()
        return len(text)

    def flush(self):
        for stream in self.streams:
            stream.flush()


@contextmanager
def tee_stderr(log_path: str | Path):
    """Show progress on the terminal and keep it in the log, tracebacks included."""
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    original = sys.stderr
    with open(log_path, "w") as log:
        sys.stderr = _Tee(original, log)
        try:
            yield
        except BaseException:
            import traceback

            traceback.print_exc()
            raise
        finally:
            sys.stderr = original
