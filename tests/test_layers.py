"""The package is a pipeline: no import cycle between modules, and no arrow pointing up between the layers
(imports inside functions count too: hiding an upward import in a function does not make it go away)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "clusterctl"

# Lowest first. A module may import its own layer and the ones below it, never one above.
LAYERS = [
    {"clusterctl", "core"},  # clusterctl/__init__.py holds the version constants only
    {"catalog"},
    {"spec"},
    {"validate"},
    {"compile"},
    {"render"},
    {"diff", "economics"},
    {"state"},
    {"engines"},
    {"ops"},
    {"cli", "__main__"},
]
RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _modules() -> dict[str, Path]:
    out = {}
    for f in PACKAGE.rglob("*.py"):
        parts = f.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = f
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "clusterctl":
            found.update(_resolve(f"{node.module}.{a.name}") for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(_resolve(a.name) for a in node.names if a.name.split(".")[0] == "clusterctl")
    return {m for m in found if m and m != module}


GRAPH = {m: _imports(m) for m in MODULES}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def test_every_package_has_a_layer():
    assert {_layer(m) for m in MODULES} <= set(RANK), {_layer(m) for m in MODULES} - set(RANK)


def test_no_upward_imports():
    upward = sorted(f"{a} -> {b}" for a, bs in GRAPH.items() for b in bs if RANK[_layer(b)] > RANK[_layer(a)])
    assert not upward, "\n".join(upward)


def test_core_imports_nothing_of_clusterctl_but_core():
    outside = sorted(f"{a} -> {b}" for a, bs in GRAPH.items() if _layer(a) == "core" for b in bs if _layer(b) != "core")
    assert not outside, outside


def test_no_import_cycles():
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(GRAPH[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for m in sorted(GRAPH):
        if m not in index:
            visit(m)
    assert not cycles, cycles


def test_the_graph_is_not_empty():
    """Guards the tests above against a parser that finds nothing."""
    assert len(MODULES) > 100 and sum(len(v) for v in GRAPH.values()) > 200


def _edges_by_layer() -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for a, bs in GRAPH.items():
        out[_layer(a)].update(_layer(b) for b in bs if _layer(b) != _layer(a))
    return out


def test_pure_layers_touch_no_engine():
    """spec, validate, compile, render, diff and economics are pure: no engine, state or lifecycle import."""
    impure = {"state", "engines", "ops", "cli"}
    edges = _edges_by_layer()
    for layer in ("spec", "validate", "compile", "render", "diff", "economics"):
        assert not edges[layer] & impure, (layer, edges[layer] & impure)
