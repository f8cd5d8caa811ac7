"""Make a freshly launched instance a Slurm node: pushed from the controller over SSH, once it answers.

What the node gets, in one tar stream over one SSH session (run by the kit's bootstrap.sh, as root):
- identity: hostname = node name, /etc/hosts lines for itself and the controller;
- the cluster's munge key and the slurmd drop-in every node has: configless, slurmd fetches slurm.conf, gres.conf,
  cgroup.conf and topology.conf from slurmctld (--conf-server), so a node never runs a config other than the
  controller's;
- the pool's NCCL environment, health expectations, the TaskProlog and health check programs;
- the spot-interruption watcher (a systemd service polling IMDSv2 every 5 s);
- then munge and slurmd (`-N <node>`) start; slurmd registers and Slurm sets its address (cloud_reg_addrs).
Packages come with the image (pre-converged AMI); on a stock Debian image bootstrap.sh apt-installs slurmd, munge.

Host keys: an instance is new on every launch and its address may have belonged to another one before, so each
instance gets its own known_hosts file (trust on first use, per instance id), never a shared one.

A node that cannot be bootstrapped before ResumeTimeout is given back at once: its instance terminated and the
node powered down with the reason, instead of Slurm marking it DOWN later.
"""

from __future__ import annotations

import io
import os
import shlex
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor

from clusterctl.core import hostlist
from clusterctl.engines.aws.burst import ec2 as cloud
from clusterctl.engines.aws.burst.actions import REASON_PREFIX, RESUMABLE_REASONS, Context, _drain, _power_down
from clusterctl.engines.aws.burst.slurm import SlurmError
from clusterctl.engines.ssh.ports import port_open

KIT_FILES = ("bootstrap.sh", "clusterctl-spot-watch", "clusterctl-spot-watch.service", "clusterctl-task-prolog",
             "clusterctl-healthcheck")
DATA_FILES = ("slurmd-configless.conf",)  # kit files that are not programs
POOL_FILES = ("nccl.env", "health.conf")
MARGIN = 30  # give up this long before ResumeTimeout, so the reason is ours and not "ResumeTimeout reached"
REMOTE = 'set -e; d=$(mktemp -d /tmp/clusterctl-burst.XXXXXX); trap \'rm -rf "$d"\' EXIT; tar -xf - -C "$d"; sh "$d/bootstrap.sh" "$d"'


def spawn_detached(nodes: list[str]) -> int:
    """Run `clusterctl burst bootstrap NODES` in a new session, so the resume program can return to slurmctld now."""
    proc = subprocess.Popen([sys.executable, "-m", "clusterctl.engines.aws.burst", "bootstrap", hostlist.compress(sorted(nodes))],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, close_fds=True, env=dict(os.environ))
    return proc.pid


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, int(time.time())
    tar.addfile(info, io.BytesIO(data))


def node_env(ctx: Context, node: str, address: str) -> str:
    plan = ctx.plan.plan
    s = ctx.settings
    values = {
        "NODE": node, "CLUSTER": plan.name, "POOL": ctx.plan.pool_of(node).name, "ADDRESS": address,
        "CONTROLLER": plan.controller.name, "CONTROLLER_ADDR": plan.controller.address or "",
        "IMDS_ENDPOINT": s.imds_endpoint, "SPOT_SIGNAL": s.spot_signal, "SPOT_GRACE": str(s.spot_grace_seconds),
    }
    return "".join(f"{k}={v}\n" for k, v in values.items())


def payload(ctx: Context, node: str, address: str) -> bytes:
    """The tar stream bootstrap.sh unpacks on the node."""
    s = ctx.settings
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for f in KIT_FILES + DATA_FILES:
            p = s.kit_dir / f
            if p.is_file():
                _add(tar, f, p.read_bytes(), 0o755 if f in KIT_FILES else 0o644)
        pool_dir = s.kit_dir / "pools" / ctx.plan.pool_of(node).name
        for f in POOL_FILES:
            if (pool_dir / f).is_file():
                _add(tar, f, (pool_dir / f).read_bytes())
        _add(tar, "munge.key", s.munge_key.read_bytes(), 0o400)
        _add(tar, "node.env", node_env(ctx, node, address).encode())
    return buf.getvalue()


def ssh_argv(ctx: Context, node: str, instance_id: str, address: str) -> list[str]:
    s = ctx.settings
    user = s.ssh_user or ctx.plan.aws_nodes[node].ssh.user
    known = s.state_dir / "known_hosts.d" / instance_id
    known.parent.mkdir(parents=True, exist_ok=True)
    return ["ssh", "-i", str(s.ssh_key), "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
            "-o", "StrictHostKeyChecking=accept-new", "-o", f"UserKnownHostsFile={known}",
            "-o", "ConnectTimeout=5", "-o", "ServerAliveInterval=15", "-o", "LogLevel=ERROR", f"{user}@{address}"]


def bootstrap_one(ctx: Context, node: str, inst: cloud.Instance, deadline: float) -> str | None:
    """None when the node is set up; otherwise why not."""
    log = ctx.log
    address = inst.private_ip
    assert address is not None  # bootstrap_nodes passes only instances that have a private address
    argv = ssh_argv(ctx, node, inst.id, address)
    sudo = [] if argv[-1].startswith("root@") else ["sudo", "-n"]
    t0 = time.monotonic()
    last = ""
    while True:
        if port_open(address):
            probe = subprocess.run([*argv, "--", "true"], capture_output=True, text=True, timeout=30)
            if probe.returncode == 0:
                break
            last = ((probe.stderr or probe.stdout).strip().splitlines()[-1:] or [f"ssh exit {probe.returncode}"])[0]
        else:
            last = "port 22 closed"
        if time.monotonic() > deadline:
            return f"no SSH to {address} within {int(time.monotonic() - t0)}s ({last})"
        time.sleep(2)
    log.info(f"{node}: {inst.id} answers on {address} after {time.monotonic() - t0:.1f}s; configuring")
    remaining = max(30, deadline - time.monotonic())
    try:
        cp = subprocess.run([*argv, "--", *sudo, "sh", "-c", shlex.quote(REMOTE)], input=payload(ctx, node, address),
                            capture_output=True, timeout=remaining)
    except subprocess.TimeoutExpired:
        return f"configuring {address} took longer than {int(remaining)}s"
    out = (cp.stdout + cp.stderr).decode(errors="replace").strip()
    for line in out.splitlines()[-15:]:
        log.info(f"{node}: | {line}")
    if cp.returncode != 0:
        tail = out.splitlines()[-1] if out else f"exit {cp.returncode}"
        return f"bootstrap.sh on {address} failed: {tail}"
    log.info(f"{node}: configured in {time.monotonic() - t0:.1f}s; slurmd started")
    return None


def bootstrap_nodes(ctx: Context, names: list[str], timeout: float | None = None) -> dict[str, str | None]:
    """Set up each node's instance in parallel; nodes that fail are given back (terminate + POWER_DOWN)."""
    log = ctx.log
    timeout = timeout if timeout is not None else max(60, ctx.plan.plan.slurm.resume_timeout - MARGIN)
    deadline = time.monotonic() + timeout
    insts = {i.name: i for i in cloud.cluster_instances(ctx.ec2, ctx.plan.cluster, ctx.cluster_id, names,
                                                       states=("pending", "running"))}
    results: dict[str, str | None] = {}
    todo = []
    for n in names:
        if n in insts and insts[n].private_ip:
            todo.append(n)
        else:
            results[n] = "no running instance tagged with this node name"
    if todo:
        with ThreadPoolExecutor(max_workers=min(32, len(todo))) as pool:
            futures = {n: pool.submit(bootstrap_one, ctx, n, insts[n], deadline) for n in todo}
            for n, f in futures.items():
                try:
                    results[n] = f.result()
                except Exception as e:  # a bug or an OS error must still give the node back
                    results[n] = f"{type(e).__name__}: {e}"
    failed = {n: why for n, why in results.items() if why}
    for n, why in sorted(failed.items()):
        log.error(f"{n}: bootstrap failed: {why}")
    if failed:
        ids = [insts[n].id for n in failed if n in insts]
        cloud.terminate(ctx.ec2, ids)
        by_reason: dict[str, list[str]] = {}
        for n, why in failed.items():
            by_reason.setdefault(f"{REASON_PREFIX}: bootstrap failed: {why}", []).append(n)
        for reason, ns in by_reason.items():
            _power_down(ctx, [n for n in ns if n in ctx.plan.cloud_nodes], reason)
            # A static node is not power-saved: it stays drained, saying what to do. Its instance was terminated by
            # us (not EC2), so sync does not try again.
            static = [n for n in ns if n not in ctx.plan.cloud_nodes]
            _drain(ctx, static, f"{reason}; `clusterctl up` recreates it, then resume it")
    _resume_replaced(ctx, [n for n, why in results.items() if not why and n in ctx.plan.static_nodes])
    return results


def _resume_replaced(ctx: Context, names: list[str]) -> None:
    """Static nodes set up on a replacement instance: back to service when the drain was the spot watcher's or ours
    (an admin's stays); a node that was only DOWN returns when its slurmd registers (ReturnToService=2)."""
    if not names:
        return
    try:
        states = ctx.slurm.nodes(names)
        ours = [n for n, st in states.items() if "DRAIN" in st.flags and (st.reason or "").startswith(RESUMABLE_REASONS)]
        ctx.slurm.resume(ours)
    except SlurmError as e:
        ctx.log.error(f"could not resume {hostlist.compress(names)}: {e}")
        return
    if ours:
        ctx.log.info(f"{hostlist.compress(ours)}: back in service on the replacement instance")

