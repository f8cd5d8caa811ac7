"""Secrets the nodes need at boot: the munge key in SSM Parameter Store and the admin SSH key pair.

The munge key comes in as a Pulumi secret (encrypted in the stack's state) and is stored as a SecureString; the
instance role may read that one parameter (iam.py). It is never put in user-data, tags or outputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
from pulumi import Input, ResourceOptions


@dataclass
class ClusterSecretsArgs:
    munge_parameter: str
    munge_key_b64: Input[str]  # a pulumi secret: base64 of the 1024-byte key
    ssh_public_key: str | None
    tags: dict[str, str]


class ClusterSecrets(pulumi.ComponentResource):
    munge: aws.ssm.Parameter
    key_pair: aws.ec2.KeyPair | None

    def __init__(self, name: str, args: ClusterSecretsArgs, opts: ResourceOptions | None = None):
        super().__init__("clusterctl:aws:ClusterSecrets", name, None, opts)
        child = ResourceOptions(parent=self)
        self.munge = aws.ssm.Parameter(
            f"{name}-munge", name=args.munge_parameter, type="SecureString", value=pulumi.Output.secret(args.munge_key_b64),
            description="munge key of the cluster (base64); read by the nodes' instance role at boot",
            tags=args.tags, opts=child)
        self.key_pair = None
        if args.ssh_public_key:
            self.key_pair = aws.ec2.KeyPair(f"{name}-admin", public_key=args.ssh_public_key, tags=args.tags, opts=child)
        self.register_outputs({"munge_parameter_arn": self.munge.arn,
                               "key_name": self.key_pair.key_name if self.key_pair else None})
