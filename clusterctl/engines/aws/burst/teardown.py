"""`clusterctl down` of a cluster with elastic aws pools: terminate the instances Slurm powered up.

Those instances were launched by `clusterctl burst resume`, not by the Pulumi stack, so a stack destroy does not
know them: they would keep running (and billing), and their network interfaces would hold the stack's subnets and
security group so the destroy fails. They are found the way the burst programs find them (cloud tags: this
cluster's name AND its unique id, and a Name that is one of this plan's cloud nodes, or the pool tag of an elastic
pool for strays a resume left unnamed), terminated, and waited for until gone.
Static nodes (the stack's own instances) and other clusters' instances (same name, other id) are never touched,
except a static spot node's replacement that sync launched and no `up` adopted yet (tag clusterctl:role=replacement):
the stack does not know it either.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Callable

from clusterctl.engines.aws.burst import ec2 as cloud
from clusterctl.engines.aws.burst.plan import BurstPlan
from clusterctl.compile.model import ClusterPlan
from clusterctl.core.errors import ClusterctlError

# A p5 takes a few minutes to shut down; the destroy after this needs their ENIs gone.
WAIT_SECONDS = 900
POLL_SECONDS = 5


class BurstTeardownFailed(ClusterctlError):
    pass


def release_burst_instances(plan: ClusterPlan, cluster_id: str, log: Callable[[str], None] = lambda m: None,
                            wait_seconds: int = WAIT_SECONDS, poll_seconds: float = POLL_SECONDS) -> dict[str, str]:
    """Terminate every live instance of the plan's cloud nodes (and elastic pools' strays); wait until they are gone.

    Returns {node name (instance id when unnamed): instance id} of what was terminated.
    """
    burst = BurstPlan(plan)
    pools_by_region: dict[str, set[str]] = defaultdict(set)
    for pool in burst.elastic_pools():
        assert pool.region is not None  # elastic pools are aws pools; compile gives each its region
        pools_by_region[pool.region].add(pool.name)
    for node in burst.plan.static_spot_nodes:  # their replacements are looked for, with or without elastic pools
        region = burst.plan.pool(node.pool or "").region
        assert region is not None
        pools_by_region.setdefault(region, set())
    released: dict[str, str] = {}
    for region, pools in sorted(pools_by_region.items()):
        ec2, _ = cloud.clients(region)
        try:
            insts = [i for i in cloud.cluster_instances(ec2, plan.name, cluster_id)
                     if _launched_by_burst(burst, pools, i)]
            if not insts:
                continue
            listed = ", ".join(f"{i.name or '(unnamed)'}={i.id}" for i in insts)
            log(f"terminating {len(insts)} burst instance(s) in {region}: {listed}")
            cloud.terminate(ec2, [i.id for i in insts])
            ec2.get_waiter("instance_terminated").wait(
                InstanceIds=[i.id for i in insts],
                WaiterConfig={"Delay": poll_seconds, "MaxAttempts": max(1, int(wait_seconds / poll_seconds))})
        except Exception as e:  # botocore errors and waiter timeouts: the destroy must not start on top of them
            raise BurstTeardownFailed(f"could not terminate the burst instances of {plan.name} in {region} "
                                      f"({cloud.error_code(e)}: {cloud.error_message(e)}); the stack was not destroyed, "
                                      f"run `clusterctl down` again") from None
        released.update({i.name or i.id: i.id for i in insts})
    return released


def _launched_by_burst(burst: BurstPlan, elastic_pools: set[str], inst: cloud.Instance) -> bool:
    """A cloud node's instance, a stray of an elastic pool (no Name, or a node `max` no longer has), or an image
    builder an interrupted `image build` left running (it would hold the subnet the destroy removes), or a static
    node's replacement (adopted or not: the destroy removes it anyway); never a static node's instance the stack
    made."""
    if inst.replacement:
        return True
    if inst.name in burst.static_nodes:
        return False
    return inst.name in burst.cloud_nodes or inst.pool in elastic_pools or inst.image_builder
