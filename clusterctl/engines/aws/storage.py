"""Storage the stack creates: the checkpoint bucket and FSx for Lustre filesystems.

Checkpoint bucket: versioned (an overwritten or deleted checkpoint can be recovered), encrypted at rest (SSE-S3),
public access blocked on all four switches. FSx for Lustre: deployment type, capacity and per-unit throughput
straight from the plan; linked to S3 when the spec asks, with a data repository association for PERSISTENT_2
(which has no import/export paths on the filesystem itself) and import/export paths for the older types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
from pulumi import Input, ResourceOptions

from clusterctl.render.stack_config import FsxConfig

LUSTRE_VERSION = "2.15"  # PERSISTENT_2 needs 2.12+; 2.15 is what current Lustre clients speak
DRA_EVENTS = ["NEW", "CHANGED", "DELETED"]


@dataclass
class CheckpointBucketArgs:
    bucket: str
    tags: dict[str, str]


class CheckpointBucket(pulumi.ComponentResource):
    bucket: aws.s3.Bucket

    def __init__(self, name: str, args: CheckpointBucketArgs, opts: ResourceOptions | None = None):
        super().__init__("clusterctl:aws:CheckpointBucket", name, None, opts)
        child = ResourceOptions(parent=self)
        self.bucket = aws.s3.Bucket(f"{name}-bucket", bucket=args.bucket, tags=args.tags, opts=child)
        aws.s3.BucketVersioning(f"{name}-versioning", bucket=self.bucket.id,
                                versioning_configuration={"status": "Enabled"}, opts=child)
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-sse", bucket=self.bucket.id,
            rules=[{"apply_server_side_encryption_by_default": {"sse_algorithm": "AES256"}, "bucket_key_enabled": True}],
            opts=child)
        aws.s3.BucketPublicAccessBlock(
            f"{name}-public-access-block", bucket=self.bucket.id, block_public_acls=True, block_public_policy=True,
            ignore_public_acls=True, restrict_public_buckets=True, opts=child)
        self.register_outputs({"bucket": self.bucket.id, "arn": self.bucket.arn})


@dataclass
class LustreArgs:
    config: FsxConfig
    subnet_id: Input[str]
    security_group_ids: list[Input[str]]
    tags: dict[str, str]


def s3_url(bucket: str, path: str | None) -> str:
    return f"s3://{bucket}/{(path or '/').strip('/')}".rstrip("/")


class Lustre(pulumi.ComponentResource):
    filesystem: aws.fsx.LustreFileSystem

    def __init__(self, name: str, args: LustreArgs, opts: ResourceOptions | None = None):
        super().__init__("clusterctl:aws:Lustre", name, None, opts)
        child = ResourceOptions(parent=self)
        c = args.config
        persistent_2 = c.deployment_type == "PERSISTENT_2"
        extra: dict[str, Any] = {}  # optional LustreFileSystem keyword arguments of several types
        if c.per_unit_storage_throughput is not None and c.deployment_type.startswith("PERSISTENT"):
            extra["per_unit_storage_throughput"] = c.per_unit_storage_throughput
        if c.s3_bucket and not persistent_2:
            extra["import_path"] = s3_url(c.s3_bucket, c.import_path)
            if c.export_path:
                extra["export_path"] = s3_url(c.s3_bucket, c.export_path)
        self.filesystem = aws.fsx.LustreFileSystem(
            f"{name}-fs", deployment_type=c.deployment_type, storage_capacity=c.storage_capacity_gib,
            storage_type="SSD", file_system_type_version=LUSTRE_VERSION,
            subnet_ids=args.subnet_id,  # pulumi-aws 7: one subnet id (FSx for Lustre supports exactly one)
            security_group_ids=args.security_group_ids, tags={**args.tags, "Name": name},
            # A filesystem's subnet is fixed: a new one replaces it, data and all. Where the AZ rule moves (a fix,
            # or a mounting pool's AZs edited), the existing filesystem stays; only a new one goes where the rule says.
            opts=ResourceOptions.merge(child, ResourceOptions(ignore_changes=["subnet_ids"])), **extra)
        self.association = None
        if c.s3_bucket and persistent_2:
            s3: aws.fsx.DataRepositoryAssociationS3ArgsDict = {"auto_import_policy": {"events": DRA_EVENTS}}
            if c.export_path and c.export_path.strip("/") == (c.import_path or "/").strip("/"):
                s3["auto_export_policy"] = {"events": DRA_EVENTS}
            elif c.export_path:
                # One association links one S3 prefix both ways; a different export prefix needs a second filesystem path.
                pulumi.log.warn(f"{c.mount_point}: PERSISTENT_2 exports to the import prefix only; export_path ignored")
            self.association = aws.fsx.DataRepositoryAssociation(
                f"{name}-s3", file_system_id=self.filesystem.id, file_system_path="/",
                data_repository_path=s3_url(c.s3_bucket, c.import_path), batch_import_meta_data_on_create=True,
                s3=s3, tags=args.tags, opts=child)
        self.register_outputs({"id": self.filesystem.id, "dns_name": self.filesystem.dns_name,
                               "mount_name": self.filesystem.mount_name})
