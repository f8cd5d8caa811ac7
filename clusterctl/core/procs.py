"""Which process a pid is: a pid alone can be reused, a pid with its start time cannot. Records of a command's own
files and cgroups carry both, so a later command can tell a live owner from a dead one."""

from __future__ import annotations

import os
from pathlib import Path


def starttime(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def me() -> str:
    """This process as `<pid>-<starttime>`: the tag its records carry."""
    return f"{os.getpid()}-{starttime(os.getpid())}"


def tag_alive(tag: str) -> bool:
    """Whether the process a `<pid>-<starttime>` tag names still runs. An unreadable tag counts as alive: a record
    that is not ours to judge is left alone."""
    pid, _, start = tag.partition("-")
    if not pid.isdigit() or not start.isdigit():
        return True
    return starttime(int(pid)) == start
