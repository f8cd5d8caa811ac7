"""The one base every spec model inherits, and the update-policy marker each field carries."""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class UpdatePolicy(str, Enum):
    """What changing a field costs on a running cluster, mildest first."""

    LIVE = "live"  # applied in place: config reload, no job affected
    DRAIN = "drain"  # nodes are drained, updated and resumed in batches
    REPLACE = "replace"  # nodes (or cloud resources) are destroyed and created anew
    FORBIDDEN = "forbidden"  # cannot change on an existing cluster

    @property
    def rank(self) -> int:
        return list(UpdatePolicy).index(self)


def spec_field(
    default: Any = ...,
    *,
    description: str,
    policy: UpdatePolicy = UpdatePolicy.LIVE,
    shrink: UpdatePolicy | None = None,
    **kw: Any,
) -> Any:
    """A pydantic Field that also records its update policy in the JSON Schema (`x-update-policy`).

    `shrink` is the policy when the value gets smaller (a count going down removes nodes, which must be drained first).
    """
    extra = dict(kw.pop("json_schema_extra", {}) or {})
    extra["x-update-policy"] = policy.value
    if shrink is not None:
        extra["x-shrink-policy"] = shrink.value
    return Field(default, description=description, json_schema_extra=extra, **kw)


class SpecModel(BaseModel):
    """Base of every spec model: unknown keys are errors (a YAML typo must fail), values are checked on assignment,
    and types are strict (`count: "2"` is an error, as the JSON Schema says), so the schema and `validate` agree."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True, strict=True)


def field_policy(model: type[BaseModel], name: str, *, shrinking: bool = False) -> UpdatePolicy | None:
    """The update policy a field declares (its shrink policy when the value got smaller and it has one)."""
    info = model.model_fields.get(name)
    extra = info.json_schema_extra if info is not None else None
    if not isinstance(extra, dict) or "x-update-policy" not in extra:
        return None
    if shrinking and "x-shrink-policy" in extra:
        return UpdatePolicy(extra["x-shrink-policy"])
    return UpdatePolicy(extra["x-update-policy"])


def sets_membership(model: type[BaseModel], name: str) -> bool:
    """Whether a field says which nodes exist (it declares a shrink policy: a count, a host list, an elastic bound).
    A change of one disrupts only the nodes it adds or removes, never the rest of the pool."""
    info = model.model_fields.get(name)
    extra = info.json_schema_extra if info is not None else None
    return isinstance(extra, dict) and "x-shrink-policy" in extra
