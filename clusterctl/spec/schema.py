"""The spec's JSON Schema, published by `clusterctl schema` for editors (yaml-language-server)."""

from __future__ import annotations

import json

from clusterctl.spec.cluster import ClusterSpec

SCHEMA_ID = "https://clusterctl.dev/schema/clusterctl-v1.json"


def schema_json() -> str:
    schema = ClusterSpec.model_json_schema(by_alias=True)
    schema["$id"] = SCHEMA_ID
    schema["title"] = "clusterctl cluster spec"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
