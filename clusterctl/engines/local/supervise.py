"""The per-node supervisor process: `python -m clusterctl.engines.local.supervise NODE_DIR` (started by machine.start).

Runs detached from the caller. Moves itself into the node's own cgroups, runs systemd-nspawn, records the pids,
re-creates the fake GPUs and the fake NVMe disk's /dev/nvme0n1 after each boot (nspawn gives every boot a fresh
/dev), restarts nspawn when the node reboots, and on SIGTERM asks the node to power off and exits when it has.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType
from typing import TypedDict

from clusterctl.engines.local import cgroups, disks, gpus
from clusterctl.engines.local.errors import LabError
from clusterctl.engines.local.machine import REBOOT_EXIT, NodePaths, find_leader
from clusterctl.engines.local.proc import write_pidfile


class _State(TypedDict):
    stopping: bool
    child: subprocess.Popen[bytes] | None


def _log(msg: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {msg}", flush=True)


def _desired_gpus(paths: NodePaths) -> int:
    try:
        return int(paths.gpus.read_text().strip() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def _wait_leader(child: subprocess.Popen, timeout: float = 60.0) -> int | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and child.poll() is None:
        leader = find_leader(child.pid)
        if leader:
            return leader
        time.sleep(0.05)
    return None


def main(node_dir: str) -> int:
    dir_ = Path(node_dir)
    paths = NodePaths(dir=dir_, logs=dir_.parent.parent / "logs", name=dir_.name)
    write_pidfile(paths.supervisor_pid, os.getpid())  # also written by the launcher; first one wins the race
    launch = json.loads(paths.launch.read_text())
    if launch["own_cgroups"]:
        dirs = cgroups.create_and_enter(launch["cgroup"])
        paths.cgroups.write_text(json.dumps({"owned": True, "dirs": dirs}))
    else:
        paths.cgroups.write_text(json.dumps({"owned": False, "dirs": [d for d, _ in cgroups.current().values()]}))

    state: _State = {"stopping": False, "child": None}

    def on_term(signum: int, frame: FrameType | None) -> None:
        state["stopping"] = True
        if state["child"] is not None and state["child"].poll() is None:
            state["child"].send_signal(signal.SIGTERM)  # nspawn turns this into a clean poweroff of the node

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)

    rc = 0
    boots = 0
    while not state["stopping"]:
        boots += 1
        with open(paths.console_log, "ab") as console:
            console.write(f"\n===== clusterctl: boot {boots} of {paths.name} at {time.ctime()} =====\n".encode())
            console.flush()
            child = subprocess.Popen(launch["argv"], stdin=subprocess.DEVNULL, stdout=console,
                                     stderr=subprocess.STDOUT)
        state["child"] = child
        write_pidfile(paths.nspawn_pid, child.pid)
        _log(f"boot {boots}: systemd-nspawn pid {child.pid}")
        leader = _wait_leader(child)
        if leader:
            write_pidfile(paths.leader_pid, leader)
            count = _desired_gpus(paths)
            try:
                gpus.apply(leader, count)
                _log(f"node init pid {leader}; {count} fake GPU(s) created")
            except OSError as exc:
                _log(f"could not create fake GPUs: {exc}")
            if paths.disk_image.exists():  # up() creates it when the spec gives the node a disk, down() deletes it
                try:
                    dev = disks.attach(paths.disk_image)  # re-uses the attachment up() made
                    disks.expose(leader, dev)
                    _log(f"/dev/{disks.DEVICE} in the node is {dev}")
                except (OSError, LabError) as exc:
                    _log(f"could not give the node its disk: {exc}")
        else:
            _log("node init did not appear (see the console log)")
        rc = child.wait()
        paths.leader_pid.unlink(missing_ok=True)
        paths.nspawn_pid.unlink(missing_ok=True)
        _log(f"systemd-nspawn exited with {rc}")
        if rc != REBOOT_EXIT:
            break
        _log("node rebooted: starting it again")
    paths.supervisor_pid.unlink(missing_ok=True)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
