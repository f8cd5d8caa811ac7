"""Deterministic YAML: keys in insertion order, block style, no anchors, same bytes for the same data."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from clusterctl.render.lines import check_single_line
from clusterctl.render.yamlblock import dump_block

if TYPE_CHECKING:
    import yaml

UNSAFE_TAG = "!unsafe"  # Ansible never templates a string carrying this tag
STR_TAG = "tag:yaml.org,2002:str"


class _Unsafe(str):
    """A string value written with the !unsafe tag."""


@lru_cache(maxsize=1)
def _dumper() -> type[yaml.SafeDumper]:
    import yaml

    base = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

    class Dumper(base):  # type: ignore[misc, valid-type]
        def ignore_aliases(self, data: Any) -> bool:
            return True

    def represent_unsafe(dumper: yaml.SafeDumper, value: _Unsafe) -> yaml.ScalarNode:
        # ansible-core 2.19 gives an !unsafe scalar the type its bare text would have (`!unsafe '22.05'` is a float,
        # `!unsafe ''` is null): such text is written as a quoted plain string instead; it holds no template syntax.
        if dumper.resolve(yaml.ScalarNode, value, (True, False)) != STR_TAG:
            return dumper.represent_str(str(value))
        return dumper.represent_scalar(UNSAFE_TAG, str(value))

    Dumper.add_representer(_Unsafe, represent_unsafe)
    return Dumper


@lru_cache(maxsize=1)
def _libyaml() -> bool:
    import yaml

    return hasattr(yaml, "CSafeDumper")


def dump_yaml(data: Any) -> str:
    import yaml

    return yaml.dump(data, Dumper=_dumper(), sort_keys=False, default_flow_style=False, width=120, allow_unicode=True)


def _mark_unsafe(data: Any, where: str) -> Any:
    # Values only: keys are variable, group and host names, which Ansible never templates.
    if isinstance(data, dict):
        return {k: _mark_unsafe(v, where) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_mark_unsafe(v, where) for v in data]
    if isinstance(data, str):
        # Roles write these values into line-oriented files on the nodes (fstab, modprobe.d, env files).
        return _Unsafe(check_single_line(data, where))
    return data


def dump_ansible_yaml(data: Any, where: str) -> str:
    """YAML for Ansible (inventory, group_vars): every string value tagged !unsafe, so spec data is never templated.

    `where` names the file in the RenderError raised for a value with a line break.
    """
    fast = dump_block(data, where) if _libyaml() else None  # the fast path writes what libyaml's emitter writes
    return fast if fast is not None else dump_yaml(_mark_unsafe(data, where))


def load_ansible_yaml(text: str) -> Any:
    """Read back what dump_ansible_yaml wrote (the !unsafe tag read as a plain string), for tools and tests."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor(UNSAFE_TAG, lambda loader, node: loader.construct_scalar(node))
    return yaml.load(text, Loader=Loader)
