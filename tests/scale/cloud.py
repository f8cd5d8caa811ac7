"""The scale rig's cloud: moto_server as the EC2 endpoint of the elastic pool, and the emulated instances.

- The pool's launch resources are made as the Pulumi stack makes them (tests/engines/aws/burst/harness.create_stack:
  VPC, one subnet per AZ, the EFA security group, the pool's launch template, with the cluster's tags). The VPC is
  127.64.0.0/16: the private address moto gives an instance is a loopback address of this machine, so the NodeAddr
  `clusterctl burst resume` sets in Slurm reaches the emulated slurmd like a real instance's address would.
- The burst programs' settings file (what the burst role writes to /etc/clusterctl/burst.env): moto's endpoint and
  fake credentials, the rig's paths, the cluster id the stack is tagged with, and CLUSTERCTL_BURST_BOOTSTRAP=off:
  no SSH bootstrap, because Instances (below) stands in for what it does (start slurmd -N <node> on the instance).
- Instances: a watcher that lists the cluster's live instances in moto through boto3 with the product's own query
  (burst.ec2.cluster_instances: cluster + cluster-id tags, Name tag = node) and starts an emulated slurmd for each
  one named after a CLOUD node, and stops it when the instance is terminated.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable

from tests.engines.aws.burst import harness

VPC_CIDR = "127.64.0.0/16"  # inside 127.0.0.0/8: every address moto hands out is local here


@dataclass
class Event:
    at: float  # time.time()
    node: str
    instance_id: str
    address: str | None
    what: str  # started | stopped (the node's slurmd)


def settings_env(rig_dir: Path, endpoint: str, region: str, cluster_id: str) -> dict[str, str]:
    """The burst programs' settings for the rig (clusterctl/engines/aws/burst/settings.py names the keys)."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": region,
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        "CLUSTERCTL_BURST_PLAN": str(rig_dir / "etc" / "plan.json"),
        "CLUSTERCTL_BURST_LOG": str(rig_dir / "log" / "burst.log"),
        "CLUSTERCTL_BURST_STATE": str(rig_dir / "burst"),
        "CLUSTERCTL_BURST_SLURM_DIR": str(rig_dir / "etc"),
        "CLUSTERCTL_BURST_BOOTSTRAP": "off",
        "CLUSTERCTL_BURST_CLUSTER_ID": cluster_id,
    }


@dataclass
class Run:
    """One run of a burst program, from its log (clusterctl/engines/aws/burst/runlog.py's line format)."""

    action: str
    run_id: str
    started: float  # time.time() of its first line
    nodes: str = ""  # the hostlist Slurm passed
    seconds: float | None = None  # its own "done in" time
    exit: int | None = None
    lines: list[str] = field(default_factory=list)


_LINE = re.compile(r"^(\S+ \S+) \w+ ([\w-]+)\[\d+\] run=(\w+) (.*)$")
_DONE = re.compile(r"^done in ([\d.]+)s, exit (\d+)$")


def burst_runs(log_text: str) -> list[Run]:
    """The runs in a burst log, in the order they started."""
    runs: dict[str, Run] = {}
    for line in log_text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        when, action, run_id, msg = m.groups()
        run = runs.get(run_id)
        if run is None:
            started = datetime.strptime(when, "%Y-%m-%d %H:%M:%S,%f").timestamp()  # asctime: local time
            run = runs[run_id] = Run(action, run_id, started)
        run.lines.append(msg)
        if msg.startswith(f"start: {action} "):
            run.nodes = msg.split()[2]
        elif done := _DONE.match(msg):
            run.seconds, run.exit = float(done.group(1)), int(done.group(2))
    return list(runs.values())


class Cloud:
    """moto with the pool's launch resources; `ec2` is the test's own boto3 client on it."""

    def __init__(self, plan, pool: str):
        self.plan = plan
        self.region = plan.pool(pool).region
        self.cluster_id = harness.CLUSTER_ID
        self.moto = harness.Moto()
        try:
            self.ec2 = harness.ec2_client(self.moto.url, self.region)
            self.stack = harness.create_stack(self.ec2, plan, pool, self.cluster_id, cidr=VPC_CIDR)
        except Exception:
            self.moto.stop()
            raise

    def instances(self, states: tuple[str, ...] = ("pending", "running")) -> list:
        """The cluster's instances in these states, as the burst programs see them (burst.ec2.Instance)."""
        from clusterctl.engines.aws.burst import ec2 as cloud

        return cloud.cluster_instances(self.ec2, self.plan.name, self.cluster_id, states=states)

    def stop(self) -> None:
        self.moto.stop()


@dataclass
class Instances:
    """Follows moto: a slurmd for every live instance named after a CLOUD node, stopped when the instance goes."""

    cloud: Cloud
    nodes: set[str]  # the CLOUD nodes
    start: Callable[[str], None]  # starts the node's slurmd
    stop: Callable[[str], None]  # stops it
    interval: float = 0.5
    running: dict[str, str] = field(default_factory=dict)  # node -> instance id
    events: list[Event] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def begin(self) -> "Instances":
        self._thread.start()
        return self

    def end(self) -> None:
        self._halt.set()
        self._thread.join(30)

    def sync_once(self) -> None:
        live = {i.name: i for i in self.cloud.instances() if i.name in self.nodes}  # untagged yet: next round
        for node, inst in sorted(live.items()):
            if self.running.get(node) != inst.id:
                if node in self.running:  # a second instance for the node: its slurmd is the new one's
                    self.stop(node)
                self.start(node)
                self.running[node] = inst.id
                self.events.append(Event(time.time(), node, inst.id, inst.private_ip, "started"))
        for node in sorted(set(self.running) - set(live)):
            self.stop(node)
            self.events.append(Event(time.time(), node, self.running.pop(node), None, "stopped"))

    def _loop(self) -> None:
        while not self._halt.is_set():
            try:
                self.sync_once()
            except Exception as e:  # keep following moto; the test sees the errors
                self.errors.append(f"{type(e).__name__}: {e}")
            self._halt.wait(self.interval)
