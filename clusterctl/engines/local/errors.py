"""Errors of the local (lab node) provider."""

from clusterctl.core.errors import ClusterctlError


class LabError(ClusterctlError):
    """Lab nodes could not be built, booted, reached or torn down; the message says which step and why."""
