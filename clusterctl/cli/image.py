"""`clusterctl image build`: node images, built once per pool (see clusterctl.ops.image)."""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from clusterctl.cli.output import SpecLoader


class Output(str, Enum):
    text = "text"
    json = "json"


def register(app: typer.Typer, load: SpecLoader) -> None:
    image_app = typer.Typer(help="Node images: the node stack baked once, booted by every node of a pool.",
                            no_args_is_help=True)
    app.add_typer(image_app, name="image")

    @image_app.command("build")
    def build(
        spec: Path = typer.Argument(..., metavar="SPEC", help="Cluster spec (cluster.yaml)."),
        pool: Optional[List[str]] = typer.Option(None, "--pool", "-p", help="Only this pool (repeatable)."),
        output: Output = typer.Option(Output.text, "--output", "-o", help="json: one JSON report on stdout."),
    ) -> None:
        """Bake each lab or aws pool's node stack (driver, CUDA, NCCL, RDMA/EFA, Slurm and munge binaries, exporters,
        health check) into an image its nodes boot from at the next `up`, so their converge applies only per-node
        configuration. Lab pools: a root filesystem; aws pools: an AMI, built in the cluster's network (run `up`
        first). A pool whose image is current (same roles, versions and base) is not rebuilt; a failed build records
        nothing. Exit 0 when every image is built or current, 1 on any error."""
        from clusterctl.cli.output import console
        from clusterctl.ops.image_build import build_images
        from clusterctl.render.compiled import Compiled

        compiled = Compiled.of(load(spec, output))
        quiet = output is Output.json
        built = build_images(compiled, console(stderr=quiet), list(pool or []), quiet=quiet)
        if quiet:
            sys.stdout.write(json.dumps({"cluster": compiled.name, "ok": True,
                                         "images": [b.to_dict() for b in built]}, indent=2) + "\n")
            return
        for b in built:
            what = f"built in {b.seconds:.0f} s" if b.built else "current, not rebuilt"
            typer.echo(f"pool {b.pool}: {b.image} ({what}; inputs {b.inputs_hash[:12]})")
