"""Concrete nodes: names, addresses, GPUs and resources for the controller and every pool."""

from __future__ import annotations

from typing import Any

from ipaddress import IPv4Network

from clusterctl.compile.model import LiveFacts, Node, SshTarget
from clusterctl.spec import effective as eff
from clusterctl.spec.cluster import ClusterSpec
from clusterctl.spec.pools import AwsPool, LocalPool, OnpremPool, Pool, SshSpec
from clusterctl.core.providers import traits


def ssh_target(ssh: SshSpec) -> SshTarget:
    return SshTarget(ssh.user, ssh.port, ssh.jump_host, ssh.become, ssh.private_key_file, ssh.known_hosts_file)


# Who logs in on an aws instance, and may sudo: Debian's cloud images make `admin`, Ubuntu's (and the DLAMIs built
# on them) `ubuntu`. Chosen by the os the spec gives the pool or controller.
AWS_ADMIN = "admin"
AWS_LOGIN = {"debian12": AWS_ADMIN, "ubuntu2204": "ubuntu", "ubuntu2404": "ubuntu"}


def aws_login(os_name: str) -> str:
    return AWS_LOGIN.get(os_name, AWS_ADMIN)


def controller_node(spec: ClusterSpec, facts: LiveFacts) -> Node:
    c = spec.controller
    name = eff.controller_name(spec)
    address, ssh = c.address, ssh_target(c.ssh)
    if traits(c).lab:
        address = eff.lab_addresses(spec)[0]
    elif traits(c).rented:
        # Reached on its public address (the jump host); its private one is what the cluster uses.
        address = facts.addresses.get(name)
        ssh = SshTarget(user=aws_login(c.os), become=True, jump_host=facts.jump_host)
    return Node(
        name=name,
        pool=None,
        provider=c.provider,
        role="controller",
        address=address,
        instance_type=c.instance_type if traits(c).rented else None,
        ssh=ssh,
    )


def pool_nodes(spec: ClusterSpec, facts: LiveFacts) -> list[Node]:
    """Every compute node in spec order. `facts` supplies cloud nodes' addresses once instances exist."""
    lab_free = iter(eff.lab_addresses(spec)[1:])
    out: list[Node] = []
    for pool in spec.pools:
        layout = eff.cpu_layout(pool)
        common: dict[str, Any] = dict(
            pool=pool.name,
            provider=pool.provider,
            role="compute",
            gpus=eff.gpus_per_node(pool),
            gpu_model=eff.gpu_key(pool),
            gres_type=eff.gres_type(pool),
            cpus=eff.cpus(pool),
            memory_mb=eff.memory_mb(pool),
            mem_spec_mb=mem_spec_mb(eff.memory_mb(pool)),
            sockets=layout.sockets if layout else 0,
            cores_per_socket=layout.cores_per_socket if layout else 0,
            threads_per_core=layout.threads_per_core if layout else 0,
            features=features(spec, pool),
        )
        if isinstance(pool, LocalPool):
            out += [Node(name=n, address=next(lab_free), **common) for n in eff.generated_names(pool)]
        elif isinstance(pool, OnpremPool):
            ssh = ssh_target(pool.ssh)
            out += [Node(name=n, address=a, ssh=ssh, **common) for n, a in eff.onprem_hosts(pool)]
        elif isinstance(pool, AwsPool):
            static = eff.static_nodes(pool)
            out += [
                Node(
                    name=n,
                    address=facts.addresses.get(n),
                    cloud=i >= static,
                    instance_type=pool.instance_type,
                    ssh=SshTarget(user=aws_login(pool.os), become=True, jump_host=facts.jump_host),
                    **common,
                )
                for i, n in enumerate(eff.generated_names(pool))
            ]
    return out


# MemSpecLimit: what the OS, page cache, slurmd/slurmstepd, the Lustre client and the GPU driver keep on a node
# (1/32 of RAM, at most 32 GiB). Nodes under 16 GiB (lab containers) get none: the limit also caps slurmd's own cgroup.
MEM_SPEC_MIN_NODE_MB = 16 * 1024
MEM_SPEC_MAX_MB = 32 * 1024


def mem_spec_mb(memory_mb: int | None) -> int:
    if not memory_mb or memory_mb < MEM_SPEC_MIN_NODE_MB:
        return 0
    return min(memory_mb // 32, MEM_SPEC_MAX_MB)


def features(spec: ClusterSpec, pool: Pool) -> tuple[str, ...]:
    """Slurm node features: what a job may constrain on (-C): pool, GPU, fabric, and for cloud nodes the market."""
    fab, _ = eff.fabric(spec, pool)
    out = [f"pool_{pool.name}", fab.type]
    gpu = eff.gpu_key(pool)
    if gpu:
        out.append(gpu)
    if isinstance(pool, AwsPool):
        out += [pool.instance_type, pool.market]
    out += pool.features
    return tuple(dict.fromkeys(out))  # keep order, drop repeats


def lab_prefix_len(spec: ClusterSpec) -> int:
    return IPv4Network(spec.lab.subnet).prefixlen
