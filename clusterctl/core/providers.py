"""What each provider is, as data: decisions that depend on where a node comes from read these traits, so no layer
compares provider names (the engines that implement a provider live in clusterctl.engines.<name>)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ProviderTraits:
    name: str
    lab: bool  # containers on this machine, made and removed by clusterctl
    owned: bool  # hardware the user owns: never created or destroyed, only configured and drained
    rented: bool  # cloud capacity billed by the hour, created and destroyed through the cluster's stack


PROVIDERS: dict[str, ProviderTraits] = {
    "local": ProviderTraits("local", lab=True, owned=False, rented=False),
    "onprem": ProviderTraits("onprem", lab=False, owned=True, rented=False),
    "aws": ProviderTraits("aws", lab=False, owned=False, rented=True),
}


class HasProvider(Protocol):
    @property
    def provider(self) -> str: ...


def traits(item: HasProvider) -> ProviderTraits:
    """The traits of anything with a `provider` name: a spec pool or controller, a compiled node or pool."""
    return PROVIDERS[item.provider]
