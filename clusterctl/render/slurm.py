"""slurm.conf, gres.conf, cgroup.conf and topology.conf from the plan."""

from __future__ import annotations

from itertools import groupby

from clusterctl import hostlist
from clusterctl.compile.model import ClusterPlan, Node
from clusterctl.render import layout
from clusterctl.render.templates import render_template


def _node_attrs(n: Node) -> str:
    attrs = [f"CPUs={n.cpus}"]
    if n.memory_mb:
        attrs.append(f"RealMemory={n.memory_mb}")
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
    for _, group in groupby(cloud, key=lambda n: n.pool):
        group = list(group)
        lines.append(f"NodeName={hostlist.compress([n.name for n in group])} {_node_attrs(group[0])} State=CLOUD")
    return lines


def partition_lines(plan: ClusterPlan) -> list[str]:
    out = []
    for p in plan.partitions:
        attrs = [f"PartitionName={p.name}", f"Nodes={hostlist.compress(list(p.nodes))}" if p.nodes else "Nodes="]
        if p.default:
            attrs.append("Default=YES")
        attrs += [f"MaxTime={p.max_time}", f"PriorityTier={p.priority_tier}"]
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
        files = "/dev/nvidia0" if n.gpus == 1 else f"/dev/nvidia[0-{n.gpus - 1}]"
        typ = f" Type={n.gres_type}" if n.gres_type else ""
        lines.append(f"NodeName={hostlist.compress([x.name for x in nodes])} Name=gpu{typ} File={files}")
    return lines


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


def render_slurm(plan: ClusterPlan) -> dict[str, str]:
    cloud = [n for n in plan.nodes if n.cloud]
    owned = [n.name for n in plan.nodes if not n.cloud]
    ctx = dict(
        plan=plan,
        slurm_version="%d.%02d" % plan.slurm.version,
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
    }
    if runs_slurmdbd(plan):
        files[layout.SLURMDBD_CONF] = render_template("slurm/slurmdbd.conf.j2", plan=plan, slurm_version=ctx["slurm_version"])
    return files


def runs_slurmdbd(plan: ClusterPlan) -> bool:
    """Accounting on, and no other slurmdbd host named: the controller runs slurmdbd."""
    return plan.slurm.accounting and plan.slurm.accounting_host in (None, plan.controller.name)
