"""A fast path for dump_ansible_yaml: block YAML written directly, byte for byte what PyYAML writes, for the common shape
(mappings and lists of short plain strings, ints, bools and nulls). PyYAML's Python representer is most of `render`'s
time at scale (the inventory holds five values per host); anything outside that shape returns None and PyYAML writes
the whole document, so the fast path never has to be right about a case it does not handle."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from clusterctl.render.lines import check_single_line

_MAX_LINE = 100  # below PyYAML's width (120): a longer line could be folded, which this writer does not do
_MAX_KEY = 64  # PyYAML writes keys over 128 characters as explicit `? key`
# ASCII text PyYAML writes plain in block context: no indicator at the start, no `: ` or ` #`, no quotes, no
# brackets, braces or alias characters, no leading or trailing space. A lone `-` or `- x` is a sequence entry, handled below.
_PLAIN = re.compile(r"[A-Za-z0-9_./+=~-](?:[A-Za-z0-9_./+=~@%^:, -]*[A-Za-z0-9_./+=~@%^-])?\Z")


@lru_cache(maxsize=1)
def _resolvers() -> dict:
    # Imported here, as yamlout imports PyYAML: the burst bundle on the controller imports render without PyYAML.
    from yaml.resolver import Resolver

    return Resolver.yaml_implicit_resolvers


class _Fallback(Exception):
    """The data holds something this writer leaves to PyYAML."""


def _plain_str(value: str) -> bool:
    """True when PyYAML writes `value` plain and reads it back as a string (not a bool, number, null or date)."""
    if not _PLAIN.match(value) or ": " in value or (value[0] == "-" and (len(value) == 1 or value[1] == " ")):
        return False
    if value.startswith(("---", "...")):  # libyaml quotes what looks like a document marker
        return False
    return not any(regexp.match(value) for _, regexp in _resolvers().get(value[0], ()))


def _key(key: Any) -> str:
    if type(key) is not str or len(key) > _MAX_KEY or not _plain_str(key):  # PyYAML refuses str subclasses
        raise _Fallback
    return key


def _scalar(value: Any, where: str) -> str:
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if type(value) is int:
        return str(value)
    if type(value) is str:
        check_single_line(value, where)  # the same refusal as the PyYAML path, before anything else
        if _plain_str(value):
            return "!unsafe " + value
    raise _Fallback


def _line(out: list[str], text: str) -> None:
    if len(text) > _MAX_LINE:
        raise _Fallback
    out.append(text)


def _value(out: list[str], head: str, value: Any, indent: int, where: str) -> None:
    """`head` is `key:` (or `- `) already indented; nested blocks go at `indent`."""
    if isinstance(value, dict):
        if not value:
            _line(out, head + " {}")
            return
        _line(out, head)
        _mapping(out, value, indent, where)
    elif isinstance(value, (list, tuple)):
        _line(out, head + " []")  # a non-empty list is written by _mapping
    else:
        _line(out, f"{head} {_scalar(value, where)}")


def _mapping(out: list[str], data: dict, indent: int, where: str, lead: str = "") -> None:
    """Entries at column `indent`; the first one follows `lead` (`- ` of a list item) when there is one."""
    pad = " " * indent
    for i, (key, value) in enumerate(data.items()):
        head = (lead if i == 0 and lead else pad) + _key(key) + ":"
        if isinstance(value, (list, tuple)) and value:
            _line(out, head)
            _sequence(out, value, indent, where)  # PyYAML indents no list under a mapping key
        else:
            _value(out, head, value, indent + 2, where)


def _sequence(out: list[str], items: Any, indent: int, where: str) -> None:
    pad = " " * indent
    for item in items:
        if isinstance(item, dict) and item:
            _mapping(out, item, indent + 2, where, lead=pad + "- ")
        elif isinstance(item, (dict, list, tuple)):
            raise _Fallback  # a list in a list, an empty mapping item: rare, PyYAML writes them
        else:
            _line(out, f"{pad}- {_scalar(item, where)}")


def dump_block(data: Any, where: str) -> str | None:
    """`data` as dump_ansible_yaml writes it (strings tagged !unsafe), or None where PyYAML must write it."""
    if not isinstance(data, dict) or not data:
        return None
    out: list[str] = []
    try:
        _mapping(out, data, 0, where)
    except _Fallback:
        return None
    out.append("")
    return "\n".join(out)
