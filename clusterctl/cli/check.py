"""`clusterctl check`, ready to register on the CLI's Typer app: `register(app, load)` where `load(spec_path)` is
cli._load (loads + validates, prints findings, raises SpecError). Heavy modules load inside the command."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path

import typer

from clusterctl.cli.output import SpecLoader


class CheckOutput(str, Enum):
    text = "text"
    json = "json"


def register(app: typer.Typer, load: SpecLoader) -> None:
    @app.command()
    def check(
        spec: Path = typer.Argument(..., help="Cluster spec (cluster.yaml)."),
        output: CheckOutput = typer.Option(CheckOutput.text, "--output", "-o", help="json: the rows as one JSON document."),
        nccl_tolerance: float = typer.Option(
            0.8, "--nccl-tolerance", min=0.0, max=1.0,
            help="NCCL all_reduce passes at this fraction of the fabric's expected bus bandwidth."),
        straggler_tolerance: float = typer.Option(
            0.9, "--straggler-tolerance", min=0.0, max=1.0,
            help="A node whose all_reduce figure (alone or in its best pair) is below this fraction of the median is a straggler."),
        drain_stragglers: bool = typer.Option(
            False, "--drain-stragglers", help="Drain the stragglers found, with the figure in the reason."),
    ) -> None:
        """Acceptance tests on the live cluster: GPUs and driver per node, IB/EFA ports, mounts, Slurm states, a
        multi-node Slurm job, NCCL all_reduce bandwidth and a ranking of every node by it (skipped, with the reason,
        where it cannot run), exporters.
        Exit 0 when no row fails, 1 otherwise."""
        from clusterctl.cli.output import console
        from clusterctl.ops.check import check_json, print_checks, run_checks
        from clusterctl.ops.phases import Phases

        cluster = load(spec, output)
        phases = Phases()
        rows, ok = run_checks(cluster, nccl_tolerance=nccl_tolerance, straggler_tolerance=straggler_tolerance,
                              drain_stragglers=drain_stragglers, phases=phases)
        if output is CheckOutput.json:
            sys.stdout.write(check_json(cluster.name, rows, phases))
        else:
            print_checks(console(), cluster.name, rows, phases)
        raise typer.Exit(0 if ok else 1)
