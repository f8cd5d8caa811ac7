"""Random mutations of the example specs never end in a traceback: only findings, or a spec that renders."""

import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterctl.render import render_spec
from clusterctl.validate import load_text
from tests.conftest import EXAMPLES
from tests.helpers import example_dict, to_yaml

BASES = [example_dict(p.name) for p in EXAMPLES]

values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-10, max_value=10**7),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["aws", "local", "onprem", "efa", "infiniband", "spot", "capacity-block", "p5.48xlarge", "h200",
                     "gpu[001-004]", "10.0.0.[1-4]", "x[5-1]", "auto", "/mnt", "ndr", "100g", "PERSISTENT_2", "22.05"]),
    st.lists(st.sampled_from(["gpu", "owned", "burst", "p5", "x"]), max_size=3),
    st.dictionaries(st.sampled_from(["name", "count", "pools", "type"]), st.integers(0, 3), max_size=2),
)


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


def _mutate(data, path, action, value):
    if not path:
        return data
    parent = data
    for p in path[:-1]:
        parent = parent[p]
    last = path[-1]
    if action == "set":
        parent[last] = value
    elif action == "delete":
        if isinstance(parent, dict):
            parent.pop(last)
        else:
            parent.pop(last)
    elif action == "duplicate" and isinstance(parent, list):
        parent.append(copy.deepcopy(parent[last]))
    elif action == "unknown-key" and isinstance(parent[last], dict):
        parent[last]["surprise"] = value
    return data


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.sampled_from(range(len(BASES))),
    picks=st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(["set", "delete", "duplicate", "unknown-key"]), values),
                   min_size=1, max_size=3),
)
def test_mutated_spec_never_tracebacks(base, picks):
    data = copy.deepcopy(BASES[base])
    for index, action, value in picks:
        paths = list(_paths(data))
        data = _mutate(data, paths[index % len(paths)], action, value)
    loaded = load_text(to_yaml(data))  # must not raise
    for f in loaded.findings:
        assert f.message and f.code
    if loaded.ok:
        _, files = render_spec(loaded.spec)  # a spec with no errors must render
        assert "slurm/slurm.conf" in files


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_never_tracebacks(text):
    load_text(text)
