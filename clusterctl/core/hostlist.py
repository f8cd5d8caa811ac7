"""Slurm hostlist expressions: expand `gpu[001-064]` / `10.1.0.[1-64]` and compress name lists back.

Follows Slurm's syntax: comma-separated items, each with zero or more bracket groups of
comma-separated numbers or ranges; zero padding is kept from the range's lower bound.
"""

from __future__ import annotations

import re
from itertools import product

MAX_HOSTS = 100_000  # guards against `n[1-999999999]` exhausting memory


class HostlistError(ValueError):
    pass


def _split_top(expr: str) -> list[str]:
    items, depth, cur = [], 0, ""
    for ch in expr:
        if ch == "[":
            if depth:
                raise HostlistError(f"nested '[' in {expr!r}")
            depth = 1
        elif ch == "]":
            if not depth:
                raise HostlistError(f"unbalanced ']' in {expr!r}")
            depth = 0
        if ch == "," and not depth:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    if depth:
        raise HostlistError(f"unclosed '[' in {expr!r}")
    items.append(cur)
    return items


def _expand_group(body: str, expr: str) -> list[str]:
    out: list[str] = []
    for part in body.split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part.strip())
        if not m:
            raise HostlistError(f"bad range {part!r} in {expr!r}")
        lo_s, hi_s = m.group(1), m.group(2) or m.group(1)
        lo, hi = int(lo_s), int(hi_s)
        if hi < lo:
            raise HostlistError(f"range {part!r} runs backwards in {expr!r}")
        if hi - lo + 1 > MAX_HOSTS:
            raise HostlistError(f"range {part!r} in {expr!r} has more than {MAX_HOSTS} entries")
        width = len(lo_s) if lo_s.startswith("0") else 0
        out.extend(str(i).zfill(width) for i in range(lo, hi + 1))
    return out


def expand(expr: str) -> list[str]:
    """Expand a hostlist expression into names, in order. Raises HostlistError on bad syntax."""
    if not isinstance(expr, str) or not expr.strip():
        raise HostlistError("empty hostlist")
    names: list[str] = []
    for item in _split_top(expr.strip()):
        item = item.strip()
        if not item:
            raise HostlistError(f"empty item in {expr!r}")
        pieces = re.split(r"(\[[^\]]*\])", item)
        choices = [
            _expand_group(p[1:-1], expr) if p.startswith("[") else [p] for p in pieces if p != ""
        ]
        total = 1
        for c in choices:
            total *= len(c)
        if total + len(names) > MAX_HOSTS:
            raise HostlistError(f"{expr!r} expands to more than {MAX_HOSTS} hosts")
        names.extend("".join(t) for t in product(*choices))
    return names


def count(expr: str) -> int:
    """How many hosts `expr` names, without expanding it (same syntax checks as expand)."""
    if not isinstance(expr, str) or not expr.strip():
        raise HostlistError("empty hostlist")
    total = 0
    for item in _split_top(expr.strip()):
        item = item.strip()
        if not item:
            raise HostlistError(f"empty item in {expr!r}")
        n = 1
        for p in re.split(r"(\[[^\]]*\])", item):
            if p.startswith("["):
                n *= _group_size(p[1:-1], expr)
        total += n
    return total


def _group_size(body: str, expr: str) -> int:
    size = 0
    for part in body.split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part.strip())
        if not m:
            raise HostlistError(f"bad range {part!r} in {expr!r}")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise HostlistError(f"range {part!r} runs backwards in {expr!r}")
        size += hi - lo + 1
    return size


_TAIL_NUM = re.compile(r"^(.*?)(\d+)$")


def compress(names: list[str]) -> str:
    """Compress names into a hostlist expression (`gpu[001-003,007]`), keeping their order groups."""
    groups: dict[tuple[str, int], list[int]] = {}
    order: list[tuple[str, int] | str] = []
    for n in names:
        m = _TAIL_NUM.match(n)
        if not m:
            order.append(n)
            continue
        key = (m.group(1), len(m.group(2)))
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(m.group(2)))
    parts: list[str] = []
    for item in order:
        if isinstance(item, str):
            parts.append(item)
            continue
        prefix, width = item
        nums = sorted(set(groups[item]))
        ranges, start, prev = [], nums[0], nums[0]
        for x in nums[1:] + [None]:
            if x is not None and x == prev + 1:
                prev = x
                continue
            ranges.append(
                str(start).zfill(width) if start == prev else f"{str(start).zfill(width)}-{str(prev).zfill(width)}"
            )
            if x is not None:
                start = prev = x
        if len(nums) == 1:
            parts.append(f"{prefix}{ranges[0]}")
        else:
            parts.append(f"{prefix}[{','.join(ranges)}]")
    return ",".join(parts)
