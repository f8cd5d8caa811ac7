"""Pulumi Automation API: one stack per cluster, driven from clusterctl.

- project `clusterctl`, stack = cluster name, inline program = clusterctl.engines.aws.program.program_from_config
  (the same function stacks/aws/__main__.py runs under a plain `pulumi up`);
- state backend `file://<state dir>/<cluster>/pulumi` by default; the spec's `state.pulumi_backend` or
  `CLUSTERCTL_PULUMI_BACKEND` (s3://bucket/prefix, file://..., or a Pulumi Cloud URL) moves it, so a team or a
  pipeline can share state; when both are set they must agree (two places would mean two stacks, two clusters);
- secrets: the passphrase provider with a generated passphrase kept in the cluster's secrets dir (0600), unless
  PULUMI_CONFIG_PASSPHRASE[_FILE] is set or CLUSTERCTL_PULUMI_SECRETS_PROVIDER names another (e.g. awskms://...);
- config: the rendered stack config (render/cloud.py) plus the runtime values (SSH public key, admin CIDR, cluster id);
- the munge key is NOT stack config: the SDK's `set_config`/`set_all_config` put every value, secrets included,
  on `pulumi config set` command lines (visible in /proc/*/cmdline to every user, and in process accounting).
  The program is inline, so it runs in this very process when `pulumi preview/up` calls back into it: the key
  is handed to it as a Python value and marked secret there (encrypted in the state, `[secret]` in diffs and
  events). Neither argv nor the pulumi child's environment ever holds it, and error text is redacted.

`require_pulumi_cli()` runs before anything else and touches nothing.
"""

from __future__ import annotations

import os
import secrets as pysecrets
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, TypeVar

from clusterctl.engines.aws.errors import CloudError, PulumiCliMissing
from clusterctl.render.cloud import PROJECT
from clusterctl.state import ClusterState

if TYPE_CHECKING:
    from pulumi import automation as auto

    from clusterctl.engines.aws.program import AwsCluster

_T = TypeVar("_T")

BACKEND_ENV = "CLUSTERCTL_PULUMI_BACKEND"
SECRETS_PROVIDER_ENV = "CLUSTERCTL_PULUMI_SECRETS_PROVIDER"
INSTALL_CLI = "curl -fsSL https://get.pulumi.com | sh"


def aws_plugin_version() -> str:
    """The aws resource plugin version that matches the installed pulumi-aws SDK (they are released together)."""
    from importlib.metadata import version

    return "v" + version("pulumi_aws")


def install_hint() -> str:
    return (f"Install it with `{INSTALL_CLI}` (then add ~/.pulumi/bin to PATH), and the AWS provider plugin with "
            f"`pulumi plugin install resource aws {aws_plugin_version()}`.")


def require_pulumi_cli() -> str:
    """Path of the `pulumi` binary; raises PulumiCliMissing with the install commands. Reads PATH only."""
    path = shutil.which("pulumi")
    if path is None:
        raise PulumiCliMissing("the Pulumi CLI (`pulumi`) is not on PATH; clusterctl drives it to create AWS capacity. "
                               f"Nothing was changed. {install_hint()}")
    return path


def require_aws_plugin(pulumi_bin: str) -> None:
    """The aws provider plugin must be installed (offline machines cannot let Pulumi download it mid-run)."""
    want = aws_plugin_version().lstrip("v")
    try:
        out = subprocess.run([pulumi_bin, "plugin", "ls", "--json"], capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise PulumiCliMissing(f"`pulumi plugin ls` failed ({e}). {install_hint()}") from e
    import json

    plugins = json.loads(out or "[]") or []
    if not any(p.get("name") == "aws" and p.get("kind") == "resource" and p.get("version") == want for p in plugins):
        raise PulumiCliMissing(f"the Pulumi AWS provider plugin {want} is not installed. Nothing was changed. Run "
                               f"`pulumi plugin install resource aws {aws_plugin_version()}`.")


def backend_url(state: ClusterState, from_spec: str | None = None) -> str:
    """The stack's state backend: the spec's `state.pulumi_backend`, else $CLUSTERCTL_PULUMI_BACKEND, else next to
    clusterctl's own state (file:// in the state directory, or the s3 backend's prefix)."""
    env = os.environ.get(BACKEND_ENV, "").strip()
    if from_spec and env and env.rstrip("/") != from_spec.rstrip("/"):
        raise CloudError(f"{BACKEND_ENV}={env} but the spec's state.pulumi_backend is {from_spec}: the stack would be "
                         f"looked for in the wrong place; unset {BACKEND_ENV} or make them agree")
    return from_spec or env or state.pulumi_url()


@dataclass
class StackSettings:
    """Everything the Automation API needs about one cluster's stack."""

    cluster: str
    config: dict  # the rendered stack config (namespaced keys)
    backend: str  # backend_url() of the cluster
    munge_key_b64: str = field(repr=False)
    cluster_id: str = ""  # apply/secrets.ensure_cluster_id()
    ssh_public_key: str | None = None
    admin_cidr: str | None = None
    env: dict[str, str] = field(default_factory=dict)


# Secret values handed to programs in this process; _first_error() removes them from any text it passes on.
_SECRETS: set[str] = set()


def _redact(text: str) -> str:
    for value in _SECRETS:
        text = text.replace(value, "[secret]")
    return text


def _inline_program(munge_key_b64: str) -> Callable[[], AwsCluster]:
    """The stack's program with the munge key bound in (a closure: its repr does not show the key)."""
    from clusterctl.engines.aws.program import program_from_config

    _SECRETS.add(munge_key_b64)

    def program() -> AwsCluster:
        return program_from_config(munge_key_b64)
    return program


def _passphrase_env(state: ClusterState) -> dict[str, str]:
    if os.environ.get("PULUMI_CONFIG_PASSPHRASE") is not None or os.environ.get("PULUMI_CONFIG_PASSPHRASE_FILE"):
        return {}
    path = state.secret_file("pulumi-passphrase", lambda: pysecrets.token_urlsafe(32).encode())
    return {"PULUMI_CONFIG_PASSPHRASE_FILE": str(path)}


def workspace_options(state: ClusterState, url: str, extra_env: dict[str, str] | None = None) -> auto.LocalWorkspaceOptions:
    """LocalWorkspaceOptions for the cluster's stack: project `clusterctl`, the backend, the secrets provider."""
    from pulumi import automation as auto

    if url.startswith("file://"):
        Path(url[len("file://"):]).mkdir(parents=True, exist_ok=True)
    work = state.dir / "pulumi-workspace"
    work.mkdir(parents=True, exist_ok=True)
    env = {"PULUMI_BACKEND_URL": url, "PULUMI_SKIP_UPDATE_CHECK": "true", **_passphrase_env(state), **(extra_env or {})}
    return auto.LocalWorkspaceOptions(
        work_dir=str(work),
        env_vars=env,
        secrets_provider=os.environ.get(SECRETS_PROVIDER_ENV) or None,
        project_settings=auto.ProjectSettings(name=PROJECT, runtime="python", backend=auto.ProjectBackend(url)),
    )


def open_stack(state: ClusterState, settings: StackSettings) -> auto.Stack:
    """Create or select the cluster's stack with its config set; returns a pulumi.automation.Stack."""
    from pulumi import automation as auto

    from clusterctl.render.stack_config import RUNTIME_KEYS, automation_config

    opts = workspace_options(state, settings.backend, settings.env)
    try:
        stack = auto.create_or_select_stack(stack_name=settings.cluster, project_name=PROJECT,
                                            # ignored: PulumiFn's stub says -> None; the SDK ignores what it returns
                                            program=_inline_program(settings.munge_key_b64), opts=opts)  # type: ignore[arg-type]
        values = {k: auto.ConfigValue(v) for k, v in automation_config(settings.config).items()}
        ns = PROJECT + ":"
        runtime = {"ssh_public_key": settings.ssh_public_key, "admin_cidr": settings.admin_cidr,
                   "cluster_id": settings.cluster_id}
        values.update({ns + k: auto.ConfigValue(v) for k, v in runtime.items() if v})
        # Keys a previous build set but this one does not (e.g. checkpoints removed from the spec) must go;
        # runtime settings given once (admin CIDR, SSH key) stay until replaced. A munge key an older clusterctl
        # (or a person) put in the config goes too: the program gets it from us (rm-all names only the key).
        protected = {ns + k for k in RUNTIME_KEYS}
        stale = [k for k in stack.get_all_config()
                 if (k.startswith(ns) or k == "aws:region") and k not in values and k not in protected]
        if stale:
            stack.remove_all_config(stale)
        stack.set_all_config(values)
    except auto.errors.CommandError as e:
        raise CloudError(f"pulumi could not open stack {settings.cluster} at {settings.backend}: {_first_error(e)}") from None
    return stack


def existing_stack(state: ClusterState, cluster: str, url: str) -> auto.Stack | None:
    """The cluster's stack in backend `url` if it was ever created, else None (creates no backend or stack)."""
    from pulumi import automation as auto

    from clusterctl.engines.aws.program import program_from_config

    if url.startswith("file://") and not Path(url[len("file://"):]).exists():
        return None
    try:
        # ignored: pulumi's PulumiFn stub says the program returns None; the SDK ignores what it returns
        return auto.select_stack(stack_name=cluster, project_name=PROJECT, program=program_from_config,  # type: ignore[arg-type]
                                 opts=workspace_options(state, url))
    except auto.errors.StackNotFoundError:
        return None
    except auto.errors.CommandError as e:
        raise CloudError(f"pulumi could not read stack {cluster} at {url}: {_first_error(e)}") from None


def _first_error(e: Exception) -> str:
    text = _redact(str(e))
    for line in text.splitlines():
        if "error:" in line:
            return line.strip()
    return text.strip().splitlines()[-1] if text.strip() else type(e).__name__


@dataclass
class Preview:
    changes: dict[str, int]  # op -> count, e.g. {"create": 52}
    steps: list[tuple[str, str, str]]  # (op, type, name) of every resource that changes

    @property
    def has_changes(self) -> bool:
        return any(n for op, n in self.changes.items() if op != "same")


def _collect(steps: list, forward: Callable | None) -> Callable[[auto.EngineEvent], None]:
    def on_event(ev: auto.EngineEvent) -> None:
        pre = getattr(ev, "resource_pre_event", None)
        if pre is not None and pre.metadata.op not in ("same", "read"):
            md = pre.metadata
            steps.append((str(getattr(md.op, "value", md.op)), md.type, md.urn.rsplit("::", 1)[-1]))
        if forward is not None:
            forward(ev)
    return on_event


def _run(what: str, fn: Callable[[], _T]) -> _T:
    from pulumi import automation as auto

    try:
        return fn()
    except auto.errors.CommandError as e:
        raise CloudError(f"pulumi {what} failed: {_first_error(e)}") from None


# refresh=True: spot nodes and capacity-block nodes can vanish (interruption, block end) without Pulumi seeing it;
# reading the real state first makes the preview say "create p5003" instead of failing on a dead instance id.
def preview(stack: auto.Stack, on_event: Callable | None = None, refresh: bool = True) -> Preview:
    steps: list = []
    res = _run("preview", lambda: stack.preview(on_event=_collect(steps, on_event), diff=False, refresh=refresh))
    return Preview({str(k): int(v) for k, v in (res.change_summary or {}).items()}, steps)


def up(stack: auto.Stack, on_event: Callable | None = None, refresh: bool = True) -> dict:
    """Apply; returns the stack outputs as plain values."""
    res = _run("up", lambda: stack.up(on_event=on_event, refresh=refresh))
    return {k: v.value for k, v in res.outputs.items()}


def refresh(stack: auto.Stack, on_event: Callable | None = None) -> dict[str, int]:
    res = _run("refresh", lambda: stack.refresh(on_event=on_event))
    return {op: n for op, n in (res.summary.resource_changes or {}).items()}  # OpType is a str


def destroy(stack: auto.Stack, on_event: Callable | None = None) -> dict[str, int]:
    res = _run("destroy", lambda: stack.destroy(on_event=on_event))
    return {op: n for op, n in (res.summary.resource_changes or {}).items()}  # OpType is a str


def outputs(stack: auto.Stack) -> dict:
    return {k: v.value for k, v in stack.outputs().items()}
