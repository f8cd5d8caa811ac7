"""`clusterctl status`: each node of the applied cluster with its Slurm state (and, for lab nodes, whether the
container runs)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape

from clusterctl.ops.access import access_for
from clusterctl.engines.ssh.remote import RemoteError
from clusterctl.state import ClusterState

if TYPE_CHECKING:
    from rich.console import Console

    from clusterctl.compile.model import ClusterPlan
    from clusterctl.ops.access import Access
    from clusterctl.render.compiled import Compiled


def slurm_nodes(access: Access, plan: ClusterPlan) -> tuple[dict[str, dict], str | None]:
    try:
        r = access.remote(plan.controller).run("sinfo -h -N -o '%N|%T|%G|%E'", timeout=30)
    except RemoteError as e:
        return {}, str(e)
    out = {}
    for line in r.stdout.splitlines():
        name, st, gres, reason = (line.split("|") + ["", "", "", ""])[:4]
        out[name] = {"state": st, "gres": gres, "reason": "" if reason == "none" else reason}
    return out, None


def status(compiled: Compiled, console: Console | None = None) -> dict:
    state = ClusterState.for_spec(compiled.spec)
    plan = compiled.plan
    applied = bool(state.applied_build())
    access = access_for(plan, state, lambda m: None)
    lab = {s.name: s for s in access.lab.status()} if access.lab is not None else {}
    slurm, error = slurm_nodes(access, plan)
    nodes = []
    for n in plan.all_nodes:
        row = {"name": n.name, "role": n.role, "pool": n.pool, "address": n.address, "gpus": n.gpus}
        if n.name in lab:
            row["container"] = "running" if lab[n.name].running else "stopped"
        row.update(slurm.get(n.name, {"state": "-" if n.role == "controller" else "unknown", "gres": "", "reason": ""}))
        nodes.append(row)
    return {"cluster": plan.name, "applied": applied, "controller_error": error, "nodes": nodes}


def print_status(console: Console, info: dict) -> None:
    from rich.table import Table

    t = Table(title=f"cluster {info['cluster']}" + ("" if info["applied"] else " (not applied yet)"))
    cols = ["node", "role", "pool", "address", "GPUs", "container", "slurm state", "reason"]
    for c in cols:
        t.add_column(c)
    for n in info["nodes"]:
        t.add_row(n["name"], n["role"], n["pool"] or "", n["address"] or "(cloud)", str(n["gpus"]), n.get("container", ""),
                  n["state"], n["reason"])
    console.print(t)
    if info["controller_error"]:
        console.print(f"[yellow]controller not answering:[/] {escape(info['controller_error'])}", highlight=False)
