"""A spec compiled once per command: the spec, its plan and the build files, passed down to every step. Cloud
outputs come back as facts set on the plan (compile.facts), never as a second compile."""

from __future__ import annotations

from dataclasses import dataclass

from clusterctl.compile import compile_plan
from clusterctl.compile.facts import apply_facts
from clusterctl.compile.model import ClusterPlan, LiveFacts
from clusterctl.render import render_plan
from clusterctl.spec.cluster import ClusterSpec


@dataclass(frozen=True)
class Compiled:
    spec: ClusterSpec
    plan: ClusterPlan
    files: dict[str, str]

    @classmethod
    def of(cls, spec: ClusterSpec) -> Compiled:
        plan = compile_plan(spec)
        return cls(spec, plan, render_plan(plan, spec))

    @property
    def name(self) -> str:
        return self.spec.name

    def with_facts(self, facts: LiveFacts | None) -> Compiled:
        """The same cluster once its cloud resources exist: addresses and mount sources filled in, files re-rendered."""
        if facts is None:
            return self
        plan = apply_facts(self.plan, facts)
        return Compiled(self.spec, plan, render_plan(plan, self.spec))
