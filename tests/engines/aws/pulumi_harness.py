"""Run the Pulumi program under the official mocks (pulumi.runtime.set_mocks): no CLI, no cloud.

The mocks record every resource registration with the inputs as the engine would receive them (serialized,
camelCase keys), so tests assert on exactly what the provider would be asked to create.
"""

from __future__ import annotations

import base64
import itertools
from dataclasses import dataclass, field

import pulumi

AMI = "ami-0123456789abcdef0"
MUNGE_B64 = base64.b64encode(b"k" * 1024).decode()
CLUSTER_ID = "0123456789abcdef"  # what apply/secrets.ensure_cluster_id() makes
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB0testkey clusterctl-test"


@dataclass
class Registered:
    typ: str
    name: str
    inputs: dict
    id: str


@dataclass
class Recorder(pulumi.runtime.Mocks):
    resources: list[Registered] = field(default_factory=list)
    calls: list[tuple[str, dict]] = field(default_factory=list)
    _ips: itertools.count = field(default_factory=lambda: itertools.count(20))

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        rid = f"{args.name}-id"
        state = dict(args.inputs)
        t = args.typ
        if t == "aws:ec2/launchTemplate:LaunchTemplate":
            state.update(latestVersion=1, arn=f"arn:aws:ec2:::launch-template/{rid}")
        elif t == "aws:ec2/instance:Instance":
            state.setdefault("privateIp", f"10.240.0.{next(self._ips)}")
            state.update(availabilityZone="mock-az", publicIp="")
        elif t == "aws:iam/instanceProfile:InstanceProfile":
            state.update(arn=f"arn:aws:iam::123456789012:instance-profile/{args.name}", name=args.name)
        elif t == "aws:iam/role:Role":
            state.update(arn=f"arn:aws:iam::123456789012:role/{args.name}", name=args.name)
        elif t == "aws:ssm/parameter:Parameter":
            state.update(arn=f"arn:aws:ssm:us-east-1:123456789012:parameter{args.inputs['name']}")
        elif t == "aws:s3/bucket:Bucket":
            state.update(arn=f"arn:aws:s3:::{args.inputs['bucket']}")
        elif t == "aws:fsx/lustreFileSystem:LustreFileSystem":
            state.update(dnsName=f"{rid}.fsx.mock.amazonaws.com", mountName="abcdefgh")
        elif t == "aws:ec2/placementGroup:PlacementGroup":
            state.update(name=args.name)
        elif t == "aws:ec2/keyPair:KeyPair":
            state.update(keyName=args.name)
        self.resources.append(Registered(t, args.name, dict(args.inputs), rid))
        return [rid, state]

    def call(self, args: pulumi.runtime.MockCallArgs):
        self.calls.append((args.token, dict(args.args)))
        if args.token == "aws:ec2/getAmi:getAmi":
            return {"id": AMI, "imageId": AMI, "rootDeviceName": "/dev/xvda", "architecture": "x86_64"}
        return {}

    # -- queries ---------------------------------------------------------------------------------------------
    def of_type(self, typ: str) -> list[Registered]:
        return [r for r in self.resources if r.typ == typ]

    def one(self, typ: str, name: str | None = None) -> Registered:
        found = [r for r in self.of_type(typ) if name is None or r.name == name]
        assert len(found) == 1, (typ, name, [r.name for r in self.of_type(typ)])
        return found[0]

    def by_id(self, rid: str) -> Registered:
        return next(r for r in self.resources if r.id == rid)


def run_program(fn) -> Recorder:
    """Run fn() (which declares resources) under fresh mocks; wait for every registration; return the recorder."""
    rec = Recorder()
    pulumi.runtime.set_mocks(rec, project="clusterctl", stack="test", preview=False)

    @pulumi.runtime.test
    def _run():
        result = fn()
        outputs = getattr(result, "outputs", None)
        return pulumi.Output.from_input(outputs) if outputs is not None else None

    _run()
    return rec


def run_spec(spec, runtime=None):
    """The stacks/aws program for a spec, as `up` would configure it; returns (StackConfig, Recorder)."""
    from clusterctl.render.stack_config import Runtime, StackConfig
    from clusterctl.engines.aws.program import build
    from clusterctl.compile import compile_plan

    import dataclasses

    runtime = runtime or Runtime(SSH_KEY, None)
    runtime = dataclasses.replace(runtime, cluster_id=runtime.cluster_id or CLUSTER_ID)
    cfg = StackConfig.from_plan(compile_plan(spec), runtime)
    return cfg, run_program(lambda: build(cfg, MUNGE_B64))
