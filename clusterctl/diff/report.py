"""The plan report: spec changes, file hunks and node changes, each with what it costs (its update policy)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from clusterctl.diff.attribution import attribute
from clusterctl.diff.files import FileDiff, diff_builds
from clusterctl.diff.spec_changes import FieldChange, diff_specs, max_policy
from clusterctl.render import layout
from clusterctl.spec.base import UpdatePolicy

POLICY_MEANING = {
    "live": "applied in place (config reload), no job disturbed",
    "drain": "nodes drained, updated and resumed in batches",
    "replace": "nodes or cloud resources destroyed and created anew",
    "forbidden": "cannot change on an existing cluster",
    "create": "new cluster: everything is created",
}


@dataclass
class NodeChange:
    name: str
    kind: str  # added | removed | changed
    policy: str | None
    detail: str = ""


@dataclass
class PlanReport:
    cluster: str
    first_apply: bool
    spec_changes: list[FieldChange] = field(default_factory=list)
    files: list[FileDiff] = field(default_factory=list)
    nodes: list[NodeChange] = field(default_factory=list)
    # What `apply --plan` checks to refuse a stale plan: the new spec and build, and the applied build it diffs against.
    fingerprint: dict = field(default_factory=dict)
    # Live sections added by `plan` when it can reach them: per-host Ansible check mode, cloud preview, cost delta.
    hosts: dict | None = None
    cloud: dict | None = None
    cost: dict | None = None
    images: list[dict] | None = None  # recorded node images per pool, current or stale (lab and aws pools)

    @property
    def has_changes(self) -> bool:
        return self.first_apply or bool(self.files or self.spec_changes)

    @property
    def policy(self) -> str | None:
        if self.first_apply:
            return "create"
        p = max_policy(
            [c.policy for c in self.spec_changes] + [UpdatePolicy(f.policy) for f in self.files if f.policy]
        )
        return p.value if p else None

    @property
    def drift_on_hosts(self) -> bool:
        return bool(self.hosts and any(h.get("changes") for h in self.hosts.get("by_host", {}).values()))

    def to_dict(self) -> dict:
        return {
            "cluster": self.cluster,
            "changes": self.has_changes,
            "first_apply": self.first_apply,
            "policy": self.policy,
            "fingerprint": self.fingerprint,
            "hosts": self.hosts,
            "cloud": self.cloud,
            "cost": self.cost,
            "images": self.images,
            "spec_changes": [c.to_dict() for c in self.spec_changes],
            "nodes": [vars(n) for n in self.nodes],
            "files": [
                {
                    "path": f.path,
                    "status": f.status,
                    "policy": f.policy,
                    "hunks": [
                        {
                            "header": h.header,
                            "policy": h.policy,
                            "causes": h.causes,
                            "lines": [
                                {"text": ln, "policy": h.line_policies.get(i)} for i, ln in enumerate(h.lines)
                            ],
                        }
                        for h in f.hunks
                    ],
                }
                for f in self.files
            ],
        }


def _plan_nodes(build: dict[str, str]) -> dict[str, dict]:
    text = build.get(layout.PLAN_JSON)
    if not text:
        return {}
    return {n["name"]: n for n in json.loads(text)["nodes"]}


def _node_policy(name: str, files: list[FileDiff]) -> str | None:
    """The highest policy of the slurm.conf lines that add, remove or change this node."""
    needle = f"NodeName={name} "
    found = [
        UpdatePolicy(h.line_policies[i])
        for f in files
        if f.path == layout.SLURM_CONF
        for h in f.hunks
        for i, ln in enumerate(h.lines)
        if ln[:1] in "+-" and ln[1:].startswith(needle) and i in h.line_policies
    ]
    p = max_policy(found)
    return p.value if p else None


def node_changes(old: dict[str, str], new: dict[str, str], files: list[FileDiff], overall: str | None) -> list[NodeChange]:
    o, n = _plan_nodes(old), _plan_nodes(new)
    out = []
    for name in n.keys() - o.keys():
        out.append(NodeChange(name, "added", _node_policy(name, files) or overall, f"pool {n[name]['pool']}"))
    for name in o.keys() - n.keys():
        out.append(NodeChange(name, "removed", _node_policy(name, files) or overall, f"pool {o[name]['pool']}"))
    for name in n.keys() & o.keys():
        if n[name] != o[name]:
            diff = sorted(k for k in n[name] if n[name][k] != o[name].get(k))
            out.append(NodeChange(name, "changed", _node_policy(name, files) or overall, "changed: " + ", ".join(diff)))
    return sorted(out, key=lambda c: (c.kind, c.name))


def fingerprint(old_build: dict[str, str], new_build: dict[str, str]) -> dict:
    from clusterctl.render import sha256

    return {
        "spec": sha256(new_build[layout.SPEC_JSON]),
        "build": sha256(new_build[layout.MANIFEST]),
        "applied": sha256(old_build[layout.MANIFEST]) if old_build else None,
    }


def build_report(cluster: str, old_build: dict[str, str], new_build: dict[str, str]) -> PlanReport:
    """Compare the last applied build with the new one."""
    if not old_build:
        files = diff_builds({}, new_build)
        for f in files:
            for h in f.hunks:
                h.policy = None
        return PlanReport(cluster, True, [], files, [], fingerprint({}, new_build))
    old_spec = json.loads(old_build[layout.SPEC_JSON])
    new_spec = json.loads(new_build[layout.SPEC_JSON])
    changes = diff_specs(old_spec, new_spec)
    files = diff_builds(old_build, new_build)
    attribute(old_spec, old_build, changes, files, new_build)
    overall = max_policy(c.policy for c in changes)
    nodes = node_changes(old_build, new_build, files, overall.value if overall else None)
    return PlanReport(cluster, False, changes, files, nodes, fingerprint(old_build, new_build))
