"""`up` adopts the instances the sync timer launched for static spot nodes, instead of creating second ones.

When EC2 takes back a static spot node's instance, the controller's sync timer launches a replacement with the same
Name tag and address (burst.actions.replace_static). The Pulumi stack still records the old instance id. A refresh
would find it gone and `up` would create another instance for the node (a new address, a second p5 billed, and the
replacement, untracked, left running under a job). So before the refresh, each static node's instance resource whose
recorded instance is no longer running is pointed at the running instance that carries its name (the stack's
deployment exported, its id rewritten, imported back); the refresh then reads the replacement's real attributes.
Only instances tagged with the cluster's name and id are ever adopted, one per node, never the controller.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

INSTANCE_TYPE = "aws:ec2/instance:Instance"


def node_of(urn: str) -> str:
    """The resource's name in its URN (urn:pulumi:<stack>::<project>::<type chain>::<name>): the node name."""
    return urn.rsplit("::", 1)[-1]


def adopt(deployment: dict, nodes: Iterable[str], running: dict[str, str]) -> tuple[dict, dict[str, tuple[str, str]]]:
    """deployment: the `deployment` part of a stack export; nodes: the static nodes that may be adopted;
    running: node name -> the id of the running instance that carries its Name tag (ours by cluster tags).
    Returns (a copy with those instances' ids rewritten, node -> (recorded id, adopted id)); a node whose recorded
    instance is the running one, or that has no running instance, is left as it is."""
    wanted = set(nodes)
    out = copy.deepcopy(deployment)
    running_ids = set(running.values())
    adopted: dict[str, tuple[str, str]] = {}
    for res in out.get("resources") or []:
        if res.get("type") != INSTANCE_TYPE or res.get("delete"):
            continue
        name = node_of(res.get("urn", ""))
        old, new = res.get("id"), running.get(name)
        if name not in wanted or new is None or old == new or old in running_ids:
            continue
        res["id"] = new
        if isinstance(res.get("outputs"), dict):
            res["outputs"]["id"] = new
        adopted[name] = (str(old), new)
    return out, adopted


@dataclass(frozen=True)
class Adopted:
    recorded: str  # the instance id the stack had (gone)
    instance_id: str  # the replacement, now the stack's
    address: str | None  # its private address (the node's, kept by the replacement)


def running_by_name(ec2: Any, cluster: str, cluster_id: str, nodes: list[str]) -> dict[str, Any]:
    """node -> its running (or pending) replacement (a burst.ec2.Instance tagged clusterctl:role=replacement),
    found by the cluster's tags and the node's Name; a node with two is left out: which one Slurm uses is not known
    here."""
    from clusterctl.engines.aws.burst import ec2 as cloud

    found: dict[str, list[Any]] = {}
    for i in cloud.cluster_instances(ec2, cluster, cluster_id, nodes, states=("pending", "running")):
        if i.name is not None and i.replacement:
            found.setdefault(i.name, []).append(i)
    return {n: insts[0] for n, insts in found.items() if len(insts) == 1}


def adopt_replacements(stack: Any, ec2: Any, cluster: str, cluster_id: str, nodes: list[str]) -> dict[str, Adopted]:
    """On a Pulumi Automation API stack (export_stack/import_stack): adopt the sync timer's replacements."""
    if not nodes:
        return {}
    running = running_by_name(ec2, cluster, cluster_id, nodes)
    if not running:
        return {}
    exported = stack.export_stack()
    deployment, adopted = adopt(exported.deployment, nodes, {n: i.id for n, i in running.items()})
    if adopted:
        from pulumi import automation as auto

        stack.import_stack(auto.Deployment(version=exported.version, deployment=deployment))
    return {n: Adopted(old, new, running[n].private_ip) for n, (old, new) in adopted.items()}
