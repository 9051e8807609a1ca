"""Where `servelab export` may write, and how: never over a results folder, never over a
folder it did not make, and all at once.

A folder an export makes holds a manifest (MANIFEST: the files it wrote). A later export may
replace such a folder only while it holds exactly those files; any other non-empty folder,
a results folder (one with metrics.csv, sessions/ or store/), a folder holding one, and
anything inside a results folder's store/ or sessions/ are refused, naming the reason,
before anything is written. The new folder is built beside the old one and swapped in by
renames, so a reader never finds half an export under the name.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

MANIFEST = ".servelab-export.json"
# what makes a folder a servelab experiment's results
RESULT_MARKS = ("metrics.csv", "sessions", "store")
# the folders of a results folder that only the workflow writes
RESULT_INNARDS = ("sessions", "store")


class UnsafeOut(ValueError):
    pass


def is_results(folder: Path) -> bool:
    return any((folder / mark).exists() for mark in RESULT_MARKS)


def results_below(folder: Path) -> Path | None:
    """The first results folder at or below `folder` (stops at the first found)."""
    for root, dirs, _files in os.walk(folder):
        if is_results(Path(root)):
            return Path(root)
        dirs.sort()
    return None


def written_files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if not p.is_dir()}


def check_out(out: Path, results: list[Path]) -> None:
    """Refuse an `--out` that would delete, overwrite or mix with what the export did not write."""
    target = out.resolve()
    for exp in results:
        exp = exp.resolve()
        if target == exp:
            raise UnsafeOut(f"--out {out} is the results folder being exported: it would be replaced; "
                            f"name a new folder (e.g. {out}/export/llmd)")
        if exp.is_relative_to(target):
            raise UnsafeOut(f"--out {out} holds the results folder {exp}: exporting there would replace it; "
                            f"name a new folder")
    for parent in [target, *target.parents]:
        if is_results(parent) and target != parent:
            inner = target.relative_to(parent).parts[0]
            if inner in RESULT_INNARDS:
                raise UnsafeOut(f"--out {out} is inside {parent / inner}, which only the workflow writes; "
                                f"name a folder outside it")
            break
    if target.exists() and not target.is_dir():
        raise UnsafeOut(f"--out {out} is a file, not a folder: it would be replaced; name a new folder")
    if not target.is_dir() or not any(target.iterdir()):
        return
    if (found := results_below(target)) is not None:
        raise UnsafeOut(f"--out {out} holds the results folder {found}: exporting there would replace it; "
                        f"name a new folder")
    manifest = target / MANIFEST
    if not manifest.is_file():
        some = sorted(p.name for p in target.iterdir())[:3]
        raise UnsafeOut(f"--out {out} is a non-empty folder that servelab export did not make (it holds "
                        f"{', '.join(some)}...): name a new or empty folder")
    try:
        listed = set(json.loads(manifest.read_text())["files"])
    except (ValueError, KeyError, TypeError) as err:
        raise UnsafeOut(f"--out {out}: its {MANIFEST} is unreadable ({err}); name a new folder") from err
    if extra := sorted(written_files(target) - listed - {MANIFEST}):
        raise UnsafeOut(f"--out {out} holds {len(extra)} file(s) an earlier export did not write "
                        f"(e.g. {extra[0]}): they would be deleted; move them or name a new folder")


def write_file(path: Path, text: str) -> None:
    path.write_text(text)


def write_folder(out: Path, files: dict[str, str]) -> None:
    """`files` ({relative path: text}) as the folder `out`, swapped in whole: built as a
    hidden sibling, the manifest written last, then renamed over any earlier export."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
    old = out.with_name(f".{out.name}.old{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        for rel, text in files.items():
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            write_file(path, text)
        (tmp / MANIFEST).write_text(json.dumps({"files": sorted(files)}, indent=1) + "\n")
        if out.exists():
            os.replace(out, old)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
