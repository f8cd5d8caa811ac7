"""A real hybrid cluster on this machine for the burst tests and benchmarks/burst.py.

A lab controller and one owned lab node converged by clusterctl's own `up` steps (render, lab nodes, munge key,
site.yml with the burst role, smoke job) from tests/engines/aws/burst/lab-hybrid.yaml, with moto as the EC2 endpoint (the
pool's launch resources made by harness.create_stack, reached through the fault proxy on the lab bridge), a fake
IMDS on the bridge, and InstanceVms booting a lab node for every instance moto reports running.

The static spot node (pool steady) is made as the stack makes it (harness.create_static_nodes), and the plan is
rendered with its address as `up` renders it from the stack's outputs. `up` would converge it with site.yml; here
its VM boots only once the cluster is up, so the controller's bootstrap kit sets it up (`clusterctl burst
bootstrap`), the same kit that sets up its replacement after a spot interruption.

Why `up`'s steps and not the `clusterctl up` command: `up` refuses specs with aws pools when the pulumi CLI is
missing (it is, here; nothing can download it), before it touches anything. The AWS part of `up` (the Pulumi stack)
is what CloudStack stands in for; every other step is the product's own code.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from pathlib import Path

from tests.engines.aws.burst import harness

HERE = Path(__file__).resolve().parent
SPEC = HERE / "lab-hybrid.yaml"
POOL = "cloud"
STATIC_POOL = "steady"  # one static spot node (steady001)


class BurstLab:
    def __init__(self, state_root: Path, spec_path: Path = SPEC, log=print, spot_grace: int = 5):
        from clusterctl.state import ClusterState
        from clusterctl.validate import load_valid

        self.spec = load_valid(spec_path)
        self.state = ClusterState(self.spec.name, root=Path(state_root))
        self.log = log
        self.spot_grace = spot_grace
        self.moto = self.proxy = self.imds = self.vms = self.stack = None
        self.static: dict[str, tuple[str, str]] = {}
        self.access = None
        self.timings: dict[str, float] = {}

    # --- bring-up ---------------------------------------------------------------------------------------

    def up(self) -> "BurstLab":
        from clusterctl.compile import compile_plan
        from clusterctl.compile.model import LiveFacts
        from clusterctl.ops.access import access_for
        from clusterctl.state.secrets import ensure_munge_key
        from clusterctl.ops.smoke import run_smoke
        from clusterctl.render import render_spec
        from clusterctl.render.write import write_build

        t0 = time.monotonic()
        self.plan = compile_plan(self.spec)  # where the lab and the cloud go; aws addresses come from the stack
        self.access = access_for(self.plan, self.state, lambda m: None)
        self.access.lab.up()
        self.munge_key = ensure_munge_key(self.state)
        self.start_cloud()  # before converging: the burst role's settings name the proxy's and IMDS's addresses
        self.plan, files = render_spec(self.spec, LiveFacts(addresses={n: a for n, (_, a) in self.static.items()}))
        self.build = self.state.dir / "build"
        write_build(files, self.build)
        self.access = access_for(self.plan, self.state, lambda m: None)
        self.converge_result = self.converge()
        self.vms = harness.InstanceVms(self.ec2, self.plan.name, self.access.lab.spec, images=self.proxy.images).start()
        self.proxy.bake = lambda instance_id: self.vms.bake(instance_id, self.amis)
        self.set_up_static_nodes()
        smoke = run_smoke(self.plan, self.access.remote(self.plan.controller))
        if not all(s.ok for s in smoke):
            raise RuntimeError(f"smoke job failed: {smoke}")
        self.timings["cluster up"] = time.monotonic() - t0
        return self

    def set_up_static_nodes(self) -> None:
        """The static aws nodes, once their VMs answer, set up by the controller's bootstrap kit (inline) and
        registered in Slurm."""
        from tests.helpers import wait_for

        names = sorted(self.static)
        for n in names:
            wait_for(lambda n=n: self.vms.address_of(n), 120, 1, f"the VM of {n} to boot")
        self.as_slurm(f"clusterctl burst bootstrap {','.join(names)}", timeout=300)
        for n in names:
            wait_for(lambda n=n: self.node(n).get("State", "").split("+")[0] in ("IDLE", "MIXED", "ALLOCATED"), 120, 1,
                     f"{n} to register in Slurm")

    def reclaim(self, instance_id: str) -> None:
        """What EC2 does to a spot instance it takes back at the notice's deadline: terminated, and reported with
        its spot reason from now on (FaultProxy.reclaimed)."""
        self.proxy.reclaimed.add(instance_id)
        self.ec2.terminate_instances(InstanceIds=[instance_id])

    @property
    def amis(self) -> Path:
        """Where the roots of the images CreateImage made are baked (the harness's AMI store)."""
        return self.state.dir / "amis"

    def set_template_image(self, image_id: str) -> None:
        """What `up` does once a pool has a recorded node image (stack_settings -> with_recorded_images; asserted
        under Pulumi mocks in tests/engines/aws/test_image_pulumi.py): the pool's launch template gets a new
        version booting it, the one burst resume launches ($Latest)."""
        lt = self.stack.launch_template_id
        data = self.ec2.describe_launch_template_versions(LaunchTemplateId=lt, Versions=["$Latest"])[
            "LaunchTemplateVersions"][0]["LaunchTemplateData"]
        self.ec2.create_launch_template_version(LaunchTemplateId=lt, LaunchTemplateData={**data, "ImageId": image_id})

    def start_cloud(self) -> None:
        """moto with the pool's launch resources; the fault proxy and IMDS on the lab bridge (the bridge's address
        is the one address of this machine that the lab nodes reach)."""
        gateway = self.plan.lab.gateway
        pool = self.plan.pool(POOL)
        self.moto = harness.Moto()
        self.ec2 = harness.ec2_client(self.moto.url, pool.region)
        from clusterctl.state.secrets import ensure_cluster_id

        self.stack = harness.create_stack(self.ec2, self.plan, POOL, ensure_cluster_id(self.state))
        # node -> (instance id, address) of the static aws nodes, made as the Pulumi stack makes them
        self.static = harness.create_static_nodes(self.ec2, self.plan, self.stack, STATIC_POOL, ensure_cluster_id(self.state))
        self.proxy = harness.FaultProxy(self.moto.url, gateway, self.stack.subnet_azs)
        self.imds = harness.FakeImds(gateway)

    def burst_env(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.proxy.url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": self.plan.pool(POOL).region,
            # Lab VMs let root in with the lab key; stock Debian AMIs log in as admin and sudo (the default).
            "CLUSTERCTL_BURST_SSH_USER": "root",
            "CLUSTERCTL_BURST_SPOT_GRACE": str(self.spot_grace),
        }

    def converge(self):
        """site.yml, burst role included, as `up` runs it; plus the settings a user gives the role (here: moto's
        endpoint behind the fault proxy, fake credentials, the fake IMDS)."""
        from clusterctl.engines.ansible.runner import PlaybookRun, run_playbook
        from clusterctl.state.secrets import playbook_vars

        run = PlaybookRun(build_dir=self.build, ssh=self.access.ssh, limit=":".join(["all", *(f"!{n}" for n in self.static)]),
                          extravars={**playbook_vars(self.munge_key),
                                     "clusterctl_burst_env": self.burst_env(),
                                     "clusterctl_burst_imds_endpoint": self.imds.url})
        r = run_playbook(run)
        if not r.ok:
            raise RuntimeError(f"converge failed: {[(f.host, f.task, f.msg) for f in r.failures]}")
        return r

    def down(self) -> None:
        """Everything up() started goes, even when a part fails to stop; the first failure is raised at the end."""
        errors = []
        from clusterctl.engines.local.mounts import remove_tree

        steps = [lambda: self.vms and self.vms.stop(remove=False),  # the lab's down() removes the VMs' nodes too
                 lambda: self.access and self.access.lab and self.access.lab.down(),
                 *(lambda p=p: p and p.stop() for p in (self.proxy, self.imds, self.moto)),
                 lambda: self.amis.is_dir() and remove_tree(self.amis)]
        for step in steps:
            try:
                step()
            except Exception as e:  # keep going: a leftover server or netns would outlive the test session
                errors.append(e)
        if errors:
            raise errors[0]

    # --- helpers ----------------------------------------------------------------------------------------

    def ctl(self, command: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess:
        return self.access.remote(self.plan.controller).run(command, timeout=timeout, check=check)

    def on(self, address: str, command: str, timeout: float = 60) -> subprocess.CompletedProcess:
        from clusterctl.engines.local.sshkeys import ssh_argv

        lab = self.access.lab
        return subprocess.run([*ssh_argv(lab.ssh_key, lab.known_hosts, address), "--", command], capture_output=True,
                              text=True, timeout=timeout)

    def as_slurm(self, command: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
        return self.ctl(f"runuser -u slurm -- {command}", timeout=timeout, check=check)

    def node(self, name: str) -> dict[str, str]:
        """`scontrol -o show node` fields of one node (Reason keeps its spaces)."""
        line = self.ctl(f"scontrol -o show node {shlex.quote(name)}").stdout.strip()
        out = {}
        if " Reason=" in line:
            line, reason = line.split(" Reason=", 1)
            out["Reason"] = reason
        for field in line.split():
            if "=" in field:
                k, v = field.split("=", 1)
                out[k] = v
        return out

    def job(self, job_id: str) -> dict[str, str]:
        line = self.ctl(f"scontrol -o show job {job_id}", check=False).stdout.strip()
        out = {}
        for field in line.split():
            if "=" in field:
                k, v = field.split("=", 1)
                out.setdefault(k, v)
        if " Comment=" in line:
            out["Comment"] = line.split(" Comment=", 1)[1].split(" ")[0]
        return out

    def sbatch(self, args: str) -> str:
        return self.ctl(f"sbatch --parsable {args}").stdout.strip().split(";")[0]

    def burst_log(self) -> str:
        return self.ctl("cat /var/log/clusterctl/burst.log", check=False).stdout

    def explain(self, job: str | None = None, node: str | None = None, lines: int = 40) -> str:
        """What a failed wait needs to be understood after the lab is gone: the job's and node's Slurm fields, the
        tail of the burst log, the VMs' errors and last events, and the last RunInstances calls."""
        parts = []
        for what, get in (("job", lambda: job and self.job(job)), ("node", lambda: node and self.node(node)),
                          ("burst.log", lambda: "\n".join(self.burst_log().splitlines()[-lines:]))):
            try:
                parts.append(f"{what}: {get()}")
            except Exception as e:  # one broken source must not hide the others
                parts.append(f"{what}: ({type(e).__name__}: {e})")
        if self.vms is not None:
            parts.append(f"vm errors: {self.vms.errors[-5:]}")
            parts.append(f"vm events: {self.vms.events[-6:]}")
        if self.proxy is not None:
            parts.append(f"RunInstances calls: {self.proxy.calls[-6:]}")
        return "\n".join(parts)

    def instances(self, states=("pending", "running")) -> list[dict]:
        resp = self.ec2.describe_instances(Filters=[{"Name": "tag:clusterctl:cluster", "Values": [self.plan.name]},
                                                    {"Name": "instance-state-name", "Values": list(states)}])
        out = []
        for r in resp["Reservations"]:
            for i in r["Instances"]:
                i["TagMap"] = {t["Key"]: t["Value"] for t in i.get("Tags") or []}
                out.append(i)
        return out

