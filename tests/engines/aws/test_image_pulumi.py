"""Launch templates and static instances boot the recorded node image: the Pulumi program under the official mocks,
its config being what `up` hands it (the rendered config with image.with_recorded_images applied)."""

from __future__ import annotations

import dataclasses

import pulumi

from clusterctl.engines.aws.image import with_recorded_images
from clusterctl.engines.aws.program import build
from clusterctl.render.cloud import cloud_config
from clusterctl.render.stack_config import Runtime, StackConfig
from tests.engines.aws.pulumi_harness import CLUSTER_ID, MUNGE_B64, SSH_KEY, Recorder
from tests.helpers import plan_of

BAKED = "ami-0baked0000000001"
LT = "aws:ec2/launchTemplate:LaunchTemplate"


class ById(Recorder):
    """getAmi answers the image its image-id filter names (what EC2 does), the base harness's AMI otherwise."""

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict:
        answer = super().call(args)
        ids = [f["values"][0] for f in args.args.get("filters") or [] if f["name"] == "image-id"]
        if args.token == "aws:ec2/getAmi:getAmi" and ids:
            answer = {**answer, "id": ids[0], "imageId": ids[0]}
        return answer


def run(config: dict) -> ById:
    cfg = StackConfig.from_mapping(config, dataclasses.replace(Runtime(SSH_KEY, None), cluster_id=CLUSTER_ID))
    rec = ById()
    pulumi.runtime.set_mocks(rec, project="clusterctl", stack="test", preview=False)

    @pulumi.runtime.test
    def _run() -> pulumi.Output:
        return pulumi.Output.from_input(build(cfg, MUNGE_B64).outputs)

    _run()
    return rec


def test_launch_templates_boot_the_recorded_image() -> None:
    config = cloud_config(plan_of("aws-p5-spot.yaml"))
    assert config is not None
    rec = run(with_recorded_images(config, {"p5": BAKED}))
    templates = [r for r in rec.of_type(LT) if "p5" in r.name]
    assert templates and all(t.inputs["imageId"] == BAKED for t in templates)
    lookups = [a for token, a in rec.calls if token == "aws:ec2/getAmi:getAmi"]
    assert any({"name": "image-id", "values": [BAKED]} in a.get("filters", []) for a in lookups)


def test_with_recorded_images_leaves_other_pools_and_the_input_alone() -> None:
    config = cloud_config(plan_of("hybrid-burst.yaml"))
    assert config is not None
    before = [dict(p) for p in config["clusterctl:pools"]]
    out = with_recorded_images(config, {"nosuchpool": BAKED})
    assert out["clusterctl:pools"] == before and config["clusterctl:pools"] == before
    name = before[0]["name"]
    assert with_recorded_images(config, {name: BAKED})["clusterctl:pools"][0]["ami"] == BAKED
    assert config["clusterctl:pools"][0]["ami"] == before[0]["ami"]
