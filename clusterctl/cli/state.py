"""`clusterctl history` and `clusterctl state migrate`: the state backend's own commands."""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path

import typer

from clusterctl.cli.output import SpecLoader


class Output(str, Enum):
    text = "text"
    json = "json"


def register(app: typer.Typer, load: SpecLoader) -> None:
    state_app = typer.Typer(help="Where the cluster's state lives.", no_args_is_help=True)
    app.add_typer(state_app, name="state")

    @app.command()
    def history(
        spec: Path = typer.Argument(..., metavar="SPEC", help="Cluster spec (cluster.yaml)."),
        output: Output = typer.Option(Output.text, "--output", "-o"),
    ) -> None:
        """Past applies and downs of the cluster, oldest first: when, who, the plan fingerprint, the cost delta."""
        from clusterctl.state import ClusterState

        cluster = load(spec, output)
        state = ClusterState.for_spec(cluster)
        entries = state.history()
        if output is Output.json:
            sys.stdout.write(json.dumps({"cluster": cluster.name, "ok": True, "backend": state.backend.url, "history": entries},
                                        indent=2) + "\n")
            return
        if not entries:
            typer.echo(f"cluster {cluster.name}: no applies recorded in {state.backend.url}")
        for e in entries:
            typer.echo(_line(e))

    @state_app.command("migrate")
    def migrate(
        spec: Path = typer.Argument(..., metavar="SPEC", help="Cluster spec (cluster.yaml)."),
        to: str = typer.Option(..., "--to", help="The new backend: s3://bucket/prefix."),
    ) -> None:
        """Move the cluster's local state (applied build, secrets) to TO; refused if TO holds another cluster.
        Then set state.backend (or $CLUSTERCTL_STATE_BACKEND) to TO."""
        from clusterctl.core.errors import ClusterctlError
        from clusterctl.spec.cluster import State
        from clusterctl.state import ClusterState
        from clusterctl.state.backend import chosen_kms_key
        from clusterctl.state.migrate import migrate as do_migrate

        cluster = load(spec)
        try:
            State(backend=to)  # the same allow-list as the spec's
        except ValueError:
            raise ClusterctlError(f"--to {to}: not s3://bucket/prefix") from None
        # The source is the local directory whatever the spec or the environment now says.
        source = ClusterState(cluster.name, backend="local")
        target = ClusterState(cluster.name, backend=to, kms_key=chosen_kms_key(cluster.state.kms_key))
        result = do_migrate(source, target)
        typer.echo(f"moved cluster {cluster.name}: {len(result['secrets'])} secret(s), applied version "
                   f"{result['applied_version']} now in {result['to']}; set state.backend: {result['to']} in the spec "
                   "(or CLUSTERCTL_STATE_BACKEND) from now on")


def _line(e: dict) -> str:
    fp = e.get("fingerprint") or {}
    delta = e.get("cost_delta_monthly_usd")
    cost = f"cost {delta:+,.2f} USD/month" if delta is not None else "cost n/a"
    plan = f"spec {fp['spec'][:12]} build {fp['build'][:12]}" if fp else "-"
    return f"{e.get('version', '?'):>4}  {e.get('when', '?')}  {e.get('action', '?'):<6} {e.get('who', '?')}  " \
           f"{e.get('command') or '-'}  {plan}  {cost}"
