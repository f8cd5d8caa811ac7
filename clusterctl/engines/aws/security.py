"""Security groups: the cluster (EFA) group and the FSx for Lustre group.

EFA traffic is not IP: the EFA user guide requires a group whose inbound AND outbound rules allow all traffic
from/to the group itself; without the outbound self rule, NCCL over EFA hangs at init. The controller and every
node are members, so slurmctld, slurmd, munge and srun's ephemeral ports need no further rules. SSH comes in from
the given CIDRs only (the VPC, an on-prem controller, the operator's admin CIDR). Outbound to anywhere: apt
mirrors through the NAT gateway, AWS APIs (SSM for the munge key).

Rules are separate resources (aws.vpc.SecurityGroup{Ingress,Egress}Rule), the provider's recommended form:
inline rules cannot reference the group they are defined in.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
from pulumi import Input, ResourceOptions

LUSTRE_PORTS = ((988, 988), (1018, 1023))  # FSx for Lustre: LNet and the client ports


@dataclass
class SecurityArgs:
    vpc_id: Input[str]
    ssh_cidrs: list[str]
    with_fsx: bool
    tags: dict[str, str]


class ClusterSecurity(pulumi.ComponentResource):
    efa: aws.ec2.SecurityGroup
    fsx: aws.ec2.SecurityGroup | None

    def __init__(self, name: str, args: SecurityArgs, opts: ResourceOptions | None = None):
        super().__init__("clusterctl:aws:ClusterSecurity", name, None, opts)
        child = ResourceOptions(parent=self)
        self.efa = aws.ec2.SecurityGroup(
            f"{name}-efa", vpc_id=args.vpc_id,
            description="clusterctl cluster: all traffic within the group (EFA), SSH from admin CIDRs",
            tags={**args.tags, "Name": f"{name}-efa"}, opts=child)
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-efa-in-self", security_group_id=self.efa.id, referenced_security_group_id=self.efa.id,
            ip_protocol="-1", description="EFA and cluster traffic from members", opts=child)
        aws.vpc.SecurityGroupEgressRule(
            f"{name}-efa-out-self", security_group_id=self.efa.id, referenced_security_group_id=self.efa.id,
            ip_protocol="-1", description="EFA and cluster traffic to members", opts=child)
        aws.vpc.SecurityGroupEgressRule(
            f"{name}-efa-out-any", security_group_id=self.efa.id, cidr_ipv4="0.0.0.0/0", ip_protocol="-1",
            description="package mirrors (via NAT) and AWS APIs", opts=child)
        for i, cidr in enumerate(args.ssh_cidrs):
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-ssh-{i}", security_group_id=self.efa.id, cidr_ipv4=cidr, ip_protocol="tcp",
                from_port=22, to_port=22, description=f"SSH from {cidr}", opts=child)

        self.fsx = None
        if args.with_fsx:
            self.fsx = aws.ec2.SecurityGroup(
                f"{name}-fsx", vpc_id=args.vpc_id, description="clusterctl FSx for Lustre: Lustre ports from the cluster",
                tags={**args.tags, "Name": f"{name}-fsx"}, opts=child)
            for lo, hi in LUSTRE_PORTS:
                for src, ref in (("nodes", self.efa.id), ("self", self.fsx.id)):
                    aws.vpc.SecurityGroupIngressRule(
                        f"{name}-fsx-{lo}-{src}", security_group_id=self.fsx.id, referenced_security_group_id=ref,
                        ip_protocol="tcp", from_port=lo, to_port=hi, description=f"Lustre {lo}-{hi} from {src}", opts=child)
            aws.vpc.SecurityGroupEgressRule(
                f"{name}-fsx-out", security_group_id=self.fsx.id, cidr_ipv4="0.0.0.0/0", ip_protocol="-1",
                description="replies and S3 data repository traffic", opts=child)

        self.register_outputs({"efa_security_group_id": self.efa.id,
                               "fsx_security_group_id": self.fsx.id if self.fsx else None})
