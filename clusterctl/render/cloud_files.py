"""The aws files of the build: the Pulumi stack config and the nodes' cloud-init user-data.

Assembled here rather than in render.cloud, which the stack config and user-data modules build on (no cycle)."""

from __future__ import annotations

from clusterctl.compile.model import ClusterPlan
from clusterctl.render import layout
from clusterctl.render.cloud import cloud_config
from clusterctl.render.userdata import render_cloud_init
from clusterctl.render.yamlout import dump_yaml


def render_cloud(plan: ClusterPlan) -> dict[str, str]:
    """The stack config and the nodes' cloud-init user-data (cloud-init/...), both reviewed in the build's diff."""
    cfg = cloud_config(plan)
    if cfg is None:
        return {}
    header = (
        f"# Rendered by clusterctl for cluster {plan.name}: the Pulumi stack config (stacks/aws reads it).\n"
        "# Set outside the build: clusterctl:cluster_id, clusterctl:munge_key_b64 (secret; plain `pulumi up` only),\n"
        "# clusterctl:ssh_public_key, clusterctl:admin_cidr.\n"
    )
    return {layout.PULUMI_CONFIG.format(stack=plan.name): header + dump_yaml({"config": cfg}), **render_cloud_init(plan)}
