"""Line-level differences between two builds, grouped by file and by hunk."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from clusterctl.diff.linediff import unified
from clusterctl.render import layout

# Bookkeeping files: their changes are the sum of the others', so the report leaves them out.
META_FILES = (layout.MANIFEST, layout.PLAN_JSON, layout.SPEC_JSON)
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class Hunk:
    header: str
    lines: list[str]  # unified-diff lines (' ', '-', '+' prefixed)
    policy: str | None = None  # the highest of its lines'
    causes: list[str] = field(default_factory=list)
    line_policies: dict[int, str] = field(default_factory=dict)  # index in lines -> policy of that +/- line

    @property
    def removed(self) -> list[str]:
        return [ln[1:] for ln in self.lines if ln.startswith("-")]

    @property
    def added(self) -> list[str]:
        return [ln[1:] for ln in self.lines if ln.startswith("+")]


@dataclass
class FileDiff:
    path: str
    status: str  # added | removed | modified
    hunks: list[Hunk]

    @property
    def policy(self) -> str | None:
        from clusterctl.diff.spec_changes import max_policy
        from clusterctl.spec.base import UpdatePolicy

        p = max_policy(UpdatePolicy(h.policy) for h in self.hunks if h.policy)
        return p.value if p else None


def changed_lines(old: str | None, new: str | None) -> tuple[set[str], set[str]]:
    """(removed, added) line sets between two texts: the lines whose number of occurrences went down (removed) or up
    (added). Linear in the texts' size (a multiset difference, not a sequence alignment): attribution only asks which
    lines a change produces, and a line that merely moved was produced by no change."""
    if old == new:
        return set(), set()
    o, n = Counter((old or "").splitlines()), Counter((new or "").splitlines())
    return set(o - n), set(n - o)


def diff_builds(old: dict[str, str], new: dict[str, str], context: int = 1) -> list[FileDiff]:
    out = []
    for path in sorted(set(old) | set(new)):
        if path in META_FILES or old.get(path) == new.get(path):
            continue
        status = "added" if path not in old else "removed" if path not in new else "modified"
        lines = unified((old.get(path) or "").splitlines(), (new.get(path) or "").splitlines(), context)
        hunks: list[Hunk] = []
        for ln in lines:
            if _HUNK.match(ln):
                hunks.append(Hunk(ln, []))
            elif hunks:
                hunks[-1].lines.append(ln)
        out.append(FileDiff(path, status, hunks))
    return out
