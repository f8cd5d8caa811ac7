"""The `local` backend: today's state directory, unchanged on disk (applied/, secrets/, the flock lock file), plus
history.jsonl, one line per apply or down. The version is the number of history lines: an apply from this directory
moves it, so a plan made before is stale even when the build did not change."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Callable, ContextManager

from clusterctl.render.write import read_build, write_build
from clusterctl.state.backend import Applied


class LocalBackend:
    def __init__(self, dir: Path, cluster: str):
        self.dir, self.cluster, self.url = dir, cluster, "local"

    @property
    def applied_dir(self) -> Path:
        return self.dir / "applied"

    @property
    def secrets_dir(self) -> Path:
        d = self.dir / "secrets"
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        return d

    def applied(self) -> Applied:
        files = read_build(self.applied_dir) if self.applied_dir.is_dir() else {}
        n = len(self.history())
        return Applied(files, str(n) if n else None)

    def record(self, files: dict[str, str], entry: dict) -> str:
        write_build(files, self.applied_dir)
        return self._append(entry)

    def forget(self, entry: dict) -> None:
        shutil.rmtree(self.applied_dir, ignore_errors=True)
        self._append(entry)

    def history(self) -> list[dict]:
        try:
            lines = (self.dir / "history.jsonl").read_text().splitlines()
        except FileNotFoundError:
            return []
        return [json.loads(ln) for ln in lines if ln.strip()]

    def _append(self, entry: dict) -> str:
        version = str(len(self.history()) + 1)
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / "history.jsonl", "a") as f:
            f.write(json.dumps({"version": version, **entry}) + "\n")
        return version

    @property
    def lock_path(self) -> Path:
        return self.dir / "lock"

    def check_ready(self) -> None:
        """A directory can always keep what a command writes."""

    def lock(self, command: str) -> ContextManager[dict]:
        from clusterctl.state.lock import held

        return held(self.lock_path, self.cluster, command)

    def holder(self) -> dict | None:
        from clusterctl.state.lock import holder

        return holder(self.lock_path)

    def break_lock(self, lock_id: str | None) -> dict | None:
        from clusterctl.state.lock import break_lock

        return break_lock(self.lock_path, lock_id)

    def secret(self, name: str, make: Callable[[], bytes] | None, mode: int = 0o600) -> bytes | None:
        path = self.secrets_dir / name
        if make is not None:
            create_once(path, make, mode)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None

    def secret_names(self) -> list[str]:
        return sorted(p.name for p in self.secrets_dir.iterdir() if p.is_file() and not p.name.startswith("."))


    def plain(self, name: str) -> bytes | None:
        """Non-secret files of the state (known_hosts): in the directory itself."""
        try:
            return (self.dir / name).read_bytes()
        except FileNotFoundError:
            return None

    def put_plain(self, name: str, data: bytes) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / name).write_bytes(data)


def create_once(path: Path, make: Callable[[], bytes], mode: int) -> None:
    """Write `path` atomically unless it exists (a second writer's file wins over ours, never half of one)."""
    if path.exists():
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(make())
    os.replace(tmp, path)
