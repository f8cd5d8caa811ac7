"""The cloud stack's outputs set on a compiled plan give exactly the plan a compile with those facts gives, so a
command compiles once and the facts come back as data."""

from __future__ import annotations

import pytest

from clusterctl.compile import compile_plan
from clusterctl.compile.facts import apply_facts
from clusterctl.compile.model import LiveFacts
from clusterctl.validate import load_valid
from tests.conftest import EXAMPLES


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_facts_on_a_compiled_plan_equal_a_compile_with_them(path):
    spec = load_valid(path)
    plan = compile_plan(spec)
    names = [n.name for n in plan.all_nodes]
    facts = LiveFacts(addresses={n: f"10.9.{i // 250}.{i % 250 + 1}" for i, n in enumerate(names)},
                      jump_host="admin@203.0.113.7",
                      mount_sources={m.mount_point: f"fs-0123.fsx.example.com@tcp:/{i}" for i, m in enumerate(plan.mounts)})
    assert apply_facts(plan, facts) == compile_plan(spec, facts)


def test_aws_instances_are_reached_as_the_login_user_of_their_os():
    """Debian's cloud images make `admin`, Ubuntu's and the DLAMIs built on them `ubuntu`: the Ansible user of an
    aws node, and the user of the jump host (the controller), follow the os the spec gives them."""
    from clusterctl.engines.aws.facts import cloud_facts
    from clusterctl.engines.aws.up import CloudOutputs
    from tests.helpers import spec_of

    def edit(data):  # an Ubuntu pool names its image and gets Slurm and Lustre from a site's mirrors (validation)
        data["pools"][0].update(os="ubuntu2204", ami="ami-0abc12345678def90")
        data["mirrors"] = {m: {"url": f"https://repo.example.com/{m}", "key_url": f"https://repo.example.com/{m}/key.asc"}
                           for m in ("slurm", "lustre")}

    plan = compile_plan(spec_of("aws-p5-spot.yaml", edit))
    assert {n.ssh.user for n in plan.nodes_of("p5")} == {"ubuntu"} and plan.controller.ssh.user == "admin"
    assert {n.ssh.user for n in compile_plan(load_valid(EXAMPLES[0].parent / "aws-p5-spot.yaml")).nodes} == {"admin"}
    outputs = CloudOutputs(controller={"name": "p5spot-ctl", "private_ip": "10.0.0.5", "public_ip": "203.0.113.7",
                                       "instance_id": "i-0"})
    assert cloud_facts(outputs, plan.controller_os).jump_host == "admin@203.0.113.7"  # aws controllers: Debian 12
    assert cloud_facts(outputs, "ubuntu2404").jump_host == "ubuntu@203.0.113.7"
