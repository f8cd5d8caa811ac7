"""Field-level differences between two specs, each with the update policy its field declares.

Lists of named things (pools, partitions, filesystems, host groups, burst targets) are matched by their key, so
reordering pools is no change and `pools[gpu].count` names the pool rather than its position.
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from typing import Any, Iterable, Literal, Union, get_args, get_origin


from clusterctl.spec.base import SpecModel, UpdatePolicy, field_policy, sets_membership
from clusterctl.spec.cluster import ClusterSpec

# How items of a list of models are matched between old and new specs.
ITEM_KEYS = ("name", "mount_point", "names", "partition")
# Lists whose items are nodes or groups of them: adding or removing one only touches those nodes.
MEMBERSHIP_LISTS = ("pools", "hosts")


@dataclass(frozen=True)
class FieldChange:
    path: str  # display path with item keys: pools[gpu].count
    steps: tuple  # how to reach it in a spec dict: ("pools", ("name", "gpu"), "count")
    old: Any
    new: Any
    policy: UpdatePolicy
    kind: str  # changed | added | removed
    membership: bool = False  # only adds or removes nodes (count, hosts, a pool): the other nodes are not touched

    def to_dict(self) -> dict:
        return {"path": self.path, "old": self.old, "new": self.new, "policy": self.policy.value, "kind": self.kind}


def _models_in(annotation: Any) -> list[type[SpecModel]]:
    """The spec model classes an annotation can hold (unwrapping Optional, Annotated, Union)."""
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        return _models_in(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return [m for a in get_args(annotation) for m in _models_in(a)]
    if isinstance(annotation, type) and issubclass(annotation, SpecModel):
        return [annotation]
    return []


def _list_item_models(annotation: Any) -> list[type[SpecModel]]:
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        return _list_item_models(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return [m for a in get_args(annotation) for m in _list_item_models(a)]
    if origin is list:
        return _models_in(get_args(annotation)[0])
    return []


def _pick(models: list[type[SpecModel]], value: dict) -> type[SpecModel] | None:
    """The model whose Literal discriminator fields (provider, type) match the value."""
    for m in models:
        ok = True
        for name, info in m.model_fields.items():
            if get_origin(info.annotation) is Literal and len(get_args(info.annotation)) == 1:
                key = info.alias or name
                if key in value and value[key] != get_args(info.annotation)[0]:
                    ok = False
        if ok:
            return m
    return models[0] if models else None


def _item_key(item: Any) -> tuple[str, Any] | None:
    if isinstance(item, dict):
        for k in ITEM_KEYS:
            if k in item:
                return (k, item[k])
    return None


def _shrinks(old: Any, new: Any) -> bool:
    if isinstance(old, bool) or isinstance(new, bool):
        return False
    if isinstance(old, (int, float)) and isinstance(new, (int, float)):
        return new < old
    if isinstance(old, list) and isinstance(new, list):
        return len(new) < len(old)
    return False


def _label(steps: Iterable[str | int | tuple[str, Any]]) -> str:
    out = ""
    for s in steps:
        if isinstance(s, tuple):
            out += f"[{s[1]}]"
        elif isinstance(s, int):
            out += f"[{s}]"
        else:
            out += ("." if out else "") + s
    return out


def diff_specs(old: dict, new: dict) -> list[FieldChange]:
    """Changes from `old` to `new` (both spec dicts as spec.json holds them)."""
    out: list[FieldChange] = []
    _walk(ClusterSpec, old, new, (), UpdatePolicy.LIVE, out)
    return out


def _walk(model: type[SpecModel], old: dict, new: dict, steps: tuple, inherited: UpdatePolicy, out: list) -> None:
    for name, info in model.model_fields.items():
        key = info.alias or name
        o, n = old.get(key), new.get(key)
        if o == n:
            continue
        policy = field_policy(model, name, shrinking=_shrinks(o, n)) or inherited
        here = steps + (key,)
        items = _list_item_models(info.annotation)
        nested = _models_in(info.annotation)
        if items and isinstance(o, list) and isinstance(n, list) and all(_item_key(x) for x in o + n):
            _walk_items(items, o, n, here, policy, out)
        elif nested and isinstance(o, dict) and isinstance(n, dict):
            mo, mn = _pick(nested, o), _pick(nested, n)
            if mo is not None and mo is mn:
                _walk(mo, o, n, here, policy, out)
            else:  # a different kind (e.g. provider changed): the whole thing is replaced
                out.append(FieldChange(_label(here), here, o, n, max(policy, UpdatePolicy.REPLACE, key=_rank), "changed"))
        else:
            out.append(FieldChange(_label(here), here, o, n, policy, "changed", sets_membership(model, name)))


def _walk_items(models: list[type[SpecModel]], old: list, new: list, steps: tuple, policy: UpdatePolicy, out: list) -> None:
    old_by = {_item_key(x): x for x in old}
    new_by = {_item_key(x): x for x in new}
    for k, item in new_by.items():
        here = steps + (k,)
        if k not in old_by:
            out.append(FieldChange(_label(here), here, None, item, policy, "added", steps[-1] in MEMBERSHIP_LISTS))
            continue
        mo, mn = _pick(models, old_by[k]), _pick(models, item)
        if mn is not None and mo is mn:
            _walk(mn, old_by[k], item, here, policy, out)
        else:
            out.append(FieldChange(_label(here), here, old_by[k], item, max(policy, UpdatePolicy.REPLACE, key=_rank), "changed"))
    for k, item in old_by.items():
        if k not in new_by:
            here = steps + (k,)
            # Removing nodes, mounts or partitions means draining what uses them first.
            out.append(FieldChange(_label(here), here, item, None, max(policy, UpdatePolicy.DRAIN, key=_rank), "removed",
                                   steps[-1] in MEMBERSHIP_LISTS))


def _rank(p: UpdatePolicy) -> int:
    return p.rank


def apply_change(spec: dict, change: FieldChange) -> dict:
    """A copy of `spec` with only this change applied (used to find which rendered lines a change causes)."""
    import copy

    out = copy.deepcopy(spec)
    *parents, last = change.steps
    node: Any = out
    for s in parents:
        node = _step(node, s)
    if isinstance(last, tuple):  # an item of a keyed list
        idx = next((i for i, x in enumerate(node) if _item_key(x) == last), None)
        if change.new is None:
            node.pop(idx)
        elif idx is None:
            node.append(copy.deepcopy(change.new))
        else:
            node[idx] = copy.deepcopy(change.new)
    elif change.new is None:
        node.pop(last, None)
    else:
        node[last] = copy.deepcopy(change.new)
    return out


def _step(node: Any, s: str | int | tuple[str, Any]) -> Any:
    if isinstance(s, tuple):
        return next(x for x in node if _item_key(x) == s)
    return node[s]


def max_policy(policies: Iterable[UpdatePolicy]) -> UpdatePolicy | None:
    policies = list(policies)
    return max(policies, key=_rank) if policies else None
