"""The apply lock of an s3 backend: one object, created only if absent (`If-None-Match: *`), so of any number of
runners racing for it S3 lets exactly one create it. It holds who, host, command, since and a unique id.

The holder deletes it with `If-Match` on the ETag its create returned: it never removes a lock someone else made.
A runner that dies (killed, its VM gone) leaves the object; no other machine can tell a dead runner from a slow
one, so the lock is never taken over automatically: the refusal prints the lock's id, and only
`--break-lock ID` with that id removes it (again with If-Match, so a lock re-taken meanwhile is never removed).
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Iterator, Protocol

from clusterctl.state.lock import LockedError, describe, new_holder


class Objects(Protocol):
    """The conditional object store the lock lives in (clusterctl.state.s3.Objects)."""

    def get(self, key: str) -> tuple[bytes, str] | None: ...

    def put(self, key: str, body: bytes, if_none_match: bool = False, if_match: str | None = None) -> str | None: ...

    def delete(self, key: str, if_match: str) -> bool: ...


class S3Lock:
    def __init__(self, objects: Objects, key: str, cluster: str) -> None:
        self.objects, self.key, self.cluster = objects, key, cluster

    def _current(self) -> tuple[dict, str] | None:
        got = self.objects.get(self.key)
        if got is None:
            return None
        body, etag = got
        try:
            return json.loads(body), etag
        except ValueError:
            return {"id": None, "raw": body[:200].decode(errors="replace")}, etag

    def holder(self) -> dict | None:
        cur = self._current()
        return cur[0] if cur else None

    def refusal(self, who: dict) -> str:
        return (f"cluster {self.cluster} is locked by {describe(who)} (lock id {who.get('id')}); wait for it to "
                f"finish. If that run is gone (killed, its runner destroyed), and only then, clear its lock with "
                f"`--break-lock {who.get('id')}`")

    @contextmanager
    def held(self, command: str) -> Iterator[dict]:
        me = new_holder(command)
        etag = self.objects.put(self.key, json.dumps(me).encode(), if_none_match=True)
        if etag is None:
            who = self.holder() or {}
            raise LockedError(self.refusal(who))
        try:
            yield me
        except BaseException:
            try:
                self.objects.delete(self.key, if_match=etag)
            except Exception:  # noqa: BLE001 - the run's own error is the one to report; the lock id was printed
                pass
            raise
        if not self.objects.delete(self.key, if_match=etag):
            raise LockedError(f"the lock of cluster {self.cluster} was broken (--break-lock) while this run held it; "
                              "another run may have changed the cluster meanwhile: run `clusterctl plan` again")

    def break_(self, lock_id: str | None) -> dict | None:
        cur = self._current()
        if cur is None:
            return None
        who, etag = cur
        if not lock_id:
            raise LockedError(f"{self.refusal(who)}. A bare --break-lock is refused with an s3 backend: name the id, "
                              "so that only the lock you judged dead is removed")
        if who.get("id") != lock_id:
            raise LockedError(f"--break-lock {lock_id}: not the id of the lock now held ({who.get('id')}, "
                              f"{describe(who)}); nothing was removed")
        if not self.objects.delete(self.key, if_match=etag):
            raise LockedError(f"the lock {lock_id} changed while it was being broken; nothing was removed")
        return who
