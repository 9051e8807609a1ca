"""Where `servelab export` may write, and how: never into a results folder's innards, never
through a symlink, never over what the export did not make, and all at once.

The rules, each a refusal named before anything is written, in the order check_out checks
them (tests/export/test_export_targets.py tries each on a table of targets):

    symlink          --out is a symlink
    innards          --out is in a results folder's store/ or sessions/, at any depth
    exported         --out is the results folder being exported, or holds it
    current folder   --out is the folder the command runs in, or holds it
    holds results    --out holds any results folder (metrics.csv, sessions/ or store/ in it)
    a file           --out is a file (or a pipe, a device)
    symlink inside   a symlink in --out (an earlier export makes none)
    read-only        --out is an empty read-only folder
    not ours         --out is a non-empty folder without an export's manifest
    manifest         its manifest is unreadable
    extra file       it holds a file its export did not write
    extra folder     it holds a folder its export did not make (an empty one included)
    read-only        a file or folder in it is read-only: its owner protected it
    no write         the disk refuses (a read-only parent, /proc, a full disk): one line, as it was

A folder an export makes holds a manifest (MANIFEST: the files it wrote). The new folder is
built as a hidden sibling and swapped in by renames, so a reader never finds half an export
under the name; whatever happens, no hidden sibling is left behind.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
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


def check_not_inside_results(target: Path, what: str) -> None:
    """Refuse `target` (resolved) inside any results folder's store/ or sessions/, at any
    depth: a results folder nested in a store (store/sessions/) does not end the search."""
    target = target.resolve()
    for parent in target.parents:
        if is_results(parent):
            inner = target.relative_to(parent).parts[0]
            if inner in RESULT_INNARDS:
                raise UnsafeOut(f"{what} is inside {parent / inner}, which only the workflow writes; "
                                f"name a folder outside it")


def symlinks_in(folder: Path) -> list[Path]:
    return [Path(root) / name for root, dirs, files in os.walk(folder) for name in [*dirs, *files]
            if (Path(root) / name).is_symlink()]


def read_only(path: Path) -> bool:
    """Read-only by its mode (root may write anyway; what its owner meant is what counts)."""
    return not os.lstat(path).st_mode & stat.S_IWUSR


def check_earlier_export(out: Path, target: Path) -> None:
    """An earlier export may be replaced only whole: every entry its own, none protected."""
    manifest = target / MANIFEST
    if not manifest.is_file():
        some = sorted(p.name for p in target.iterdir())[:3]
        raise UnsafeOut(f"--out {out} is a non-empty folder that servelab export did not make (it holds "
                        f"{', '.join(some)}...): name a new or empty folder")
    try:
        listed = set(json.loads(manifest.read_text())["files"])
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise UnsafeOut(f"--out {out}: its {MANIFEST} is unreadable ({err}); name a new folder") from err
    if extra := sorted(written_files(target) - listed - {MANIFEST}):
        raise UnsafeOut(f"--out {out} holds {len(extra)} file(s) an earlier export did not write "
                        f"(e.g. {extra[0]}): they would be deleted; move them or name a new folder")
    made = {str(Path(f).parent) for f in listed} | {str(p) for f in listed for p in Path(f).parents}
    folders = {str(p.relative_to(target)) for p in target.rglob("*") if p.is_dir()}
    if extra := sorted(folders - made):
        raise UnsafeOut(f"--out {out} holds {len(extra)} folder(s) an earlier export did not make "
                        f"(e.g. {extra[0]}/): they would be deleted; move them or name a new folder")
    for path in [target, *target.rglob("*")]:
        if read_only(path):
            raise UnsafeOut(f"--out {out}: {path} is read-only, so someone protected it; it would be "
                            f"replaced: make it writable or name a new folder")


def check_out(out: Path, results: list[Path]) -> None:
    """Refuse an `--out` that would delete, overwrite or mix with what the export did not write."""
    if Path(out).is_symlink():
        raise UnsafeOut(f"--out {out} is a symlink: the export would land where it points; name a real folder")
    target = Path(out).resolve()
    check_not_inside_results(target, f"--out {out}")
    for exp in results:
        exp = exp.resolve()
        if target == exp:
            raise UnsafeOut(f"--out {out} is the results folder being exported: it would be replaced; "
                            f"name a new folder (e.g. {out}/export/llmd)")
        if exp.is_relative_to(target):
            raise UnsafeOut(f"--out {out} holds the results folder {exp}: exporting there would replace it; "
                            f"name a new folder")
    cwd = Path.cwd().resolve()
    if cwd == target or cwd.is_relative_to(target):
        raise UnsafeOut(f"--out {out} is the folder this command runs in (or holds it): it would be replaced; "
                        f"name a new folder (e.g. {Path(out) / 'llmd'})")
    if target.exists() and not target.is_dir():
        raise UnsafeOut(f"--out {out} is a file, not a folder: it would be replaced; name a new folder")
    if not target.is_dir():
        return
    if links := symlinks_in(target):
        raise UnsafeOut(f"--out {out} holds a symlink ({links[0]}) that servelab export did not make; "
                        f"name a new folder")
    if not any(target.iterdir()):
        if read_only(target):
            raise UnsafeOut(f"--out {out} is a read-only folder: make it writable or name a new folder")
        return
    if (found := results_below(target)) is not None:
        raise UnsafeOut(f"--out {out} holds the results folder {found}: exporting there would replace it; "
                        f"name a new folder")
    check_earlier_export(out, target)


def write_file(path: Path, text: str) -> None:
    path.write_text(text)


def remove(path: Path) -> None:
    """Remove a folder this export made (its own hidden sibling), whatever its modes."""
    def writable_then_retry(func, name, _exc):
        os.chmod(os.path.dirname(name), stat.S_IRWXU)
        func(name)
    if path.exists():
        shutil.rmtree(path, onerror=writable_then_retry)


def write_folder(out: Path, files: dict[str, str]) -> None:
    """`files` ({relative path: text}) as the folder `out`, swapped in whole: built as a
    hidden sibling, the manifest written last, then renamed over any earlier export. An
    OSError (a read-only parent, a full disk, /proc) leaves everything as it was."""
    out = Path(os.path.abspath(out))
    tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
    old = out.with_name(f".{out.name}.old{os.getpid()}")
    missing = [p for p in [out.parent, *out.parent.parents] if not p.exists()]
    swapped = False
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        remove(tmp)
        for rel, text in files.items():
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            write_file(path, text)
        (tmp / MANIFEST).write_text(json.dumps({"files": sorted(files)}, indent=1) + "\n")
        if out.exists():
            os.replace(out, old)
            swapped = True
        os.replace(tmp, out)
        swapped = False
    except BaseException:
        if swapped:   # the earlier export back under its name
            os.replace(old, out)
        remove(tmp)
        if missing and missing[-1].is_dir() and not any(p.is_file() for p in missing[-1].rglob("*")):
            remove(missing[-1])   # the folders this export made for it
        raise
    finally:
        remove(old)
