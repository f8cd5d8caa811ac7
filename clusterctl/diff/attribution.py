"""Which spec change caused which rendered line, so every hunk carries the policy of the change behind it.

Each change is applied alone to the old spec and rendered; the lines that render differs from the old build in are
that change's lines. A changed line's policy is the highest among the changes that produce it; a line no single
change explains (changes that only make sense together) gets the highest policy of all changes. A hunk's policy is
the highest of its lines'.
"""

from __future__ import annotations

from pydantic import ValidationError

from clusterctl.diff.files import META_FILES, FileDiff, changed_lines
from clusterctl.diff.spec_changes import FieldChange, apply_change, max_policy
from clusterctl.compile import compile_plan
from clusterctl.render import render_config
from clusterctl.spec.base import UpdatePolicy
from clusterctl.spec.cluster import ClusterSpec

MAX_SOLO_RENDERS = 64  # past this many changes, attribution costs more than it tells: hunks get the overall policy


def _solo_lines(old_spec: dict, old_build: dict[str, str], change: FieldChange) -> dict[str, tuple[set, set]] | None:
    try:
        spec = ClusterSpec.model_validate(apply_change(old_spec, change))
        files = render_config(compile_plan(spec))  # the bookkeeping files are never attributed: not rendered
    except (ValidationError, ValueError, KeyError, StopIteration):
        return None  # this change cannot stand alone
    return _lines_against(old_build, files)


def _lines_against(old_build: dict[str, str], files: dict[str, str]) -> dict[str, tuple[set, set]]:
    return {p: changed_lines(old_build.get(p), files.get(p)) for p in set(files) | set(old_build) if p not in META_FILES}


def attribute(old_spec: dict, old_build: dict[str, str], changes: list[FieldChange], diffs: list[FileDiff],
              new_build: dict[str, str] | None = None) -> None:
    """Fill in policy and causes on every hunk of `diffs`. With one change, the new build is that change's own
    render (no second render)."""
    overall = max_policy(c.policy for c in changes)
    solo = {}
    if len(changes) == 1 and new_build is not None:
        solo[changes[0].path] = (changes[0], _lines_against(old_build, new_build))
    elif len(changes) <= MAX_SOLO_RENDERS:
        for c in changes:
            lines = _solo_lines(old_spec, old_build, c)
            if lines is not None:
                solo[c.path] = (c, lines)
    for fd in diffs:
        for h in fd.hunks:
            hunk_causes: dict[str, None] = {}
            for i, ln in enumerate(h.lines):
                sign, text = ln[:1], ln[1:]
                if sign not in "+-" or not text.strip():  # blank lines carry no meaning and would match every change
                    continue
                side = 0 if sign == "-" else 1
                causes = [c for c, lines in solo.values() if fd.path in lines and text in lines[fd.path][side]]
                hunk_causes.update((c.path, None) for c in causes)
                p = max_policy(c.policy for c in causes) or overall
                if p:
                    h.line_policies[i] = p.value
            h.causes = list(hunk_causes)
            p = max_policy(UpdatePolicy(v) for v in h.line_policies.values())
            h.policy = p.value if p else (overall.value if overall else None)
