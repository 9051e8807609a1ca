"""A server's processes as /proc shows them: its process group and every descendant (also
those that left the group for a session of their own), each told from a later process of
the same pid by its start time; signalling the group."""

from __future__ import annotations

import os
from pathlib import Path


def signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False


def proc_stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (state, ppid, pgrp, ...), or None."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_time(pid: int) -> str | None:
    """Its start time in clock ticks since boot: tells a process from a later one of its pid."""
    fields = proc_stat(pid)
    return fields[19] if fields else None


def still_running(pid: int, started: str) -> bool:
    """That process (pid and start time) is alive and not a zombie."""
    fields = proc_stat(pid)
    return bool(fields) and fields[0] != "Z" and fields[19] == started


def parent_pid(pid: int) -> int | None:
    return int(fields[1]) if (fields := proc_stat(pid)) else None


def group_processes(pgid: int) -> dict[int, str]:
    """{pid: title} of the live processes of the group and of their descendants (title:
    the command line as the process set it, e.g. vLLM's 'VLLM::EngineCore')."""
    parents, members = {}, set()
    for proc_dir in Path("/proc").iterdir():
        if not proc_dir.name.isdigit():
            continue
        fields = proc_stat(int(proc_dir.name))
        if not fields or fields[0] == "Z":
            continue
        parents[int(proc_dir.name)] = int(fields[1])
        if int(fields[2]) == pgid:
            members.add(int(proc_dir.name))
    changed = True
    while changed:   # descendants that left the group (setsid) are still its own
        new = {pid for pid, ppid in parents.items() if ppid in members and pid not in members}
        members |= new
        changed = bool(new)
    out = {}
    for pid in members:
        try:
            out[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
    return out


def group_alive(pgid: int) -> bool:
    """True while any non-zombie process is left in the group."""
    return any((fields := proc_stat(int(d.name))) and int(fields[2]) == pgid and fields[0] != "Z"
               for d in Path("/proc").iterdir() if d.name.isdigit())
