"""Lab node images without booting anything: which image a pool's nodes boot (only a current one), where the builder
sits on the lab network, and what baking removes from a root."""

from __future__ import annotations

from pathlib import Path

from clusterctl.engines import images
from clusterctl.engines.local import image as lab_image
from clusterctl.engines.local import rootfs
from clusterctl.engines.local.provider import lab_for
from clusterctl.render.ansible import builder_inventory
from clusterctl.render.yamlout import load_ansible_yaml
from clusterctl.state import ClusterState
from tests.helpers import plan_of


def _lab(tmp_path, edit=None):
    plan = plan_of("lab.yaml", edit)
    state = ClusterState(plan.name, root=tmp_path / "state")
    return plan, state, lab_for(plan, state, lambda m: None)


def test_nodes_boot_a_recorded_image_only_while_it_is_current(tmp_path, monkeypatch):
    monkeypatch.setenv("CLUSTERCTL_CACHE_DIR", str(tmp_path / "cache"))
    plan, state, lab = _lab(tmp_path)
    pool = plan.pool("gpu")
    assert all(n.image is None for n in lab.spec.nodes)  # nothing recorded
    digest = lab_image.inputs(plan, pool, lab.spec)
    path = lab_image.image_dir(lab.spec, "gpu", digest)
    images.record(state.backend, "gpu", {"image": str(path), "inputs_hash": digest})
    assert all(n.image is None for n in lab_for(plan, state, lambda m: None).spec.nodes)  # recorded, not on disk
    path.mkdir(parents=True)
    booted = {n.name: n.image for n in lab_for(plan, state, lambda m: None).spec.nodes}
    assert booted == {"lab-ctl": None, "gpu001": str(path), "gpu002": str(path)}
    # A new driver version changes the role variables: the image is stale, the nodes boot the base again.
    plan2, _, _ = _lab(tmp_path, lambda d: d.setdefault("software", {}).update(nvidia_driver="575.57.08"))
    assert lab_image.inputs(plan2, plan2.pool("gpu"), lab.spec) != digest
    assert all(n.image is None for n in lab_for(plan2, state, lambda m: None).spec.nodes)


def test_the_builder_takes_the_highest_free_address_and_joins_only_its_pool(tmp_path):
    plan, _, lab = _lab(tmp_path)
    node = lab_image.builder(plan.pool("gpu"), lab.spec)
    assert (node.name, node.address, node.gpus) == ("gpu-image", "10.213.0.254", 8)
    inv = load_ansible_yaml(builder_inventory(plan, plan.pool("gpu"), node.name, node.address))
    assert inv == {"all": {"children": {"slurm_controller": {}, "compute": {"children": {"pool_gpu": {"hosts": {
        "gpu-image": {"ansible_host": "10.213.0.254", "ansible_user": "root", "clusterctl_node_provider": "local"}}}}}}}}


def test_baking_copies_the_root_without_its_identity(tmp_path):
    root = tmp_path / "root"
    for f, text in {"etc/ssh/ssh_host_ed25519_key": "k", "etc/machine-id": "0123", "etc/hostname": "gpu-image\n",
                    "etc/resolv.conf": "nameserver 10.0.0.1\n", "etc/munge/munge.key": "secret",
                    "usr/sbin/slurmd": "binary"}.items():
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        (root / f).write_text(text)
    dest = rootfs.bake(root, tmp_path / "images" / "img", lambda m: None)
    assert (dest / "usr/sbin/slurmd").read_text() == "binary"
    assert (dest / "etc/machine-id").read_text() == "" and (dest / "etc/hostname").read_text() == "localhost\n"
    for gone in ("etc/ssh/ssh_host_ed25519_key", "etc/resolv.conf", "etc/munge/munge.key"):
        assert not (dest / gone).exists(), gone
    assert (root / "etc/munge/munge.key").exists()  # the builder's root is not touched
    assert not list(Path(tmp_path / "images").glob(".build-*"))


def test_a_build_removes_the_images_it_replaces_once_no_node_boots_from_them(tmp_path, monkeypatch):
    monkeypatch.setenv("CLUSTERCTL_CACHE_DIR", str(tmp_path / "cache"))
    plan, state, lab = _lab(tmp_path)
    made = {}
    for tag in ("a", "b", "c", "new"):
        made[tag] = lab_image.image_dir(lab.spec, "gpu", tag * 16)
        (made[tag] / "etc").mkdir(parents=True)
    outside = tmp_path / "elsewhere"  # a record naming a path outside the image cache: never removed
    outside.mkdir()
    previous = {"image": str(made["c"]), "retired": [str(made["a"]), str(made["b"]), str(outside)]}
    logged = []
    kept = lab_image.retire(previous, str(made["new"]), {str(made["b"])}, lab.spec, logged.append)
    assert kept == [str(made["b"])]  # a node's overlay still has it as lower: retired, not removed
    assert not made["a"].exists() and not made["c"].exists()
    assert made["b"].is_dir() and made["new"].is_dir() and outside.is_dir()
    assert len(logged) == 2
    # The next build removes it once no node uses it; rebuilding the same inputs never removes the image itself.
    assert lab_image.retire({"image": str(made["new"]), "retired": kept}, str(made["new"]), set(), lab.spec,
                            logged.append) == []
    assert not made["b"].exists() and made["new"].is_dir()
    assert lab_image.retire(None, str(made["new"]), set(), lab.spec, logged.append) == []


def test_the_lab_knows_which_root_each_node_overlays_running_or_not(tmp_path, monkeypatch):
    import json

    monkeypatch.setenv("CLUSTERCTL_CACHE_DIR", str(tmp_path / "cache"))
    _, _, lab = _lab(tmp_path)
    assert lab.lowers_in_use() == set()
    for name, lower in (("gpu001", "/img/x"), ("gone-node", "/img/y")):  # gone-node: left the spec, dir still there
        d = lab.spec.state_dir / "nodes" / name
        d.mkdir(parents=True)
        (d / "node.json").write_text(json.dumps({"lower": lower}))
    assert lab.lowers_in_use() == {"/img/x", "/img/y"}
