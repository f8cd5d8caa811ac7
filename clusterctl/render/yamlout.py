"""Deterministic YAML: keys in insertion order, block style, no anchors, same bytes for the same data."""

from __future__ import annotations


def dump_yaml(data) -> str:
    import yaml

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

    class NoAliases(dumper):  # type: ignore[misc, valid-type]
        def ignore_aliases(self, data):
            return True

    return yaml.dump(data, Dumper=NoAliases, sort_keys=False, default_flow_style=False, width=120, allow_unicode=True)
