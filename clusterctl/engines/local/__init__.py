"""The `local` provider: lab nodes on this machine.

Each lab node is a systemd-nspawn container booting real systemd, in its own network namespace with its own IPv4
address on a per-cluster bridge, reachable over real SSH from the host, with NAT to the outside (apt works) and
fake /dev/nvidiaN device nodes so Slurm GRES scheduling is real. Needs root.
"""

from clusterctl.engines.local.errors import LabError
from clusterctl.engines.local.lab import Lab
from clusterctl.engines.local.spec import LabNode, LabSpec, NodeStatus

__all__ = ["Lab", "LabError", "LabNode", "LabSpec", "NodeStatus"]
