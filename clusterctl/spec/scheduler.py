"""Slurm: partitions, preemption, accounting, health checks and burst into elastic pools."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import model_validator

from clusterctl.spec.base import SpecModel, UpdatePolicy, spec_field
from clusterctl.spec.types import PART_NAME_PATTERN, Address, PartitionName, PoolName, PosixUser, allowed

L = UpdatePolicy.LIVE


class Partition(SpecModel):
    name: str = spec_field(pattern=PART_NAME_PATTERN, description="Partition name users submit to (-p).")
    pools: list[PoolName] = spec_field(min_length=1, description="Pools whose nodes belong to this partition.")
    default: bool = spec_field(False, description="Jobs without -p land here. Exactly one partition is the default.")
    preemptible: bool = spec_field(
        False, description="Jobs here may be preempted by non-preemptible partitions (the guide's experiment partition)."
    )
    max_time: str = spec_field(
        "UNLIMITED", pattern=allowed(r"^(UNLIMITED|INFINITE|(\d+-)?\d{1,2}(:\d{2}){0,2})$", "UNLIMITED or [days-]hours[:minutes[:seconds]]"), description="Slurm MaxTime (e.g. 2-00:00:00)."
    )


class Preemption(SpecModel):
    enabled: bool = spec_field(True, description="Let critical partitions preempt jobs in preemptible ones.")
    mode: Literal["requeue", "cancel", "suspend"] = spec_field("requeue", description="What happens to a preempted job.")
    grace_time_seconds: int = spec_field(
        120, ge=0, le=3600, description="SIGTERM-to-kill grace so preempted jobs can checkpoint."
    )


class Accounting(SpecModel):
    enabled: bool = spec_field(
        False,
        description="Job accounting (sacct history, sreport, fair share): slurmdbd with a local MariaDB on the "
        "controller, or the slurmdbd named by storage_host. Every job is recorded; associations are not enforced.")
    storage_host: Address | None = spec_field(
        None, description="An existing slurmdbd host to report to (it must share the cluster's munge key); default: "
        "the controller runs its own.")


ACCOUNT_PATTERN = allowed(r"^[a-z][a-z0-9_-]{0,31}$", "an account name: a lower-case letter, then letters, digits, _ or -, at most 32")


class Account(SpecModel):
    name: str = spec_field(pattern=ACCOUNT_PATTERN, description="Slurm account (sacctmgr), e.g. a team.")
    share: int = spec_field(1, ge=1, le=1_000_000, description="Fair-share weight relative to sibling accounts (fairshare=).")
    users: list[PosixUser] = spec_field(default_factory=list, description="POSIX users who submit under this account.")


class BurstTarget(SpecModel):
    partition: PartitionName = spec_field(description="Partition whose queue may grow into the pools.")
    pools: list[PoolName] = spec_field(min_length=1, description="Elastic pools that partition may power up.")


class Burst(SpecModel):
    suspend_time_seconds: int = spec_field(600, ge=60, le=86400, description="Idle time before a cloud node is released (SuspendTime).")
    resume_timeout_seconds: int = spec_field(
        1800, ge=60, le=7200, description="Time a node may take from launch to registered (ResumeTimeout)."
    )
    targets: list[BurstTarget] = spec_field(default_factory=list, description="Which partitions grow into which elastic pools.")


class Slurm(SpecModel):
    partitions: list[Partition] = spec_field(min_length=1, description="Partitions, each mapping to pools.")
    preemption: Preemption = spec_field(default_factory=Preemption, description="Partition-priority preemption.")
    accounting: Accounting = spec_field(default_factory=Accounting, description="Job accounting.")
    health_check_interval_seconds: int = spec_field(
        300, ge=0, le=86400, description="HealthCheckInterval; 0 disables the node health check."
    )
    dcgm_prolog: bool = spec_field(
        False, description="Run DCGM diagnostics level 1 (dcgmi diag -r 1, about a minute) in the Slurm Prolog before "
        "each job on nodes with real NVIDIA GPUs and dcgmi, as AWS ParallelCluster's GPU health check does; a failing node "
        "is drained with the failed test in the reason and the job requeued. Nodes without dcgmi (lab nodes) pass.")
    burst: Burst = spec_field(default_factory=Burst, description="Power saving / cloud burst settings.")
    drain_batch_size: int = spec_field(
        1, ge=1, le=4096, description="Rolling changes (policy drain): nodes drained, updated and resumed at a time."
    )
    drain_timeout_seconds: int = spec_field(
        3600, ge=60, le=7 * 86400, description="How long a rolling change waits for a batch's jobs to finish draining."
    )
    accounts: list[Account] = spec_field(
        default_factory=list, max_length=4096,
        description="Accounts with fair-share weights and their users, applied with sacctmgr on every converge (added and "
        "updated, never removed: removing an account drops its usage history). Needs accounting.")

    @model_validator(mode="after")
    def _accounts(self) -> Self:
        names = [a.name for a in self.accounts]
        if len(set(names)) != len(names):
            raise ValueError("account names must be unique")
        if names and not self.accounting.enabled:
            raise ValueError("accounts need accounting (scheduler.slurm.accounting.enabled: true)")
        return self


class Scheduler(SpecModel):
    slurm: Slurm = spec_field(description="Slurm settings.")
