"""plan: each change classified by the update policy of the field behind it, down to the rendered line."""

import json

from clusterctl.diff import build_report
from clusterctl.diff.spec_changes import diff_specs
from clusterctl.render import render_spec
from tests.helpers import edited, example_dict, spec_of


def _build(data):
    return render_spec(spec_of(data))[1]


def _report(name, edit):
    return build_report("x", _build(example_dict(name)), _build(edited(name, edit)))


def _spec(data):
    return json.loads(_build(data)["spec.json"])


def test_no_change_no_report():
    r = _report("lab.yaml", lambda d: None)
    assert not r.has_changes and r.policy is None


def test_reordering_pools_is_no_change():
    base = example_dict("hybrid-burst.yaml")
    swapped = edited("hybrid-burst.yaml", lambda d: d["pools"].reverse())
    assert diff_specs(_spec(base), _spec(swapped)) == []


def test_adding_a_node_is_live_and_names_the_node():
    r = _report("lab.yaml", lambda d: d["pools"][0].update(count=3))
    assert r.policy == "live"
    assert [(n.name, n.kind, n.policy) for n in r.nodes] == [("gpu003", "added", "live")]
    assert [c.path for c in r.spec_changes] == ["pools[gpu].count"]


def test_removing_a_node_needs_a_drain():
    r = _report("lab.yaml", lambda d: d["pools"][0].update(count=1))
    assert r.policy == "drain"
    assert [(n.name, n.kind, n.policy) for n in r.nodes] == [("gpu002", "removed", "drain")]


def test_gpu_type_change_is_replace():
    r = _report("lab.yaml", lambda d: d["pools"][0].update(gpu="h200"))
    assert r.policy == "replace"
    slurm = next(f for f in r.files if f.path == "slurm/slurm.conf")
    assert slurm.policy == "replace"
    assert {n.policy for n in r.nodes} == {"replace"}


def test_mixed_change_each_line_keeps_its_own_policy():
    r = _report("lab.yaml", lambda d: (d["pools"][0].update(gpu="h200"), d["pools"][0].update(count=3)))
    topo = next(f for f in r.files if f.path == "slurm/topology.conf")
    assert topo.policy == "live"  # only the node count touches the switch layout
    slurm = next(f for f in r.files if f.path == "slurm/slurm.conf")
    pol = {ln[1:].split()[0]: slurm.hunks[0].line_policies.get(i) for i, ln in enumerate(slurm.hunks[0].lines) if ln[:1] == "+"}
    assert pol["PartitionName=critical"] == "live"
    assert pol["NodeName=gpu001"] == "replace"


def test_removing_a_pool_is_a_drain():
    r = _report("hybrid-burst.yaml", lambda d: (
        d["pools"].pop(1), d["scheduler"]["slurm"]["partitions"].pop(2), d["scheduler"]["slurm"]["burst"].update(targets=[])))
    kinds = {c.path: (c.kind, c.policy.value) for c in r.spec_changes}
    assert kinds["pools[burst]"] == ("removed", "drain")
    assert kinds["scheduler.slurm.partitions[burst]"] == ("removed", "drain")


def test_forbidden_field():
    r = _report("lab.yaml", lambda d: d.update(name="lab2"))
    assert r.policy == "forbidden"


def test_provider_change_is_replace():
    def edit(d):
        d["pools"][0] = {"name": "gpu", "provider": "onprem", "gpu": "h100-sxm",
                         "hosts": [{"names": "gpu[001-002]", "addresses": "10.30.0.[1-2]"}]}
        d["controller"] = {"provider": "onprem", "address": "10.30.0.254"}
        d.pop("lab")

    r = _report("lab.yaml", edit)
    pool = next(c for c in r.spec_changes if c.path == "pools[gpu]")
    assert pool.policy.value == "replace"


def test_first_apply_is_create():
    r = build_report("lab", {}, _build(example_dict("lab.yaml")))
    assert r.first_apply and r.has_changes and r.policy == "create"


def test_markdown_and_json_formats():
    from clusterctl.diff.formats import as_json, as_markdown, as_text

    r = _report("lab.yaml", lambda d: d["pools"][0].update(count=3))
    md = as_markdown(r)
    assert "| live | `gpu003` | added (pool gpu) |" in md and "```diff" in md
    assert json.loads(as_json(r))["policy"] == "live"
    assert "[live] gpu003 added" in as_text(r)
