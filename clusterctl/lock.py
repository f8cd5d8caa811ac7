"""The apply lock: one `up`/`apply`/`down` per cluster at a time, also across machines sharing the state directory.

A lock file created with O_EXCL holds who has it (command, user, host, pid, since). A holder on this host whose
process is gone (a killed run) is stale and taken over automatically; a holder on another host can only be removed
with --break-lock, after making sure that run is really gone.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import time
from contextlib import contextmanager
from pathlib import Path

from clusterctl.errors import ClusterctlError


class LockedError(ClusterctlError):
    pass


def _holder(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text() or "{}")
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is dead for our purposes
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def _stale(holder: dict) -> bool:
    return holder.get("host") == socket.gethostname() and isinstance(holder.get("pid"), int) and not _alive(holder["pid"])


def describe(holder: dict) -> str:
    if not holder:
        return "an unreadable lock"
    return (f"`clusterctl {holder.get('command', '?')}` by {holder.get('user', '?')}@{holder.get('host', '?')} "
            f"(pid {holder.get('pid', '?')}) since {holder.get('since', '?')}")


@contextmanager
def held(path: Path, cluster: str, command: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    me = {"command": command, "user": getpass.getuser(), "host": socket.gethostname(), "pid": os.getpid(),
          "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    for _ in range(2):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            break
        except FileExistsError:
            holder = _holder(path)
            if holder is None:
                continue  # released between our open and read: try again
            if _stale(holder):
                path.unlink(missing_ok=True)  # its process is gone: a killed run on this machine
                continue
            raise LockedError(f"cluster {cluster} is locked by {describe(holder)}; wait for it to finish, or if that "
                              "run is gone, pass --break-lock") from None
    else:
        raise LockedError(f"cluster {cluster}: could not take the lock at {path}")
    with os.fdopen(fd, "w") as f:
        json.dump(me, f)
    try:
        yield
    finally:
        if _holder(path) == me:  # only remove our own lock (it may have been broken and retaken)
            path.unlink(missing_ok=True)


def break_lock(path: Path) -> dict | None:
    """Remove the lock whoever holds it; returns who held it."""
    holder = _holder(path)
    path.unlink(missing_ok=True)
    return holder
