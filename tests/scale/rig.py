"""A real Slurm cluster of a rendered spec's size on one machine: Debian's slurmctld and one real slurmd per node,
all on 127.0.0.1, with a private munged. Nothing of the host's own Slurm or munge is used or touched: every daemon
gets its files under one temporary directory and is started and stopped here, by PID.

The rig runs the rendered slurm.conf, gres.conf, topology.conf and cgroup.conf. What it changes is listed by
`differences()`: transport (addresses, ports, the munge socket), where daemons keep state, spool, pid and log files,
the process-tracking/task plugins (cgroups cannot be nested per emulated node here), the device files GPUs are
faked with, SlurmdParameters=config_overrides (nodes would otherwise drain for the CPUs and memory this host
lacks), and for the elastic pool where the power-saving programs find their settings: they are the product's own
`clusterctl burst resume|suspend|resume-fail` against moto_server (tests/scale/cloud.py), and the rig starts an
emulated slurmd for each instance moto reports launched. Needs root (slurmctld drops to SlurmUser; munged runs as
munge).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from clusterctl.core import hostlist
from clusterctl.compile.model import ClusterPlan
from clusterctl.render import layout, render_spec
from clusterctl.validate import load_valid
from tests.helpers import root_missing
from tests.scale import cloud as rig_cloud

ROOT = Path(__file__).resolve().parents[2]
SPEC_1024 = Path(__file__).with_name("scale-1024.yaml")
TASK_PROLOG = ROOT / "playbooks" / "roles" / "slurm_node" / "files" / "task-prolog.sh"  # what the role installs
BURST_ACTIONS = ("resume", "suspend", "resume-fail")  # the power-saving programs, as `clusterctl burst <action>`
FINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE")
# Started as slurmctld-wlm (Debian's alternative) 22.05 drops every Gres=: the daemons must run under plain names.
DAEMONS = {"slurmctld": "slurmctld-wlm", "slurmd": "slurmd-wlm", "slurmstepd": "slurmstepd-wlm"}


ROOT_WHY = "slurmctld drops to SlurmUser, munged runs as munge"


def available() -> str | None:
    """Why the rig cannot run here, or None."""
    return root_missing(ROOT_WHY) or slurm_missing()


def slurm_missing() -> str | None:
    """Which Slurm/munge programs are not installed, or None."""
    missing = [b for b in ("slurmctld", "slurmd", "munged", "sbatch") if shutil.which(b) is None]
    return f"not installed: {', '.join(missing)} (apt-get install slurmctld slurmd slurm-client munge)" if missing else None


def _others_may_run(path: Path) -> bool:
    """SlurmUser (an "other" to root's files) can execute `path`: it and every directory above it are o+x."""
    return all(p.stat().st_mode & stat.S_IXOTH for p in (path, *path.parents))


def slurm_python() -> tuple[str, list[str]]:
    """(interpreter, PYTHONPATH) with which SlurmUser runs this checkout's clusterctl and this environment's packages.

    This interpreter where SlurmUser may run it; else (e.g. a venv on a pyenv Python under /root, which is 0700) the
    system's Python of the same version with this environment's site-packages on PYTHONPATH (the same packages at
    the same versions, which is also what the burst role's bundle installs on a controller)."""
    here = Path(sys.executable).resolve()
    if _others_may_run(here):
        return sys.executable, [str(ROOT)]
    system = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    if not (system.exists() and _others_may_run(system)):
        raise RuntimeError(f"SlurmUser cannot run {here} and there is no {system}")
    paths = sysconfig.get_paths()
    return str(system), list(dict.fromkeys([str(ROOT), paths["purelib"], paths["platlib"]]))


def free_port_block(count: int, start: int = 20000, stop: int = 60000) -> int:
    """The first port of `count` consecutive ports nothing listens on (checked by binding each)."""
    base = start
    while base + count < stop:
        for p in range(base, base + count):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    base = p + 1
                    break
        else:
            return base
    raise RuntimeError("no free port block")


@dataclass
class Rig:
    plan: ClusterPlan
    rendered: dict[str, str]
    dir: Path
    ctld_port: int
    node_ports: dict[str, int]
    pids: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.dir / "etc" / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        return dict(os.environ, SLURM_CONF=str(self.conf))

    # --- configuration -------------------------------------------------------------------------------------------
    def overrides(self) -> dict[str, str]:
        d = self.dir
        return {
            "SlurmctldHost": f"{socket.gethostname().split('.')[0]}(127.0.0.1)",
            "SlurmctldPort": str(self.ctld_port),
            "SlurmdPort": str(min(self.node_ports.values())),
            "AuthInfo": f"socket={d}/munge/munge.socket",
            "StateSaveLocation": f"{d}/state",
            "SlurmdSpoolDir": f"{d}/spool/%n",
            "SlurmctldPidFile": f"{d}/run/slurmctld.pid",
            "SlurmdPidFile": f"{d}/run/slurmd-%n.pid",
            "SlurmctldLogFile": f"{d}/log/slurmctld.log",
            "SlurmdLogFile": f"{d}/log/slurmd-%n.log",
            "ProctrackType": "proctrack/linuxproc",
            "TaskPlugin": "task/none",
            "TaskProlog": f"{d}/etc/task-prolog",
            "SlurmdParameters": "config_overrides",
            # Elastic pools: the slurm_controller role's wrappers of `clusterctl burst ...`, with the rig's settings.
            **({"ResumeProgram": f"{d}/bin/clusterctl-resume", "SuspendProgram": f"{d}/bin/clusterctl-suspend",
                "ResumeFailProgram": f"{d}/bin/clusterctl-resume-fail"} if self.cloud_nodes else {}),
        }

    @property
    def cloud_nodes(self) -> list[str]:
        return [n.name for n in self.plan.nodes if n.cloud]

    def slurm_conf(self) -> str:
        """The rendered slurm.conf with the overrides applied, and node lines pointed at 127.0.0.1:<own port>."""
        over = self.overrides()
        out, seen = [], set()
        for line in self.rendered[layout.SLURM_CONF].splitlines():
            key = line.split("=", 1)[0]
            if key in over:
                out.append(f"{key}={over[key]}")
                seen.add(key)
            elif key == "NodeName":
                out.append(self._node_line(line))
            else:
                out.append(line)
        # New keys go before the node lines (after them they would still be global, but read badly).
        first_node = next(i for i, ln in enumerate(out) if ln.startswith("NodeName="))
        out[first_node:first_node] = [f"{k}={v}" for k, v in over.items() if k not in seen] + [""]
        return "\n".join(out) + "\n"

    def _node_line(self, line: str) -> str:
        name = line.split()[0].split("=", 1)[1]
        ports = [self.node_ports[n] for n in hostlist.expand(name)]
        assert ports == list(range(ports[0], ports[0] + len(ports))), "a node group's ports must be consecutive"
        port = str(ports[0]) if len(ports) == 1 else f"[{ports[0]}-{ports[-1]}]"
        line = re.sub(r" NodeAddr=\S+", "", line)
        return line.replace(f"NodeName={name} ", f"NodeName={name} NodeHostname=localhost NodeAddr=127.0.0.1 "
                                                 f"Port={port} ", 1)

    def gres_conf(self) -> str:
        return self.rendered[layout.GRES_CONF].replace("File=/dev/nvidia", f"File={self.dir}/dev/nvidia")

    def differences(self) -> list[str]:
        """What the rig's config says differently from the rendered one, one line per setting."""
        rendered = dict(ln.split("=", 1) for ln in self.rendered[layout.SLURM_CONF].splitlines()
                        if "=" in ln and not ln.startswith(("#", "NodeName=", "PartitionName=")))
        out = [f"{k}: {rendered.get(k, '(unset)')} -> {v}" for k, v in self.overrides().items()]
        out.append("NodeName lines: NodeAddr=<site address> -> NodeHostname=localhost NodeAddr=127.0.0.1 Port=<own>")
        out.append(f"gres.conf File=/dev/nvidiaN -> {self.dir}/dev/nvidiaN (character devices 195,N made by the rig)")
        if self.cloud_nodes:
            out += [
                "ResumeProgram & co.: the same wrappers (exec clusterctl burst <action> \"$@\"), where clusterctl is "
                f"this checkout run by {slurm_python()[0]} with the test environment's packages (what the burst "
                "role's /usr/local/bin/clusterctl runs from its venv) and the settings file is "
                f"{self.dir}/etc/burst.env instead of /etc/clusterctl/burst.env",
                "burst settings: AWS_ENDPOINT_URL=moto_server on 127.0.0.1 with fake credentials; plan, log and lock "
                "under the rig directory; CLUSTERCTL_BURST_BOOTSTRAP=off (no SSH bootstrap: the rig starts "
                "`slurmd -N <node>` for each instance moto reports, which is what the bootstrap ends with)",
                "EC2: moto_server; the launch resources the Pulumi stack makes (VPC, subnets, EFA security group, "
                "launch template) are made with boto3 and the same tags (tests/engines/aws/burst/harness.create_stack)",
                f"instance addresses: the pool's VPC in moto is {rig_cloud.VPC_CIDR}, so the NodeAddr resume sets (the "
                "instance's private address) is a loopback address that reaches the emulated slurmd; its registration "
                "then sets NodeAddr=127.0.0.1 (cloud_reg_addrs)",
                "a CLOUD node's slurmd runs with an LD_PRELOAD sysinfo() whose uptime counts from its instance's start",
            ]
        return out

    def write(self) -> None:
        d = self.dir
        for sub in ("etc", "state", "spool", "run", "log", "munge", "dev", "bin"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        for rel in (layout.TOPOLOGY_CONF, layout.CGROUP_CONF):
            (d / "etc" / Path(rel).name).write_text(self.rendered[rel])
        self.conf.write_text(self.slurm_conf())
        shutil.copy(TASK_PROLOG, d / "etc" / "task-prolog")
        (d / "etc" / "task-prolog").chmod(0o755)
        for n in self.plan.nodes:  # slurmd binds its step socket there before creating it
            (d / "spool" / n.name).mkdir(exist_ok=True)
        (d / "etc" / "gres.conf").write_text(self.gres_conf())
        gpus = max((n.gpus for n in self.plan.nodes), default=0)
        for i in range(gpus):
            dev = d / "dev" / f"nvidia{i}"
            if not dev.exists():
                os.mknod(dev, 0o666 | 0o020000, os.makedev(195, i))
        if self.cloud_nodes:
            self._write_power()
        for plain, real in DAEMONS.items():
            link = d / "bin" / plain
            if not link.exists():
                link.symlink_to(Path("/usr/sbin") / real)
        os.chmod(d, 0o755)
        shutil.chown(d / "state", "slurm", "slurm")
        shutil.chown(d / "log", "slurm", "slurm")
        shutil.chown(d / "munge", "munge", "munge")
        os.chmod(d / "munge", 0o755)
        key = d / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        shutil.chown(key, "munge", "munge")
        key.chmod(0o400)

    def _write_power(self) -> None:
        """The power-saving programs run as SlurmUser with an almost empty environment, as slurmctld runs them on a
        controller: the slurm_controller role's wrapper, exec'ing the product's `clusterctl burst <action>` (this
        checkout, this venv's python) with the rig's settings file. The plan is the build's plan.json. The
        preload makes a resumed slurmd's uptime start at its instance's launch."""
        d = self.dir
        (d / "etc" / "plan.json").write_text(self.rendered["plan.json"])
        (d / "burst").mkdir(exist_ok=True)
        shutil.chown(d / "burst", "slurm", "slurm")
        python, path = slurm_python()
        for action in BURST_ACTIONS:  # Slurm runs each with the hostlist as its argument
            script = d / "bin" / f"clusterctl-{action}"
            script.write_text(
                "#!/bin/sh\n# Installed by the scale rig: Slurm power saving -> clusterctl burst "
                f"{action} HOSTLIST\nexport CLUSTERCTL_BURST_ENV_FILE={d}/etc/burst.env PYTHONPATH={':'.join(path)}\n"
                f"exec {python} -m clusterctl.engines.aws.burst {action} \"$@\"\n")
            script.chmod(0o755)
        (d / "lib").mkdir(exist_ok=True)
        subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(d / "lib" / "uptime.so"),
                        str(Path(__file__).with_name("uptime.c")), "-ldl"], check=True, capture_output=True)

    def start_cloud(self) -> None:
        """moto with the elastic pool's launch resources, the burst programs' settings pointing at it, and the
        watcher that starts (with a fresh uptime) or stops a CLOUD node's slurmd as moto launches or terminates
        its instance."""
        pool = next(p.name for p in self.plan.pools if p.provider == "aws" and p.elastic)
        self.cloud = rig_cloud.Cloud(self.plan, pool)
        env_file = self.dir / "etc" / "burst.env"
        settings = rig_cloud.settings_env(self.dir, self.cloud.moto.url, self.cloud.region, self.cloud.cluster_id)
        env_file.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        shutil.chown(env_file, "root", "slurm")  # as the burst role installs it: it holds credentials
        env_file.chmod(0o640)

        def boot(node: str) -> None:
            env = dict(LD_PRELOAD=str(self.dir / "lib" / "uptime.so"), RIG_BOOT_EPOCH=str(int(time.time())))
            self.start_nodes([node], extra_env=env)

        def halt(node: str) -> None:
            if node in self.pids:
                proc = self.pids.pop(node)
                proc.terminate()
                self._stopped.append(proc)

        self._stopped: list[subprocess.Popen] = []
        self.instances = rig_cloud.Instances(self.cloud, set(self.cloud_nodes), boot, halt).begin()

    def burst_runs(self) -> list[rig_cloud.Run]:
        """The power-saving programs' runs, from their own log."""
        log = self.dir / "log" / "burst.log"
        return rig_cloud.burst_runs(log.read_text() if log.exists() else "")

    # --- daemons -------------------------------------------------------------------------------------------------
    def _spawn(self, key: str, argv: list[str], extra_env: dict | None = None, **kw) -> None:
        self.pids[key] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL, start_new_session=True,
                                          env={**self.env, **(extra_env or {})}, **kw)

    def start_munge(self) -> None:
        m = self.dir / "munge"
        self._spawn("munged", ["munged", "-F", f"--socket={m}/munge.socket", f"--key-file={m}/munge.key",
                               f"--pid-file={m}/munged.pid", f"--log-file={m}/munged.log", f"--seed-file={m}/seed"],
                    user="munge", group="munge")
        _wait(lambda: (m / "munge.socket").exists(), 10, "munged socket")

    def start_controller(self) -> None:
        self._spawn("slurmctld", [str(self.dir / "bin" / "slurmctld"), "-D", "-i", "-f", str(self.conf)])
        _wait(lambda: self.run("scontrol", "ping", check=False).returncode == 0, 30, "slurmctld to answer")

    def start_nodes(self, names: list[str] | None = None, extra_env: dict | None = None) -> None:
        """Start slurmds: by default every node that is not CLOUD (those start when Slurm resumes them)."""
        for name in names if names is not None else [n.name for n in self.plan.nodes if not n.cloud]:
            self._spawn(name, [str(self.dir / "bin" / "slurmd"), "-D", "-f", str(self.conf), "-N", name],
                        extra_env=extra_env)

    def stop(self) -> None:
        """Cancel every job, then stop slurmds, slurmctld and munged, each by the PID it was started with."""
        if getattr(self, "instances", None):
            self.instances.end()
        if "slurmctld" in self.pids and self.pids["slurmctld"].poll() is None:
            self.run("scancel", "--full", "--user=root", check=False)
            _wait(lambda: not self.run("squeue", "-h", "-t", "R,CG", check=False).stdout.strip(), 30, None)
        order = [k for k in self.pids if k not in ("slurmctld", "munged")] + ["slurmctld", "munged"]
        for group in (order[:-2], order[-2:-1], order[-1:]):
            procs = [self.pids[k] for k in group if k in self.pids]
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 20
            for p in procs:
                try:
                    p.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.pids.clear()
        for p in getattr(self, "_stopped", []):  # CLOUD slurmds stopped when their instance went
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if getattr(self, "cloud", None):
            self.cloud.stop()

    # --- client side ---------------------------------------------------------------------------------------------
    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=60, check=check)

    def node_states(self) -> dict[str, int]:
        """Node count per state (sinfo's long state names, e.g. idle, allocated, down*)."""
        out: dict[str, int] = {}
        for line in self.run("sinfo", "-h", "-o", "%D %T", check=False).stdout.splitlines():
            count, state = line.split()
            out[state] = out.get(state, 0) + int(count)
        return out

    def wait_idle(self, count: int, timeout: float) -> float:
        t0 = time.monotonic()
        _wait(lambda: self.node_states().get("idle", 0) >= count, timeout, f"{count} idle nodes", interval=0.5,
              detail=self.node_states)
        return time.monotonic() - t0

    def sbatch(self, *args: str) -> str:
        return self.run("sbatch", "--parsable", "-o", "/dev/null", *args).stdout.strip().split(";")[0]

    def job(self, job_id: str) -> dict[str, str]:
        out = self.run("scontrol", "-o", "show", "job", job_id, check=False).stdout
        return dict(kv.split("=", 1) for kv in out.split() if "=" in kv)

    def wait_job(self, job_id: str, states: tuple[str, ...], timeout: float) -> dict[str, str]:
        """Wait until the job is in one of `states` or has ended (the caller checks which)."""
        _wait(lambda: self.job(job_id).get("JobState") in states + FINAL, timeout, f"job {job_id} {states}", interval=0.2,
              detail=lambda: self.job(job_id))
        return self.job(job_id)

    def slurmctld_rss_kib(self) -> int:
        status = Path(f"/proc/{self.pids['slurmctld'].pid}/status").read_text()
        return int(re.search(r"VmRSS:\s+(\d+)", status).group(1))


def make_rig(spec_path: Path = SPEC_1024, base: Path | None = None, nodes: int | None = None) -> Rig:
    """Render the spec and lay the rig out (nothing started). `nodes`: the first N owned nodes only, no
    cloud ones (the whole spec when N covers every owned node)."""
    plan, files = render_spec(load_valid(spec_path))
    if nodes is not None and nodes < sum(not n.cloud for n in plan.nodes):
        plan, files = _first_nodes(plan, files, nodes)
    d = Path(tempfile.mkdtemp(prefix="clusterctl-scale-", dir=base))
    names = [n.name for n in plan.nodes]
    first = free_port_block(len(names) + 1)
    rig = Rig(plan, files, d, first, {n: first + 1 + i for i, n in enumerate(names)})
    rig.write()
    return rig


def _first_nodes(plan, files, count):
    """The same spec cut to its first `count` owned nodes, rendered again (pools, partitions, switches follow)."""
    from dataclasses import replace

    from clusterctl.render.slurm import render_slurm

    keep = [n for n in plan.nodes if not n.cloud][:count]
    names = {n.name for n in keep}
    plan = replace(
        plan,
        nodes=tuple(keep),
        pools=tuple(replace(p, nodes=tuple(x for x in p.nodes if x in names)) for p in plan.pools),
        partitions=tuple(replace(p, nodes=tuple(x for x in p.nodes if x in names)) for p in plan.partitions
                         if names & set(p.nodes)),  # the burst partition goes with the cloud nodes
        switches=_cut_switches(plan.switches, names),
    )
    return plan, {**files, **render_slurm(plan)}


def _cut_switches(switches, names):
    leaves = [type(s)(s.name, nodes=tuple(n for n in s.nodes if n in names)) for s in switches if s.nodes]
    leaves = [s for s in leaves if s.nodes]
    roots = [type(s)(s.name, switches=tuple(x for x in s.switches if x in {leaf.name for leaf in leaves}))
             for s in switches if not s.nodes]
    return tuple(leaves + roots)


def _wait(pred, timeout: float, what: str | None, interval: float = 0.2, detail=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(interval)
    if what:
        raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}" + (f": {detail()}" if detail else ""))
