"""clusterctl: declarative GPU training clusters."""

__version__ = "0.1.0"
API_VERSION = "clusterctl/v1"
