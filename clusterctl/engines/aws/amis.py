"""The official Debian 12 AMIs: who publishes them and how they are found. One definition for the stack (which picks
the newest for static nodes), preflight (which checks that one is visible) and `image build` (its Debian base)."""

from __future__ import annotations

DEBIAN_OWNER = "136693071363"  # Debian's cloud team account: official bookworm AMIs
DEBIAN_12_NAME = "debian-12-amd64-*"


def debian_12_query(arch: str = "x86_64") -> dict:
    """DescribeImages parameters (EC2 API shape) for the available official Debian 12 images of `arch`."""
    return {"Owners": [DEBIAN_OWNER], "Filters": [
        {"Name": "name", "Values": [DEBIAN_12_NAME]}, {"Name": "architecture", "Values": [arch]},
        {"Name": "state", "Values": ["available"]}]}
