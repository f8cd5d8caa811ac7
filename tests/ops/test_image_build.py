"""`clusterctl image build` refuses, by name, what it cannot build, before anything boots."""

from __future__ import annotations

import pytest

from clusterctl.ops.image import ImageError, chosen_pools
from clusterctl.render.compiled import Compiled
from tests.engines.aws.conftest import aws, moto_server  # noqa: F401  (fixtures)
from tests.helpers import clusterctl, spec_of


def test_pools_are_chosen_by_name_and_only_lab_and_aws_pools_are_built():
    lab = Compiled.of(spec_of("lab.yaml"))
    assert chosen_pools(lab, []) == ["gpu"] == chosen_pools(lab, ["gpu"])
    with pytest.raises(ImageError, match="--pool nope: no such pool in cluster lab"):
        chosen_pools(lab, ["nope"])
    rented = Compiled.of(spec_of("aws-p5-spot.yaml"))
    assert chosen_pools(rented, []) == ["p5"] == chosen_pools(rented, ["p5"])
    owned = Compiled.of(spec_of("onprem-64xh100-ib.yaml"))
    with pytest.raises(ImageError, match="--pool gpu: owned hosts are installed in place"):
        chosen_pools(owned, ["gpu"])
    with pytest.raises(ImageError, match="no lab or aws pool"):
        chosen_pools(owned, [])


def test_the_cli_says_why_without_a_traceback(tmp_path, aws):  # noqa: F811  (the fixture)
    """An aws pool's builder boots in the cluster's own network: before `up` made it, the build is refused by
    name, and nothing is launched. Against a real moto_server (the `aws` fixture's endpoint and credentials)."""
    import os

    import boto3

    from tests.conftest import example

    env = {**{k: v for k, v in os.environ.items() if k.startswith("AWS_")}, "CLUSTERCTL_STATE_DIR": str(tmp_path),
           "PATH": "/usr/bin:/bin"}
    r = clusterctl("image", "build", example("aws-p5-spot.yaml"), "--pool", "p5", check=False, env=env)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "pool p5: the image builder boots in the cluster's own network" in r.stderr
    assert "run `clusterctl up` first" in r.stderr
    ec2 = boto3.client("ec2", region_name="us-east-1")
    assert not [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]
    r = clusterctl("image", "build", example("onprem-64xh100-ib.yaml"), check=False, env=env)
    assert r.returncode == 1 and "no lab or aws pool" in r.stderr and "Traceback" not in r.stderr


def test_plan_says_whether_each_recorded_image_is_current(tmp_path, monkeypatch):
    """A plan names each lab pool's recorded image; after a change to what it is made of, it says it is stale."""
    import json

    from clusterctl.engines import images
    from clusterctl.engines.local import image as lab_image
    from clusterctl.engines.local.provider import lab_for
    from clusterctl.state import ClusterState
    from tests.helpers import example_dict, to_yaml

    env = {"CLUSTERCTL_STATE_DIR": str(tmp_path / "state"), "CLUSTERCTL_CACHE_DIR": str(tmp_path / "cache"),
           "PATH": "/usr/bin:/bin"}
    spec = tmp_path / "lab.yaml"
    spec.write_text(to_yaml(example_dict("lab.yaml")))
    r = clusterctl("plan", spec, "--output", "json", env=env, check=False)
    assert r.returncode == 2 and json.loads(r.stdout)["images"] is None  # nothing recorded: nothing said

    monkeypatch.setenv("CLUSTERCTL_CACHE_DIR", env["CLUSTERCTL_CACHE_DIR"])  # the cache the CLI sees
    compiled = Compiled.of(spec_of(spec))
    state = ClusterState("lab", root=tmp_path / "state")
    lab = lab_for(compiled.plan, state, lambda m: None).spec
    digest = lab_image.inputs(compiled.plan, compiled.plan.pool("gpu"), lab)
    path = lab_image.image_dir(lab, "gpu", digest)
    path.mkdir(parents=True)
    images.record(state.backend, "gpu", {"image": str(path), "inputs_hash": digest})
    r = clusterctl("plan", spec, "--output", "json", env=env, check=False)
    assert json.loads(r.stdout)["images"] == [{"pool": "gpu", "image": str(path), "current": True,
                                               "rebuilt_by_up": True}]
    data = example_dict("lab.yaml")
    data.setdefault("software", {})["nvidia_driver"] = "575.57.08"
    spec.write_text(to_yaml(data))
    r = clusterctl("plan", spec, env=env, check=False)
    assert "image of pool gpu: stale" in r.stdout and "clusterctl image build" in r.stdout


def test_plan_says_whether_an_aws_pools_recorded_ami_is_current(tmp_path):
    """An aws pool's recorded AMI is judged against the base it was built on: current while the roles and their
    variables are what it was built with and the spec's ami (when it names one) is its base, stale after a version
    or base change, with what to run (up does not rebuild it).
    No AWS call: the plan reads the record."""
    import json

    from clusterctl.engines.aws.image import BuiltImage, record_image
    from clusterctl.ops.image_aws import inputs
    from clusterctl.state import ClusterState
    from tests.helpers import example_dict, to_yaml

    env = {"CLUSTERCTL_STATE_DIR": str(tmp_path / "state"), "PATH": "/usr/bin:/bin"}
    spec = tmp_path / "aws.yaml"
    spec.write_text(to_yaml(example_dict("aws-p5-spot.yaml")))
    compiled = Compiled.of(spec_of(spec))
    base = "ami-0abc12345678def90"
    digest = inputs(compiled, compiled.plan.pool("p5"), base)
    record_image(ClusterState(compiled.name, root=tmp_path / "state").backend, "p5",
                 BuiltImage("ami-0feed0000000000aa", base, digest, "i-0builder"))
    r = clusterctl("plan", spec, "--output", "json", env=env, check=False)
    assert json.loads(r.stdout)["images"] == [{"pool": "p5", "image": "ami-0feed0000000000aa", "current": True,
                                               "rebuilt_by_up": False}]
    for edit in ({"pools": [{"ami": base}]}, {"pools": [{"ami": "ami-0fedcba987654321"}]}):  # same base: current
        data = example_dict("aws-p5-spot.yaml")
        data["pools"][0].update(edit["pools"][0])
        spec.write_text(to_yaml(data))
        r = clusterctl("plan", spec, "--output", "json", env=env, check=False)
        assert json.loads(r.stdout)["images"][0]["current"] is (edit["pools"][0]["ami"] == base)
    data = example_dict("aws-p5-spot.yaml")
    data.setdefault("software", {})["nccl"] = "2.27.3"
    spec.write_text(to_yaml(data))
    r = clusterctl("plan", spec, env=env, check=False)
    assert ("image of pool p5: stale (ami-0feed0000000000aa: roles, role variables or the spec's ami changed since it "
            "was built); "
            "new nodes boot it until `clusterctl image build --pool p5` and `clusterctl up`") in r.stdout, r.stdout


def test_up_rebuilds_only_a_built_pools_stale_image_and_only_for_new_nodes(tmp_path, monkeypatch):
    """Which pools `up` rebuilds first: none that were never built; a built one only once stale and only while some
    node of it is still to be made (existing nodes keep the root they were made on)."""
    from clusterctl.engines import images
    from clusterctl.engines.local import image as lab_image
    from clusterctl.engines.local.provider import lab_for
    from clusterctl.ops.image import stale_for_new_nodes
    from clusterctl.state import ClusterState

    monkeypatch.setenv("CLUSTERCTL_CACHE_DIR", str(tmp_path / "cache"))
    compiled = Compiled.of(spec_of("lab.yaml"))
    state = ClusterState("lab", root=tmp_path / "state")
    assert stale_for_new_nodes(compiled, state) == []  # never built: the base rootfs, as before
    lab = lab_for(compiled.plan, state, lambda m: None).spec
    path = lab_image.image_dir(lab, "gpu", "0" * 64)
    path.mkdir(parents=True)
    images.record(state.backend, "gpu", {"image": str(path), "inputs_hash": "0" * 64})  # not what the spec makes
    assert stale_for_new_nodes(compiled, state) == ["gpu"]
    nodes = [n.name for n in compiled.plan.nodes_of("gpu")]
    for name in nodes:
        (lab.state_dir / "nodes" / name).mkdir(parents=True)
        (lab.state_dir / "nodes" / name / "node.json").write_text('{"lower": "/var/cache/clusterctl/rootfs"}')
    assert stale_for_new_nodes(compiled, state) == []  # every node exists: nothing boots from it at this up
    (lab.state_dir / "nodes" / nodes[-1] / "node.json").unlink()
    assert stale_for_new_nodes(compiled, state) == ["gpu"]
    digest = lab_image.inputs(compiled.plan, compiled.plan.pool("gpu"), lab)
    images.record(state.backend, "gpu", {"image": str(path), "inputs_hash": digest})
    assert stale_for_new_nodes(compiled, state) == []  # current
