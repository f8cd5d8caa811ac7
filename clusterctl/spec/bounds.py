"""Bounded parsing: a spec from a pull request must not cost more than a small file's worth of time and memory.

Before anything is composed into Python objects, the YAML event stream is scanned once (linear in the file's size,
no recursion) and refused on the first construct a cluster spec never needs: anchors and aliases (an alias bomb
expands a 556-byte file into billions of nodes), nesting deeper than any spec has, huge scalars, complex mapping
keys, non-standard tags and several documents. Each refusal names the line and column.
"""

from __future__ import annotations

import re
from io import StringIO

MAX_SPEC_BYTES = 1 << 20  # 1 MiB: a 65,536-node spec written out host by host is still far smaller
MAX_DEPTH = 32  # the deepest spec path is about 8 levels
MAX_SCALAR_CHARS = 8192  # the longest legitimate value (a description, a hostlist) is far shorter
_LONG_NUMBER = re.compile(r"[-+]?[0-9_]{40,}")  # Python refuses to convert 4,300+ digits; no spec value needs 40
CORE_TAGS = frozenset(
    f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "seq", "map")
)


class BoundsError(ValueError):
    """Carries the problem and the 1-based line and column where it was seen."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.line, self.column = line, column


def check_size(size: int) -> None:
    if size > MAX_SPEC_BYTES:
        raise BoundsError(f"the spec is {size:,} bytes; at most {MAX_SPEC_BYTES:,} are read")


def scan(text: str) -> None:
    """Raise BoundsError on the first construct outside the bounds; ruamel's own syntax errors pass through."""
    from ruamel.yaml import YAML
    from ruamel.yaml.events import (
        AliasEvent,
        CollectionStartEvent,
        DocumentStartEvent,
        MappingEndEvent,
        MappingStartEvent,
        NodeEvent,
        ScalarEvent,
        SequenceEndEvent,
    )

    check_size(len(text.encode("utf-8", "surrogatepass")))
    # One [is_mapping, next_is_key] per open collection.
    stack: list[list[bool]] = []
    documents = 0
    for ev in YAML(typ="rt").parse(StringIO(text)):
        where = (ev.start_mark.line + 1, ev.start_mark.column + 1)
        if isinstance(ev, DocumentStartEvent):
            documents += 1
            if documents > 1:
                raise BoundsError("a spec is one YAML document (found a second '---')", *where)
            continue
        if isinstance(ev, AliasEvent):
            raise BoundsError(f"YAML aliases (*{ev.anchor}) are not allowed in a spec: write the value out", *where)
        if not isinstance(ev, (NodeEvent, MappingEndEvent, SequenceEndEvent)):
            continue
        if isinstance(ev, (MappingEndEvent, SequenceEndEvent)):
            stack.pop()
            _node_done(stack)
            continue
        if ev.anchor is not None:
            raise BoundsError(f"YAML anchors (&{ev.anchor}) are not allowed in a spec: write the value out", *where)
        raw_tag = getattr(ev, "tag", None)  # scalars and collection starts carry one
        tag = str(raw_tag) if raw_tag is not None else None
        if tag is not None and tag not in CORE_TAGS and tag != "None":
            raise BoundsError(f"YAML tag {tag} is not allowed in a spec", *where)
        if isinstance(ev, CollectionStartEvent):
            if stack and stack[-1][0] and stack[-1][1]:
                raise BoundsError("a mapping key must be a plain value, not a list or a mapping", *where)
            if len(stack) >= MAX_DEPTH:
                raise BoundsError(f"the spec nests deeper than {MAX_DEPTH} levels", *where)
            is_map = isinstance(ev, MappingStartEvent)
            stack.append([is_map, is_map])
            continue
        if isinstance(ev, ScalarEvent) and len(ev.value) > MAX_SCALAR_CHARS:
            raise BoundsError(f"a value of {len(ev.value):,} characters; at most {MAX_SCALAR_CHARS:,} are allowed", *where)
        if isinstance(ev, ScalarEvent) and ev.style is None and _LONG_NUMBER.fullmatch(ev.value):
            raise BoundsError(f"a number of {len(ev.value)} digits is not a spec value", *where)
        _node_done(stack)


def _node_done(stack: list[list[bool]]) -> None:
    """A whole node ended: inside a mapping, keys and values alternate."""
    if stack and stack[-1][0]:
        stack[-1][1] = not stack[-1][1]
