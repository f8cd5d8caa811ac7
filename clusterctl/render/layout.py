"""Where things live: files in the build directory and paths on the nodes. Renderers and roles share these names."""

# Build directory (relative paths; the manifest lists every file with its sha256).
SLURM_CONF = "slurm/slurm.conf"
GRES_CONF = "slurm/gres.conf"
CGROUP_CONF = "slurm/cgroup.conf"
TOPOLOGY_CONF = "slurm/topology.conf"
SLURM_ACCOUNTS = "slurm/accounts.txt"  # only with accounts: ACCOUNT SHARE USER,USER (or -), one a line
SLURMD_DROPIN = "slurm/slurmd-configless.conf"  # systemd drop-in: compute nodes' slurmd with --conf-server
SLURMDBD_CONF = "slurm/slurmdbd.conf"  # only when the controller runs slurmdbd (no StoragePass: added on the host)
INVENTORY = "ansible/inventory.yml"
GROUP_VARS = "ansible/group_vars"
HOSTS = "common/hosts"
NCCL_ENV = "nccl/{pool}.env"
HEALTH_CONF = "health/{pool}.conf"
PULUMI_CONFIG = "pulumi/Pulumi.{stack}.yaml"
PLAN_JSON = "plan.json"
SPEC_JSON = "spec.json"
MANIFEST = "manifest.json"

# Paths on the nodes.
SLURMCTLD_PORT = 6817
# Configless Slurm: compute nodes hold none of these; their slurmd fetches them from slurmctld. A copy left in
# /etc/slurm would be read first by the node's client commands (scontrol in the health check), so it is removed.
CONFIGLESS_FILES = ("slurm.conf", "gres.conf", "cgroup.conf", "topology.conf")
NODE_SLURMD_DROPIN = "/etc/systemd/system/slurmd.service.d/clusterctl-configless.conf"
HEALTH_PROGRAM = "/usr/local/sbin/clusterctl-healthcheck"
# slurm.conf takes a program path without arguments: one small wrapper per power-saving action.
BURST_RESUME = "/usr/local/sbin/clusterctl-resume"
BURST_SUSPEND = "/usr/local/sbin/clusterctl-suspend"
BURST_RESUME_FAIL = "/usr/local/sbin/clusterctl-resume-fail"
TASK_PROLOG = "/etc/slurm/clusterctl-task-prolog"
PROLOG = "/etc/slurm/clusterctl-prolog"  # DCGM diagnostics level 1 (scheduler.slurm.dcgm_prolog)
NODE_NCCL_ENV = "/etc/clusterctl/nccl.env"
NODE_HEALTH_CONF = "/etc/clusterctl/health.conf"


def pool_group(pool: str) -> str:
    """Ansible group of a pool's nodes (group names may not contain '-')."""
    return "pool_" + pool.replace("-", "_")
