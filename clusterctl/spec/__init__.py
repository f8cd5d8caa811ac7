"""The cluster spec: pydantic models only, no I/O (loading lives in clusterctl.spec.loader)."""

from clusterctl.spec.base import SpecModel, UpdatePolicy
from clusterctl.spec.cluster import ClusterSpec

__all__ = ["ClusterSpec", "SpecModel", "UpdatePolicy"]
