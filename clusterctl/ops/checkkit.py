"""The pieces of `clusterctl check` (rows, probes, runners, the per-node, Slurm and NCCL checks), shared by the
checks themselves (clusterctl.ops.check) and the straggler ranking (clusterctl.ops.stragglers)."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import asdict, dataclass
from typing import Callable

from clusterctl.core import hostlist
from clusterctl.catalog.fabrics import ALLREDUCE_MEASURED_GBS, FABRIC_LINKS
from clusterctl.catalog.instances import INSTANCE_TYPES
from clusterctl.compile.model import ClusterPlan, Node, PoolPlan
from clusterctl.render.monitoring import metrics as m
from clusterctl.core.providers import traits

PASS, FAIL, SKIP = "pass", "fail", "skip"
READY = {"idle", "mixed", "allocated", "completing"}
NCCL_TESTS = "/opt/nccl-tests/all_reduce_perf"
# The guide: NDR400 (50 GB/s line rate per port) reached 46 GB/s all-reduce; the same efficiency is assumed for a
# link the guide did not measure (derived, not measured: say so in the row).
LINK_EFFICIENCY = ALLREDUCE_MEASURED_GBS["infiniband-ndr"] / FABRIC_LINKS["ndr"].gbytes_per_port
DEFAULT_NCCL_TOLERANCE = 0.8  # pass at >= 80% of the expected bus bandwidth


@dataclass(frozen=True)
class CheckRow:
    check: str
    node: str  # a node, or a pool's hostlist for pool-wide checks
    status: str  # pass | fail | skip
    detail: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class CommandResult:
    rc: int
    stdout: str
    stderr: str = ""


Runner = Callable[[Node, str, float], CommandResult]


# --- what each node reports --------------------------------------------------------------------------------

def probe_command(mounts: tuple[str, ...]) -> str:
    """One POSIX sh script per node; prints key=value lines (parsed by parse_probe)."""
    ms = " ".join(shlex.quote(x) for x in mounts)
    return "\n".join([
        "echo gpu_devices=$(ls /dev 2>/dev/null | grep -c '^nvidia[0-9][0-9]*$')",
        "if command -v nvidia-smi >/dev/null 2>&1; then",
        "  echo nvidia_smi=present",
        "  echo driver=$(timeout 60 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>&1 | sort -u | tr '\\n' ' ')",
        "  echo smi_gpus=$(timeout 60 nvidia-smi -L 2>/dev/null | grep -c '^GPU ')",
        "else echo nvidia_smi=absent; fi",
        "for dev in /sys/class/infiniband/*; do [ -e \"$dev\" ] || continue",
        "  drv=$(basename \"$(readlink -f \"$dev/device/driver\" 2>/dev/null)\" 2>/dev/null)",
        "  for p in \"$dev\"/ports/*; do [ -r \"$p/state\" ] || continue",
        "    echo port=$(basename \"$dev\")/$(basename \"$p\") ${drv:-unknown} $(cut -d: -f2 \"$p/state\" | tr -d ' ')",
        "  done",
        "done",
        f"for mp in {ms}; do if mountpoint -q \"$mp\"; then echo mount=\"$mp\" yes; else echo mount=\"$mp\" no; fi; done" if ms else "true",
        f"if [ -x {NCCL_TESTS} ]; then echo nccl_tests=present; else echo nccl_tests=absent; fi",
        # An MPI build (libmpi linked) spans nodes through Slurm's PMIx; a build without MPI gets no --mpi option.
        f"echo nccl_mpi=$(ldd {NCCL_TESTS} 2>/dev/null | grep -c libmpi)",
    ])


@dataclass
class Probe:
    gpu_devices: int = 0
    nvidia_smi: bool = False
    drivers: tuple[str, ...] = ()
    smi_gpus: int | None = None
    ports: tuple[tuple[str, str, str], ...] = ()  # (device/port, driver, state)
    mounts: dict | None = None
    nccl_tests: bool = False
    nccl_mpi: bool = False

    @property
    def efa_devices(self) -> int:
        return len({p.split("/")[0] for p, drv, _ in self.ports if drv == "efa" or p.startswith("rdmap")})

    @property
    def ib_active(self) -> int:
        return sum(1 for p, drv, st in self.ports if st == "ACTIVE" and not (drv == "efa" or p.startswith("rdmap")))


def parse_probe(text: str) -> Probe:
    mounts: dict[str, bool] = {}
    p = Probe(mounts=mounts)
    ports = []
    for line in text.splitlines():
        key, _, value = line.strip().partition("=")
        if key == "gpu_devices":
            p.gpu_devices = int(value or 0)
        elif key == "nvidia_smi":
            p.nvidia_smi = value == "present"
        elif key == "driver":
            p.drivers = tuple(sorted(set(value.split())))
        elif key == "smi_gpus":
            p.smi_gpus = int(value or 0)
        elif key == "port":
            parts = value.split()
            if len(parts) == 3:
                ports.append((parts[0], parts[1], parts[2]))
        elif key == "mount":
            path, _, ok = value.rpartition(" ")
            mounts[path] = ok == "yes"
        elif key == "nccl_tests":
            p.nccl_tests = value == "present"
        elif key == "nccl_mpi":
            p.nccl_mpi = value not in ("", "0")
    p.ports = tuple(ports)
    return p


# --- expected figures -----------------------------------------------------------------------------------------

def expected_busbw_gbs(pool: PoolPlan) -> tuple[float | None, str]:
    """The all_reduce bus bandwidth (GB/s, nccl-tests' busbw) a pool's fabric should reach, and where it comes from.

    nccl-tests' busbw across nodes is bounded by the node's NICs: one ring per rail, so it scales with the rails.
    Per port: the guide's measured all-reduce figure where it has one (NDR400: 46 GB/s; 400GbE RoCEv2: 28 GB/s),
    else line rate x the guide's NDR efficiency (46/50)."""
    if pool.fabric == "efa":
        it = INSTANCE_TYPES.get(pool.instance_type or "")
        if it is None or not it.efa_gbps:
            return None, f"no EFA bandwidth in the catalog for {pool.instance_type}"
        line = it.efa_gbps / 8
        return line * LINK_EFFICIENCY, f"{it.efa_gbps} Gb/s EFA x {LINK_EFFICIENCY:.2f} (the guide's NDR efficiency; derived)"
    if pool.fabric_speed and pool.fabric_speed in FABRIC_LINKS:
        link = FABRIC_LINKS[pool.fabric_speed]
        ports = max(pool.rails, 1)
        family = "infiniband" if pool.fabric == "infiniband" else "ethernet"
        measured = ALLREDUCE_MEASURED_GBS.get(f"{family}-{link.key}")
        if measured is not None:
            return measured * ports, f"{ports} x {measured:g} GB/s ({link.note}, measured in the guide)"
        per = link.gbytes_per_port * LINK_EFFICIENCY
        return per * ports, f"{ports} x {per:.1f} GB/s ({link.note} line rate x {LINK_EFFICIENCY:.2f}; derived)"
    return None, f"no link speed for fabric {pool.fabric} in the spec"


_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s")


def parse_all_reduce(text: str) -> dict:
    """nccl-tests output -> ranks, busbw (GB/s, out-of-place, largest message), avg busbw.

    ranks counts DISTINCT rank numbers: an MPI build prints one line per rank from rank 0; a build without MPI run as
    many tasks prints "Rank 0" once per task (every task is its own 1-rank test, whose bus bandwidth is 0)."""
    ranks = len(set(re.findall(r"(?m)^#\s+Rank\s+(\d+)", text)))
    rows = [(int(mt.group(1)), float(mt.group(8))) for mt in map(_ROW.match, text.splitlines()) if mt]
    avg = re.search(r"Avg bus bandwidth\s*:\s*([\d.]+)", text)
    return {"ranks": ranks, "busbw": max(rows)[1] if rows else None, "size": max(rows)[0] if rows else None,
            "avg_busbw": float(avg.group(1)) if avg else None}


# NCCL_DEBUG=INFO lines naming the network NCCL chose: "Using network <name>" (NCCL 2.x init), rings/channels
# "via NET/<name>/<dev>", the plugin's "NET/OFI Selected Provider is efa", and the socket transport's own init line
# "NET/Socket : Using [0]eth0:..." (printed only when NCCL initialises sockets, i.e. plugin and IB both failed).
_NET_USING = re.compile(r"NCCL INFO Using network (\S[^\n]*?)\s*$", re.M)
_NET_VIA = re.compile(r"\bvia NET/([^/\n]+)/")
_NET_OFI = re.compile(r"NCCL INFO NET/OFI Selected Provider is ")
_NET_SOCKET_INIT = re.compile(r"NCCL INFO NET/Socket : Using ")
RDMA_FABRICS = ("efa", "infiniband", "roce")


def nccl_networks(text: str) -> set[str]:
    """The NCCL network(s) an NCCL_DEBUG=INFO log shows in use: "Socket", "IB", "Libfabric", "AWS Libfabric"."""
    nets = {m.strip() for m in _NET_USING.findall(text)} | {m.strip() for m in _NET_VIA.findall(text)}
    if _NET_OFI.search(text):
        nets.add("Libfabric")
    if _NET_SOCKET_INIT.search(text):
        nets.add("Socket")
    return nets


def network_verdict(fabric: str, text: str) -> str | None:
    """Why this NCCL log fails a pool on an RDMA fabric (it fell back to sockets), else None. A log naming no network
    (NCCL_DEBUG_FILE redirected it) proves nothing either way and is left to the bandwidth figure."""
    if fabric not in RDMA_FABRICS:
        return None
    if "Socket" in nccl_networks(text):
        plugin = "aws-ofi-nccl (NET/OFI) was not loaded" if fabric == "efa" else "NET/IB found no usable device"
        return (f"NCCL fell back to NET/Socket on a {fabric} fabric: {plugin}; the run is TCP, not RDMA "
                "(check LD_LIBRARY_PATH in the pool's NCCL env and the TaskProlog)")
    return None


# --- the checks -----------------------------------------------------------------------------------------------

def _safe(run: Runner, node: Node, command: str, timeout: float) -> CommandResult:
    try:
        return run(node, command, timeout)
    except Exception as e:  # a runner raising (no address, timeout) is a failed command, not a crash
        return CommandResult(255, "", str(e))


def _last_line(r: CommandResult) -> str:
    lines = (r.stderr or r.stdout).strip().splitlines()
    return lines[-1] if lines else f"rc={r.rc}"


def static_nodes(plan: ClusterPlan, pool: PoolPlan) -> list[Node]:
    return [n for n in plan.nodes_of(pool.name) if not n.cloud]


def _partition_for(plan: ClusterPlan, names: list[str]) -> str | None:
    return next((p.name for p in plan.partitions if set(names) <= set(p.nodes)), None)


def node_rows(plan: ClusterPlan, pool: PoolPlan, node: Node, probe: Probe) -> list[CheckRow]:
    rows = []
    h = pool.health
    if node.gpus:
        ok = probe.gpu_devices == node.gpus and (probe.smi_gpus is None or probe.smi_gpus == node.gpus)
        detail = f"{probe.gpu_devices} /dev/nvidiaN (expected {node.gpus})"
        if probe.smi_gpus is not None:
            detail += f", nvidia-smi lists {probe.smi_gpus}"
        rows.append(CheckRow("gpus", node.name, PASS if ok else FAIL, detail))
        want = plan.software.get("nvidia_driver")
        if node.gpu_model == "mi300x":
            rows.append(CheckRow("gpu driver", node.name, SKIP, "AMD GPUs: no nvidia-smi (ROCm not checked)"))
        elif traits(node).lab:  # any nvidia-smi there is a stand-in replaying a fixture
            rows.append(CheckRow("gpu driver", node.name, SKIP, "lab node: fake /dev/nvidiaN device files, no NVIDIA driver"))
        elif probe.nvidia_smi:
            ok = probe.drivers == (want,)
            got = ", ".join(probe.drivers) or "none reported"
            rows.append(CheckRow("gpu driver", node.name, PASS if ok else FAIL, f"driver {got} (spec: {want})"))
        else:
            rows.append(CheckRow("gpu driver", node.name, FAIL, f"nvidia-smi not found: NVIDIA driver {want} is not installed"))
    if h.efa_devices:
        ok = probe.efa_devices >= h.efa_devices
        rows.append(CheckRow("fabric ports", node.name, PASS if ok else FAIL,
                             f"{probe.efa_devices} EFA devices (expected {h.efa_devices})"))
    elif h.ib_ports:
        ok = probe.ib_active >= h.ib_ports
        down = [f"{p} {st}" for p, drv, st in probe.ports if st != "ACTIVE"]
        rows.append(CheckRow("fabric ports", node.name, PASS if ok else FAIL,
                             f"{probe.ib_active} active {pool.fabric} ports (expected {h.ib_ports})"
                             + (f"; not active: {', '.join(down)}" if down and not ok else "")))
    if h.mounts:
        missing = [mp for mp in h.mounts if not (probe.mounts or {}).get(mp)]
        rows.append(CheckRow("mounts", node.name, FAIL if missing else PASS,
                             f"not mounted: {' '.join(missing)}" if missing else " ".join(h.mounts)))
    return rows


def pool_skip_rows(pool: PoolPlan, names: list[str]) -> list[CheckRow]:
    """One SKIP row per pool for checks its nodes do not need (keeps a 64-node table readable)."""
    where = hostlist.compress(names)
    rows = []
    if not (pool.health.efa_devices or pool.health.ib_ports):
        rows.append(CheckRow("fabric ports", where, SKIP, f"pool {pool.name} ({pool.fabric}) expects no IB/EFA ports"))
    if not pool.health.mounts:
        rows.append(CheckRow("mounts", where, SKIP, f"pool {pool.name} requires no mounts"))
    if not pool.gpus_per_node:
        rows.append(CheckRow("gpus", where, SKIP, f"pool {pool.name} has no GPUs"))
    return rows


def slurm_state_rows(plan: ClusterPlan, run: Runner, names: list[str]) -> list[CheckRow]:
    if not names:
        return []
    r = _safe(run, plan.controller, f"sinfo -h -N -o '%N|%T|%E' -n {shlex.quote(hostlist.compress(names))}", 60)
    if r.rc != 0:
        return [CheckRow("slurm state", hostlist.compress(names), FAIL, f"sinfo failed: {_last_line(r)}")]
    seen: dict[str, tuple[str, str]] = {}
    for line in r.stdout.splitlines():
        parts = line.strip().split("|", 2)
        if len(parts) == 3:
            seen.setdefault(parts[0], (parts[1].lower(), parts[2]))
    rows = []
    for n in names:
        if n not in seen:
            rows.append(CheckRow("slurm state", n, FAIL, "not registered with slurmctld"))
            continue
        raw, reason = seen[n]
        state = raw.rstrip("*~#!%$@^-+")
        ok = state in READY and not raw.endswith("*")
        detail = raw + ("" if reason.strip().lower() in ("", "none") else f": {reason.strip()}")
        rows.append(CheckRow("slurm state", n, PASS if ok else FAIL, detail))
    return rows


def slurm_job_row(plan: ClusterPlan, pool: PoolPlan, run: Runner, names: list[str]) -> CheckRow:
    where = hostlist.compress(names)
    part = _partition_for(plan, names)
    gres = f" --gres=gpu:{pool.gpus_per_node}" if pool.gpus_per_node else ""
    cmd = (f"timeout 300 srun{' -p ' + part if part else ''} -w {where} -N {len(names)}{gres} "
           f"--immediate=120 --time=5 hostname")
    r = _safe(run, plan.controller, cmd, 330)
    if r.rc != 0:
        return CheckRow("slurm job", where, FAIL, f"`{cmd}` failed: {_last_line(r)}")
    ran = sorted(set(r.stdout.split()))
    ok = ran == sorted(names)
    return CheckRow("slurm job", where, PASS if ok else FAIL,
                    f"srun -N {len(names)}{gres} ran on {hostlist.compress(ran) if ran else 'no node'}")


def nccl_skip(plan: ClusterPlan, pool: PoolPlan, nodes: list[Node], probes: dict[str, Probe | None]) -> str | None:
    """Why NCCL tests cannot run across these nodes, or None when they can."""
    names = [n.name for n in nodes]
    if not pool.gpus_per_node:
        return f"pool {pool.name} has no GPUs"
    if pool.gpu_model == "mi300x":
        return "AMD GPUs: RCCL tests are not part of this check"
    if len(nodes) < 2:
        return f"pool {pool.name} has {len(nodes)} static node(s): crossing the fabric needs 2"
    unreachable = [n for n in names if probes.get(n) is None]
    if unreachable:
        return f"nodes not reachable: {hostlist.compress(unreachable)}"
    reached = {n: p for n, p in probes.items() if p is not None}
    no_driver = [n for n in names if not reached[n].nvidia_smi]
    if no_driver:
        why = ("lab nodes with fake /dev/nvidiaN device files, no GPUs or CUDA for NCCL"
               if all(traits(n).lab for n in nodes) else "no NVIDIA driver (nvidia-smi)")
        return f"{why}: {hostlist.compress(no_driver)}"
    no_tests = [n for n in names if not reached[n].nccl_tests]
    if no_tests:
        return f"{NCCL_TESTS} missing on {hostlist.compress(no_tests)} (the nccl role builds it where CUDA is)"
    return None


def tasks_per_node(pool: PoolPlan, nodes: list[Node]) -> tuple[int, int]:
    """(tasks per node, GPUs per task): one task per GPU where the nodes have a CPU for each, else fewer tasks each
    driving several GPUs (nccl-tests -g), so the ranks are the same and Slurm can place the job."""
    g, cpus = pool.gpus_per_node, min((n.cpus for n in nodes), default=1)
    tasks = max(t for t in range(1, g + 1) if g % t == 0 and (t <= cpus or t == 1))
    return tasks, g // tasks


def run_all_reduce(plan: ClusterPlan, pool: PoolPlan, run: Runner, nodes: list[Node], mpi_opt: str) -> tuple[dict | None, str]:
    """all_reduce_perf over `nodes` (one rank per GPU) -> (parsed figures, "") or (None, why it failed)."""
    names = [n.name for n in nodes]
    where = hostlist.compress(names)
    part = _partition_for(plan, names)
    g = pool.gpus_per_node
    tasks, per_task = tasks_per_node(pool, nodes)
    # NCCL_DEBUG=INFO (init and net only) so the log names the network: srun passes the caller's environment on
    # (--export=ALL, its default) and the TaskProlog leaves a NCCL_DEBUG the job already has alone.
    cmd = (f"NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET timeout 900 srun{' -p ' + part if part else ''} -w {where} "
           f"-N {len(names)} --ntasks-per-node={tasks} --gres=gpu:{g}{mpi_opt} --immediate=120 --time=15 "
           f"{NCCL_TESTS} -b 256M -e 8G -f 2 -g {per_task} -c 0 -n 20")
    r = _safe(run, plan.controller, cmd, 930)
    if r.rc != 0:
        return None, f"all_reduce_perf failed: {_last_line(r)}"
    res = parse_all_reduce(r.stdout)
    want_ranks = len(names) * g
    if res["ranks"] != want_ranks:
        return None, (f"all_reduce_perf ran {res['ranks']} rank(s) per test instead of {want_ranks}: "
                      "nccl-tests must be built with MPI=1 to span nodes")
    if res["busbw"] is None:
        return None, "no bandwidth figures in all_reduce_perf's output"
    fell_back = network_verdict(pool.fabric, r.stdout)
    if fell_back:
        return None, fell_back
    res["networks"] = sorted(nccl_networks(r.stdout))
    return res, ""


def mpi_option(plan: ClusterPlan, run: Runner, nodes: list[Node], probes: dict[str, Probe | None]) -> str:
    """--mpi=pmix for an MPI build of nccl-tests where Slurm has PMIx; nothing otherwise."""
    if not all((p := probes[n.name]) is not None and p.nccl_mpi for n in nodes):
        return ""
    mpi = _safe(run, plan.controller, "srun --mpi=list 2>&1", 30)
    return " --mpi=pmix" if "pmix" in mpi.stdout else ""


def nccl_row(plan: ClusterPlan, pool: PoolPlan, run: Runner, nodes: list[Node], probes: dict[str, Probe | None],
             tolerance: float) -> CheckRow:
    names = [n.name for n in nodes]
    where = hostlist.compress(names) if names else pool.name
    name = "nccl all_reduce"
    skip = nccl_skip(plan, pool, nodes, probes)
    if skip:
        return CheckRow(name, where, SKIP, skip)
    res, error = run_all_reduce(plan, pool, run, nodes, mpi_option(plan, run, nodes, probes))
    if res is None:
        return CheckRow(name, where, FAIL, error)
    expected, source = expected_busbw_gbs(pool)
    got = f"bus bandwidth {res['busbw']:.1f} GB/s at {res['size'] / 2**30:g} GiB over {len(names) * pool.gpus_per_node} GPUs"
    if res.get("networks"):
        got += f" via NET/{', NET/'.join(res['networks'])}"
    if expected is None:
        return CheckRow(name, where, PASS, f"{got}; no reference figure ({source})")
    ok = res["busbw"] >= tolerance * expected
    return CheckRow(name, where, PASS if ok else FAIL,
                    f"{got}; expected {expected:.0f} GB/s = {source}; pass at >= {tolerance:.0%}")


def exporters_row(plan: ClusterPlan, run: Runner) -> CheckRow:
    ctl = plan.controller.name
    if not plan.monitoring.get("enabled"):
        return CheckRow("exporters", ctl, SKIP, "monitoring is disabled in the spec")
    r = _safe(run, plan.controller, f"curl -sf -m 10 'http://localhost:{m.PROMETHEUS_PORT}/api/v1/query?query=up'", 30)
    try:
        result = json.loads(r.stdout)["data"]["result"]
    except (ValueError, KeyError, TypeError):
        return CheckRow("exporters", ctl, FAIL, f"Prometheus does not answer on :{m.PROMETHEUS_PORT}: {_last_line(r)}")
    # Series without a node label belong to targets of an earlier config (stale within 5 minutes): ignore them.
    targets = [(s["metric"].get("job", "?"), s["metric"]["node"], s["value"][1]) for s in result if "node" in s["metric"]]
    down = sorted(f"{job}@{node}" for job, node, v in targets if v != "1")
    if not targets:
        return CheckRow("exporters", ctl, FAIL, "Prometheus has no scrape targets")
    if down:
        return CheckRow("exporters", ctl, FAIL, f"down: {', '.join(down)}")
    jobs = sorted({job for job, _, _ in targets})
    return CheckRow("exporters", ctl, PASS, f"{len(targets)} targets up ({', '.join(jobs)})")
