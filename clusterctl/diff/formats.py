"""The plan report as text (terminal), markdown (pull-request comment) or JSON (tools)."""

from __future__ import annotations

import json
from typing import Any

from clusterctl.diff.files import Hunk
from clusterctl.diff.report import POLICY_MEANING, PlanReport


def _summary(r: PlanReport) -> str:
    if r.first_apply:
        return f"cluster {r.cluster}: not applied yet; {len(r.files)} files will be created"
    if not r.has_changes:
        return f"cluster {r.cluster}: no changes"
    return (
        f"cluster {r.cluster}: {len(r.spec_changes)} spec change(s), {len(r.files)} file(s) changed, "
        f"{len(r.nodes)} node(s) affected; overall policy: {r.policy} ({POLICY_MEANING.get(r.policy or '', '')})"
    )


def _value(v: Any) -> str:
    s = json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else str(v)
    return s if len(s) <= 80 else s[:77] + "..."


def _line_tag(h: Hunk, i: int) -> str:
    """Name a line's policy only where the hunk mixes policies; otherwise the header says it."""
    if len(set(h.line_policies.values())) < 2 or i not in h.line_policies:
        return ""
    return f"    [{h.line_policies[i]}]"


def _live_lines(r: PlanReport) -> list[str]:
    out = []
    if r.cost:
        c = r.cost
        note = "" if c["complete"] else " (some pools could not be priced)"
        out.append(f"cost: ${c['old_monthly_usd']:,.0f}/month -> ${c['new_monthly_usd']:,.0f}/month "
                   f"({c['delta_monthly_usd']:+,.0f}){note}; prices: {c['prices']}")
    if r.hosts is not None:
        for host, info in r.hosts["by_host"].items():
            for ch in info["changes"]:
                out.append(f"host {host}: {ch['task']}" + (f" ({', '.join(ch['files'])})" if ch["files"] else ""))
        for f in r.hosts["failures"]:
            out.append(f"host {f['host']}: could not check: {f['message']}")
    for img in r.images or []:
        if img["current"]:
            out.append(f"image of pool {img['pool']}: current ({img['image']})")
        elif img.get("rebuilt_by_up", True):
            out.append(f"image of pool {img['pool']}: stale (roles, role variables or base changed since it was "
                       f"built); `clusterctl up` rebuilds it before it creates a node of the pool, or `clusterctl image build` now")
        else:
            out.append(f"image of pool {img['pool']}: stale ({img['image']}: roles, role variables or the spec's ami "
                       f"changed since it was built); new nodes boot it until `clusterctl image build --pool {img['pool']}` and `clusterctl up`")
    if r.cloud is not None:
        if not r.cloud.get("checked"):
            out.append(f"cloud: not previewed: {r.cloud['reason']}")
        else:
            counts = ", ".join(f"{n} to {op}" for op, n in sorted(r.cloud["changes"].items())) or "no changes"
            out.append(f"cloud (Pulumi preview): {counts}")
            out += [f"cloud {s['op']}: {s['name']} ({s['type']})" for s in r.cloud.get("steps", [])]
    return out


def as_text(r: PlanReport) -> str:
    out = [_summary(r)] + _live_lines(r)
    if r.first_apply:
        out += [f"  + {f.path} ({sum(len(h.added) for h in f.hunks)} lines)" for f in r.files]
        return "\n".join(out) + "\n"
    if r.spec_changes:
        out.append("\nSpec changes:")
        out += [f"  [{c.policy.value}] {c.path}: {_value(c.old)} -> {_value(c.new)} ({c.kind})" for c in r.spec_changes]
    if r.nodes:
        out.append("\nNodes:")
        out += [f"  [{n.policy}] {n.name} {n.kind} ({n.detail})" for n in r.nodes]
    for f in r.files:
        out.append(f"\n{f.path} ({f.status}, {f.policy})")
        for h in f.hunks:
            cause = f" <- {', '.join(h.causes)}" if h.causes else ""
            out.append(f"  {h.header} [{h.policy}]{cause}")
            out += [f"  {ln}" + _line_tag(h, i) for i, ln in enumerate(h.lines)]
    return "\n".join(out) + "\n"


def as_markdown(r: PlanReport) -> str:
    out = [f"## clusterctl plan: `{r.cluster}`", "", f"**{_summary(r)}**", ""]
    live = _live_lines(r)
    if live:
        out += [f"- {ln}" for ln in live] + [""]
    if r.first_apply:
        out += ["| file | lines |", "|---|---|"]
        out += [f"| `{f.path}` | {sum(len(h.added) for h in f.hunks)} |" for f in r.files]
        return "\n".join(out) + "\n"
    if r.spec_changes:
        out += ["### Spec changes", "", "| policy | field | old | new |", "|---|---|---|---|"]
        out += [f"| {c.policy.value} | `{c.path}` | `{_value(c.old)}` | `{_value(c.new)}` |" for c in r.spec_changes]
        out.append("")
    if r.nodes:
        out += ["### Nodes", "", "| policy | node | change |", "|---|---|---|"]
        out += [f"| {n.policy} | `{n.name}` | {n.kind} ({n.detail}) |" for n in r.nodes]
        out.append("")
    if r.files:
        out += ["### Rendered files", ""]
        for f in r.files:
            out += [f"<details><summary><code>{f.path}</code> ({f.status}, {f.policy})</summary>", "", "```diff"]
            for h in f.hunks:
                cause = f" <- {', '.join(h.causes)}" if h.causes else ""
                out.append(f"{h.header} [{h.policy}]{cause}")
                out += [ln + _line_tag(h, i) for i, ln in enumerate(h.lines)]
            out += ["```", "", "</details>", ""]
    return "\n".join(out) + "\n"


def as_json(r: PlanReport) -> str:
    return json.dumps(r.to_dict(), indent=2, sort_keys=True) + "\n"


FORMATS = {"text": as_text, "markdown": as_markdown, "json": as_json}
