"""`clusterctl image build` on the lab, for real: the node stack baked once, the nodes boot from it, and their
converge applies only what is theirs.

Its own lab (cluster `img`, subnet 10.221.0.0/24, its own state dir, two compute nodes with a local NVMe cache). In
order: the image of pool gpu is built (a builder node boots from the base rootfs, the roles run in image mode, the
stopped builder's root is baked), holds the packages and no identity, and a second build finds it current; `up`
boots the nodes from it and their converge installs no package, only per-node configuration; a builder whose
converge fails leaves no image and no builder behind; a rebuild after a version change keeps the image the nodes
still boot from; and `up` of a grown pool whose image went stale rebuilds it before the new node boots.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from clusterctl.compile import compile_plan
from clusterctl.engines import images
from clusterctl.engines.local import image as lab_image
from clusterctl.engines.provider import providers_for
from clusterctl.ops.access import access_for
from clusterctl.render.layout import HEALTH_PROGRAM
from clusterctl.state import ClusterState
from clusterctl.validate import load_valid
from tests.helpers import clusterctl, example_dict, needs_root, to_yaml

pytestmark = [
    pytest.mark.integration,
    needs_root("lab nodes: network namespaces, systemd-nspawn"),
]

# Tasks that install packages: with the image, a booted node has them all already.
INSTALLS = ("Base packages (time sync, tools the roles use)", "munge installed",
            "slurmd and the Slurm client commands installed", "node_exporter (Debian's prometheus-node-exporter)")


def known_hosts(d: Path) -> str:
    path = d / "state" / "img" / "lab" / "ssh" / "known_hosts"
    return path.read_text() if path.exists() else ""


def _spec_data() -> dict:
    data = example_dict("lab.yaml")
    data["name"] = "img"
    data["lab"]["subnet"] = "10.221.0.0/24"
    data["scheduler"]["slurm"]["accounting"]["enabled"] = False  # not what this test is about
    data["scheduler"]["slurm"].pop("accounts", None)
    return data


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    d = tmp_path_factory.mktemp("img")
    spec = d / "img.yaml"
    spec.write_text(to_yaml(_spec_data()))
    e = dict(os.environ, CLUSTERCTL_STATE_DIR=str(d / "state"))
    yield e, d, spec
    clusterctl("down", spec, "--force", env=e, check=False)


@pytest.fixture(scope="module")
def built(env):
    e, d, spec = env
    r = clusterctl("image", "build", spec, "--output", "json", env=e)
    return json.loads(r.stdout)


def test_image_build_bakes_the_pool_stack_without_identity(env, built):
    e, d, spec = env
    (img,) = built["images"]
    assert img["pool"] == "gpu" and img["built"] is True
    root = Path(img["image"])
    status = (root / "var/lib/dpkg/status").read_text()
    for pkg in ("slurmd", "munge", "chrony", "prometheus-node-exporter"):
        assert f"Package: {pkg}\nStatus: install ok installed" in status, pkg
    assert (root / HEALTH_PROGRAM.lstrip("/")).is_file()  # the health role ran: it is part of the image
    # No machine's identity: host keys, machine-id, hostname, the munge key are each node's own.
    assert not list((root / "etc/ssh").glob("ssh_host_*"))
    assert (root / "etc/machine-id").read_text() == ""
    assert (root / "etc/hostname").read_text() == "localhost\n"
    assert not (root / "etc/munge/munge.key").exists()
    # Recorded with its inputs; the builder is gone (no node dir, no netns, not in known_hosts).
    state = ClusterState("img", root=d / "state")
    assert images.recorded(state.backend, "gpu") == {"image": img["image"], "inputs_hash": img["inputs_hash"]}
    assert not (d / "state" / "img" / "lab" / "nodes" / "gpu-image").exists()
    assert "gpu-image" not in known_hosts(d)
    again = json.loads(clusterctl("image", "build", spec, "--output", "json", env=e).stdout)
    assert [(i["image"], i["built"]) for i in again["images"]] == [(img["image"], False)]


def test_nodes_boot_from_the_image_and_converge_only_their_own_configuration(env, built):
    e, d, spec = env
    r = clusterctl("up", spec, "--output", "json", env=e, check=False)
    report = json.loads(r.stdout)
    assert report["ok"], report["error"] or report["converge"]["failures"]
    image = built["images"][0]["image"]
    for node in ("gpu001", "gpu002"):
        meta = json.loads((d / "state" / "img" / "lab" / "nodes" / node / "node.json").read_text())
        assert meta["lower"] == image, node
        changed = [c["task"] for c in report["converge"]["changes"] if c["host"] == node]
        assert not [t for t in changed if t in INSTALLS], changed
        assert "The cluster's munge key (created once by clusterctl, identical on every node)" in changed
    # The controller is no pool node: it booted from the base rootfs and installed its packages itself.
    ctl = json.loads((d / "state" / "img" / "lab" / "nodes" / "img-ctl" / "node.json").read_text())
    assert ctl["lower"] != image


def test_a_failed_build_leaves_no_image_and_no_builder(env, built):
    e, d, spec = env
    plan = compile_plan(load_valid(spec))
    state = ClusterState("img", root=d / "state")
    lab = access_for(plan, state, lambda m: None, [p for p in providers_for(plan) if p.name == "local"]).lab
    pool = plan.pool("gpu")
    node = lab_image.builder(pool, lab.spec)
    dest = d / "never"

    def fails() -> None:
        raise RuntimeError("converge failed halfway")

    with pytest.raises(RuntimeError, match="halfway"):
        lab.build_image(node, fails, dest)
    assert not dest.exists() and not list(d.glob(".build-never"))
    assert not (d / "state" / "img" / "lab" / "nodes" / node.name).exists()
    assert node.name not in known_hosts(d)
    assert images.recorded(state.backend, "gpu")["image"] == built["images"][0]["image"]  # the good one stays


def test_a_rebuild_keeps_the_image_its_nodes_still_boot_from(env, built):
    """After a version change the pool's image is rebuilt; gpu001 and gpu002 still overlay the first image, so it
    stays on disk, recorded as retired (a later build removes it once no node uses it)."""
    e, d, spec = env
    data = _spec_data()
    data.setdefault("software", {})["nvidia_driver"] = "575.57.08"
    spec2 = d / "img-575.yaml"
    spec2.write_text(to_yaml(data))
    r = json.loads(clusterctl("image", "build", spec2, "--output", "json", env=e).stdout)
    (img,) = r["images"]
    first = built["images"][0]["image"]
    assert img["built"] is True and img["image"] != first and Path(img["image"]).is_dir()
    assert Path(first).is_dir()
    state = ClusterState("img", root=d / "state")
    assert images.recorded(state.backend, "gpu")["retired"] == [first]


def test_up_rebuilds_a_stale_image_before_a_new_node_boots_from_it(env, built):
    """Another version change and a third node: `up` rebuilds the pool's image first (timed as a phase, listed in its
    report), gpu003 boots from the new image, gpu001/gpu002 keep the root they were made on."""
    e, d, spec = env
    data = _spec_data()
    data["pools"][0]["count"] = 3
    data.setdefault("software", {})["nvidia_driver"] = "580.95.05"
    grown = d / "img-grown.yaml"
    grown.write_text(to_yaml(data))
    r = clusterctl("up", grown, "--output", "json", env=e, check=False)
    report = json.loads(r.stdout)
    assert report["ok"], report["error"] or report["converge"]["failures"]
    (img,) = report["images"]
    assert img["pool"] == "gpu" and img["built"] is True and "image build" in report["phases"]
    lowers = {n: json.loads((d / "state" / "img" / "lab" / "nodes" / n / "node.json").read_text())["lower"]
              for n in ("gpu001", "gpu002", "gpu003")}
    first = built["images"][0]["image"]
    assert lowers == {"gpu001": first, "gpu002": first, "gpu003": img["image"]}, lowers
    changed = [c["task"] for c in report["converge"]["changes"] if c["host"] == "gpu003"]
    assert not [t for t in changed if t in INSTALLS], changed
    state = ClusterState("img", root=d / "state")
    assert images.recorded(state.backend, "gpu")["retired"] == [first]  # still gpu001's and gpu002's lower
    # Nothing left to rebuild: the next `up` finds the image current.
    again = json.loads(clusterctl("up", grown, "--output", "json", env=e).stdout)
    assert again["images"] == [] and "image build" not in again["phases"]
