"""cloud-init user-data for cloud nodes, rendered from the stack config.

Push, not pull. Cloud nodes are configured by the same Ansible roles as bare metal, pushed over SSH by
`clusterctl up` (through the controller as jump host) once the instances exist. Why not ansible-pull or a
join-the-controller bootstrap:
- one engine and one code path for owned and rented nodes: the same roles, the same check/diff mode for `plan`,
  the same idempotence test (second run changed=0), failures reported per host and task on the operator's screen;
- nothing on the node has to fetch playbooks or the rendered build (no repository credentials, no build bucket);
  the build dir stays on the workstation and in git, where it is reviewed;
- a pull agent fails silently on the node; a push run fails in front of whoever ran `up`.
Nodes that Slurm powers up later (elastic pools) are pushed to by the controller's ResumeProgram the same way.

So user-data only does what must exist before the first SSH login and what makes a node safe to join:
IMDS reachable by root only (an iptables owner rule, as ParallelCluster's Imds.Secured: IMDS hands out the
instance role's credentials to whoever asks, and jobs run as ordinary users),
hostname = node name (from the instance's Name tag: one launch template per pool serves all its nodes), this node
and the controller in /etc/hosts, the admin user's SSH key, the packages Ansible needs (python3, python3-apt),
and the munge key. The munge key never appears in user-data (anyone with ec2:DescribeInstanceAttribute can read
user-data): the stack stores it as an SSM Parameter Store SecureString, the instance role may read that one
parameter, and the bootstrap script fetches and decrypts it with the role's credentials.
"""

from __future__ import annotations

from clusterctl.compile.model import ClusterPlan
from clusterctl.render.stack_config import StackConfig

# Installed before Ansible: its modules need python3 (+ apt bindings); awscli fetches the munge key; munge owns it;
# iptables keeps IMDS root-only (the template's clusterctl-imds-firewall unit).
PACKAGES = ("python3", "python3-apt", "sudo", "curl", "ca-certificates", "gnupg", "awscli", "munge", "iptables")
TEMPLATE = "cloud-init/user-data.yaml.j2"


def render_user_data(cfg: StackConfig, pool: str | None = None, *, controller: bool = False,
                     ssh_public_key: str | None = None) -> str:
    """User-data of a pool's nodes (pool given) or of the aws controller (controller=True)."""
    from clusterctl.render.templates import render_template

    if (pool is None) == (not controller):
        raise ValueError("give either a pool or controller=True")
    return render_template(
        TEMPLATE,
        cluster=cfg.cluster,
        role="controller" if controller else "compute",
        pool=pool,
        is_controller=controller,
        controller={"name": cfg.controller.name, "address": cfg.controller.address},
        munge_parameter=cfg.munge_parameter,
        ssh_public_key=ssh_public_key if ssh_public_key is not None else cfg.runtime.ssh_public_key,
        packages=PACKAGES,
    )


CLOUD_INIT_DIR = "cloud-init"


def render_cloud_init(plan: ClusterPlan) -> dict[str, str]:
    """Build files: cloud-init/pools/<pool>.yaml per aws pool (cloud-init/controller.yaml for an aws controller).

    These are byte-identical to what the launch templates carry, minus the workstation's SSH key (not in the spec;
    cloud-init also gets it from the EC2 key pair).
    """
    if not plan.aws_pools:
        return {}
    cfg = StackConfig.from_plan(plan)
    files = {f"{CLOUD_INIT_DIR}/pools/{p.name}.yaml": render_user_data(cfg, p.name) for p in cfg.pools}
    if cfg.controller.on_aws:
        files[f"{CLOUD_INIT_DIR}/controller.yaml"] = render_user_data(cfg, controller=True)
    return files
