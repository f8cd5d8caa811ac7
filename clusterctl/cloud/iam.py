"""The nodes' IAM role and instance profile: least privilege.

- AmazonSSMManagedInstanceCore: Session Manager access and the SSM agent (no SSH port needed for break-glass);
- read/write on the checkpoint bucket, that bucket only (list the bucket; get/put/delete its objects);
- read the cluster's munge key parameter, that parameter only (SecureString with the AWS-managed aws/ssm key,
  whose key policy already lets account principals decrypt through SSM, so no kms statement is needed).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
from pulumi import Input, Output, ResourceOptions

SSM_CORE_POLICY = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"


def assume_role_policy() -> str:
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
    })


def node_policy(bucket_arn: str | None, parameter_arn: str) -> str:
    statements = [{"Sid": "MungeKey", "Effect": "Allow", "Action": ["ssm:GetParameter"], "Resource": parameter_arn}]
    if bucket_arn:
        statements += [
            {"Sid": "CheckpointList", "Effect": "Allow", "Action": ["s3:ListBucket", "s3:GetBucketLocation"],
             "Resource": bucket_arn},
            {"Sid": "CheckpointObjects", "Effect": "Allow",
             "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload",
                        "s3:ListMultipartUploadParts"],
             "Resource": f"{bucket_arn}/*"},
        ]
    return json.dumps({"Version": "2012-10-17", "Statement": statements})


@dataclass
class NodeRoleArgs:
    checkpoint_bucket_arn: Input[str] | None
    munge_parameter_arn: Input[str]
    tags: dict[str, str]


class NodeRole(pulumi.ComponentResource):
    role: aws.iam.Role
    profile: aws.iam.InstanceProfile

    def __init__(self, name: str, args: NodeRoleArgs, opts: ResourceOptions | None = None):
        super().__init__("clusterctl:aws:NodeRole", name, None, opts)
        child = ResourceOptions(parent=self)
        self.role = aws.iam.Role(f"{name}-role", assume_role_policy=assume_role_policy(), tags=args.tags, opts=child)
        aws.iam.RolePolicyAttachment(f"{name}-ssm", role=self.role.name, policy_arn=SSM_CORE_POLICY, opts=child)
        policy = Output.all(args.checkpoint_bucket_arn, args.munge_parameter_arn).apply(lambda a: node_policy(a[0], a[1]))
        aws.iam.RolePolicy(f"{name}-access", role=self.role.name, policy=policy, opts=child)
        self.profile = aws.iam.InstanceProfile(f"{name}-profile", role=self.role.name, tags=args.tags, opts=child)
        self.register_outputs({"role_arn": self.role.arn, "instance_profile_arn": self.profile.arn})
