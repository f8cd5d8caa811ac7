"""Per-cluster state: the last applied build (and its history), the apply lock, the secrets.

Where it lives is the backend's business (clusterctl.state.backend): `local`, the directory
$CLUSTERCTL_STATE_DIR/<cluster> (default ~/.local/state/clusterctl/<cluster>), or `s3://bucket/prefix`. Ops only
use ClusterState. The directory is always there as this machine's scratch (the rendered build Ansible reads,
known_hosts, the lab's nodes, Pulumi's workspace); with `local` it also holds the state itself. Never in the git
checkout: the munge key and SSH keys are secrets.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Callable, ContextManager, Iterator

from clusterctl.state.backend import Applied, Backend, StateError, chosen_kms_key, chosen_url, history_entry

if TYPE_CHECKING:
    from clusterctl.spec.cluster import ClusterSpec
    from clusterctl.state.local import LocalBackend

__all__ = ["Applied", "ClusterState", "state_root"]


def state_root() -> Path:
    env = os.environ.get("CLUSTERCTL_STATE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "clusterctl"


class ClusterState:
    def __init__(self, cluster: str, root: Path | None = None, backend: str | None = None, kms_key: str | None = None):
        """backend, kms_key: used as given; when None, $CLUSTERCTL_STATE_BACKEND / _KMS_KEY, else local."""
        self.cluster = cluster
        self.dir = (root or state_root()) / cluster
        self.backend = open_backend(backend or chosen_url(None), cluster, self.dir, kms_key or chosen_kms_key(None))
        self._holder: dict | None = None
        self._secrets_tmp: Path | None = None
        self._known_hosts: bytes | None = None  # s3: the backend's copy as fetched, to tell what this run added

    @classmethod
    def for_spec(cls, spec: ClusterSpec, root: Path | None = None) -> "ClusterState":
        """The state of a spec's cluster, in the backend its `state:` names (or $CLUSTERCTL_STATE_BACKEND)."""
        return cls(spec.name, root, chosen_url(spec.state.backend), chosen_kms_key(spec.state.kms_key))

    @property
    def is_local(self) -> bool:
        return self.backend.url == "local"

    def _local(self) -> LocalBackend:
        """The local backend, for what only a directory has (the applied build and secrets as files)."""
        from clusterctl.state.local import LocalBackend

        assert isinstance(self.backend, LocalBackend)
        return self.backend

    # -- applied builds -------------------------------------------------------------------------------------------

    @property
    def applied_dir(self) -> Path:
        """The applied build as a directory (Ansible and check mode read files): the backend's, or a fresh copy."""
        if self.is_local:
            return self._local().applied_dir
        from clusterctl.render.write import write_build

        copy = self.dir / "applied-copy"
        write_build(self.applied().files, copy)
        return copy

    def applied(self) -> Applied:
        """The applied build and its version, read together (one pointer read with an s3 backend)."""
        return self.backend.applied()

    def applied_build(self) -> dict[str, str]:
        return self.applied().files

    def record_applied(self, files: dict[str, str], cost_monthly_usd: float | None = None) -> str:
        """Called once an apply converged: the next plan diffs against exactly this build. Returns the new version.
        cost_monthly_usd: what the applied cluster costs (for the history), when the caller has it at hand."""
        entry = history_entry("apply", files, self.history(), self._command(), cost_monthly_usd)
        return self.backend.record(files, entry)

    def forget_applied(self) -> None:
        """After `down`: the next plan is a fresh create again (the history keeps the down)."""
        self.backend.forget(history_entry("down", {}, self.history(), self._command()))

    def history(self) -> list[dict]:
        return self.backend.history()

    def _command(self) -> str | None:
        return (self._holder or {}).get("command")

    # -- the lock -------------------------------------------------------------------------------------------------

    @property
    def lock_path(self) -> Path:
        return self.dir / "lock"

    def check_ready(self) -> None:
        """Before a command changes anything: refuse a backend set up so that the command would fail halfway."""
        self.backend.check_ready()

    def lock(self, what: str) -> ContextManager[dict]:
        """One apply at a time per cluster (local: clusterctl.state.lock; s3: clusterctl.state.s3lock)."""
        from contextlib import contextmanager

        @contextmanager
        def held() -> Iterator[dict]:
            with self.backend.lock(what) as me:
                self._holder = me
                try:
                    yield me
                finally:
                    self._holder = None
                    self._keep_known_hosts()

        return held()

    def lock_holder(self) -> dict | None:
        """Who holds the lock now; None when it is free."""
        return self.backend.holder()

    def break_lock(self, lock_id: str | None = None) -> dict | None:
        """local: clears a dead run's info (the id is optional); s3: removes the lock object, only given its id."""
        return self.backend.break_lock(lock_id)

    # -- secrets --------------------------------------------------------------------------------------------------

    @property
    def secrets_dir(self) -> Path:
        """Where secret files are: the state directory's (local), or a private directory of this process, in memory
        where the machine has /dev/shm, removed when it exits (s3: the backend holds them only encrypted)."""
        if self.is_local:
            return self._local().secrets_dir
        if self._secrets_tmp is None:
            self._secrets_tmp = _private_dir()
        return self._secrets_tmp

    def secret(self, name: str, make: Callable[[], bytes] | None = None) -> bytes | None:
        """A secret's bytes; made once with make() (and kept) when there is none yet."""
        return self.backend.secret(name, make)

    def secret_file(self, name: str, make: Callable[[], bytes] | None = None, mode: int = 0o600) -> Path:
        """A secret as a file a tool can read (ssh -i, munge key for Ansible), made once when missing and `make` is
        given. Without one and with no such secret, the path is returned all the same (and does not exist)."""
        path = self.secrets_dir / name
        if self.is_local:
            self.backend.secret(name, make, mode)
            return path
        data = self.backend.secret(name, make)
        if data is not None:
            _write_private(path, data, mode)
        return path

    # -- machine-local scratch ------------------------------------------------------------------------------------

    @property
    def known_hosts_path(self) -> Path:
        """Host keys of the cluster's hosts that the spec does not pin, recorded on first contact. With an s3
        backend they live in the bucket too: a fresh runner checks hosts strictly against what an earlier one
        recorded, instead of accepting every key anew."""
        path = self.dir / "known_hosts"
        if not self.is_local and self._known_hosts is None:
            self._known_hosts = self.backend.plain("known_hosts") or b""
            if self._known_hosts:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(self._known_hosts)
        return path

    def _keep_known_hosts(self) -> None:
        """At lock release: keys this run recorded go to the backend (only lock holders write them, so no merge)."""
        if self.is_local or self._known_hosts is None:
            return
        path = self.dir / "known_hosts"
        now = path.read_bytes() if path.exists() else b""
        if now and now != self._known_hosts:
            self.backend.put_plain("known_hosts", now)
            self._known_hosts = now

    def pulumi_url(self) -> str:
        """The Pulumi backend when the spec names none: next to the rest of the state, so a runner that is thrown
        away does not take the stack's state with it."""
        if self.is_local:
            return (self.dir / "pulumi").as_uri()
        return f"{self.backend.url}/{self.cluster}/pulumi"


def open_backend(url: str, cluster: str, local_dir: Path, kms_key: str | None) -> Backend:
    # Here, not in state.backend: the backends import that module, so choosing them there would be a cycle.
    if url == "local":
        from clusterctl.state.local import LocalBackend

        return LocalBackend(local_dir, cluster)
    m = re.fullmatch(r"s3://([^/]+)/?(.*)", url)
    if not m:
        raise StateError(f"state backend {url!r}: not `local` or s3://bucket/prefix")
    from clusterctl.state.s3 import S3Backend

    return S3Backend(m.group(1), m.group(2).strip("/"), cluster, kms_key)


SECRETS_PREFIX = "clusterctl-secrets-"


def _private_dir() -> Path:
    """clusterctl-secrets-<pid>-<starttime>-XXXX: removed when this process exits (atexit; SIGTERM and SIGHUP end
    the command as an exception, core.interrupt, so it runs then too). A SIGKILLed command cannot remove its own:
    each new one first removes those of this user whose process is gone."""
    import atexit
    import shutil
    import tempfile

    from clusterctl.core import procs

    shm = Path("/dev/shm")
    where = Path(shm if os.access(shm, os.W_OK) else tempfile.gettempdir())
    sweep_private_dirs(where)
    d = Path(tempfile.mkdtemp(prefix=f"{SECRETS_PREFIX}{procs.me()}-", dir=where))
    atexit.register(shutil.rmtree, d, True)
    return d


def sweep_private_dirs(where: Path) -> list[Path]:
    """Remove the secrets directories of dead commands of this user in `where`; returns those removed."""
    import shutil

    from clusterctl.core import procs

    gone = []
    for d in where.glob(SECRETS_PREFIX + "*"):
        tag = "-".join(d.name[len(SECRETS_PREFIX):].split("-")[:2])
        try:
            mine = d.is_dir() and not d.is_symlink() and d.stat().st_uid == os.getuid()
        except OSError:
            continue
        if mine and not procs.tag_alive(tag):
            shutil.rmtree(d, ignore_errors=True)
            gone.append(d)
    return gone


def _write_private(path: Path, data: bytes, mode: int) -> None:
    if path.exists() and path.read_bytes() == data:
        return
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
