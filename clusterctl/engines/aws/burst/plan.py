"""The cluster plan as the controller has it: the build's plan.json, read back into clusterctl's ClusterPlan.

The burst programs decide nothing the compiler already decided: which nodes are cloud nodes, their pool, the
pool's instance type, AZ order and market, and (through cloud.config.StackConfig, the same code the Pulumi
program and its launch template use) the pool's ENI layout and purchase options.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence, TypeVar

from clusterctl.compile.model import ClusterPlan, Node, PoolPlan
from clusterctl.core.errors import ClusterctlError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from clusterctl.render.stack_config import PoolConfig, StackConfig

_D = TypeVar("_D", bound="DataclassInstance")


class PlanError(ClusterctlError):
    """The controller's plan.json is missing or unreadable."""


def _convert(tp: Any, value: Any) -> Any:  # a type hint; a JSON value
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args: Sequence[Any] = [a for a in typing.get_args(tp) if a is not type(None)]
        return _convert(args[0], value) if len(args) == 1 else value
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):  # a dataclass type (hints are never instances)
        return from_dict(tp, value)
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], v) for v in value)
        if args:
            return tuple(_convert(a, v) for a, v in zip(args, value, strict=False))
        return tuple(value)
    return value


def from_dict(cls: type[_D], data: dict) -> _D:
    """A (nested, frozen) dataclass from its dataclasses.asdict() form; unknown keys are ignored."""
    hints = typing.get_type_hints(cls)
    kwargs = {f.name: _convert(hints[f.name], data[f.name]) for f in dataclasses.fields(cls) if f.name in data}
    return cls(**kwargs)


def plan_from_json(text: str) -> ClusterPlan:
    return from_dict(ClusterPlan, json.loads(text))


@dataclass
class BurstPlan:
    """The plan seen from the burst programs: elastic pools and their cloud (power-saved) nodes."""

    plan: ClusterPlan

    @classmethod
    def load(cls, path: Path) -> "BurstPlan":
        try:
            return cls(plan_from_json(path.read_text()))
        except FileNotFoundError:
            raise PlanError(f"{path}: no cluster plan on this controller (the burst role copies the build's plan.json "
                            f"there; run `clusterctl up` first)") from None
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise PlanError(f"{path}: unreadable cluster plan ({e})") from None

    @property
    def cluster(self) -> str:
        return self.plan.name

    @cached_property
    def cloud_nodes(self) -> dict[str, Node]:
        """Nodes Slurm powers up and down (State=CLOUD): the elastic aws pools' nodes above min."""
        return {n.name: n for n in self.plan.nodes if n.cloud and n.provider == "aws"}

    @cached_property
    def static_nodes(self) -> set[str]:
        """Nodes of aws pools that always exist (the Pulumi stack owns their instances; burst never touches them)."""
        return {n.name for n in self.plan.nodes if n.provider == "aws" and not n.cloud}

    @cached_property
    def aws_nodes(self) -> dict[str, Node]:
        """Every node of an aws pool: cloud nodes and static ones (what the bootstrap kit can set up)."""
        return {n.name: n for n in self.plan.nodes if n.provider == "aws"}

    @cached_property
    def replaceable_nodes(self) -> dict[str, Node]:
        """Static nodes (the Pulumi stack's, elastic pools' min included) of spot pools, with the address slurm.conf
        names: when EC2 takes one back, sync launches its replacement at that address (the controller is in no pool)."""
        return {n.name: n for n in self.plan.static_spot_nodes if n.address}

    def elastic_pools(self) -> list[PoolPlan]:
        return [p for p in self.plan.pools if p.provider == "aws" and p.elastic]

    def pool_of(self, node: str) -> PoolPlan:
        pool = self.aws_nodes[node].pool
        assert pool is not None  # aws nodes belong to a pool; only the controller has none
        return self.plan.pool(pool)

    @cached_property
    def stack(self) -> StackConfig:
        """StackConfig of the plan: PoolConfig per aws pool (ENI layout, market, reservation) as the launch template has it."""
        from clusterctl.render.stack_config import StackConfig

        return StackConfig.from_plan(self.plan)

    def pool_config(self, pool: str) -> PoolConfig:
        return self.stack.pool(pool)
