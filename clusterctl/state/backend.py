"""The one interface behind which a cluster's state lives, and the choice of where.

Ops never see which backend they use: they go through ClusterState, which delegates here. A backend keeps the applied
build (with an opaque version that moves on every apply and down, so a plan made against an older one is stale), a
history of applies, the apply lock and the secrets. Two exist: `local` (the state directory, flock) and `s3://`.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import time
from dataclasses import dataclass
from typing import Callable, ContextManager, Protocol

from clusterctl.core.errors import ClusterctlError

BACKEND_ENV = "CLUSTERCTL_STATE_BACKEND"
KMS_ENV = "CLUSTERCTL_STATE_KMS_KEY"


class StateError(ClusterctlError):
    pass


class StateConflict(StateError):
    """The state moved under us (another runner recorded an apply): nothing of ours was made current."""


@dataclass(frozen=True)
class Applied:
    files: dict[str, str]
    version: str | None  # None: never recorded through a backend (a state dir from before versions)


class Backend(Protocol):
    url: str

    def applied(self) -> Applied: ...
    def record(self, files: dict[str, str], entry: dict) -> str: ...
    def forget(self, entry: dict) -> None: ...
    def history(self) -> list[dict]: ...
    def lock(self, command: str) -> ContextManager[dict]: ...
    def check_ready(self) -> None: ...
    def holder(self) -> dict | None: ...
    def break_lock(self, lock_id: str | None) -> dict | None: ...
    def secret(self, name: str, make: Callable[[], bytes] | None, mode: int = 0o600) -> bytes | None: ...
    def secret_names(self) -> list[str]: ...
    def plain(self, name: str) -> bytes | None: ...
    def put_plain(self, name: str, data: bytes) -> None: ...


def chosen_url(from_spec: str | None) -> str:
    """$CLUSTERCTL_STATE_BACKEND, else the spec's state.backend, else local. The variable is checked against the
    spec's own allow-list: it ends up in object keys as much as the spec's value does."""
    return _checked_env(BACKEND_ENV, "backend", "not `local` or s3://bucket/prefix") or from_spec or "local"


def chosen_kms_key(from_spec: str | None) -> str | None:
    return _checked_env(KMS_ENV, "kms_key", "not a KMS alias (alias/...) or key ARN") or from_spec


def _checked_env(var: str, field: str, what: str) -> str:
    """A state setting from the environment, held to the spec field's own allow-list; "" when unset."""
    from clusterctl.spec.cluster import State

    value = os.environ.get(var, "").strip()
    if value:
        try:
            State(**{field: value})
        except ValueError:
            raise StateError(f"{var}={value!r}: {what}") from None
    return value


def actor() -> dict:
    """Who is running: the same fields in lock objects and history entries."""
    return {"user": getpass.getuser(), "host": socket.gethostname(), "pid": os.getpid(),
            "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def history_entry(action: str, files: dict[str, str], previous: list[dict], command: str | None,
                  cost_monthly_usd: float | None = None) -> dict:
    """One line of `clusterctl history`: when, who, what was applied (the plan fingerprint's spec and build
    hashes, so a reviewed plan can be matched to the apply) and what it changed the monthly cost by."""
    from clusterctl.render import layout, sha256

    who = actor()
    entry = {"action": action, "when": who["since"], "who": f"{who['user']}@{who['host']}", "command": command,
             "fingerprint": None, "cost_monthly_usd": None, "cost_delta_monthly_usd": None}
    if files:
        entry["fingerprint"] = {"spec": sha256(files[layout.SPEC_JSON]), "build": sha256(files[layout.MANIFEST])}
        # The caller's figure (it has the compiled plan); else costed from the build's spec (a migrated build).
        entry["cost_monthly_usd"] = (round(cost_monthly_usd, 2) if cost_monthly_usd is not None
                                     else _monthly_cost(files[layout.SPEC_JSON]))
    elif action == "down":
        entry["cost_monthly_usd"] = 0.0
    before = next((e.get("cost_monthly_usd") for e in reversed(previous) if e.get("cost_monthly_usd") is not None), 0.0)
    if entry["cost_monthly_usd"] is not None:
        entry["cost_delta_monthly_usd"] = round(entry["cost_monthly_usd"] - before, 2)
    return entry


def _monthly_cost(spec_json: str) -> float | None:
    from clusterctl.economics.cost import estimate_cost
    from clusterctl.spec.cluster import ClusterSpec

    try:
        return round(estimate_cost(ClusterSpec.model_validate(json.loads(spec_json))).total_monthly_usd, 2)
    except (ValueError, ClusterctlError):
        return None  # history is informative: a spec an older clusterctl wrote must not block the apply
