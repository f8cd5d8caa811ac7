"""cloud_up / cloud_down: the AWS part of `clusterctl up` and `clusterctl down`.

Order of cloud_up, each step only after the previous one passed:
  require the pulumi CLI (and the aws plugin)  -> nothing touched yet, not even the state dir
  preflight with boto3                          -> account checks; errors stop here, nothing created
  recorded node images                          -> a pool with one boots it; the others boot their spec image
  adopt replacements                            -> static spot nodes the sync timer replaced (engines/aws/adopt.py)
  preview                                       -> what the stack will create/update/delete
  confirm callback                              -> the user (or --yes) agrees to exactly that preview
  up                                            -> resources created
  outputs                                       -> node addresses / instance ids for the inventory
"""

from __future__ import annotations

import base64
import os
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from clusterctl.engines.aws.errors import NotConfirmed, PreflightFailed
from clusterctl.compile.model import ClusterPlan
from clusterctl.core.findings import Finding, Level
from clusterctl.state import ClusterState

if TYPE_CHECKING:
    from pulumi import automation as auto

    from clusterctl.engines.aws.adopt import Adopted
    from rich.console import Console

    from clusterctl.engines.aws.automation import StackSettings
    from clusterctl.engines.aws.preflight import AwsApi

ADMIN_CIDR_ENV = "CLUSTERCTL_ADMIN_CIDR"


@dataclass
class CloudOutputs:
    """What the stack reports back, shaped for the rest of clusterctl."""

    addresses: dict[str, str] = field(default_factory=dict)  # node name -> private IP (feeds compile_plan(addresses=))
    instance_ids: dict[str, str] = field(default_factory=dict)  # node name (and the controller) -> instance id
    controller: dict | None = None  # {name, private_ip, public_ip, instance_id} for an aws controller
    fsx_sources: dict[str, str] = field(default_factory=dict)  # mount point -> "<dns>@tcp:/<mountname>"
    raw: dict = field(default_factory=dict)

    @classmethod
    def from_stack(cls, out: dict) -> "CloudOutputs":
        nodes = out.get("nodes") or {}
        res = cls(
            addresses={n: v["private_ip"] for n, v in nodes.items() if v.get("private_ip")},
            instance_ids={n: v["instance_id"] for n, v in nodes.items()},
            controller=out.get("controller"),
            fsx_sources={mp: f"{v['dns_name']}@tcp:/{v['mount_name']}" for mp, v in (out.get("fsx") or {}).items()},
            raw=out,
        )
        if res.controller:
            res.instance_ids[res.controller["name"]] = res.controller["instance_id"]
        return res


@dataclass
class CloudUpResult:
    findings: list[Finding]
    preview: object  # automation.Preview
    outputs: CloudOutputs
    adopted: dict[str, Adopted] = field(default_factory=dict)  # static spot nodes: the sync timer's replacements


def ensure_ssh_key(state: ClusterState) -> tuple[Path, str]:
    """The cluster's admin SSH key for cloud nodes (private key path, public key line); made once."""
    key = state.secret_file("aws_admin_ed25519", lambda: _new_ssh_key(state.cluster))
    pub = subprocess.run(["ssh-keygen", "-y", "-f", str(key)], check=True, capture_output=True, text=True).stdout
    return key, " ".join(pub.split()[:2] + [f"clusterctl-{state.cluster}"])


def _new_ssh_key(cluster: str) -> bytes:
    """A fresh ed25519 private key, made in a private directory (the state keeps it; the public half is derived)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="clusterctl-keygen-") as d:
        key = Path(d) / "key"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"clusterctl-{cluster}", "-f", str(key)],
                       check=True, capture_output=True)
        return key.read_bytes()


def _munge_b64(state: ClusterState) -> str:
    from clusterctl.state.secrets import ensure_munge_key

    return base64.b64encode(ensure_munge_key(state).read_bytes()).decode()


@contextmanager
def _progress(console: Console | None, title: str, quiet: bool, on_event: Callable | None) -> Iterator[Callable | None]:
    """Yields the on_event callback for one Pulumi operation: the live view (on a console) plus the caller's."""
    if console is None:
        yield on_event
        return
    from clusterctl.engines.aws.progress import PulumiProgress

    with PulumiProgress(console, title, quiet=quiet) as view:
        def both(ev: auto.EngineEvent) -> None:
            view.event(ev)
            if on_event is not None:
                on_event(ev)
        yield both


def stack_settings(plan: ClusterPlan, state: ClusterState, admin_cidr: str | None = None) -> StackSettings:
    """The stack config of this build plus the runtime settings (admin key, munge key, admin CIDR, cluster id).
    Pools with a node image recorded in the state boot it (up, plan previews and drift all read the same records)."""
    from clusterctl.state.secrets import ensure_cluster_id
    from clusterctl.engines.aws import automation
    from clusterctl.engines.aws.image import recorded_images, with_recorded_images
    from clusterctl.render.cloud import cloud_config

    _, public_key = ensure_ssh_key(state)
    images = recorded_images(state.backend, [p.name for p in plan.aws_pools])
    config = cloud_config(plan)
    assert config is not None  # the aws engine runs only for plans with aws pools
    if images:
        config = with_recorded_images(config, images)
    return automation.StackSettings(
        cluster=plan.name, config=config, backend=automation.backend_url(state, plan.pulumi_backend),
        munge_key_b64=_munge_b64(state), cluster_id=ensure_cluster_id(state), ssh_public_key=public_key,
        admin_cidr=admin_cidr or os.environ.get(ADMIN_CIDR_ENV) or None)


def cloud_up(plan: ClusterPlan, state: ClusterState, *, confirm: Callable[[object], bool],
             console: Console | None = None, quiet: bool = False, on_event: Callable | None = None, api: AwsApi | None = None,
             admin_cidr: str | None = None, on_findings: Callable[[list[Finding]], None] | None = None) -> CloudUpResult:
    """Create or update the cluster's AWS resources; see the module docstring for the order.

    confirm(preview) -> bool decides after the preview (pass `lambda p: True` for --yes). Raises PulumiCliMissing,
    PreflightFailed (findings attached), NotConfirmed or CloudError; in the first two cases nothing was touched.
    """
    from clusterctl.engines.aws import automation
    from clusterctl.engines.aws.preflight import AwsApi, run_preflight

    pulumi_bin = automation.require_pulumi_cli()
    automation.require_aws_plugin(pulumi_bin)

    findings = run_preflight(plan, api)
    if on_findings is not None:
        on_findings(findings)
    errors = [f for f in findings if f.level is Level.ERROR]
    if errors:
        raise PreflightFailed(f"the AWS account cannot host {plan.name} as specified ({len(errors)} error(s)); nothing was created",
                              findings)

    settings = stack_settings(plan, state, admin_cidr)
    stack = automation.open_stack(state, settings)
    api = api or AwsApi()

    def adopt() -> dict[str, Adopted]:
        got = adopt_replacements(plan, state, stack, api, settings.cluster_id)
        if console is not None and not quiet:
            for node, a in sorted(got.items()):
                console.print(f"{node}: adopted {a.instance_id}, the sync timer's replacement of {a.recorded} "
                              f"(taken back by EC2)")
        return got

    adopted = adopt()  # before the preview: it shows no create for a node that has its replacement
    with _progress(console, f"previewing {plan.name} (aws)", quiet, on_event) as cb:
        preview = automation.preview(stack, on_event=cb)
    if not confirm(preview):
        what = " (but the instance ids of replaced nodes)" if adopted else ""
        raise NotConfirmed(f"not confirmed; nothing was changed in the {plan.name} stack{what}")
    adopted.update(adopt())  # a replacement launched while the user read the preview: adopted, never doubled
    with _progress(console, f"creating {plan.name} (aws)", quiet, on_event) as cb:
        out = automation.up(stack, on_event=cb)
    return CloudUpResult(findings, preview, CloudOutputs.from_stack(out), adopted)


def adopt_replacements(plan: ClusterPlan, state: ClusterState, stack: auto.Stack, api: AwsApi,
                       cluster_id: str) -> dict[str, Adopted]:
    """The sync timer's replacements of static spot nodes become the stack's instances (no second instance per
    node); an adopted node is a new machine at the old address, so its recorded host key is forgotten (the
    converge records the new one on first contact, as for any new node)."""
    from clusterctl.engines.aws import adopt
    from clusterctl.engines.ssh.hostkeys import copy_without, known_name

    nodes = list(plan.static_spot_nodes)
    if not nodes:
        return {}
    region = plan.pool(nodes[0].pool or "").region
    assert region is not None  # compile gives every aws pool its region
    adopted = adopt.adopt_replacements(stack, api.client("ec2", region), plan.name, cluster_id, [n.name for n in nodes])
    addresses = [a.address for a in adopted.values() if a.address]
    if addresses:
        known = state.known_hosts_path
        if known.exists():
            copy_without(known, known, [known_name(a) for a in addresses])
    return adopted


def _existing_stack(plan: ClusterPlan, state: ClusterState) -> auto.Stack | None:
    from clusterctl.engines.aws import automation

    return automation.existing_stack(state, plan.name, automation.backend_url(state, plan.pulumi_backend))


def existing_stack_or_reason(plan: ClusterPlan, state: ClusterState) -> tuple[auto.Stack | None, str | None]:
    """(stack, None) when the pulumi CLI and the cluster's stack are there, else (None, why not). Creates nothing."""
    from clusterctl.engines.aws import automation
    from clusterctl.engines.aws.errors import CloudError

    try:
        automation.require_aws_plugin(automation.require_pulumi_cli())
        stack = _existing_stack(plan, state)
    except CloudError as e:
        return None, str(e)
    if stack is None:
        return None, "no Pulumi stack for this cluster in the state backend yet: `up` creates every resource"
    return stack, None


def cloud_preview(plan: ClusterPlan, state: ClusterState) -> dict:
    """For `plan`: the Pulumi preview of this build's stack config against the live stack (creates, updates,
    replaces, deletes and the resources each one hits). Reports why when it cannot preview; never creates a stack."""
    from clusterctl.engines.aws import automation

    from clusterctl.state.lock import LockedError

    stack, reason = existing_stack_or_reason(plan, state)
    if stack is None:
        return {"checked": False, "reason": reason}
    # The preview sets this build's config on the stack: never while an apply or up is between its own config and
    # its `pulumi up`. A held lock is reported, not waited for (plan stays read-only and quick).
    try:
        with state.lock("plan (cloud preview)"):
            preview = automation.preview(automation.open_stack(state, stack_settings(plan, state)))
    except LockedError as e:
        return {"checked": False, "reason": f"not previewed while another run holds the lock: {e}"}
    return {"checked": True, "changes": {k: v for k, v in preview.changes.items() if k != "same" and v},
            "steps": [{"op": op, "type": typ, "name": name} for op, typ, name in preview.steps]}


def cloud_outputs(plan: ClusterPlan, state: ClusterState) -> CloudOutputs | None:
    """Outputs of the existing stack (for `status` / a later converge), None when there is none."""
    from clusterctl.engines.aws import automation

    stack = _existing_stack(plan, state)
    return CloudOutputs.from_stack(automation.outputs(stack)) if stack is not None else None


def cloud_down(plan: ClusterPlan, state: ClusterState, *, console: Console | None = None, quiet: bool = False,
               on_event: Callable | None = None) -> dict[str, int]:
    """Destroy exactly this cluster's stack (the caller drains Slurm first). Returns Pulumi's change counts."""
    from clusterctl.engines.aws import automation

    automation.require_pulumi_cli()
    stack = _existing_stack(plan, state)
    if stack is None:
        return {}
    with _progress(console, f"destroying {plan.name} (aws)", quiet, on_event) as cb:
        return automation.destroy(stack, on_event=cb)
