"""`clusterctl cost` and `clusterctl size`, ready to register on the CLI's Typer app: `register(app, load)` where
`load(spec_path)` is cli._load. Heavy modules load inside the commands."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from clusterctl.cli.output import SpecLoader
from clusterctl.core.providers import traits


class EconOutput(str, Enum):
    text = "text"
    json = "json"


class StarterProvider(str, Enum):
    aws = "aws"
    onprem = "onprem"


def register(app: typer.Typer, load: SpecLoader) -> None:
    @app.command()
    def cost(
        spec: Path = typer.Argument(..., help="Cluster spec (cluster.yaml)."),
        output: EconOutput = typer.Option(EconOutput.text, "--output", "-o"),
        prices: Optional[Path] = typer.Option(None, "--prices", help="A saved price table (JSON) over the shipped one."),
        refresh_prices: bool = typer.Option(
            False, "--refresh-prices", help="Fetch on-demand and spot prices of the spec's instance types from AWS "
            "(Price List API + spot price history; needs credentials)."),
        save_prices: Optional[Path] = typer.Option(None, "--save-prices", help="Write the price table used to this file."),
        utilization: float = typer.Option(1.0, "--utilization", min=0.01, max=1.0,
                                          help="Share of the month rented capacity would run (rent vs buy); 1 = 24/7."),
        capex_per_gpu: Optional[float] = typer.Option(None, "--capex-per-gpu", help="Owned: purchase price per GPU, all-in (default $46,875, the guide's)."),
        capex_per_node: Optional[float] = typer.Option(None, "--capex-per-node", help="Owned: purchase price per node (wins over --capex-per-gpu)."),
        life_years: Optional[float] = typer.Option(None, "--life-years", min=0.5, help="Owned: depreciation life (default 4)."),
        power_kw: Optional[float] = typer.Option(None, "--power-kw-per-node", min=0.0, help="Owned: power draw per node (default: DGX datasheet)."),
        usd_per_kwh: Optional[float] = typer.Option(None, "--usd-per-kwh", min=0.0, help="Owned: electricity price (default 0.08)."),
        pue: Optional[float] = typer.Option(None, "--pue", min=1.0, help="Owned: data center PUE (default 1.56)."),
        ops: Optional[float] = typer.Option(None, "--ops-per-node-month", min=0.0, help="Owned: operations per node-month (default $8,333, the guide's)."),
    ) -> None:
        """Hourly and monthly cost per pool and in total, and rent-vs-buy break-even per GPU pool."""
        from dataclasses import replace

        from clusterctl.catalog.prices import PriceTable, refresh_prices as fetch
        from clusterctl.cli.output import console, document
        from clusterctl.compile import compile_plan
        from clusterctl.economics.cost import estimate_cost, print_cost
        from clusterctl.economics.owned import OwnedCostParams

        cluster = load(spec, output)
        plan = compile_plan(cluster)
        table = PriceTable()
        if prices:
            table = table.merged(PriceTable.from_json(prices.read_text()))
        if refresh_prices:
            types = sorted({p.instance_type for p in plan.aws_pools if p.instance_type} | ({cluster.controller.instance_type} if traits(cluster.controller).rented else set()))
            regions = sorted({p.region for p in plan.aws_pools if p.region} or {"us-east-1"})
            table = table.merged(fetch(types, regions))
        if save_prices:
            save_prices.write_text(table.to_json())
        given = {"capex_per_gpu_usd": capex_per_gpu, "capex_per_node_usd": capex_per_node, "life_years": life_years,
                 "power_kw_per_node": power_kw, "usd_per_kwh": usd_per_kwh, "pue": pue, "ops_usd_per_node_month": ops}
        params = replace(OwnedCostParams(), **{k: v for k, v in given.items() if v is not None})
        report = estimate_cost(cluster, plan, table, params, utilization)
        if output is EconOutput.json:
            sys.stdout.write(document(cluster.name, report.complete, report.to_dict()))
        else:
            print_cost(console(), report)

    @app.command()
    def size(
        params: str = typer.Option(..., "--params", help="Model parameters, e.g. 70B."),
        tokens: str = typer.Option(..., "--tokens", help="Training tokens, e.g. 2T."),
        gpu: str = typer.Option("h100", "--gpu", help="GPU model (catalog key or h100, a100, ...)."),
        mfu: float = typer.Option(0.4, "--mfu", min=0.01, max=1.0, help="Model FLOPs utilization for the time estimate."),
        gpus: Optional[int] = typer.Option(None, "--gpus", min=1, help="GPUs to estimate the time for (default: the minimum, in whole nodes)."),
        gpus_per_node: int = typer.Option(8, "--gpus-per-node", min=1, max=16),
        output: EconOutput = typer.Option(EconOutput.text, "--output", "-o"),
        write_spec: Optional[Path] = typer.Option(None, "--write-spec", help="Write a starter cluster spec sized for it."),
        provider: StarterProvider = typer.Option(StarterProvider.aws, "--provider", help="Starter spec: rented (aws) or owned (onprem) nodes."),
        name: str = typer.Option("train", "--name", help="Starter spec: cluster name."),
        region: str = typer.Option("us-east-1", "--region", help="Starter spec: AWS region."),
        force: bool = typer.Option(False, "--force", help="Overwrite --write-spec's file."),
    ) -> None:
        """Memory lower bound, minimum GPUs and nodes, and training days at an MFU (6·N·T FLOPs); a starter spec."""
        import shlex

        from clusterctl.cli.output import console, document
        from clusterctl.economics.size import SizeError, estimate_size, print_size, starter_spec
        from clusterctl.validate import load_text

        est = estimate_size(params, tokens, gpu, mfu=mfu, gpus=gpus, gpus_per_node=gpus_per_node)
        if output is EconOutput.json:
            sys.stdout.write(document(None, True, est.to_dict()))
        else:
            print_size(console(), est)
        if write_spec:
            if write_spec.exists() and not force:
                raise SizeError(f"{write_spec} exists; pass --force to overwrite it")
            command = (f"clusterctl size --params {shlex.quote(params)} --tokens {shlex.quote(tokens)} --gpu {shlex.quote(gpu)}"
                       + (f" --mfu {mfu:g}" if mfu != 0.4 else "") + (f" --gpus {gpus}" if gpus else ""))
            text = starter_spec(est, name, provider.value, region, command=command)
            loaded = load_text(text, str(write_spec))
            if not loaded.ok:  # a bug of ours, never the user's: say so instead of writing a broken spec
                raise SizeError(f"the starter spec does not validate: {[f.message for f in loaded.errors]}")
            write_spec.write_text(text)
            console(stderr=output is EconOutput.json).print(
                f"wrote {write_spec} ({provider.value}, {est.gpus} GPUs); next: clusterctl validate {write_spec}", highlight=False)
