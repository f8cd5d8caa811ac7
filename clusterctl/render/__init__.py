"""render: ClusterPlan -> build files (path -> text). Deterministic: the same spec gives the same bytes."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from clusterctl import __version__
from clusterctl.compile import compile_plan
from clusterctl.compile.model import ClusterPlan, LiveFacts
from clusterctl.render import layout
from clusterctl.render.ansible import render_ansible
from clusterctl.render.cloud_files import render_cloud
from clusterctl.render.monitoring import render_monitoring
from clusterctl.render.node_files import render_node_files
from clusterctl.render.slurm import render_slurm
from clusterctl.spec.cluster import ClusterSpec

__all__ = ["render_config", "render_plan", "render_spec", "to_json", "sha256"]


def to_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def to_json_rows(data: dict) -> str:
    """Like to_json for a mapping of big lists (plan.json: thousands of nodes), but each list item on one compact
    line: still one line per node for a reviewer's diff, and written by json's C encoder (indent= forces the slow
    pure-Python one, half of render's time at 16,384 nodes)."""
    def compact(v: Any) -> str:
        return json.dumps(v, sort_keys=True, separators=(", ", ": "))

    out = ["{"]
    keys = sorted(data)
    for i, key in enumerate(keys):
        value, comma = data[key], "," if i < len(keys) - 1 else ""
        if isinstance(value, list) and value:
            rows = [f"    {compact(v)}," for v in value]
            rows[-1] = rows[-1][:-1]
            out += [f"  {json.dumps(key)}: [", *rows, f"  ]{comma}"]
        else:
            out.append(f"  {json.dumps(key)}: {compact(value)}{comma}")
    return "\n".join(out + ["}"]) + "\n"


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def render_config(plan: ClusterPlan) -> dict[str, str]:
    """The files the cluster runs on, without the build's bookkeeping (plan.json, spec.json, manifest)."""
    files: dict[str, str] = {}
    files.update(render_slurm(plan))
    files.update(render_ansible(plan))
    files.update(render_node_files(plan))
    files.update(render_cloud(plan))
    files.update(render_monitoring(plan))
    return files


def render_plan(plan: ClusterPlan, spec: ClusterSpec) -> dict[str, str]:
    """Every file of the build directory, the manifest included, keyed by relative path in sorted order."""
    files = render_config(plan)
    files[layout.PLAN_JSON] = to_json_rows(plan.to_dict())
    files[layout.SPEC_JSON] = to_json(spec.model_dump(mode="json", by_alias=True))
    manifest = {
        "cluster": plan.name,
        "clusterctl": __version__,
        "files": {path: sha256(text) for path, text in sorted(files.items())},
    }
    files[layout.MANIFEST] = to_json(manifest)
    return dict(sorted(files.items()))


def render_spec(spec: ClusterSpec, facts: LiveFacts | None = None) -> tuple[ClusterPlan, dict[str, str]]:
    plan = compile_plan(spec, facts)
    return plan, render_plan(plan, spec)
