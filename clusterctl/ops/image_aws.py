"""`clusterctl image build` for aws pools: an AMI per pool, baked by the same node roles, in the same image mode, as
the lab's images (clusterctl.ops.image).

The builder boots from the pool's base image (the spec's `ami`, else by the pool's `os`: AWS's Deep Learning Base
OSS NVIDIA Driver AMI through its public SSM parameter on Ubuntu, the official Debian 12 AMI on Debian) in the
cluster's own network: the subnet of the pool's first AZ, its launch template's security groups and key pair, found
by the stack's tags, so the stack must be up. It is converged over
SSH, then CreateImage, waited until available and recorded with its inputs' hash; the builder is terminated
whatever happens, and a failed build records nothing (clusterctl.engines.aws.image). The next `up` points the
pool's launch template (what burst resume launches) and its static instances at the recorded image.

The builder is a new host at an address another instance may have had: its host key is trusted on first use in a
per-build copy of the cluster's known_hosts without any key recorded for that address (builder_ssh), never in the
cluster's file.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusterctl.compile.model import ClusterPlan, LiveFacts, PoolPlan
from clusterctl.compile.nodes import aws_login
from clusterctl.core.providers import traits
from clusterctl.core.resources import resource_dir
from clusterctl.engines.ansible.settings import SshOptions
from clusterctl.engines.aws import image as ami
from clusterctl.engines.ssh import hostkeys
from clusterctl.ops.access import access_for, ssh_hosts
from clusterctl.ops.image import ImageError, PoolImage, converge_builder
from clusterctl.render.ansible import all_vars, pool_vars
from clusterctl.render.compiled import Compiled
from clusterctl.render.stack_config import StackConfig
from clusterctl.render.write import write_build
from clusterctl.state import ClusterState
from clusterctl.state.secrets import ensure_cluster_id, ensure_munge_key, playbook_vars

if TYPE_CHECKING:
    from rich.console import Console

SSH_WAIT_S = 900  # a p5 takes minutes from "running" to sshd answering
WAIT_VAR = "clusterctl_wait_for_ssh"  # playbooks/hostkeys.yml waits this long for the builder to let Ansible in
BUILDER_NAME = "{pool}-image"  # the builder's inventory name (its hostname stays the instance's own)


def inputs(compiled: Compiled, pool: PoolPlan, base: str) -> str:
    """What the pool's AMI is made of: the cluster's and the pool's role variables (versions, mirrors), the base
    image, the instance type and every playbook file."""
    plan = compiled.plan
    assert pool.instance_type is not None  # aws pools always name one (schema)
    return ami.inputs_hash({"all": all_vars(plan), "pool": pool_vars(plan, pool)}, base, resource_dir("playbooks"),
                           pool.instance_type)


def is_current(compiled: Compiled, pool: PoolPlan, record: dict | None) -> bool:
    """Whether the recorded AMI is what the spec and roles make now, judged on the spec's `ami` when it names one,
    else on the base the image was built on: a newer DLAMI release is no change of the spec (a rebuild for any
    other reason takes it). `plan` and `image build` both ask this."""
    if not record:
        return False
    return inputs(compiled, pool, pool.ami or str(record.get("base_ami"))) == record.get("inputs_hash")


def builder_ssh(access: SshOptions, build: Path, plan: ClusterPlan, pool: PoolPlan, address: str) -> SshOptions:
    """The cluster's SSH key and known hosts (the jump host stays checked against its recorded key), less any key
    recorded for the builder's address: another instance had it before, and the builder's key is trusted on first
    use in this copy only, never in the cluster's file."""
    like = next(iter(plan.nodes_of(pool.name)), None)  # the builder is reached as the pool's nodes are
    name = hostkeys.known_name(address, like.ssh.port if like is not None else 22)
    known = hostkeys.copy_without(access.known_hosts, build / f"known_hosts-{pool.name}-builder", [name])
    config = hostkeys.write_config(build / f"ssh_config-{pool.name}-builder", known, ssh_hosts(plan), tofu=True)
    return SshOptions(private_key=access.private_key, known_hosts=known, config=config)


def with_jump_host(compiled: Compiled, state: ClusterState, ec2: Any) -> Compiled:
    """The compiled spec with the aws controller as the jump host to the pool's subnets, as `up` reaches its nodes
    (image build runs without the stack's outputs: the controller is found by its tags)."""
    plan = compiled.plan
    if not traits(plan.controller).rented:
        return compiled
    address = ami.controller_address(ec2, plan.name, ensure_cluster_id(state))
    return compiled.with_facts(LiveFacts(jump_host=f"{aws_login(plan.controller_os)}@{address}")) if address else compiled


def build_aws_pools(compiled: Compiled, state: ClusterState, console: Console, chosen: list[str], quiet: bool,
                    fast: bool = True, role_vars: dict | None = None) -> list[PoolImage]:
    """Build the chosen aws pools' AMIs (a current one is kept); the caller holds the cluster's lock. role_vars:
    set over the rendered ones for the builder's converge only (the test harness's builder is a container, with
    no kernel of its own to build modules for)."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    plan = compiled.plan
    log = (lambda msg: None) if quiet else (lambda msg: console.print(f"  {msg}", highlight=False, markup=False))
    build = state.dir / "image-build"
    write_build(compiled.files, build)
    ssh = access_for(plan, state, log).ssh
    extravars = {**playbook_vars(ensure_munge_key(state)), WAIT_VAR: SSH_WAIT_S, **(role_vars or {})}
    cluster_id = ensure_cluster_id(state)
    stack = StackConfig.from_plan(plan)
    out = []
    for pool in (plan.pool(n) for n in chosen):
        t0 = time.monotonic()
        assert pool.region is not None and pool.instance_type is not None  # aws pools (schema)
        try:
            ec2, ssm = boto3.client("ec2", region_name=pool.region), boto3.client("ssm", region_name=pool.region)
            network = ami.builder_network(ec2, plan.name, cluster_id, stack.pool(pool.name))
            req = ami.BuildRequest(plan.name, cluster_id, pool.name, pool.region, pool.instance_type,
                                   network.subnet_id, network.security_group_ids, "", base_ami=pool.ami,
                                   base_os=pool.os, key_name=network.key_name,
                                   root_volume_gib=stack.pool(pool.name).root_volume_gib)
            recorded = ami.recorded_image(state.backend, pool.name)
            if recorded and is_current(compiled, pool, recorded):
                log(f"pool {pool.name}: image {recorded['image_id']} is current")
                out.append(PoolImage(pool.name, str(recorded["image_id"]), str(recorded["inputs_hash"]), False, 0.0))
                continue
            base = ami.resolve_base_ami(ec2, ssm, req)
            digest = inputs(compiled, pool, base)
            reached = with_jump_host(compiled, state, ec2)
            name = BUILDER_NAME.format(pool=pool.name)

            def converge(address: str, pool: PoolPlan = pool, name: str = name, reached: Compiled = reached) -> None:
                log(f"pool {pool.name}: converging the image builder at {address}")
                options = builder_ssh(ssh, build, reached.plan, pool, address)
                converge_builder(reached, build, pool, name, address, extravars, options, console, quiet, fast)

            log(f"pool {pool.name}: launching the image builder from {base} in {network.subnet_id}")
            built = ami.build_image(ec2, ssm, state.backend, replace(req, base_ami=base, inputs_hash=digest), converge)
        except (BotoCoreError, ClientError) as e:
            raise ImageError(f"pool {pool.name}: AWS refused the image build: {e}") from e
        log(f"pool {pool.name}: image {built.image_id} recorded; the next `clusterctl up` boots the pool from it")
        out.append(PoolImage(pool.name, built.image_id, digest, True, round(time.monotonic() - t0, 1)))
    return out
