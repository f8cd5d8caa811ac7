"""The test harness of the burst tests: what stands in for AWS around a real lab cluster.

- Moto: a real `moto_server` (the EC2 HTTP API) on 127.0.0.1 (tests/motoserver.py, shared with tests/cloud).
- FaultProxy: a thin HTTP proxy in front of it, listening where the lab controller can reach it (the lab bridge's
  gateway address), that answers RunInstances in chosen AZs with EC2's InsufficientInstanceCapacity error (HTTP 500,
  EC2's error XML) and records every RunInstances it sees. Everything else passes through unchanged.
- CloudStack: what the Pulumi stack would have created, made with boto3 and the same tags (VPC = the lab subnet,
  one subnet per AZ inside it, the EFA security group, the pool's launch template from
  clusterctl.engines.aws.launch.launch_template_data).
- InstanceVms: every instance moto reports pending/running gets a lab node (systemd-nspawn, its own netns, the
  instance's private address, 8 fake GPUs): the "VM". Terminated instances' lab nodes are stopped and removed.
  The VM is a stock lab image (Debian minbase + sshd), like a stock Debian AMI: the controller's bootstrap installs
  Slurm on it; an instance of an image made by CreateImage through the FaultProxy boots that instance's root as it
  was baked (InstanceVms.bake: the VM stopped, its root copied without identity, as a lab image is). Each VM gets its own boot clock (fresh_boot_clock), so its uptime starts at its boot like a VM's.
- FakeImds: IMDSv2 (token PUT, spot/instance-action) per client address, so a test can serve a spot interruption
  notice to one burst node.
"""

from __future__ import annotations

import http.server
import json
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from ipaddress import IPv4Network
from pathlib import Path
from typing import Callable

from tests.motoserver import Moto, free_port  # noqa: F401  (Moto: part of the harness for labcluster and benchmarks)

CLUSTER_TAG = "clusterctl:cluster"


ERROR_XML = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code>"
             "<Message>{message}</Message></Error></Errors><RequestID>{rid}</RequestID></Response>")
MESSAGES = {
    "InsufficientInstanceCapacity": "We currently do not have sufficient {itype} capacity in the Availability Zone you "
                                    "requested ({az}). Our system will be working on provisioning additional capacity.",
    "MaxSpotInstanceCountExceeded": "Max spot instance count exceeded",
    "VcpuLimitExceeded": "You have requested more vCPU capacity than your current vCPU limit allows for the instance "
                         "bucket that the specified instance type belongs to.",
}


@dataclass
class RunCall:
    at: float
    availability_zone: str | None
    count: str | None
    failed: bool
    market: str = "on-demand"


class FaultProxy:
    """HTTP proxy to moto that fails RunInstances in `failing_azs` with `fail_code` (InsufficientInstanceCapacity),
    for every market or only those in `failing_markets`."""

    def __init__(self, upstream: str, host: str, subnet_azs: dict[str, str] | None = None):
        self.upstream = upstream.rstrip("/")
        self.subnet_azs = subnet_azs or {}  # subnet id -> AZ
        # CreateImage: bake(instance id) -> the instance's root baked (InstanceVms.bake), run before moto records the
        # image, then images[image id] = that root, which InstanceVms boots the image's instances from.
        self.bake: Callable[[str], str] | None = None
        self.images: dict[str, str] = {}
        # Instances EC2 "took back": terminated by the test, DescribeInstances reports them with EC2's spot reason.
        self.reclaimed: set[str] = set()
        self.failing_azs: set[str] = set()
        self.fail_code = "InsufficientInstanceCapacity"
        self.failing_markets: set[str] | None = None  # None: every market
        self.calls: list[RunCall] = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _forward(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.command == "POST" and body:
                    form = urllib.parse.parse_qs(body.decode(errors="replace"))
                    if form.get("Action") == ["RunInstances"]:
                        subnet = (form.get("NetworkInterface.1.SubnetId") or form.get("SubnetId") or [None])[0]
                        az = proxy.subnet_azs.get(subnet) or (form.get("Placement.AvailabilityZone") or [None])[0]
                        market = (form.get("InstanceMarketOptions.MarketType") or ["on-demand"])[0]
                        fail = az in proxy.failing_azs and (proxy.failing_markets is None or market in proxy.failing_markets)
                        proxy.calls.append(RunCall(time.time(), az, (form.get("MinCount") or [None])[0], fail, market))
                        if fail:
                            itype = (form.get("InstanceType") or ["p5.48xlarge"])[0]
                            code = proxy.fail_code
                            message = MESSAGES.get(code, "injected by the test harness").format(itype=itype, az=az)
                            data = ERROR_XML.format(code=code, message=message, rid=uuid.uuid4()).encode()
                            # EC2 answers capacity errors as server errors (500), request errors as 400
                            status = 500 if code.startswith("Insufficient") else 400
                            return self._reply(status, {"Content-Type": "text/xml"}, data)
                    if form.get("Action") == ["DescribeInstances"] and proxy.reclaimed:
                        status, headers, data = self._upstream(body)
                        return self._reply(status, headers, reclaimed_xml(data, proxy.reclaimed) if status == 200 else data)
                    if form.get("Action") == ["CreateImage"] and proxy.bake is not None:
                        root = proxy.bake(form["InstanceId"][0])
                        status, headers, data = self._upstream(body)
                        image = re.search(r"<imageId>([^<]+)</imageId>", data.decode(errors="replace"))
                        if status == 200 and image:
                            proxy.images[image.group(1)] = root
                        return self._reply(status, headers, data)
                return self._reply(*self._upstream(body))

            def _upstream(self, body: bytes) -> tuple[int, dict, bytes]:
                req = urllib.request.Request(proxy.upstream + self.path, data=body if body else None, method=self.command)
                for k, v in self.headers.items():
                    if k.lower() not in ("content-length", "connection", "accept-encoding"):
                        req.add_header(k, v)
                try:
                    with urllib.request.urlopen(req, timeout=120) as r:
                        return r.status, dict(r.headers), r.read()
                except urllib.error.HTTPError as e:
                    return e.code, dict(e.headers), e.read()

            def _reply(self, status, headers, data):
                self.send_response(status)
                for k, v in headers.items():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection", "server", "date"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _forward

        self.server = http.server.ThreadingHTTPServer((host, free_port(host)), Handler)
        self.server.daemon_threads = True
        self.url = f"http://{host}:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def reclaimed_xml(data: bytes, reclaimed: set[str]) -> bytes:
    """A DescribeInstances response with the terminated instances of `reclaimed` given EC2's StateReason of a spot
    instance it took back (moto has no spot market to do so)."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(data)
    ns = root.tag.split("}")[0] + "}" if root.tag.startswith("{") else ""
    ET.register_namespace("", ns.strip("{}"))
    for item in root.iter(f"{ns}item"):
        iid = item.find(f"{ns}instanceId")
        state = item.find(f"{ns}instanceState/{ns}name")
        if iid is None or iid.text not in reclaimed or state is None or state.text != "terminated":
            continue
        reason = item.find(f"{ns}stateReason")
        if reason is None:
            reason = ET.SubElement(item, f"{ns}stateReason")
        for tag in ("code", "message"):
            el = reason.find(f"{ns}{tag}")
            if el is None:
                el = ET.SubElement(reason, f"{ns}{tag}")
            el.text = SPOT_RECLAIMED["Code" if tag == "code" else "Message"]
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


class FakeImds:
    """IMDSv2 for lab nodes: tokens from PUT /latest/api/token; spot/instance-action per client address."""

    def __init__(self, host: str):
        self.notices: dict[str, dict] = {}  # client address -> instance-action document
        self.polls: dict[str, int] = {}
        self.tokens: set[str] = set()
        imds = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _send(self, status, text=""):
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_PUT(self):
                if self.path != "/latest/api/token" or not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                    return self._send(400)
                token = uuid.uuid4().hex
                imds.tokens.add(token)
                return self._send(200, token)

            def do_GET(self):
                if self.headers.get("X-aws-ec2-metadata-token") not in imds.tokens:
                    return self._send(401)
                client = self.client_address[0]
                if self.path == "/latest/meta-data/spot/instance-action":
                    imds.polls[client] = imds.polls.get(client, 0) + 1
                    if client in imds.notices:
                        return self._send(200, json.dumps(imds.notices[client]))
                return self._send(404, "Not Found")

        self.server = http.server.ThreadingHTTPServer((host, free_port(host)), Handler)
        self.server.daemon_threads = True
        self.url = f"http://{host}:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def interrupt(self, address: str, action: str = "terminate", in_seconds: int = 120) -> dict:
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + in_seconds))
        self.notices[address] = {"action": action, "time": when}
        return self.notices[address]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def ec2_client(endpoint: str, region: str):
    import boto3

    return boto3.client("ec2", region_name=region, endpoint_url=endpoint, aws_access_key_id="testing",
                        aws_secret_access_key="testing")


@dataclass
class CloudStack:
    """The pool's launch resources as the Pulumi stack makes them (same names and tags), inside the lab subnet."""

    vpc_id: str
    subnets: dict[str, str]  # AZ -> subnet id
    security_group_id: str
    launch_template_id: str

    @property
    def subnet_azs(self) -> dict[str, str]:
        return {s: az for az, s in self.subnets.items()}


def az_subnets(lab_subnet: str, azs: list[str]) -> dict[str, str]:
    """One subnet per AZ in the upper part of the lab subnet (lab nodes use the low addresses from .10 up)."""
    net = IPv4Network(lab_subnet)
    quarters = list(net.subnets(new_prefix=net.prefixlen + 2))[1:]
    return {az: str(q) for az, q in zip(azs, quarters, strict=False)}


CLUSTER_ID = "00c0ffee00c0ffee"  # the moto tests' cluster id (the lab passes its state's)


def create_stack(ec2, plan, pool_name: str, cluster_id: str = CLUSTER_ID, image_id: str | None = None,
                 cidr: str | None = None) -> CloudStack:
    """image_id: the AMI the launch template boots (the pool's recorded node image); default any amazon x86_64 one.
    cidr: the VPC's block; default the lab subnet (a plan without lab nodes, like the scale rig's, names one)."""
    from clusterctl.engines.aws import launch
    from clusterctl.render.stack_config import CLUSTER_ID_TAG, StackConfig

    cluster = plan.name
    pool = StackConfig.from_plan(plan).pool(pool_name)
    tags = [{"Key": CLUSTER_TAG, "Value": cluster}, {"Key": CLUSTER_ID_TAG, "Value": cluster_id}]

    def spec(kind, extra=()):
        return [{"ResourceType": kind, "Tags": tags + list(extra)}]

    cidr = cidr or plan.lab.subnet
    vpc = ec2.create_vpc(CidrBlock=cidr, TagSpecifications=spec("vpc", [{"Key": "Name", "Value": f"{cluster}-vpc"}]))
    vpc_id = vpc["Vpc"]["VpcId"]
    subnets = {}
    for az, block in az_subnets(cidr, list(pool.availability_zones)).items():
        s = ec2.create_subnet(VpcId=vpc_id, CidrBlock=block, AvailabilityZone=az,
                              TagSpecifications=spec("subnet", [{"Key": "Name", "Value": f"{cluster}-{az}"}]))
        subnets[az] = s["Subnet"]["SubnetId"]
    sg = ec2.create_security_group(GroupName=f"{cluster}-efa", Description="EFA: all traffic within the group",
                                   VpcId=vpc_id, TagSpecifications=spec("security-group", [{"Key": "Name", "Value": f"{cluster}-efa"}]))
    image = image_id or sorted(i["ImageId"] for i in ec2.describe_images(
        Owners=["amazon"], Filters=[{"Name": "architecture", "Values": ["x86_64"]}])["Images"])[0]
    data = launch.launch_template_data(pool, image_id=image, subnet_id=subnets[pool.availability_zones[0]],
                                       security_group_ids=[sg["GroupId"]], user_data="#cloud-config\n{}\n")
    lt = ec2.create_launch_template(LaunchTemplateName=f"{cluster}-{pool.name}-lt", LaunchTemplateData=data,
                                    TagSpecifications=spec("launch-template", [{"Key": "clusterctl:pool", "Value": pool.name}]))
    return CloudStack(vpc_id, subnets, sg["GroupId"], lt["LaunchTemplate"]["LaunchTemplateId"])


def create_static_nodes(ec2, plan, stack: CloudStack, pool_name: str, cluster_id: str = CLUSTER_ID) -> dict[str, tuple[str, str]]:
    """Another pool of the stack: its launch template in the stack's network, and its static nodes' instances as the
    Pulumi stack makes them (from the template, in the pool's first AZ, the cluster's tags, Name = node; EC2 picks
    the addresses). Returns node -> (instance id, private address)."""
    from clusterctl.engines.aws import launch
    from clusterctl.render.stack_config import CLUSTER_ID_TAG, StackConfig

    pool = StackConfig.from_plan(plan).pool(pool_name)
    tags = [{"Key": CLUSTER_TAG, "Value": plan.name}, {"Key": CLUSTER_ID_TAG, "Value": cluster_id},
            {"Key": "clusterctl:pool", "Value": pool.name}]
    image = sorted(i["ImageId"] for i in ec2.describe_images(
        Owners=["amazon"], Filters=[{"Name": "architecture", "Values": ["x86_64"]}])["Images"])[0]
    subnet = stack.subnets[pool.availability_zones[0]]
    data = launch.launch_template_data(pool, image_id=image, subnet_id=subnet, security_group_ids=[stack.security_group_id],
                                       user_data="#cloud-config\n{}\n")
    lt = ec2.create_launch_template(LaunchTemplateName=f"{plan.name}-{pool.name}-lt", LaunchTemplateData=data,
                                    TagSpecifications=[{"ResourceType": "launch-template", "Tags": tags}])
    nodes = launch.launch_nodes(ec2, pool, plan.name, list(pool.static_nodes), cluster_id=cluster_id, subnet_id=subnet,
                                security_group_ids=[stack.security_group_id],
                                launch_template_id=lt["LaunchTemplate"]["LaunchTemplateId"])
    return {n: (v["instance_id"], v["private_ip"]) for n, v in nodes.items()}


# What EC2 reports for a spot instance it took back (EC2 API reference, StateReason).
SPOT_RECLAIMED = {"Code": "Server.SpotInstanceTermination",
                  "Message": "Server.SpotInstanceTermination: Spot instance termination"}


VM_PREFIX = "vm-"
# A VM boots no sooner than this after its launch, as EC2's take tens of seconds. Sooner, the boot time slurmctld
# derives from the VM's uptime (whole seconds, twice truncated) can fall before its own power-up request, and it then
# ignores the node's registration for good ("Still waiting for boot"): job stuck CONFIGURING, node NOT_RESPONDING.
BOOT_AFTER_S = 3.0


@contextmanager
def fresh_boot_clock(prefix: str):
    """Lab nodes named `prefix*` boot with their own boot clock (a time namespace whose CLOCK_BOOTTIME starts at
    zero), like a VM that has just booted. Containers otherwise share the host's uptime, and slurmctld ignores the
    registration of a node it powered up whose slurmd reports an uptime older than the power-up request ("Still
    waiting for boot of node"). `unshare --time` without --fork execs nspawn itself, so the pid the lab supervisor
    records is still nspawn's."""
    from clusterctl.engines.local import machine

    real = machine.nspawn_argv

    def argv(paths, netns, binds=()):
        out = real(paths, netns, binds)
        if not paths.name.startswith(prefix):
            return out
        with open("/proc/uptime") as fh:
            up = int(float(fh.read().split()[0]))
        return ["unshare", "--time", f"--boottime=-{up}", *out]

    machine.nspawn_argv = argv
    try:
        yield
    finally:
        machine.nspawn_argv = real


@dataclass
class VmEvent:
    at: float
    instance_id: str
    node: str | None
    address: str
    what: str  # booted | removed


@dataclass
class InstanceVms:
    """Boots a lab node for every live instance moto reports, and removes it when the instance is gone."""

    ec2: object
    cluster: str
    lab_spec: object  # clusterctl.engines.local.LabSpec of the cluster's own lab nodes (controller, owned nodes)
    gpus: int = 8
    interval: float = 1.0
    vms: dict[str, tuple[str, str]] = field(default_factory=dict)  # instance id -> (lab node name, address)
    images: dict[str, str] = field(default_factory=dict)  # AMI id -> baked root (FaultProxy.images)
    roots: dict[str, str | None] = field(default_factory=dict)  # instance id -> the baked root it boots, if any
    baked: set[str] = field(default_factory=set)  # instances CreateImage stopped: their VM is not started again
    names: dict[str, str | None] = field(default_factory=dict)  # instance id -> Name tag when booted
    events: list[VmEvent] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.lock = threading.Lock()

    def start(self):
        self._thread.start()
        return self

    def stop(self, remove: bool = True):
        self._stop.set()
        self._thread.join(timeout=120)
        if remove and self.vms:
            self._apply({})

    @staticmethod
    def vm_name(instance_id: str) -> str:
        return VM_PREFIX + instance_id.split("-", 1)[1][-10:]

    def live(self) -> dict[str, tuple[str, str | None, float]]:
        out: dict[str, tuple[str, str | None, float]] = {}
        resp = self.ec2.describe_instances(Filters=[{"Name": f"tag:{CLUSTER_TAG}", "Values": [self.cluster]},
                                                    {"Name": "instance-state-name", "Values": ["pending", "running"]}])
        for r in resp["Reservations"]:
            for i in r["Instances"]:
                tags = {t["Key"]: t["Value"] for t in i.get("Tags") or []}
                out[i["InstanceId"]] = (i["PrivateIpAddress"], tags.get("Name"), i["LaunchTime"].timestamp())
                self.roots.setdefault(i["InstanceId"], self.images.get(i["ImageId"]))
        return out

    def _lab(self, vms: dict[str, tuple[str, str]]):
        from dataclasses import replace

        from clusterctl.engines.local import Lab, LabNode

        vm_nodes = sorted((LabNode(name, addr, self.gpus, 0, self.roots.get(iid)) for iid, (name, addr) in vms.items()),
                          key=lambda n: n.name)
        return Lab(replace(self.lab_spec, nodes=tuple(self.lab_spec.nodes) + tuple(vm_nodes)), log=lambda m: None)

    def _apply(self, wanted: dict[str, tuple[str, str]]):
        with self.lock, fresh_boot_clock(VM_PREFIX):
            before = dict(self.vms)
            self._lab(wanted).up()
            now = time.time()
            for iid in sorted(set(wanted) - set(before)):
                self.events.append(VmEvent(now, iid, self.names.get(iid), wanted[iid][1], "booted"))
            for iid in sorted(set(before) - set(wanted)):
                self.events.append(VmEvent(now, iid, self.names.get(iid), before[iid][1], "removed"))
            self.vms = dict(wanted)

    def sync_once(self):
        live = self.live()
        wanted = {}
        now = time.time()
        for iid, (addr, name, launched) in live.items():
            if iid in self.baked:
                continue  # stopped for its image (bake); the next pass removes its VM
            if iid not in self.vms and now - launched < BOOT_AFTER_S:
                continue  # booted on a later pass (BOOT_AFTER_S says why)
            wanted[iid] = (self.vm_name(iid), addr)
            self.names.setdefault(iid, name)
            if name:
                self.names[iid] = name
        if wanted != self.vms:
            self._apply(wanted)
        # Resume names each instance with CreateTags right after RunInstances: a VM booted in between was recorded
        # without its node name, which it gets here once the tag shows.
        with self.lock:
            for e in self.events:
                if e.node is None and self.names.get(e.instance_id):
                    e.node = self.names[e.instance_id]

    def _loop(self):
        while not self._stop.is_set():
            try:
                self.sync_once()
            except Exception as e:  # keep the VMs following moto; the test sees the errors
                self.errors.append(f"{type(e).__name__}: {e}")
            self._stop.wait(self.interval)

    def bake(self, instance_id: str, cache: Path) -> str:
        """CreateImage of a running instance: its VM stopped (EC2 reboots it for a consistent image), its root baked
        into `cache` like a lab node image; returns the image's root. The VM stays stopped until it is removed."""
        from clusterctl.engines.local import rootfs

        dest = cache / f"ami-of-{instance_id}"
        with self.lock:
            if dest.is_dir():  # a retried CreateImage (the client timed out while the first one baked)
                return str(dest)
            if instance_id not in self.vms:
                raise RuntimeError(f"CreateImage of {instance_id}: no VM runs for it")
            lab = self._lab(self.vms)
            paths = lab._paths(self.vms[instance_id][0])
            self.baked.add(instance_id)
            lab._stop([paths])
            return str(rootfs.bake(paths.root, dest, lambda m: None))

    def address_of(self, node: str) -> str | None:
        for iid, (_, addr) in self.vms.items():
            if self.names.get(iid) == node:
                return addr
        return None
