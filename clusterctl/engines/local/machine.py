"""One lab node's processes on the host: where its files live, how nspawn is launched, found, and stopped.

Process tree per node:  supervisor (python -m clusterctl.engines.local.supervise) -> systemd-nspawn -> node's systemd.
The supervisor exists because the host may have no systemd to babysit nspawn: it restarts nspawn when the node
reboots (nspawn exits 133 on reboot) and re-creates the fake GPUs after every boot.
Pid files hold "pid starttime" so a reused pid is never mistaken for a node.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from clusterctl.engines.local import cgroups, names
from clusterctl.engines.local.errors import LabError
from clusterctl.engines.local.host import systemd_booted
from clusterctl.engines.local.proc import alive, comm, host_env, ns_pid, read_pidfile, which
from clusterctl.engines.local.proc import signal as send

REBOOT_EXIT = 133  # systemd-nspawn's exit status when the container rebooted


@dataclass(frozen=True)
class NodePaths:
    dir: Path  # state_dir/nodes/<name>
    logs: Path  # state_dir/logs (kept by down() for post-mortems)
    name: str

    @property
    def root(self) -> Path:  # overlay mount point: what nspawn boots
        return self.dir / "root"

    @property
    def upper(self) -> Path:
        return self.dir / "upper"

    @property
    def work(self) -> Path:
        return self.dir / "work"

    @property
    def meta(self) -> Path:  # which base rootfs this node's upper dir was made against
        return self.dir / "node.json"

    @property
    def launch(self) -> Path:
        return self.dir / "launch.json"

    @property
    def gpus(self) -> Path:  # desired fake GPU count, re-applied by the supervisor after every boot
        return self.dir / "gpus"

    @property
    def disk_image(self) -> Path:  # the fake NVMe disk's backing file; kept until down()
        return self.dir / "nvme0n1.img"

    @property
    def cgroups(self) -> Path:
        return self.dir / "cgroups.json"

    @property
    def supervisor_pid(self) -> Path:
        return self.dir / "supervisor.pid"

    @property
    def nspawn_pid(self) -> Path:
        return self.dir / "nspawn.pid"

    @property
    def leader_pid(self) -> Path:
        return self.dir / "leader.pid"

    @property
    def console_log(self) -> Path:
        return self.logs / f"{self.name}.console.log"

    @property
    def supervisor_log(self) -> Path:
        return self.logs / f"{self.name}.supervisor.log"


def nspawn_argv(paths: NodePaths, netns: str, binds: tuple[str, ...] = ()) -> list[str]:
    """binds: extra `--bind=` values (host:node[:options]), e.g. the shared apt package cache."""
    return [
        which("systemd-nspawn") or "systemd-nspawn",
        "--quiet",
        # No machined/systemd on the host to register with; run in the (per-node) cgroup we were started in.
        "--register=no", "--keep-unit",
        "-D", str(paths.root), "-M", paths.name, "--boot",
        f"--network-namespace-path=/run/netns/{netns}",
        # We write resolv.conf/hostname/machine-id into the overlay ourselves; keep nspawn from overriding them.
        "--resolv-conf=off", "--timezone=off", "--link-journal=no",
        # No terminal: log the console to a file instead of leaving a pty nobody reads.
        "--console=read-only",
        *(f"--bind={b}" for b in binds),
    ]


def nspawn_pid(paths: NodePaths) -> int | None:
    return read_pidfile(paths.nspawn_pid) or _scan_nspawn(paths.root)


def leader_pid(paths: NodePaths) -> int | None:
    return read_pidfile(paths.leader_pid)


def supervisor_pid(paths: NodePaths) -> int | None:
    return read_pidfile(paths.supervisor_pid)


def _scan_nspawn(root: Path) -> int | None:
    """Fallback when pid files are lost: a systemd-nspawn whose -D is this node's root."""
    want = str(root).encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"systemd-nspawn") and b"-D" in argv:
            i = argv.index(b"-D")
            if i + 1 < len(argv) and argv[i + 1] == want and alive(int(entry)):
                return int(entry)
    return None


def find_leader(nspawn: int) -> int | None:
    """The node's init as a host pid: nspawn's child that is pid 1 of its own pid namespace and has exec'd."""
    from clusterctl.engines.local.proc import children

    for child in children(nspawn):
        nsp = ns_pid(child)
        if len(nsp) > 1 and nsp[-1] == 1 and comm(child) not in (None, "systemd-nspawn", "(sd-namespace)"):
            return child
    return None


def bind_arg(host: Path, inside: str) -> str:
    """One nspawn --bind value: nspawn splits on ':' unless escaped."""
    return str(host).replace("\\", "\\\\").replace(":", "\\:") + f":{inside}"


def start(paths: NodePaths, netns: str, cluster: str, binds: tuple[str, ...] = ()) -> int:
    """Launch the node's supervisor detached (own session, log file); returns its pid."""
    paths.logs.mkdir(parents=True, exist_ok=True)
    launch = {
        "argv": nspawn_argv(paths, netns, binds),
        "cgroup": names.cgroup(cluster, paths.name),
        # On systemd hosts the delegated scope below is the node's cgroup; elsewhere the supervisor makes one.
        "own_cgroups": not systemd_booted(),
    }
    paths.launch.write_text(json.dumps(launch, indent=2))
    argv = [sys.executable, "-m", "clusterctl.engines.local.supervise", str(paths.dir)]
    if systemd_booted():
        argv = ["systemd-run", "--scope", "--quiet", "--collect", f"--unit=clusterctl-lab-{cluster}-{paths.name}",
                "--property=Delegate=yes", "--", *argv]
    env = host_env(PYTHONPATH=os.pathsep.join(p for p in sys.path if p))  # the same clusterctl we run from
    with open(paths.supervisor_log, "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd="/",
                                start_new_session=True, env=env, close_fds=True)
    from clusterctl.engines.local.proc import write_pidfile

    write_pidfile(paths.supervisor_pid, proc.pid)
    return proc.pid


def request_stop(paths: NodePaths) -> None:
    """Ask for a clean poweroff: the supervisor forwards SIGTERM to nspawn, which shuts the node's systemd down."""
    sup = supervisor_pid(paths)
    if sup:
        send(sup, signal.SIGTERM)
    else:
        send(nspawn_pid(paths), signal.SIGTERM)


def is_down(paths: NodePaths) -> bool:
    return not (supervisor_pid(paths) or nspawn_pid(paths) or leader_pid(paths))


def force_stop(paths: NodePaths) -> None:
    """SIGKILL what is left. Killing nspawn alone leaves the container running (its init is re-parented),
    so kill the node's init (takes its whole pid namespace) and then anything left in its cgroups."""
    for pid in (supervisor_pid(paths), leader_pid(paths), nspawn_pid(paths)):
        send(pid, signal.SIGKILL)
    dirs = recorded_cgroups(paths)
    survivors = cgroups.kill_all(dirs["dirs"]) if dirs else set()
    if survivors:
        raise LabError(f"node {paths.name}: processes {sorted(survivors)} survive SIGKILL")
    deadline = time.monotonic() + 10
    while not is_down(paths) and time.monotonic() < deadline:
        time.sleep(0.1)


def recorded_cgroups(paths: NodePaths) -> dict | None:
    try:
        return json.loads(paths.cgroups.read_text())
    except (FileNotFoundError, ValueError):
        return None


def release_cgroups(paths: NodePaths) -> None:
    rec = recorded_cgroups(paths)
    if rec and rec.get("owned"):
        cgroups.remove(rec["dirs"])
    paths.cgroups.unlink(missing_ok=True)
