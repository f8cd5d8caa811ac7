"""plan's diff: what changes between the last applied build and a new one, and what each change costs."""

from clusterctl.diff.report import PlanReport, build_report

__all__ = ["PlanReport", "build_report"]
