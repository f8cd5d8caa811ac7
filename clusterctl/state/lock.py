"""The apply lock: one `up`/`apply`/`down` per cluster at a time, also across machines sharing the state directory.

An flock(2) on a lock file that is never deleted. The kernel holds it for the holder's open file and drops it when
that process ends however it ends (a kill, a crash), so a dead holder's lock is free with no takeover step, and a
live holder's lock can never be taken: there is no unlink-then-create window in which two runs both win. (On NFS,
Linux maps flock to byte-range locks the server arbitrates, so this also holds across machines.)

Who holds it (command, user, host, pid, since, id) is written into the file while held, for the messages only; it
decides nothing. A dead holder's info stays behind until the next run overwrites it or --break-lock clears it.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from clusterctl.core.errors import ClusterctlError


class LockedError(ClusterctlError):
    pass


def describe(holder: dict) -> str:
    if not holder:
        return "a run that is just starting or ending"
    return (f"`clusterctl {holder.get('command', '?')}` by {holder.get('user', '?')}@{holder.get('host', '?')} "
            f"(pid {holder.get('pid', '?')}) since {holder.get('since', '?')}")


def new_holder(command: str) -> dict:
    """What a lock records about its holder (a local lock file or an S3 lock object alike)."""
    from clusterctl.state.backend import actor

    return {"command": command, **actor(), "id": uuid.uuid4().hex}


def _read(fd: int) -> dict:
    try:
        return json.loads(os.pread(fd, 65536, 0) or b"{}")
    except (OSError, ValueError):
        return {}


def _write(fd: int, info: dict) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(info).encode(), 0)


def _open(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)


def _try_flock(fd: int, path: Path) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    except OSError as e:  # e.g. a file system without locks: refuse rather than run unlocked
        if e.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
            raise LockedError(f"cannot lock {path}: {e.strerror}; put the state directory on a local disk or NFS") from None
        raise


@contextmanager
def held(path: Path, cluster: str, command: str) -> Iterator[dict]:
    fd = _open(path)
    try:
        if not _try_flock(fd, path):
            raise LockedError(f"cluster {cluster} is locked by {describe(_read(fd))}; wait for it to finish "
                              "(the lock is freed by itself once that run ends, even if it is killed)")
        me = new_holder(command)
        _write(fd, me)
        try:
            yield me
        finally:
            os.ftruncate(fd, 0)  # the holder info goes before the lock does
    finally:
        os.close(fd)  # releases the flock


def holder(path: Path) -> dict | None:
    """Who holds the lock now, None when it is free (only a live process can hold it)."""
    if not path.exists():
        return None
    fd = _open(path)
    try:
        if _try_flock(fd, path):
            return None
        return _read(fd)
    finally:
        os.close(fd)


def break_lock(path: Path, lock_id: str | None = None) -> dict | None:
    """Clear what a dead run left in the lock file; returns that info (None when there was none).

    The lock itself needs no breaking (it ended with its process); a live holder is never displaced: refused.
    An id, when given, must be the one left behind (the flag means the same as for an s3 backend)."""
    if not path.exists():
        return None
    fd = _open(path)
    try:
        if not _try_flock(fd, path):
            who = _read(fd)
            raise LockedError(f"the lock is held by {describe(who)}, which is still running; --break-lock never "
                              f"takes a lock from a live run: wait for it, or stop it first"
                              + (f" (kill {who['pid']} on {who['host']})" if who.get("pid") else ""))
        left = _read(fd)
        if lock_id and left and left.get("id") != lock_id:
            raise LockedError(f"--break-lock {lock_id}: the lock info left behind has id {left.get('id')}, not that one")
        os.ftruncate(fd, 0)
        return left or None
    finally:
        os.close(fd)
