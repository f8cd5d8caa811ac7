"""One interface for where capacity comes from. Lifecycle operations (up, apply, down, plan) loop over the providers
of a cluster's pools and controller and call these hooks; they never ask which provider a node is on.

Each provider lives in its own package (clusterctl.engines.local, .onprem, .aws); `providers_for` picks them by the
names the spec uses, and imports each lazily so that `clusterctl --help` never loads Pulumi or boto3.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

from clusterctl.compile.model import ClusterPlan, LiveFacts
from clusterctl.state import ClusterState
from clusterctl.spec.cluster import ClusterSpec


@dataclass(frozen=True)
class SshIdentity:
    """How clusterctl's own SSH reaches this provider's nodes."""

    private_key: Path | None = None
    known_hosts: Path | None = None  # None: the cluster's own known_hosts
    tofu: bool = True  # first contact records the key (accept-new); False: every key is known beforehand
    lab: Any = None  # the Lab handle (clusterctl.engines.local.Lab), for the local provider


@dataclass
class Context:
    """What a hook may need from the running command."""

    plan: ClusterPlan
    state: ClusterState
    console: Any = None  # a rich Console
    quiet: bool = False
    log: Callable[[str], None] = lambda message: None
    confirm: Callable[[object], bool] | None = None
    on_findings: Callable | None = None


class Provider(Protocol):
    name: str

    def check_tools(self) -> None:
        """Raise before anything changes when a tool the provider needs is missing (e.g. the Pulumi CLI)."""

    def prepare(self, ctx: Context) -> LiveFacts | None:
        """Make the capacity exist (cloud resources); return what only exists afterwards (addresses), or None."""

    def identity(self, plan: ClusterPlan, state: ClusterState, log: Callable[[str], None]) -> SshIdentity | None:
        """The key and host-key policy for this provider's nodes, or None for the user's own SSH setup."""

    def boot(self, ctx: Context, identity: SshIdentity) -> None:
        """Start machines that clusterctl runs itself (lab containers)."""

    def preview(self, plan: ClusterPlan, state: ClusterState) -> dict | None:
        """For `plan`: what the provider's own engine would change (the Pulumi preview), or None."""

    def teardown(self, ctx: Context, identity: SshIdentity | None, result: dict) -> None:
        """For `down`, after Slurm is stopped: remove what clusterctl created (instances, stacks, containers); owned
        hardware is never touched. Adds what it did to `result`."""


# Provider name -> its class, in the order `up` prepares and `down` tears down (the cloud stack first).
REGISTRY = {
    "aws": "clusterctl.engines.aws.provider:AwsProvider",
    "onprem": "clusterctl.engines.onprem.provider:OnpremProvider",
    "local": "clusterctl.engines.local.provider:LocalProvider",
}


def providers_for(spec_or_plan: ClusterSpec | ClusterPlan) -> list[Provider]:
    """The providers a cluster uses (its controller's and its pools'), each once, in REGISTRY order."""
    used = {spec_or_plan.controller.provider} | {p.provider for p in spec_or_plan.pools}
    out = []
    for name, where in REGISTRY.items():
        if name in used:
            module, _, cls = where.partition(":")
            out.append(getattr(importlib.import_module(module), cls)())
    return out
