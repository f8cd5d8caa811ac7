"""The cloud stack's outputs entering a compiled plan: what only exists once instances do (their addresses, the jump
host, FSx mount sources), set on the plan that was already compiled instead of compiling the spec a second time.
apply_facts(compile_plan(spec), f) == compile_plan(spec, f) (tests/compile/test_facts.py)."""

from __future__ import annotations

from dataclasses import replace

from clusterctl.compile.model import ClusterPlan, LiveFacts, Mount, Node
from clusterctl.core.providers import traits


def _node(n: Node, facts: LiveFacts) -> Node:
    if not traits(n).rented:
        return n
    return replace(n, address=facts.addresses.get(n.name), ssh=replace(n.ssh, jump_host=facts.jump_host))


def _mount(m: Mount, facts: LiveFacts) -> Mount:
    return replace(m, source=facts.mount_sources.get(m.mount_point, "")) if m.kind == "fsx-lustre" else m


def apply_facts(plan: ClusterPlan, facts: LiveFacts) -> ClusterPlan:
    return replace(plan, controller=_node(plan.controller, facts), nodes=tuple(_node(n, facts) for n in plan.nodes),
                   mounts=tuple(_mount(m, facts) for m in plan.mounts))
