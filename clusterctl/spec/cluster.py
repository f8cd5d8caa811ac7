"""The root of the spec: one cluster."""

from __future__ import annotations

from ipaddress import IPv4Network
from typing import Literal

from pydantic import field_validator

from clusterctl import API_VERSION
from clusterctl.spec.base import SpecModel, UpdatePolicy, spec_field
from clusterctl.spec.fabric import Fabric
from clusterctl.spec.pools import Pool, SshSpec
from clusterctl.spec.types import (MAX_NODES, NAME_PATTERN, Address, AwsRegion, InstanceType, KmsKey, PosixUser, PulumiBackend,
                                   StateBackend)
from clusterctl.spec.scheduler import Scheduler
from clusterctl.spec.software import Monitoring, Nccl, Software
from clusterctl.spec.storage import Storage
from clusterctl.spec.vendor import Mirrors, OsName

L, R, F = UpdatePolicy.LIVE, UpdatePolicy.REPLACE, UpdatePolicy.FORBIDDEN


class Controller(SpecModel):
    provider: Literal["local", "onprem", "aws"] = spec_field("local", description="Where slurmctld (and the login node) runs.", policy=F)
    hostname: str | None = spec_field(None, pattern=NAME_PATTERN, description="Controller hostname (default: <name>-ctl).", policy=F)
    address: Address | None = spec_field(
        None, description="Controller address, IP or DNS name (required for onprem; assigned for local).", policy=F
    )
    ssh: SshSpec = spec_field(default_factory=SshSpec, description="How Ansible reaches an onprem controller.")
    os: OsName = spec_field("debian12", description="Distribution on the controller (picks its vendor repositories).", policy=F)
    instance_type: InstanceType = spec_field("m7i.4xlarge", description="Instance type when the controller runs on AWS.", policy=R)
    region: AwsRegion | None = spec_field(None, description="AWS region of an aws controller (default: the first aws pool's).", policy=F)


LAB_LARGEST_PREFIX = 22  # 1,022 lab addresses: far more than one machine can boot


class Lab(SpecModel):
    subnet: str = spec_field(
        "10.213.0.0/24", description="Private subnet for lab nodes' network namespaces (local provider only).", policy=R
    )
    users: list[PosixUser] = spec_field(
        default_factory=list, max_length=64,
        description="POSIX users created on every lab node to submit jobs with (uid 2000 on, in this order: add new ones "
        "at the end), their homes in the lab's shared /home, which every lab node mounts.", policy=L
    )

    @field_validator("users")
    @classmethod
    def _users(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("lab users must be unique")
        if "root" in v:
            raise ValueError("root is not a lab user: name the users who submit jobs")
        return v

    @field_validator("subnet")
    @classmethod
    def _subnet(cls, v: str) -> str:
        net = IPv4Network(v, strict=True)
        if net.num_addresses < 16:
            raise ValueError("lab subnet needs at least 16 addresses (a /28)")
        if net.prefixlen < LAB_LARGEST_PREFIX:  # lab nodes run on one machine: a /8 only costs time and memory
            raise ValueError(f"lab subnet {net} is too large: use a /{LAB_LARGEST_PREFIX} or smaller (up to /28)")
        if not net.is_private:
            raise ValueError("lab subnet must be a private range")
        return str(net)


class State(SpecModel):
    pulumi_backend: PulumiBackend | None = spec_field(
        None,
        description="Where the Pulumi state of the aws pools' stack lives: s3://bucket/prefix (shared by a team or a CI "
        "pipeline), gs://, azblob://, file://, or a Pulumi Cloud URL. Default: file:// under the clusterctl state "
        "directory, or $CLUSTERCTL_PULUMI_BACKEND. Moving it would orphan the existing stack: migrate with "
        "`pulumi stack export` / `import` first.",
        policy=F,
    )
    # Where the state lives and which key guards its secrets say nothing about the cluster: kept out of spec.json
    # (exclude), so moving the state (`clusterctl state migrate`) is not a change to plan or refuse.
    backend: StateBackend | None = spec_field(
        None,
        description="Where clusterctl keeps the applied builds, the apply lock and the secrets: `local` (the state "
        "directory, the default) or s3://bucket/prefix (shared by CI runners; needs kms_key). "
        "$CLUSTERCTL_STATE_BACKEND overrides it.",
        exclude=True,
    )
    kms_key: KmsKey | None = spec_field(
        None,
        description="KMS key (alias/... or key ARN) that envelope-encrypts the secrets kept in an s3 backend.",
        exclude=True,
    )


class ClusterSpec(SpecModel):
    api_version: Literal["clusterctl/v1"] = spec_field(API_VERSION, alias="apiVersion", description="Spec format version.", policy=F)
    name: str = spec_field(pattern=NAME_PATTERN, description="Cluster name: Slurm ClusterName, stack name, tag value.", policy=F)
    controller: Controller = spec_field(default_factory=Controller, description="The Slurm controller / login node.")
    lab: Lab = spec_field(default_factory=Lab, description="Lab network for local pools.")
    fabric: Fabric = spec_field(default_factory=Fabric, description="Default fabric of every pool (a pool may override).", policy=R)
    pools: list[Pool] = spec_field(min_length=1, description="Node pools.")
    storage: Storage = spec_field(default_factory=Storage, description="Shared storage, local cache, checkpoints.")
    scheduler: Scheduler = spec_field(description="Scheduler settings.")
    software: Software = spec_field(default_factory=Software, description="Pinned software versions.")
    mirrors: Mirrors = spec_field(
        default_factory=Mirrors,
        description="Where vendor packages come from: a base URL and signing key per vendor repository (default: the "
        "vendors' public locations). Air-gapped sites point these at an internal mirror.",
    )
    nccl: Nccl = spec_field(default_factory=Nccl, description="NCCL environment for jobs.")
    monitoring: Monitoring = spec_field(default_factory=Monitoring, description="Monitoring and alerting.")
    state: State = spec_field(default_factory=State, description="Where clusterctl keeps the cloud stack's state.")

    @field_validator("pools")
    @classmethod
    def _node_cap(cls, pools: list) -> list:
        total = sum(p.max_nodes() for p in pools)
        if total > MAX_NODES:
            raise ValueError(f"the pools name {total:,} nodes; a cluster has at most {MAX_NODES:,}")
        return pools

    def pool(self, name: str) -> Pool | None:
        return next((p for p in self.pools if p.name == name), None)
