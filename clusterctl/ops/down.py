"""`clusterctl down`: lab nodes removed completely; owned hosts drained and the daemons clusterctl started stopped
(playbooks/down.yml), nothing else touched; aws: burst instances terminated, then exactly the cluster's stack
destroyed. Refuses while jobs run unless forced."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from clusterctl.engines.ansible.progress import Progress, print_recap
from clusterctl.engines.provider import Context, providers_for
from clusterctl.render.compiled import Compiled
from clusterctl.engines.ansible.runner import PlaybookRun, run_playbook
from clusterctl.ops.access import access_for, controller_running
from clusterctl.ops.phases import Phases
from clusterctl.compile.model import ClusterPlan
from clusterctl.core.errors import ClusterctlError
from clusterctl.engines.ssh.remote import RemoteError
from clusterctl.render import layout
from clusterctl.state import ClusterState
from clusterctl.core.providers import traits

if TYPE_CHECKING:
    from rich.console import Console

    from clusterctl.ops.access import Access


class JobsRunning(ClusterctlError):
    pass


def plan_from_build(build: dict[str, str]) -> dict:
    return json.loads(build[layout.PLAN_JSON])


def running_jobs(access: Access, plan: ClusterPlan) -> list[str]:
    try:
        r = access.remote(plan.controller).run("squeue -h -t RUNNING,COMPLETING -o '%i %u %j %N'", timeout=30)
    except RemoteError:
        return []  # no controller answering: nothing can be running through it
    return [ln for ln in r.stdout.splitlines() if ln.strip()]


def down(compiled: Compiled, console: Console, force: bool = False, quiet: bool = False) -> dict:
    from clusterctl.ops.up import check_tools

    providers = providers_for(compiled.spec)
    check_tools(providers)  # e.g. a stack can only be destroyed through Pulumi: say so before draining anything
    state = ClusterState.for_spec(compiled.spec)
    with state.lock("down"):
        plan = compiled.plan
        say = (lambda m: None) if quiet else (lambda m: console.print(f"  {m}", markup=False))
        access = access_for(plan, state, say, providers)
        jobs = running_jobs(access, plan) if controller_running(access, plan) else []
        if jobs and not force:
            raise JobsRunning(f"{len(jobs)} job(s) running on cluster {plan.name} (first: {jobs[0]}); "
                              "wait for them or pass --force")
        result: dict = {"cluster": plan.name, "jobs_killed": len(jobs) if force else 0}
        phases = Phases()
        # Owned and rented nodes are drained and their Slurm stopped first (through the last build's inventory,
        # which holds the cloud nodes' addresses); for rented ones a failure here does not stop the destroy.
        remote = [n for n in plan.all_nodes if not traits(n).lab]
        if remote:
            build = state.dir / "build"
            if not (build / layout.INVENTORY).exists() and state.applied_build():
                # A runner that did not run the `up` (a shared state backend): the applied build is that build.
                from clusterctl.render.write import write_build

                write_build(state.applied_build(), build)
            if not (build / layout.INVENTORY).exists():
                raise ClusterctlError(f"no build for {plan.name} in {state.dir} and none applied in "
                                      f"{state.backend.url}: was it ever brought up?")
            with phases.phase("stop slurm"), Progress(console, f"stopping Slurm on {plan.name}", quiet=quiet) as progress:
                r = run_playbook(PlaybookRun(build_dir=build, playbook="down.yml", ssh=access.ssh), progress.event)
            if not quiet:
                print_recap(console, r)
            result["owned"] = r.to_dict()
            # Rented nodes go away with their stack whatever their Slurm said; owned ones must stop cleanly.
            if not r.ok and not any(traits(n).rented for n in remote):
                raise ClusterctlError(f"stopping Slurm failed on {len(r.failures)} host(s); nothing else was changed")
        for p in providers:  # what clusterctl created goes: burst instances and the stack, lab containers
            with phases.phase("teardown"):
                p.teardown(Context(plan, state, console, quiet, say), access.identities.get(p.name), result)
        state.forget_applied()
        result["phases"] = phases.to_dict()
        return result

