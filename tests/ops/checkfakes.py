"""Canned answers for `clusterctl check`'s command runner, shared by the check and straggler tests: a node probe's
output, nccl-tests' all_reduce_perf output, Prometheus' up query, and a Fake runner that answers what ops/check.py
runs on each node and on the controller."""

from __future__ import annotations

import json
import re

from clusterctl.ops import check as c
from clusterctl.ops.check import CommandResult


def probe_out(gpus=8, smi=None, driver="570.172.08", ib_active=0, ib_down=0, efa=0, mounts=None, nccl=False,
              nccl_mpi=True) -> str:
    lines = [f"gpu_devices={gpus}"]
    if smi is None:
        lines.append("nvidia_smi=absent")
    else:
        lines += ["nvidia_smi=present", f"driver={driver} ", f"smi_gpus={smi}"]
    lines += [f"port=mlx5_{i}/1 mlx5_core ACTIVE" for i in range(ib_active)]
    lines += [f"port=mlx5_{ib_active + i}/1 mlx5_core DOWN" for i in range(ib_down)]
    lines += [f"port=rdmap{i}s27/1 efa ACTIVE" for i in range(efa)]
    lines += [f"mount={mp} {'yes' if ok else 'no'}" for mp, ok in (mounts or {}).items()]
    lines.append(f"nccl_tests={'present' if nccl else 'absent'}")
    lines.append(f"nccl_mpi={1 if nccl and nccl_mpi else 0}")
    return "\n".join(lines) + "\n"


def all_reduce_output(ranks: int, busbw: float, nodes=("gpu001", "gpu002")) -> str:
    out = ["# nThread 1 nGpus 1 minBytes 268435456 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 "
           "agg iters: 1 validation: 0 graph: 0", "#", "# Using devices"]
    per_node = max(ranks // len(nodes), 1)
    for r in range(ranks):
        out.append(f"#  Rank {r:2d} Group  0 Pid  {4000 + r:5d} on {nodes[r // per_node % len(nodes)]:>10} device "
                   f" {r % per_node} [0x18] NVIDIA H100 80GB HBM3")
    out += ["#", "#                                                              out-of-place                       in-place",
            "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)"]
    for size, scale in ((268435456, 0.8), (1073741824, 0.9), (8589934592, 1.0)):
        bw = busbw * scale
        out.append(f"  {size:10d}  {size // 4:12d}     float     sum      -1  1234.5  {bw / 1.875:6.2f}  {bw:6.2f}    N/A"
                   f"  1230.1  {bw / 1.875:6.2f}  {bw + 1:6.2f}    N/A")
    out += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {busbw * 0.9:.3f}", "#"]
    return "\n".join(out) + "\n"


def prometheus_up(targets) -> str:
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"__name__": "up", "job": job, "node": node, "instance": f"{node}:9100"}, "value": [1.0, v]}
        for job, node, v in targets]}})


class Fake:
    """Answers the commands check.py runs. probes: node -> probe output (or a CommandResult)."""

    def __init__(self, plan, probes, sinfo=None, srun_hosts=None, nccl=None, prometheus=None, mpi="pmix"):
        self.plan, self.probes = plan, probes
        names = [n.name for n in plan.nodes if not n.cloud]
        self.sinfo = sinfo if sinfo is not None else "".join(f"{n}|idle|none\n" * 2 for n in names)
        self.srun_hosts = srun_hosts
        self.nccl = nccl
        self.prometheus = prometheus if prometheus is not None else prometheus_up(
            [("node", n.name, "1") for n in plan.all_nodes] + [("slurm", plan.controller.name, "1")])
        self.mpi = mpi
        self.commands = []

    def __call__(self, node, command, timeout):
        self.commands.append((node.name, command))
        if "gpu_devices=" in command:
            out = self.probes[node.name]
            return out if isinstance(out, CommandResult) else CommandResult(0, out)
        assert node is self.plan.controller, (node.name, command)
        if command.startswith("sinfo"):
            return CommandResult(0, self.sinfo)
        if command.startswith("srun --mpi=list"):
            return CommandResult(0, f"MPI plugin types are...\n\tnone\n\tcray_shasta\n\t{self.mpi}\n")
        if "all_reduce_perf" in command:
            return self.all_reduce(command)
        if " srun" in command:
            w = re.search(r" -w (\S+)", command).group(1)
            from clusterctl.core import hostlist
            hosts = self.srun_hosts if self.srun_hosts is not None else hostlist.expand(w)
            return CommandResult(0, "".join(h + "\n" for h in hosts))
        if command.startswith("curl"):
            return CommandResult(0, self.prometheus)
        if command.startswith("scontrol update"):
            return CommandResult(0, "")
        raise AssertionError(command)


    def all_reduce(self, command):
        """The pool-wide run answers self.nccl; runs on subsets (straggler ranking) answer the same bus bandwidth for
        their own ranks, or what self.nccl(names) says when it is a function."""
        from clusterctl.core import hostlist
        names = hostlist.expand(re.search(r" -w (\S+)", command).group(1))
        if callable(self.nccl):
            return CommandResult(0, self.nccl(names))
        if isinstance(self.nccl, CommandResult):
            return self.nccl
        res = c.parse_all_reduce(self.nccl)
        if res["ranks"] in (0, 1) or res["ranks"] == 8 * len(names) or res["busbw"] is None:
            return CommandResult(0, self.nccl)
        return CommandResult(0, all_reduce_output(8 * len(names), res["busbw"], nodes=tuple(names)))


def by(rows, check, node=None):
    found = [r for r in rows if r.check == check and (node is None or r.node == node)]
    assert found, (check, node, rows)
    return found[0] if node is not None else found


def healthy_onprem(nccl=True):
    return probe_out(smi=8, ib_active=8, mounts={"/lustre": True, "/mnt/nvme": True}, nccl=nccl)
