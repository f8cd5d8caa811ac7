"""A unified diff that stays near-linear on large build files.

difflib aligns sequences by repeated longest-match searches: fine for a slurm.conf, quadratic on a 30,000-line
inventory where every host's user changed. Above SMALL lines this module first aligns the lines that occur exactly
once on both sides (patience diff: a longest increasing subsequence of those anchors), then lets difflib align only
the short stretches between anchors. Small files go straight to difflib, so their hunks are byte-for-byte what
difflib.unified_diff prints.
"""

from __future__ import annotations

import difflib
from bisect import bisect_left
from collections import Counter

SMALL = 2000  # lines: below this, plain difflib
MAX_SEGMENT_CELLS = 1_000_000  # a stretch without anchors bigger than this is shown as replaced, not aligned
MAX_DEPTH = 8  # anchors inside the stretches between anchors, this deep at most

Opcode = tuple[str, int, int, int, int]


def unified(a: list[str], b: list[str], context: int = 1) -> list[str]:
    """Unified-diff lines (headers `@@ ... @@`, then ' ', '-', '+' prefixed lines), without the ---/+++ header."""
    if len(a) < SMALL and len(b) < SMALL:
        return [ln for ln in difflib.unified_diff(a, b, lineterm="", n=context) if not ln.startswith(("---", "+++"))]
    out: list[str] = []
    for group in _grouped(_opcodes(a, b), context):
        first, last = group[0], group[-1]
        out.append(f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out.extend(" " + ln for ln in a[i1:i2])
                continue
            if tag in ("replace", "delete"):
                out.extend("-" + ln for ln in a[i1:i2])
            if tag in ("replace", "insert"):
                out.extend("+" + ln for ln in b[j1:j2])
    return out


def _range(start: int, stop: int) -> str:
    """difflib's unified range format."""
    length = stop - start
    if length == 1:
        return f"{start + 1}"
    return f"{start if not length else start + 1},{length}"


def _grouped(codes: list[Opcode], n: int) -> list[list[Opcode]]:
    """difflib.SequenceMatcher.get_grouped_opcodes over precomputed opcodes."""
    matcher = difflib.SequenceMatcher()
    matcher.get_opcodes = lambda: codes  # type: ignore[method-assign,assignment,return-value]
    return list(matcher.get_grouped_opcodes(n))


def _opcodes(a: list[str], b: list[str]) -> list[Opcode]:
    codes: list[Opcode] = []
    _align(a, b, 0, len(a), 0, len(b), codes, 0)
    return _merge(codes)


def _align(a: list[str], b: list[str], alo: int, ahi: int, blo: int, bhi: int, out: list[Opcode], depth: int) -> None:
    while alo < ahi and blo < bhi and a[alo] == b[blo]:  # common prefix
        out.append(("equal", alo, alo + 1, blo, blo + 1))
        alo, blo = alo + 1, blo + 1
    tail: list[Opcode] = []
    while alo < ahi and blo < bhi and a[ahi - 1] == b[bhi - 1]:  # common suffix
        tail.append(("equal", ahi - 1, ahi, bhi - 1, bhi))
        ahi, bhi = ahi - 1, bhi - 1
    anchors = _anchors(a, b, alo, ahi, blo, bhi) if depth < MAX_DEPTH else []
    if anchors:
        i, j = alo, blo
        for ai, bj in anchors:
            _align(a, b, i, ai, j, bj, out, depth + 1)
            out.append(("equal", ai, ai + 1, bj, bj + 1))
            i, j = ai + 1, bj + 1
        _align(a, b, i, ahi, j, bhi, out, depth + 1)
    else:
        _small(a, b, alo, ahi, blo, bhi, out)
    out.extend(reversed(tail))


def _anchors(a: list[str], b: list[str], alo: int, ahi: int, blo: int, bhi: int) -> list[tuple[int, int]]:
    """Lines unique on both sides, in an order both sides agree on (longest increasing subsequence)."""
    ca, cb = Counter(a[alo:ahi]), Counter(b[blo:bhi])
    where_b = {b[j]: j for j in range(blo, bhi) if cb[b[j]] == 1 and ca[b[j]] == 1}
    pairs = [(i, where_b[a[i]]) for i in range(alo, ahi) if a[i] in where_b]
    return _lis(pairs)


def _lis(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Longest run of pairs increasing in their second item (patience sorting, n log n)."""
    tops: list[int] = []  # smallest b index ending a run of each length
    ends: list[int] = []  # index in pairs of that run's last pair
    back = [-1] * len(pairs)
    for k, (_, bj) in enumerate(pairs):
        pos = bisect_left(tops, bj)
        if pos == len(tops):
            tops.append(bj)
            ends.append(k)
        else:
            tops[pos], ends[pos] = bj, k
        back[k] = ends[pos - 1] if pos else -1
    run, k = [], ends[-1] if ends else -1
    while k >= 0:
        run.append(pairs[k])
        k = back[k]
    return run[::-1]


def _small(a: list[str], b: list[str], alo: int, ahi: int, blo: int, bhi: int, out: list[Opcode]) -> None:
    if alo == ahi and blo == bhi:
        return
    if (ahi - alo) * (bhi - blo) > MAX_SEGMENT_CELLS:
        out.append(("replace", alo, ahi, blo, bhi))
        return
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a[alo:ahi], b[blo:bhi], autojunk=False).get_opcodes():
        out.append((tag, alo + i1, alo + i2, blo + j1, blo + j2))


def _merge(codes: list[Opcode]) -> list[Opcode]:
    """Adjacent opcodes of the same tag become one (what difflib's own opcodes look like)."""
    merged: list[Opcode] = []
    for tag, i1, i2, j1, j2 in codes:
        if i1 == i2 and j1 == j2:
            continue
        if merged and merged[-1][0] == tag:
            t, a1, _, b1, _ = merged[-1]
            merged[-1] = (t, a1, i2, b1, j2)
        elif merged and {merged[-1][0], tag} <= {"delete", "insert", "replace"}:
            t, a1, _, b1, _ = merged[-1]
            merged[-1] = ("replace", a1, i2, b1, j2)
        else:
            merged.append((tag, i1, i2, j1, j2))
    return merged
