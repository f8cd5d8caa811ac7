"""Where vendor packages come from: the OS of each node group and a mirror per vendor repository."""

from __future__ import annotations

from typing import Literal

from clusterctl.spec.base import SpecModel, UpdatePolicy, spec_field
from clusterctl.spec.types import RepoUrl

D = UpdatePolicy.DRAIN

# The distributions the roles know (apt-based): the lab's nodes are Debian 12.
OsName = Literal["debian12", "ubuntu2204", "ubuntu2404"]
Component = Literal["cuda", "doca", "lustre", "efa", "slurm"]
COMPONENTS: tuple[str, ...] = ("cuda", "doca", "lustre", "efa", "slurm")


class Mirror(SpecModel):
    url: RepoUrl = spec_field(
        description="Base URL of the repository (or, for efa, the directory holding the installer tarball), e.g. an "
        "internal Artifactory or apt-cacher path. It replaces the vendor's location for every distro.",
        policy=D,
    )
    key_url: RepoUrl | None = spec_field(
        None, description="URL of the OpenPGP key the repository is signed with (required: unsigned repositories are "
        "refused). For efa, optional: without it the mirror holds AWS's aws-efa-installer.key and AWS's fingerprint is "
        "pinned; with it, the site's key signs the tarballs (<tarball>.sig).",
        policy=D,
    )


class Mirrors(SpecModel):
    cuda: Mirror | None = spec_field(None, description="NVIDIA CUDA repository (driver, Fabric Manager, CUDA, NCCL).", policy=D)
    doca: Mirror | None = spec_field(None, description="NVIDIA DOCA-Host repository (DOCA-OFED).", policy=D)
    lustre: Mirror | None = spec_field(None, description="Lustre client packages.", policy=D)
    efa: Mirror | None = spec_field(
        None, description="AWS EFA installer location: the directory holding aws-efa-installer-<version>.tar.gz and its "
        ".sig.", policy=D)
    slurm: Mirror | None = spec_field(
        None, description="Slurm packages of the pinned release where the distro ships another one.", policy=D
    )

    def get(self, component: str) -> Mirror | None:
        return getattr(self, component)
