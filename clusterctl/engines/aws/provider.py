"""The aws provider: rented instances and everything around them live in the cluster's Pulumi stack; instances Slurm
powered up for burst partitions are the burst programs'."""

from __future__ import annotations

from typing import Callable

from clusterctl.compile.model import ClusterPlan, LiveFacts
from clusterctl.engines.provider import Context, SshIdentity
from clusterctl.state import ClusterState


class AwsProvider:
    name = "aws"

    def check_tools(self) -> None:
        from clusterctl.engines.aws.automation import require_pulumi_cli

        require_pulumi_cli()  # without the CLI nothing may change, the state dir included

    def prepare(self, ctx: Context) -> LiveFacts:
        from clusterctl.engines.aws.facts import cloud_facts
        from clusterctl.engines.aws.up import cloud_up

        result = cloud_up(ctx.plan, ctx.state, confirm=ctx.confirm or (lambda preview: False), console=ctx.console,
                          quiet=ctx.quiet, on_findings=ctx.on_findings)
        return cloud_facts(result.outputs, ctx.plan.controller_os)

    def identity(self, plan: ClusterPlan, state: ClusterState, log: Callable[[str], None]) -> SshIdentity:
        # The cluster's own admin key (made by the cloud engine, installed by cloud-init); host keys on first contact.
        return SshIdentity(private_key=state.secret_file("aws_admin_ed25519"))

    def boot(self, ctx: Context, identity: SshIdentity) -> None:
        """Instances boot by themselves once the stack exists."""

    def preview(self, plan: ClusterPlan, state: ClusterState) -> dict:
        from clusterctl.engines.aws.up import cloud_preview

        return cloud_preview(plan, state)

    def teardown(self, ctx: Context, identity: SshIdentity | None, result: dict) -> None:
        from clusterctl.engines.aws.burst.teardown import release_burst_instances
        from clusterctl.engines.aws.up import cloud_down
        from clusterctl.state.secrets import ensure_cluster_id

        # Nodes Slurm powered up are not the stack's: terminated first (by tag), or they would keep running and hold
        # the subnets the destroy removes. Then exactly the stack this cluster's state names.
        result["burst_terminated"] = release_burst_instances(ctx.plan, ensure_cluster_id(ctx.state), ctx.log)
        result["aws"] = cloud_down(ctx.plan, ctx.state, console=ctx.console, quiet=ctx.quiet)
