"""The nodes' IAM role and instance profile, and the burst policy: least privilege (documents in policies.py).

No AWS managed policy is attached: AmazonSSMManagedInstanceCore grants ssm:GetParameter(s) on every parameter,
so any process on a node that reached IMDS could have read other clusters' munge keys. Nothing in clusterctl
uses Session Manager (nodes are reached over SSH through the controller), so it goes; the nodes' IMDS is
root-only anyway (user-data).

The burst policy is created but attached to nothing: the principal that runs `clusterctl burst` (an aws
controller's role, or an IAM user/role of an on-prem controller) is the operator's to choose; stacks/aws/README.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
from pulumi import Input, Output, ResourceOptions

from clusterctl.engines.aws.policies import burst_policy, node_policy


def assume_role_policy() -> str:
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
    })


@dataclass
class NodeRoleArgs:
    checkpoint_bucket_arn: Input[str] | None
    munge_parameter_arn: Input[str]
    cluster_id: str
    tags: dict[str, str]


class NodeRole(pulumi.ComponentResource):
    role: aws.iam.Role
    profile: aws.iam.InstanceProfile
    burst: aws.iam.Policy

    def __init__(self, name: str, args: NodeRoleArgs, opts: ResourceOptions | None = None):
        super().__init__("clusterctl:aws:NodeRole", name, None, opts)
        child = ResourceOptions(parent=self)
        self.role = aws.iam.Role(f"{name}-role", assume_role_policy=assume_role_policy(), tags=args.tags, opts=child)
        policy = Output.all(args.checkpoint_bucket_arn, args.munge_parameter_arn).apply(lambda a: node_policy(a[0], a[1]))
        aws.iam.RolePolicy(f"{name}-access", role=self.role.name, policy=policy, opts=child)
        self.profile = aws.iam.InstanceProfile(f"{name}-profile", role=self.role.name, tags=args.tags, opts=child)
        self.burst = aws.iam.Policy(
            f"{name}-burst", description=f"clusterctl burst programs of cluster id {args.cluster_id}",
            policy=self.role.arn.apply(lambda arn: burst_policy(args.cluster_id, arn)), tags=args.tags, opts=child)
        self.register_outputs({"role_arn": self.role.arn, "instance_profile_arn": self.profile.arn,
                               "burst_policy_arn": self.burst.arn})
