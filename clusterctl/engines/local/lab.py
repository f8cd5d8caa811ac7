"""Lab: boot, inspect and tear down one cluster's lab nodes (systemd-nspawn containers with real networking)."""

from __future__ import annotations

import fcntl
import json
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from subprocess import CompletedProcess
from typing import Iterator

from clusterctl.engines.local import (aptcache, cgroups, claims, disks, gpus, host, machine, mounts, names, network,
                                     nodefiles, rootfs, sshkeys)
from clusterctl.engines.local.errors import LabError
from clusterctl.engines.local.machine import NodePaths
from clusterctl.engines.local.proc import run
from clusterctl.engines.local.spec import LabNode, LabSpec, NodeStatus

BOOT_TIMEOUT = 180.0  # seconds for all started nodes to answer over ssh (2-core host, all booting at once)
STOP_TIMEOUT = 45.0  # clean poweroff before SIGKILL


class Lab:
    def __init__(self, spec: LabSpec, log: Callable[[str], None] = print):
        self.spec = spec
        self.log = log

    # --- paths -------------------------------------------------------------------------------------

    @property
    def ssh_key(self) -> Path:
        return self.spec.state_dir / "ssh" / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.spec.state_dir / "ssh" / "known_hosts"

    def _paths(self, name: str) -> NodePaths:
        return NodePaths(dir=self.spec.state_dir / "nodes" / name, logs=self.spec.state_dir / "logs", name=name)

    def _known_node_names(self) -> list[str]:
        """Spec nodes plus any node this state dir still has traces of (removed from the spec since)."""
        names_ = [n.name for n in self.spec.nodes]
        nodes_dir = self.spec.state_dir / "nodes"
        if nodes_dir.is_dir():
            names_ += sorted(p.name for p in nodes_dir.iterdir() if p.is_dir() and p.name not in names_)
        prefix = names.netns_prefix(self.spec.cluster)
        names_ += [ns[len(prefix):] for ns in network.cluster_netns(self.spec.cluster) if ns[len(prefix):] not in names_]
        return names_

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """One up/down/set_fake_gpus at a time per cluster (two `up`s would both start the same nodes)."""
        self.spec.state_dir.mkdir(parents=True, exist_ok=True)
        with open(self.spec.state_dir / ".lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            yield

    # --- public ------------------------------------------------------------------------------------

    def ensure_host_prereqs(self) -> None:
        host.require_root()
        host.ensure_packages(self.log)
        host.ensure_kernel_features()

    def ssh_command(self, node: str) -> list[str]:
        return sshkeys.ssh_argv(self.ssh_key, self.known_hosts, self.spec.node(node).address)

    def check_claim(self) -> None:
        """Refuses, changing nothing, when a lab of this name runs from another state directory (claims)."""
        claims.check(self.spec.cluster, self.spec.state_dir)

    def up(self) -> None:
        self.check_claim()  # before anything on the host changes
        self.ensure_host_prereqs()
        host.ensure_run_systemd()
        spec = self.spec
        with self._locked():
            claims.claim(spec.cluster, spec.state_dir)
            base = rootfs.ensure_base(spec.cache_dir, spec.suite, spec.mirror, self.log)
            aptcache.ensure(spec.cache_dir)
            key = sshkeys.ensure_client_key(self.ssh_key.parent, spec.cluster)
            mtu = network.uplink_mtu()
            host.ensure_ip_forward(self.log)
            network.ensure_bridge(spec.cluster, spec.subnet, spec.gateway, mtu)
            network.ensure_nat(spec.cluster, spec.subnet)

            wanted = {n.name for n in spec.nodes}
            for gone in [n for n in self._known_node_names() if n not in wanted]:
                self.log(f"removing lab node {gone}: no longer in the spec")
                self._destroy([gone])

            started: dict[str, float] = {}
            host_keys: dict[str, tuple[str, str]] = {}
            for node in spec.nodes:
                paths = self._paths(node.name)
                self._reap_orphan(paths)
                network.ensure_node_net(spec.cluster, node.name, node.address, spec.prefixlen, spec.gateway, mtu)
                # A live supervisor counts as running even between nspawn runs (the node is rebooting).
                running = bool(machine.supervisor_pid(paths) or machine.nspawn_pid(paths))
                if running:
                    nodefiles.update_hosts(paths.root, self._hosts())  # nodes added/removed since it booted
                else:
                    self._prepare_root(node, paths, Path(node.image) if node.image else base, key)
                paths.gpus.write_text(f"{node.gpus}\n")
                disk = self._converge_disk(node, paths)
                host_keys[node.name] = (node.address, sshkeys.ensure_host_key(paths.root, node.name))
                if running:
                    leader = machine.leader_pid(paths)
                    if leader:
                        gpus.apply(leader, node.gpus)  # converge a GPU count changed by set_fake_gpus
                        if disk:
                            disks.expose(leader, disk)  # a correct (maybe mounted) /dev/nvme0n1 is left alone
                    continue
                extra = f", {node.disk_mb} MiB disk" if node.disk_mb else ""
                self.log(f"booting lab node {node.name} ({node.address}, {node.gpus} fake GPU(s){extra})")
                machine.start(paths, names.netns(spec.cluster, node.name), spec.cluster, binds=self._binds())
                started[node.name] = time.monotonic()
            sshkeys.write_known_hosts(self.known_hosts, host_keys)
            self._wait_ready(started)

    def build_image(self, builder: LabNode, converge: Callable[[], None], dest: Path) -> Path:
        """A node image: `builder`, a throwaway node on this lab's network booted from the base rootfs, is handed to
        converge() (the node roles, in image mode), stopped and baked into `dest`. The builder is removed whatever
        happens, and the cluster's own nodes are left as they are (running or not)."""
        if any(n.name == builder.name or n.address == builder.address for n in self.spec.nodes):
            raise LabError(f"image builder {builder.name} ({builder.address}) clashes with a node of the lab")
        self.check_claim()
        self.ensure_host_prereqs()
        host.ensure_run_systemd()
        spec = self.spec
        lab = Lab(replace(spec, nodes=(*spec.nodes, builder)), self.log)  # resolves the builder's name and address
        paths = lab._paths(builder.name)
        with self._locked():
            claims.claim(spec.cluster, spec.state_dir)
            base = rootfs.ensure_base(spec.cache_dir, spec.suite, spec.mirror, self.log)
            aptcache.ensure(spec.cache_dir)
            key = sshkeys.ensure_client_key(self.ssh_key.parent, spec.cluster)
            mtu = network.uplink_mtu()
            host.ensure_ip_forward(self.log)
            network.ensure_bridge(spec.cluster, spec.subnet, spec.gateway, mtu)
            network.ensure_nat(spec.cluster, spec.subnet)
            known = sshkeys.read_known_hosts(self.known_hosts)
            try:
                lab._destroy([builder.name])  # what an interrupted build left
                network.ensure_node_net(spec.cluster, builder.name, builder.address, spec.prefixlen, spec.gateway, mtu)
                lab._prepare_root(builder, paths, base, key)
                paths.gpus.write_text(f"{builder.gpus}\n")
                pub = sshkeys.ensure_host_key(paths.root, builder.name)
                sshkeys.write_known_hosts(self.known_hosts, {**known, builder.name: (builder.address, pub)})
                self.log(f"booting image builder {builder.name} ({builder.address})")
                machine.start(paths, names.netns(spec.cluster, builder.name), spec.cluster, binds=lab._binds())
                lab._wait_ready({builder.name: time.monotonic()}, [builder.name])
                converge()
                lab._stop([paths])
                return rootfs.bake(paths.root, dest, self.log)
            finally:
                lab._destroy([builder.name])
                if self.known_hosts.exists():
                    sshkeys.write_known_hosts(self.known_hosts, known)

    def made_nodes(self) -> dict[str, str]:
        """{node: the root filesystem (base or node image) its overlay is made on} for every node made so far, running
        or not: it stays the node's lower for as long as the node exists (_prepare_root)."""
        out = {}
        for name in self._known_node_names():
            meta = self._paths(name).meta
            if meta.exists():
                out[name] = str(json.loads(meta.read_text())["lower"])
        return out

    def lowers_in_use(self) -> set[str]:
        return set(self.made_nodes().values())

    def _binds(self) -> tuple[str, ...]:
        binds = aptcache.binds(self.spec.cache_dir)
        if self.spec.shared_home is not None:
            self.spec.shared_home.mkdir(parents=True, exist_ok=True)
            binds += (machine.bind_arg(self.spec.shared_home, "/home"),)
        return binds

    def down(self) -> None:
        host.require_root()
        self.check_claim()  # the namespaces of this name are another state directory's lab: not ours to remove
        with self._locked():
            self._destroy(self._known_node_names())
            network.remove_bridge(self.spec.cluster)
            for link in network.cluster_links(self.spec.cluster):
                run(["ip", "link", "del", link], check=False)
            network.remove_nat(self.spec.cluster)
            self.known_hosts.unlink(missing_ok=True)
            nodes_dir = self.spec.state_dir / "nodes"
            disks.detach_all_under(nodes_dir)  # also disks of nodes whose directory an earlier down() removed
            if nodes_dir.is_dir():
                mounts.remove_tree(nodes_dir)
        left = self.leftovers()
        if not left:
            claims.release(self.spec.cluster, self.spec.state_dir)
        if left:
            raise LabError(f"down() left parts of lab {self.spec.cluster!r} behind: " + "; ".join(left))

    def status(self) -> list[NodeStatus]:
        out = []
        for node in self.spec.nodes:
            paths = self._paths(node.name)
            pid = machine.nspawn_pid(paths)
            leader = machine.leader_pid(paths) if pid else None
            reachable = bool(pid) and self._ssh(node.name, ["true"], timeout=10).returncode == 0
            present = len(gpus.present(leader)) if leader else None
            loops = disks.attached(paths.disk_image)
            disk = loops[0] if loops else None
            in_node = (disks.in_node(leader, disk) if disk else False) if leader else None
            out.append(NodeStatus(name=node.name, address=node.address, running=bool(pid), pid=pid,
                                  leader_pid=leader, ssh_reachable=reachable, gpus=present, disk=disk,
                                  disk_in_node=in_node))
        return out

    def set_fake_gpus(self, node: str, count: int) -> None:
        self.spec.node(node)
        if not isinstance(count, int) or count < 0:
            raise LabError(f"fake GPU count must be a non-negative integer, got {count!r}")
        with self._locked():
            paths = self._paths(node)
            leader = machine.leader_pid(paths)
            if not leader:
                raise LabError(f"lab node {node} is not running; run up() first")
            paths.gpus.write_text(f"{count}\n")  # the supervisor re-applies this after a reboot
            gpus.apply(leader, count)
        self.log(f"{node}: {count} fake GPU(s)" + (f" (/dev/nvidia0..{count - 1})" if count else ""))

    def leftovers(self) -> list[str]:
        """What of this cluster still exists on the host (empty after a complete down())."""
        c = self.spec.cluster
        left = [f"netns {ns}" for ns in network.cluster_netns(c)]
        left += [f"link {link}" for link in network.cluster_links(c)]
        if network.link_exists(names.bridge(c)):
            left.append(f"bridge {names.bridge(c)}")
        left += [f"iptables {r}" for r in network.nat_rules_left(c)]
        left += [f"mount {m}" for m in mounts.mounts_under(self.spec.state_dir)]
        left += [f"loop device {dev} on {backing}" for dev, backing in disks.loops_under(self.spec.state_dir / "nodes")]
        for here, _ in cgroups.current().values():
            left += [f"cgroup {d}" for d in sorted(Path(here).glob(names.cgroup(c, "*")))]
        for name in self._known_node_names():
            pid = machine._scan_nspawn(self._paths(name).root)
            if pid:
                left.append(f"systemd-nspawn pid {pid} for {name}")
        return left

    # --- steps -------------------------------------------------------------------------------------

    def _ssh(self, node: str, command: list[str], timeout: float = 30) -> CompletedProcess[str]:
        return run([*self.ssh_command(node), "--", *command], check=False, timeout=timeout)

    def _hosts(self) -> dict[str, str]:
        return {n.name: n.address for n in self.spec.nodes}

    def _converge_disk(self, node: LabNode, paths: NodePaths) -> str | None:
        """The node's fake NVMe disk as the spec says: image created once (kept across up() and reboots) and
        attached to a loop device; returns that device. A disk the spec dropped is deleted, unless mounted."""
        image = paths.disk_image
        if node.disk_mb > 0:
            created = disks.ensure_image(image, node.disk_mb)
            dev = disks.attach(image)
            if created:
                self.log(f"{node.name}: new {node.disk_mb} MiB disk {image.name} on {dev} "
                         f"(/dev/{disks.DEVICE} in the node)")
            return dev
        if image.exists() or disks.detach_candidates(image):
            busy = [dev for dev in disks.attached(image) if disks.in_use(dev)]
            if busy:
                raise LabError(f"{node.name}: the spec has no disk for it any more, but its /dev/{disks.DEVICE} "
                               f"({', '.join(busy)} on the host) is in use (mounted?); unmount it in the node first")
            leader = machine.leader_pid(paths)
            if leader:
                disks.hide(leader)
            disks.remove(image)
            self.log(f"{node.name}: disk removed (no longer in the spec); its data is gone")
        return None

    def _prepare_root(self, node: LabNode, paths: NodePaths, base: Path, key: Path) -> None:
        """Overlay (base rootfs + this node's upper dir) mounted at paths.root, with node identity written in."""
        paths.dir.mkdir(parents=True, exist_ok=True)
        lower = base
        if paths.meta.exists():
            # An existing upper dir was made against a specific base: keep using it while it exists.
            recorded = Path(json.loads(paths.meta.read_text())["lower"])
            if recorded.is_dir():
                lower = recorded
            else:
                self.log(f"{node.name}: its base rootfs {recorded} is gone; starting from a fresh overlay")
                mounts.remove_tree(paths.root)
                mounts.remove_tree(paths.upper)
                mounts.remove_tree(paths.work)
        paths.meta.write_text(json.dumps({"lower": str(lower)}))
        if not mounts.is_mountpoint(paths.root):
            for d in (paths.upper, paths.work, paths.root):
                d.mkdir(exist_ok=True)
            run(["mount", "-t", "overlay", "overlay", "-o",
                 f"lowerdir={lower},upperdir={paths.upper},workdir={paths.work}", str(paths.root)],
                what=f"mounting the overlay root of {node.name}")
        nodefiles.write(paths.root, cluster=self.spec.cluster, node=node.name,
                        hosts=self._hosts(),
                        authorized_key=key.with_suffix(".pub").read_text(),
                        resolv=nodefiles.resolv_conf(self.log))
        aptcache.write_node_config(paths.root)

    def _reap_orphan(self, paths: NodePaths) -> None:
        """After a crash: a node whose supervisor or nspawn died cannot be managed (no reboot handling, or no
        console at all); kill what is left so it boots cleanly."""
        sup, nsp, leader = machine.supervisor_pid(paths), machine.nspawn_pid(paths), machine.leader_pid(paths)
        if (nsp and not sup) or (leader and not nsp):
            self.log(f"{paths.name}: found a half-dead node from an earlier run; restarting it")
            machine.force_stop(paths)
        elif not (sup or nsp or leader):
            rec = machine.recorded_cgroups(paths)
            if rec:
                cgroups.kill_all(rec["dirs"])

    def _wait_ready(self, started: dict[str, float], only: list[str] | None = None) -> None:
        """Until `systemctl is-system-running` answers running (or degraded, naming the failed units) on every node
        (or on `only`)."""
        pending = list(only) if only is not None else [n.name for n in self.spec.nodes]
        deadline = time.monotonic() + BOOT_TIMEOUT
        last: dict[str, str] = {}
        t0 = time.monotonic()
        while pending:
            for name in list(pending):
                paths = self._paths(name)
                if not machine.nspawn_pid(paths) and not machine.supervisor_pid(paths):
                    raise LabError(f"lab node {name} stopped while booting; logs: {paths.console_log}, "
                                   f"{paths.supervisor_log}\n" + _tail(paths.supervisor_log, 10) + "\n"
                                   + _tail(paths.console_log))
                cp = self._ssh(name, ["systemctl", "is-system-running"], timeout=15)
                state = cp.stdout.strip()
                last[name] = state or cp.stderr.strip()
                if state in ("running", "degraded"):
                    pending.remove(name)
                    took = time.monotonic() - started.get(name, t0)
                    if state == "degraded":
                        failed = self._ssh(name, ["systemctl", "--failed", "--no-legend", "--plain"]).stdout
                        units = ", ".join(line.split()[0] for line in failed.splitlines() if line.strip())
                        self.log(f"{name}: ready but degraded after {took:.1f}s; failed units: {units or '?'}")
                    elif name in started:
                        self.log(f"{name}: ready after {took:.1f}s (ssh root@{self.spec.node(name).address})")
            if pending:
                if time.monotonic() > deadline:
                    detail = "; ".join(f"{n}: {last.get(n) or 'no answer'}" for n in pending)
                    raise LabError(f"lab nodes not ready after {BOOT_TIMEOUT:.0f}s ({detail}); console logs in "
                                   f"{self.spec.state_dir / 'logs'}")
                time.sleep(0.5)

    def _stop(self, all_paths: list[NodePaths]) -> None:
        """Clean poweroff, then SIGKILL for what did not stop in time; the nodes' files stay."""
        for paths in all_paths:
            machine.request_stop(paths)
        deadline = time.monotonic() + STOP_TIMEOUT
        while any(not machine.is_down(p) for p in all_paths) and time.monotonic() < deadline:
            time.sleep(0.2)
        for paths in all_paths:
            if not machine.is_down(paths):
                self.log(f"{paths.name}: no clean poweroff within {STOP_TIMEOUT:.0f}s; killing it")
            machine.force_stop(paths)  # also sweeps the node's cgroups when the clean stop worked

    def _destroy(self, node_names: list[str]) -> None:
        """Stop (cleanly, then by force), unmount, delete the netns and the node's files; in parallel."""
        all_paths = [self._paths(n) for n in node_names]
        self._stop(all_paths)
        for paths in all_paths:
            machine.release_cgroups(paths)
            for f in (paths.supervisor_pid, paths.nspawn_pid, paths.leader_pid):
                f.unlink(missing_ok=True)
            # The node is gone, so its filesystem is unmounted; also sweep strays on other files of the node.
            busy = list(dict.fromkeys(disks.detach(paths.disk_image) + disks.detach_all_under(paths.dir)))
            if busy:
                self.log(f"{paths.name}: {', '.join(busy)} still in use; the kernel detaches it once released")
            mounts.remove_tree(paths.dir)
            network.remove_node_net(self.spec.cluster, paths.name)


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no console log)"
