"""Network: a VPC, one private subnet per AZ the pools use, a public subnet with the NAT gateway, an S3 gateway endpoint.

Compute nodes live in the private subnets: multi-NIC instances cannot get auto-assigned public addresses anyway,
and GPU nodes have no business being reachable from the internet. They reach apt mirrors through the NAT gateway
and S3 (checkpoints, datasets) through the gateway endpoint, which keeps that traffic off the NAT (and its bill).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
from pulumi import ResourceOptions

from clusterctl.render.stack_config import NetworkConfig


@dataclass
class NetworkArgs:
    config: NetworkConfig
    region: str
    tags: dict[str, str]


class Network(pulumi.ComponentResource):
    vpc: aws.ec2.Vpc
    private_subnets: dict[str, aws.ec2.Subnet]  # AZ -> subnet
    public_subnet: aws.ec2.Subnet

    def __init__(self, name: str, args: NetworkArgs, opts: ResourceOptions | None = None):
        super().__init__("clusterctl:aws:Network", name, None, opts)
        child = ResourceOptions(parent=self)
        cfg = args.config

        def tags(what: str) -> dict[str, str]:
            return {**args.tags, "Name": f"{name}-{what}"}

        self.vpc = aws.ec2.Vpc(f"{name}-vpc", cidr_block=cfg.vpc_cidr, enable_dns_support=True,
                               enable_dns_hostnames=True, tags=tags("vpc"), opts=child)
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=self.vpc.id, tags=tags("igw"), opts=child)

        pub = cfg.public_subnet
        self.public_subnet = aws.ec2.Subnet(
            f"{name}-public", vpc_id=self.vpc.id, cidr_block=pub.cidr, availability_zone=pub.availability_zone,
            map_public_ip_on_launch=False,  # only the controller asks for one, explicitly
            tags=tags("public"), opts=child)
        public_rt = aws.ec2.RouteTable(f"{name}-public-rt", vpc_id=self.vpc.id,
                                       routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": igw.id}],
                                       tags=tags("public"), opts=child)
        aws.ec2.RouteTableAssociation(f"{name}-public-rta", subnet_id=self.public_subnet.id,
                                      route_table_id=public_rt.id, opts=child)

        eip = aws.ec2.Eip(f"{name}-nat-eip", domain="vpc", tags=tags("nat"), opts=child)
        nat = aws.ec2.NatGateway(f"{name}-nat", allocation_id=eip.id, subnet_id=self.public_subnet.id,
                                 tags=tags("nat"), opts=ResourceOptions(parent=self, depends_on=[igw]))
        private_rt = aws.ec2.RouteTable(f"{name}-private-rt", vpc_id=self.vpc.id,
                                        routes=[{"cidr_block": "0.0.0.0/0", "nat_gateway_id": nat.id}],
                                        tags=tags("private"), opts=child)

        self.private_subnets = {}
        for s in cfg.subnets:
            subnet = aws.ec2.Subnet(
                f"{name}-{s.availability_zone}", vpc_id=self.vpc.id, cidr_block=s.cidr,
                availability_zone=s.availability_zone, map_public_ip_on_launch=False,
                tags=tags(s.availability_zone), opts=child)
            aws.ec2.RouteTableAssociation(f"{name}-{s.availability_zone}-rta", subnet_id=subnet.id,
                                          route_table_id=private_rt.id, opts=child)
            self.private_subnets[s.availability_zone] = subnet

        self.s3_endpoint = aws.ec2.VpcEndpoint(
            f"{name}-s3", vpc_id=self.vpc.id, service_name=f"com.amazonaws.{args.region}.s3",
            vpc_endpoint_type="Gateway", route_table_ids=[private_rt.id, public_rt.id], tags=tags("s3"), opts=child)

        self.register_outputs({
            "vpc_id": self.vpc.id,
            "public_subnet_id": self.public_subnet.id,
            "private_subnet_ids": {az: s.id for az, s in self.private_subnets.items()},
            "s3_endpoint_id": self.s3_endpoint.id,
        })
