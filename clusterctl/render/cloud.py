"""Pulumi stack config for the cluster's AWS resources: what stacks/ (or a plain `pulumi up`) builds."""

from __future__ import annotations

from clusterctl.catalog import INSTANCE_TYPES
from clusterctl.compile.model import ClusterPlan
from clusterctl.render import layout
from clusterctl.render.yamlout import dump_yaml

PLACEMENT_STRATEGY = "cluster"  # EFA needs the instances on the same spine: one cluster placement group per pool


def _pool(plan: ClusterPlan, p) -> dict:
    it = INSTANCE_TYPES[p.instance_type]
    static = [n.name for n in plan.nodes_of(p.name) if not n.cloud]
    return {
        "name": p.name,
        "instance_type": p.instance_type,
        "market": p.market,
        "capacity_reservation_id": p.capacity_reservation_id,
        "availability_zones": list(p.availability_zones),
        "ami": p.ami,
        "static_nodes": static,
        "max_nodes": p.max_count,
        "efa": p.fabric == "efa",
        "placement_strategy": PLACEMENT_STRATEGY,
        "network_interfaces": [
            {"network_card_index": s.network_card_index, "device_index": s.device_index, "interface_type": s.interface_type}
            for s in (it.eni_layout() if p.fabric == "efa" else it.eni_layout()[:1])
        ],
    }


def cloud_config(plan: ClusterPlan) -> dict | None:
    pools = plan.aws_pools
    if not pools:
        return None
    cfg = {
        "aws:region": pools[0].region,
        "clusterctl:cluster": plan.name,
        "clusterctl:pools": [_pool(plan, p) for p in pools],
        "clusterctl:fsx": [
            {
                "mount_point": f.mount_point,
                "deployment_type": f.deployment_type,
                "storage_capacity_gib": f.storage_capacity_gib,
                "per_unit_storage_throughput": f.per_unit_storage_throughput,
                "s3_bucket": f.s3_bucket,
                "import_path": f.import_path,
                "export_path": f.export_path,
            }
            for f in plan.fsx
        ],
        "clusterctl:checkpoint_bucket": (plan.checkpoints or {}).get("s3_bucket"),
    }
    if plan.controller.provider == "aws":
        cfg["clusterctl:controller"] = {"name": plan.controller.name, "instance_type": plan.controller.instance_type}
    return cfg


def render_cloud(plan: ClusterPlan) -> dict[str, str]:
    cfg = cloud_config(plan)
    if cfg is None:
        return {}
    header = f"# Rendered by clusterctl for cluster {plan.name}: the Pulumi stack config (stacks/aws reads it).\n"
    return {layout.PULUMI_CONFIG.format(stack=plan.name): header + dump_yaml({"config": cfg})}
