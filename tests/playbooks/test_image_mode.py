"""The roles' image mode (clusterctl_image_build, set by `clusterctl image build`) leaves out exactly what belongs to
one node: the cluster's munge key and the daemons that need it, slurmd, shared mounts and the NVMe cache. A new task
of that kind must be added here deliberately, or the image would carry it (or the build would fail on it)."""

from __future__ import annotations

import yaml

from tests.playbooks.test_vendor_roles import PLAYBOOKS, _tasks

IMAGE_MODE_SKIPS = {
    ("munge", "tasks", "The cluster's munge key (created once by clusterctl, identical on every node)"),
    ("munge", "tasks", "munge running"),
    ("slurm_node", "tasks", "slurmd running"),
    ("slurm_node", "handlers", "Restart slurmd"),
    ("shared_mounts", "tasks", "Shared mounts"),
    ("nvme_cache", "tasks", "Cache on this node"),
}


def test_image_mode_skips_exactly_the_per_node_tasks():
    gated = set()
    for f in sorted([*PLAYBOOKS.rglob("roles/*/tasks/*.yml"), *PLAYBOOKS.rglob("roles/*/handlers/*.yml")]):
        for t in _tasks(yaml.safe_load(f.read_text())):
            if "clusterctl_image_build" in str(t.get("when", "")):
                assert "not (clusterctl_image_build | default(false))" in str(t["when"]), (f, t["name"])
                gated.add((f.parts[-3], f.parts[-2], t["name"]))
    assert gated == IMAGE_MODE_SKIPS
