"""slurm.conf, gres.conf, cgroup.conf and topology.conf from the plan, and the slurmd drop-in of configless nodes.

Configless Slurm (SchedMD, configless_slurm.html; 20.02+): the controller alone holds the files; slurmctld serves them
(`SlurmctldParameters=enable_configless`) to every slurmd started with `--conf-server HOST:PORT`, which caches them
under SlurmdSpoolDir/conf-cache (linked from /run/slurm/conf, where 22.05's client commands look when
/etc/slurm/slurm.conf is absent). `scontrol reconfigure` on the controller sends changed files to every node.
"""

from __future__ import annotations

from itertools import groupby

from clusterctl.core import hostlist
from clusterctl.compile.model import ClusterPlan, Node
from clusterctl.render import layout
from clusterctl.render.templates import render_template


def _node_attrs(n: Node) -> str:
    attrs = [f"CPUs={n.cpus}"]
    if n.sockets:
        attrs.append(f"Sockets={n.sockets} CoresPerSocket={n.cores_per_socket} ThreadsPerCore={n.threads_per_core}")
    if n.memory_mb:
        attrs.append(f"RealMemory={n.memory_mb}")
    if n.mem_spec_mb:
        attrs.append(f"MemSpecLimit={n.mem_spec_mb}")
    if n.gpus:
        attrs.append(f"Gres=gpu:{n.gres_type}:{n.gpus}" if n.gres_type else f"Gres=gpu:{n.gpus}")
    if n.features:
        attrs.append("Features=" + ",".join(n.features))
    return " ".join(attrs)


def node_lines(plan: ClusterPlan) -> list[str]:
    """One line per addressed node (so a plan diff names the node); cloud nodes grouped per pool, State=CLOUD."""
    lines = []
    for n in plan.nodes:
        if n.cloud:
            continue
        addr = f" NodeAddr={n.address}" if n.address else ""
        lines.append(f"NodeName={n.name}{addr} {_node_attrs(n)} State=UNKNOWN")
    cloud = [n for n in plan.nodes if n.cloud]
    for _, grouped in groupby(cloud, key=lambda n: n.pool):
        group = list(grouped)
        lines.append(f"NodeName={hostlist.compress([n.name for n in group])} {_node_attrs(group[0])} State=CLOUD")
    return lines


def partition_lines(plan: ClusterPlan) -> list[str]:
    out = []
    for p in plan.partitions:
        attrs = [f"PartitionName={p.name}", f"Nodes={hostlist.compress(list(p.nodes))}" if p.nodes else "Nodes="]
        if p.default:
            attrs.append("Default=YES")
        # PriorityJobFactor feeds the multifactor partition weight; PriorityTier orders scheduling between tiers.
        attrs += [f"MaxTime={p.max_time}", f"PriorityTier={p.priority_tier}", f"PriorityJobFactor={p.priority_tier}"]
        if p.def_mem_per_gpu:
            attrs.append(f"DefMemPerGPU={p.def_mem_per_gpu}")
        if plan.slurm.preemption:
            attrs.append(f"PreemptMode={p.preempt_mode}")
            if p.grace_time:
                attrs.append(f"GraceTime={p.grace_time}")
        attrs.append("State=UP")
        out.append(" ".join(attrs))
    return out


def gres_lines(plan: ClusterPlan) -> list[str]:
    lines = []
    for pool in plan.pools:
        nodes = plan.nodes_of(pool.name)
        if not nodes or not pool.gpus_per_node:
            continue
        n = nodes[0]
        names = hostlist.compress([x.name for x in nodes])
        typ = f" Type={n.gres_type}" if n.gres_type else ""
        for first, last, cores in _gpu_groups(n.gpus, pool.gpu_cores):
            files = f"/dev/nvidia{first}" if first == last else f"/dev/nvidia[{first}-{last}]"
            lines.append(f"NodeName={names} Name=gpu{typ} File={files}" + (f" Cores={cores}" if cores else ""))
    return lines


def _gpu_groups(gpus: int, cores: tuple[str, ...]) -> list[tuple[int, int, str]]:
    """(first, last, cores) runs of GPU indexes sharing one socket; one run without cores when the layout is unknown."""
    if not cores:
        return [(0, gpus - 1, "")]
    runs: list[tuple[int, int, str]] = []
    for i, c in enumerate(cores):
        if runs and runs[-1][2] == c:
            runs[-1] = (runs[-1][0], i, c)
        else:
            runs.append((i, i, c))
    return runs


def switch_lines(plan: ClusterPlan) -> list[str]:
    out = []
    for s in plan.switches:
        if s.nodes:
            out.append(f"SwitchName={s.name} Nodes={hostlist.compress(list(s.nodes))}")
        else:
            out.append(f"SwitchName={s.name} Switches={','.join(s.switches)}")
    return out


def preempt_mode(plan: ClusterPlan) -> str:
    # Suspending preempted jobs needs gang scheduling alongside (slurm.conf(5), PreemptMode).
    return "SUSPEND,GANG" if plan.slurm.preempt_mode == "SUSPEND" else plan.slurm.preempt_mode


def slurmctld_parameters(plan: ClusterPlan) -> str:
    """One SlurmctldParameters value (the key may appear once): configless always, the power-saving ones with cloud nodes."""
    params = ["enable_configless"]
    if any(n.cloud for n in plan.nodes):
        params.append("idle_on_node_suspend")
        if plan.slurm.version < (23, 11):
            params.append("cloud_reg_addrs")  # 23.11 made it the default behaviour and dropped the flag
    return ",".join(params)


def conf_server(plan: ClusterPlan) -> str:
    """What slurmd's --conf-server names: the controller's address where the plan has one (no DNS needed at boot)."""
    return f"{plan.controller.address or plan.controller.name}:{layout.SLURMCTLD_PORT}"


def render_slurm(plan: ClusterPlan) -> dict[str, str]:
    cloud = [n for n in plan.nodes if n.cloud]
    owned = [n.name for n in plan.nodes if not n.cloud]
    ctx = dict(
        plan=plan,
        slurm_version="%d.%02d" % plan.slurm.version,
        slurmctld_port=layout.SLURMCTLD_PORT,
        slurmctld_parameters=slurmctld_parameters(plan),
        # 23.11 removed both (NoAddrCache is refused as defunct; cloud_reg_addrs became the default behaviour).
        before_23_11=plan.slurm.version < (23, 11),
        node_lines=node_lines(plan),
        partition_lines=partition_lines(plan),
        preempt_mode=preempt_mode(plan),
        health_program=layout.HEALTH_PROGRAM,
        task_prolog=layout.TASK_PROLOG,
        prolog=layout.PROLOG,
        burst_resume=layout.BURST_RESUME,
        burst_suspend=layout.BURST_SUSPEND,
        burst_resume_fail=layout.BURST_RESUME_FAIL,
        cloud_nodes=cloud,
        suspend_exc_nodes=hostlist.compress(owned) if owned else "",
    )
    files = {
        layout.SLURM_CONF: render_template("slurm/slurm.conf.j2", **ctx),
        layout.GRES_CONF: render_template("slurm/gres.conf.j2", plan=plan, gres_lines=gres_lines(plan)),
        layout.CGROUP_CONF: render_template("slurm/cgroup.conf.j2", plan=plan),
        layout.TOPOLOGY_CONF: render_template("slurm/topology.conf.j2", plan=plan, switch_lines=switch_lines(plan)),
        layout.SLURMD_DROPIN: render_template("slurm/slurmd-configless.conf.j2", plan=plan, conf_server=conf_server(plan),
                                              served=layout.CONFIGLESS_FILES),
    }
    if plan.slurm.accounts:
        files[layout.SLURM_ACCOUNTS] = "".join(
            f"{name} {share} {','.join(users) or '-'}\n" for name, share, users in plan.slurm.accounts)
    if runs_slurmdbd(plan):
        files[layout.SLURMDBD_CONF] = render_template("slurm/slurmdbd.conf.j2", plan=plan, slurm_version=ctx["slurm_version"])
    return files


def runs_slurmdbd(plan: ClusterPlan) -> bool:
    """Accounting on, and no other slurmdbd host named: the controller runs slurmdbd."""
    return plan.slurm.accounting and plan.slurm.accounting_host in (None, plan.controller.name)
