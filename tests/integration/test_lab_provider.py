"""The local provider for real: two lab nodes (systemd-nspawn) on this machine, reached over SSH.

Needs root. The base rootfs is cached in $CLUSTERCTL_CACHE_DIR (default /var/cache/clusterctl) so only the first
run pays for debootstrap; the nodes' shared apt package pool lives there too (<cache>/apt-archives).
Uses a throwaway cluster name and 10.214.7.0/24, never the default lab subnet. The GPU node also gets a fake
512 MiB NVMe disk (/dev/nvme0n1). Tests run in file order and build on each other (the disk is formatted before the
reboot test and checked after it). Run with `-s` to see the timings (debootstrap, boot, apt, down).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import needs_root

from clusterctl.engines.local import Lab, LabError, LabNode, LabSpec

pytestmark = [
    pytest.mark.integration,
    needs_root(),
]

CLUSTER = f"it{os.getpid() % 100000}"
SUBNET, GATEWAY = "10.214.7.0/24", "10.214.7.1"
CTL = LabNode("itctl", "10.214.7.10")
GPU = LabNode("itgpu", "10.214.7.11", gpus=2, disk_mb=512)
DISK_MARK = "written before the reboot"


def _log(msg: str) -> None:
    print(f"[lab {time.strftime('%H:%M:%S')}] {msg}", flush=True)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    cache = Path(os.environ.get("CLUSTERCTL_CACHE_DIR", "/var/cache/clusterctl"))
    spec = LabSpec(cluster=CLUSTER, subnet=SUBNET, gateway=GATEWAY, nodes=(CTL, GPU),
                   state_dir=tmp_path_factory.mktemp("labstate"), cache_dir=cache)
    lab = Lab(spec, log=_log)
    lab.ensure_host_prereqs()
    t0 = time.monotonic()
    try:
        lab.up()
        _log(f"first up() took {time.monotonic() - t0:.1f}s")
        yield lab
    finally:
        lab.down()  # idempotent: the last test already tore it down; this also covers failures mid-module


def sh(lab: Lab, node: str, command: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*lab.ssh_command(node), command], check=False, capture_output=True, text=True,
                          timeout=timeout)


def boot_id(lab: Lab, node: str) -> str:
    return sh(lab, node, "cat /proc/sys/kernel/random/boot_id").stdout.strip()


def wait_ssh(lab: Lab, node: str, timeout: float = 90) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cp = sh(lab, node, "systemctl is-system-running", timeout=15)
        if cp.stdout.strip() in ("running", "degraded"):
            return cp.stdout.strip()
        time.sleep(0.5)
    raise AssertionError(f"{node} not back over ssh within {timeout}s")


def test_ssh_uses_strict_host_keys(lab, tmp_path):
    argv = lab.ssh_command(CTL.name)
    assert "StrictHostKeyChecking=yes" in argv and f"UserKnownHostsFile={lab.known_hosts}" in argv
    assert sh(lab, CTL.name, "hostname").stdout.strip() == CTL.name
    assert sh(lab, GPU.name, "hostname").stdout.strip() == GPU.name
    # Each node has its own host key (not the base rootfs's), and an unknown key is refused.
    keys = [line.split()[1:] for line in lab.known_hosts.read_text().splitlines()]
    assert len(keys) == 2 and keys[0] != keys[1]
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    refused = subprocess.run([a.replace(str(lab.known_hosts), str(empty)) for a in argv] + ["true"], check=False,
                             capture_output=True, text=True, timeout=30)
    assert refused.returncode != 0 and "Host key verification failed" in refused.stderr


def test_nodes_run_systemd(lab):
    for node in (CTL, GPU):
        state = sh(lab, node.name, "systemctl is-system-running").stdout.strip()
        assert state == "running", (node.name, state, sh(lab, node.name, "systemctl --failed").stdout)
        assert sh(lab, node.name, "systemd-detect-virt").stdout.strip() == "systemd-nspawn"
    ids = {sh(lab, n.name, "cat /etc/machine-id").stdout.strip() for n in (CTL, GPU)}
    assert len(ids) == 2


def test_nodes_reach_each_other(lab):
    out = sh(lab, CTL.name, f"ping -c 2 -W 2 {GPU.address} && ping -c 1 -W 2 {GPU.name}")
    assert out.returncode == 0, out.stdout + out.stderr
    out = sh(lab, GPU.name, f"ping -c 2 -W 2 {CTL.address}")
    assert out.returncode == 0, out.stdout + out.stderr
    # A real TCP service across nodes too (what slurmd<->slurmctld need): sshd of the other node answers.
    banner = sh(lab, GPU.name, f"exec 3<>/dev/tcp/{CTL.address}/22; head -c 7 <&3")
    assert banner.stdout == "SSH-2.0", banner


def test_apt_works_inside_a_node(lab):
    t0 = time.monotonic()
    cp = sh(lab, GPU.name, "apt-get update", timeout=600)
    _log(f"apt-get update inside {GPU.name}: {time.monotonic() - t0:.1f}s")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "Err:" not in cp.stdout and "W: " not in cp.stderr, cp.stdout + cp.stderr
    policy = sh(lab, GPU.name, "apt-cache policy slurmd").stdout
    assert "Candidate:" in policy and "Candidate: (none)" not in policy, policy


def test_fake_gpus_exist(lab):
    out = sh(lab, GPU.name, "ls /dev/nvidia*; stat -c '%n %F %t:%T %a' /dev/nvidia0 /dev/nvidia1 /dev/nvidiactl")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[:3] == ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl"]
    assert "/dev/nvidia0 character special file c3:0 666" in out.stdout  # major 195 = 0xc3
    assert "/dev/nvidiactl character special file c3:ff 666" in out.stdout
    assert sh(lab, CTL.name, "ls /dev/nvidia0").returncode != 0
    assert {s.name: s.gpus for s in lab.status()} == {CTL.name: 0, GPU.name: 2}


def test_set_fake_gpus_shrinks_and_restores(lab):
    lab.set_fake_gpus(GPU.name, 1)
    assert sh(lab, GPU.name, "ls /dev/nvidia*").stdout.split() == ["/dev/nvidia0", "/dev/nvidiactl"]
    lab.set_fake_gpus(GPU.name, 2)
    assert sh(lab, GPU.name, "ls /dev/nvidia*").stdout.split() == ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl"]
    with pytest.raises(LabError):
        lab.set_fake_gpus("no-such-node", 1)


def test_cgroup_controllers_are_private_and_writable(lab):
    # What Slurm's cgroup plugins need: writable v1 controllers, rooted in the node's own cgroup subtree.
    probe = "mkdir /sys/fs/cgroup/devices/probe && echo 'c 195:1 rwm' > /sys/fs/cgroup/devices/probe/devices.deny " \
            "&& rmdir /sys/fs/cgroup/devices/probe && echo ok"
    assert sh(lab, GPU.name, probe).stdout.strip() == "ok"
    assert sh(lab, GPU.name, "sed -n 's/^[0-9]*:freezer://p' /proc/1/cgroup").stdout.strip() == "/"


def _pool(lab: Lab) -> Path:
    return lab.spec.cache_dir / "apt-archives"


def _image(lab: Lab) -> Path:
    return lab.spec.state_dir / "nodes" / GPU.name / "nvme0n1.img"


def _loops_of(path: Path) -> list[str]:
    """Independently of the provider: `losetup -a` lines naming files under path."""
    return [line for line in _out(["losetup", "-a"]).splitlines() if str(path) in line]


def test_apt_pool_shared_between_nodes(lab):
    pool = _pool(lab)
    for old in pool.glob("hello_*.deb"):
        old.unlink()  # so the first install below has to download it
    cp = sh(lab, CTL.name, "apt-get update -q", timeout=600)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    install = "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends hello"
    t0 = time.monotonic()
    first = sh(lab, GPU.name, install, timeout=600)
    t1 = time.monotonic()
    assert first.returncode == 0, first.stdout + first.stderr
    assert "Get:" in first.stdout and " hello " in first.stdout, first.stdout
    assert [p.name for p in pool.glob("hello_*.deb")], sorted(p.name for p in pool.iterdir())
    second = sh(lab, CTL.name, install, timeout=600)
    t2 = time.monotonic()
    _log(f"apt-get install hello: {t1 - t0:.1f}s in {GPU.name} (downloaded), {t2 - t1:.1f}s in {CTL.name} (pool)")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "Get:" not in second.stdout and "Need to get 0 B" in second.stdout, second.stdout
    assert sh(lab, CTL.name, "hello").stdout.strip() == "Hello, world!"
    # The second node used the pool's file through a link in its own archives dir.
    link = sh(lab, CTL.name, "readlink /var/cache/apt/archives/hello_*.deb").stdout.strip()
    assert link.startswith("/var/cache/clusterctl-lab/apt-archives/hello_"), link
    # Each node keeps its own lock and partial/ (owned by apt's sandbox user).
    for node in (CTL, GPU):
        assert sh(lab, node.name, "stat -c %U /var/cache/apt/archives/partial").stdout.strip() == "_apt"
    # apt-get clean/autoclean in a node empties only that node's view, never the pool.
    cp = sh(lab, CTL.name, "apt-get clean && apt-get autoclean -q && ls /var/cache/apt/archives")
    assert cp.returncode == 0 and "hello" not in cp.stdout, cp.stdout + cp.stderr
    assert [p.name for p in pool.glob("hello_*.deb")]


def test_concurrent_apt_installs_in_two_nodes(lab):
    # With one archives dir (and its lock) shared by the nodes, the second apt-get fails at once
    # ("Could not get lock /var/cache/apt/archives/lock"); each node has its own, so both finish.
    install = "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends xfsprogs"
    t0 = time.monotonic()
    procs = {n.name: subprocess.Popen([*lab.ssh_command(n.name), install], stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True) for n in (CTL, GPU)}
    outs = {name: p.communicate(timeout=600)[0] for name, p in procs.items()}
    _log(f"apt-get install xfsprogs in both nodes at once: {time.monotonic() - t0:.1f}s")
    for name, p in procs.items():
        assert p.returncode == 0, (name, outs[name])
    assert [p.name for p in _pool(lab).glob("xfsprogs_*.deb")]
    for node in (CTL, GPU):
        assert sh(lab, node.name, "mkfs.xfs -V").returncode == 0


def test_disk_is_a_block_device_in_the_node(lab):
    status = {s.name: s for s in lab.status()}
    loop = status[GPU.name].disk
    assert loop and loop.startswith("/dev/loop") and status[GPU.name].disk_in_node
    assert status[CTL.name].disk is None and status[CTL.name].disk_in_node is False
    image = _image(lab)
    assert image.stat().st_size == 512 * 2**20
    assert image.stat().st_blocks * 512 < 64 * 2**20  # sparse: costs what was written, not 512 MiB
    assert len(_loops_of(image)) == 1 and _loops_of(image)[0].startswith(loop + ":")
    rdev = os.stat(loop).st_rdev
    out = sh(lab, GPU.name, "stat -c '%F %t:%T %a %G' /dev/nvme0n1").stdout.strip()
    assert out == f"block special file {os.major(rdev):x}:{os.minor(rdev):x} 660 disk", out
    assert sh(lab, CTL.name, "test -e /dev/nvme0n1").returncode != 0


def test_disk_mkfs_xfs_and_mount(lab):
    script = ("blkid -p /dev/nvme0n1; echo blkid-empty=$?; mkfs.xfs -q -L nvmecache /dev/nvme0n1 && "
              "blkid -p -o value -s TYPE /dev/nvme0n1 && mkdir -p /mnt/nvme && mount /dev/nvme0n1 /mnt/nvme && "
              f"echo '{DISK_MARK}' > /mnt/nvme/mark && sync && findmnt -n -o SOURCE,FSTYPE /mnt/nvme")
    cp = sh(lab, GPU.name, script, timeout=120)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert cp.stdout.split() == ["blkid-empty=2", "xfs", "/dev/nvme0n1", "xfs"], cp.stdout
    # By label too, as the nvme_cache role's fstab line does (there is no udev, so no /dev/disk/by-label).
    cp = sh(lab, GPU.name, "umount /mnt/nvme && mount LABEL=nvmecache /mnt/nvme && cat /mnt/nvme/mark")
    assert cp.stdout.strip() == DISK_MARK, cp.stdout + cp.stderr


def test_reboot_inside_a_node_comes_back_with_gpus(lab):
    before = boot_id(lab, GPU.name)
    sh(lab, GPU.name, "systemctl reboot")
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and boot_id(lab, GPU.name) in ("", before):
        time.sleep(0.5)
    assert wait_ssh(lab, GPU.name) == "running"
    assert boot_id(lab, GPU.name) != before
    assert sh(lab, GPU.name, "ls /dev/nvidia*").stdout.split() == ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl"]


def test_disk_survives_the_reboot_and_up(lab):
    # test_reboot_inside_a_node_comes_back_with_gpus rebooted the node with the filesystem mounted.
    image = _image(lab)
    inode = image.stat().st_ino
    assert sh(lab, GPU.name, "findmnt /mnt/nvme").returncode != 0  # a new boot mounts nothing by itself
    loop = {s.name: s for s in lab.status()}[GPU.name].disk
    rdev = os.stat(loop).st_rdev
    assert sh(lab, GPU.name, "stat -c '%F %t:%T' /dev/nvme0n1").stdout.strip() == \
        f"block special file {os.major(rdev):x}:{os.minor(rdev):x}"
    cp = sh(lab, GPU.name, "mount /dev/nvme0n1 /mnt/nvme && cat /mnt/nvme/mark")
    assert cp.stdout.strip() == DISK_MARK, cp.stdout + cp.stderr
    # up() again: the same image on the same loop device, and the mounted filesystem is left alone.
    messages: list[str] = []
    Lab(lab.spec, log=messages.append).up()
    assert messages == [], messages
    assert image.stat().st_ino == inode and len(_loops_of(image)) == 1
    assert {s.name: s for s in lab.status()}[GPU.name].disk == loop
    cp = sh(lab, GPU.name, "findmnt -n -o SOURCE /mnt/nvme && cat /mnt/nvme/mark")
    assert cp.stdout.split("\n")[:2] == ["/dev/nvme0n1", DISK_MARK], cp.stdout + cp.stderr


def test_up_recovers_a_killed_node(lab):
    node_dir = lab.spec.state_dir / "nodes" / CTL.name
    for pidfile in ("supervisor.pid", "nspawn.pid", "leader.pid"):
        pid = int((node_dir / pidfile).read_text().split()[0])
        os.kill(pid, 9)
    time.sleep(0.5)
    assert not {s.name: s.running for s in lab.status()}[CTL.name]
    lab.up()
    assert all(s.running and s.ssh_reachable for s in lab.status())
    assert sh(lab, CTL.name, "systemctl is-system-running").stdout.strip() == "running"


def test_second_up_is_a_noop(lab):
    lab.up()  # settle anything the earlier tests changed
    before = {s.name: (s.pid, s.leader_pid) for s in lab.status()}
    boots = {n.name: boot_id(lab, n.name) for n in (CTL, GPU)}
    messages: list[str] = []
    Lab(lab.spec, log=messages.append).up()
    assert {s.name: (s.pid, s.leader_pid) for s in lab.status()} == before
    assert {n.name: boot_id(lab, n.name) for n in (CTL, GPU)} == boots
    assert messages == [], messages  # nothing booted, built or installed


def test_leftovers_report_a_stray_loop_device(lab):
    # E.g. from an interrupted up(): a loop device on a file of this cluster must be reported, and down() must
    # detach it (test_down_leaves_nothing checks that).
    stray = lab.spec.state_dir / "nodes" / CTL.name / "stray.img"
    with open(stray, "wb") as fh:
        fh.truncate(2**20)
    dev = _out(["losetup", "--find", "--show", str(stray)]).strip()
    assert dev.startswith("/dev/loop")
    assert any(item.startswith(f"loop device {dev} on {stray}") for item in lab.leftovers()), lab.leftovers()


def _out(argv: list[str]) -> str:
    return subprocess.run(argv, check=False, capture_output=True, text=True).stdout


def _host_leftovers(lab: Lab) -> list[str]:
    """Checked independently of Lab.leftovers(): processes, netns, links, mounts, NAT rules."""
    state = str(lab.spec.state_dir)
    left = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if state in cmd and stat[stat.rindex(")") + 2] != "Z":
                left.append(f"process {entry}: {cmd}")
    netns = _out(["ip", "netns", "list"])
    left += [f"netns {line}" for line in netns.splitlines() if f".{CLUSTER}." in line]
    links = json.loads(_out(["ip", "-j", "link", "show"]))
    left += [f"link {link['ifname']}" for link in links
             if CLUSTER in link.get("ifalias", "") or CLUSTER in link["ifname"]]
    left += [f"mount {line}" for line in Path("/proc/mounts").read_text().splitlines() if state in line]
    for table in ("nat", "filter"):
        rules = _out(["iptables", "-w", "-t", table, "-S"])
        left += [f"iptables {line}" for line in rules.splitlines() if CLUSTER in line or SUBNET in line]
    for hierarchy in Path("/sys/fs/cgroup").iterdir():
        left += [f"cgroup {d}" for d in hierarchy.rglob(f"clusterctl.{CLUSTER}.*")]
    addrs = _out(["ip", "-4", "addr"])
    left += ["host address " + GATEWAY] if f"{GATEWAY}/" in addrs else []
    left += [f"loop {line}" for line in _loops_of(lab.spec.state_dir)]
    return left


def test_down_leaves_nothing(lab):
    assert _host_leftovers(lab)  # sanity: the check sees the running lab
    t0 = time.monotonic()
    lab.down()
    _log(f"down() took {time.monotonic() - t0:.1f}s")
    assert _host_leftovers(lab) == []
    assert lab.leftovers() == []
    assert not (lab.spec.state_dir / "nodes").exists()  # the disk image with it
    assert [p.name for p in _pool(lab).glob("hello_*.deb")]  # the apt pool is per machine: kept
    lab.down()  # idempotent
    assert all(not s.running for s in lab.status())
