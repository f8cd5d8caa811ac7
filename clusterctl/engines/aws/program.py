"""The Pulumi program: the stack config in, the cluster's AWS resources out.

A function of the rendered stack config, not of the spec: `stacks/aws/__main__.py` (plain `pulumi up`) and the
Automation API (`clusterctl up`) both call `program_from_config()`, which reads pulumi.Config. Tests call
`build(StackConfig, munge_key)` under pulumi mocks.

Stack outputs (consumed by clusterctl.engines.aws.up.CloudOutputs): nodes (name -> private_ip, instance_id, AZ, pool),
controller, fsx (mount point -> dns_name, mount_name), launch_templates and placement_groups per pool (what the
burst path launches from), subnets per AZ, the security group, the checkpoint bucket and the munge parameter.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi import Input, Output, ResourceOptions

from clusterctl.engines.aws.compute import Controller, ControllerArgs, NodePool, NodePoolArgs
from clusterctl.render.stack_config import StackConfig
from clusterctl.engines.aws.iam import NodeRole, NodeRoleArgs
from clusterctl.engines.aws.network import Network, NetworkArgs
from clusterctl.engines.aws.secrets import ClusterSecrets, ClusterSecretsArgs
from clusterctl.engines.aws.security import ClusterSecurity, SecurityArgs
from clusterctl.engines.aws.storage import CheckpointBucket, CheckpointBucketArgs, Lustre, LustreArgs
from clusterctl.render.userdata import render_user_data
from clusterctl.render.cloud import PROJECT


@dataclass
class AwsClusterArgs:
    config: StackConfig
    munge_key_b64: Input[str]


class AwsCluster(pulumi.ComponentResource):
    """Every AWS resource of one cluster, as children of one component (one `pulumi destroy` removes all)."""

    def __init__(self, name: str, args: AwsClusterArgs, opts: ResourceOptions | None = None):
        super().__init__("clusterctl:aws:Cluster", name, None, opts)
        cfg = args.config
        tags = cfg.tags
        assert cfg.runtime.cluster_id is not None  # cfg.tags raises when it is missing
        child = ResourceOptions(parent=self)

        self.network = Network(name, NetworkArgs(cfg.network, cfg.region, tags), child)
        ssh = list(cfg.network.ssh_ingress_cidrs) + ([cfg.runtime.admin_cidr] if cfg.runtime.admin_cidr else [])
        self.security = ClusterSecurity(name, SecurityArgs(self.network.vpc.id, ssh, bool(cfg.fsx), tags), child)
        self.secrets = ClusterSecrets(name, ClusterSecretsArgs(cfg.munge_parameter, args.munge_key_b64,
                                                               cfg.runtime.ssh_public_key, tags), child)
        self.bucket = (CheckpointBucket(f"{name}-checkpoints", CheckpointBucketArgs(cfg.checkpoint_bucket, tags), child)
                       if cfg.checkpoint_bucket else None)
        self.role = NodeRole(name, NodeRoleArgs(self.bucket.bucket.arn if self.bucket else None,
                                                self.secrets.munge.arn, cfg.runtime.cluster_id, tags), child)
        key_name = self.secrets.key_pair.key_name if self.secrets.key_pair else None
        sgs: list[Input[str]] = [self.security.efa.id]

        # Each FSx sits in the subnet where the static nodes of the pools that mount it launch (compile chose the AZ
        # and validation refuses mounting pools that start elsewhere): no cross-AZ traffic.
        fsx_sg = self.security.fsx  # made when cfg.fsx has filesystems
        self.filesystems = {
            f.mount_point: Lustre(f"{name}-fsx{i}", LustreArgs(
                f, self.network.private_subnets[f.availability_zone].id, [fsx_sg.id], tags), child)
            for i, f in enumerate(cfg.fsx)
        } if fsx_sg else {}

        self.pools = {
            p.name: NodePool(f"{name}-{p.name}", NodePoolArgs(
                cluster=cfg.cluster, pool=p, subnet_id=self.network.private_subnets[p.primary_az].id,
                security_group_ids=sgs, instance_profile_arn=self.role.profile.arn,
                user_data=render_user_data(cfg, p.name), key_name=key_name, tags=tags), child)
            for p in cfg.pools
        }

        self.controller = None
        if cfg.controller.on_aws:
            self.controller = Controller(f"{name}-controller", ControllerArgs(
                cluster=cfg.cluster, config=cfg.controller, subnet_id=self.network.public_subnet.id,
                security_group_ids=sgs, instance_profile_name=self.role.profile.name,
                public_address=bool(cfg.runtime.admin_cidr), user_data=render_user_data(cfg, controller=True),
                key_name=key_name, tags=tags), child)

        self.outputs = self._outputs(cfg)
        self.register_outputs(self.outputs)

    def _outputs(self, cfg: StackConfig) -> dict:
        nodes = {
            node: {"private_ip": inst.private_ip, "instance_id": inst.id, "availability_zone": inst.availability_zone,
                   "pool": pool_name}
            for pool_name, pool in self.pools.items() for node, inst in pool.instances.items()
        }
        out = {
            "nodes": nodes,
            "vpc_id": self.network.vpc.id,
            "subnet_ids": {az: s.id for az, s in self.network.private_subnets.items()},
            "security_group_id": self.security.efa.id,
            "launch_templates": {n: p.launch_template.id for n, p in self.pools.items()},
            "placement_groups": {n: p.placement_group.name for n, p in self.pools.items() if p.placement_group},
            "instance_profile_arn": self.role.profile.arn,
            "burst_policy_arn": self.role.burst.arn,
            "munge_parameter": cfg.munge_parameter,
            "fsx": {mp: {"dns_name": fs.filesystem.dns_name, "mount_name": fs.filesystem.mount_name}
                    for mp, fs in self.filesystems.items()},
            "checkpoint_bucket": self.bucket.bucket.id if self.bucket else None,
        }
        if self.controller is not None:
            i = self.controller.instance
            out["controller"] = {"name": cfg.controller.name, "private_ip": i.private_ip, "public_ip": i.public_ip,
                                 "instance_id": i.id}
        return out


def build(cfg: StackConfig, munge_key_b64: Input[str]) -> AwsCluster:
    """Declare the cluster's resources and export the stack outputs."""
    cluster = AwsCluster(cfg.cluster, AwsClusterArgs(cfg, munge_key_b64))
    for key, value in cluster.outputs.items():
        pulumi.export(key, value)
    return cluster


def program_from_config(munge_key_b64: str | None = None) -> AwsCluster:
    """Entry point of stacks/aws and of clusterctl's inline Automation API program.

    clusterctl passes the munge key in (automation.py: the inline program runs in clusterctl's own process, so the
    key never becomes a `pulumi config set` argument); a plain `pulumi up` reads it from the secret stack config.
    """
    cfg = StackConfig.from_pulumi_config()
    munge = munge_key_b64 if munge_key_b64 is not None else pulumi.Config(PROJECT).require_secret("munge_key_b64")
    return build(cfg, Output.secret(munge))
