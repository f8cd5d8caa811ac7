"""IAM policy documents of a cluster, as pure functions (no Pulumi import: the burst side and tests use them too).

- node_policy: what a node's instance role may do: read the cluster's munge key parameter (that one parameter) and,
  with a checkpoint bucket, that bucket. Nothing else: nodes call no other AWS API (the spot watcher and the
  bootstrap read IMDS, which needs no permission). SecureStrings use the AWS-managed aws/ssm key, whose key policy
  lets account principals decrypt through SSM, so no kms statement is needed.
- burst_policy: what the principal running `clusterctl burst` (the controller) may do: launch from the cluster's
  launch templates into its subnets, tag and terminate instances, pass the node role and nothing else. Every
  write is tied to the cluster's unique id tag (config.CLUSTER_ID_TAG), never to the cluster name, which another
  stack or account can share. stacks/aws/burst-policy.json is this document with placeholders.
"""

from __future__ import annotations

import json

from clusterctl.render.stack_config import CLUSTER_ID_TAG

VERSION = "2012-10-17"


def _doc(statements: list[dict]) -> str:
    return json.dumps({"Version": VERSION, "Statement": statements}, indent=2, sort_keys=True) + "\n"


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
    return _doc(statements)


def _ec2(*kinds: str) -> list[str]:
    return [f"arn:aws:ec2:*:*:{k}/*" for k in kinds]


def burst_policy(cluster_id: str, node_role_arn: str) -> str:
    """The burst principal's policy for the cluster with this id (see the module docstring)."""
    ours = {"StringEquals": {f"aws:ResourceTag/{CLUSTER_ID_TAG}": cluster_id}}
    return _doc([
        # New instances (and their disks and ENIs) must be tagged with the id in the request itself.
        {"Sid": "LaunchTaggedInstances", "Effect": "Allow", "Action": ["ec2:RunInstances"],
         "Resource": _ec2("instance", "volume", "network-interface"),
         "Condition": {"StringEquals": {f"aws:RequestTag/{CLUSTER_ID_TAG}": cluster_id}}},
        # ... from the cluster's own launch template, subnets, security group, placement group and key pair.
        {"Sid": "LaunchFromClusterResources", "Effect": "Allow", "Action": ["ec2:RunInstances"],
         "Resource": _ec2("launch-template", "subnet", "security-group", "placement-group", "key-pair"),
         "Condition": ours},
        # AMIs, capacity reservations / blocks and spot requests are not the stack's and carry no tag of ours.
        {"Sid": "LaunchImagesAndMarkets", "Effect": "Allow", "Action": ["ec2:RunInstances"],
         "Resource": ["arn:aws:ec2:*::image/*", *_ec2("capacity-reservation", "spot-instances-request")]},
        # Tags given at launch (the id above guards them) ...
        {"Sid": "TagAtLaunch", "Effect": "Allow", "Action": ["ec2:CreateTags"],
         "Resource": _ec2("instance", "volume", "network-interface", "spot-instances-request"),
         "Condition": {"StringEquals": {"ec2:CreateAction": "RunInstances"}}},
        # ... and the Name tag afterwards, only on our instances, and no other key (the id cannot be moved).
        {"Sid": "NameOurInstances", "Effect": "Allow", "Action": ["ec2:CreateTags"], "Resource": _ec2("instance"),
         "Condition": {**ours, "ForAllValues:StringEquals": {"aws:TagKeys": ["Name"]}}},
        {"Sid": "TerminateOurInstances", "Effect": "Allow", "Action": ["ec2:TerminateInstances"],
         "Resource": _ec2("instance"), "Condition": ours},
        # Describe calls cannot be limited to resources; they change nothing.
        {"Sid": "Describe", "Effect": "Allow",
         "Action": ["ec2:DescribeInstances", "ec2:DescribeLaunchTemplates", "ec2:DescribeLaunchTemplateVersions",
                    "ec2:DescribeSubnets", "ec2:DescribePlacementGroups", "ec2:DescribeInstanceTypes",
                    "ec2:DescribeInstanceTypeOfferings", "ec2:DescribeCapacityReservations"],
         "Resource": "*"},
        {"Sid": "PassNodeRole", "Effect": "Allow", "Action": ["iam:PassRole"], "Resource": node_role_arn,
         "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}},
    ])


# The shipped copy (stacks/aws/burst-policy.json): fill these in, or take the stack's `burst_policy` output.
PLACEHOLDER_ID = "${CLUSTER_ID}"
PLACEHOLDER_ROLE = "${NODE_ROLE_ARN}"


def shipped_burst_policy() -> str:
    return burst_policy(PLACEHOLDER_ID, PLACEHOLDER_ROLE)


if __name__ == "__main__":  # python -m clusterctl.engines.aws.policies > stacks/aws/burst-policy.json
    print(shipped_burst_policy(), end="")
