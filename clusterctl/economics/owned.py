"""What owning GPU nodes costs: capex amortized over a life, plus power and operations.

The spec has no cost fields (yet): these parameters come from the command line, with the defaults below. Each
default says where it comes from; change them to your quotes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from clusterctl.catalog.prices import HOURS_PER_MONTH

# Maximum system power per 8-GPU node, from NVIDIA's DGX datasheets (DGX H100 / H200: 10.2 kW; DGX B200: 14.3 kW;
# DGX A100: 6.5 kW). Other models: scaled per GPU from the DGX H100 (10.2 kW / 8), marked as an estimate.
NODE_POWER_KW_8GPU = {"h100-sxm": 10.2, "h200": 10.2, "b200": 14.3, "a100-80gb": 6.5, "a100-40gb": 6.5}
KW_PER_GPU_FALLBACK = 10.2 / 8


@dataclass(frozen=True)
class OwnedCostParams:
    # The guide's rent-vs-buy example: buying 32 H100s costs $1.5M upfront, all-in (its budget split: 50% GPUs,
    # 25% network, 10% storage, 15% software and cooling) -> $46,875 per GPU, $375,000 per 8-GPU node.
    capex_per_gpu_usd: float = 1_500_000 / 32
    capex_per_node_usd: float | None = None  # wins over capex_per_gpu_usd x GPUs when given
    # Depreciation life. Servers are usually written off over 3-5 years; the guide expects B200s to make H100s
    # obsolete by 2027, so the middle, 4 years, is the default.
    life_years: float = 4.0
    power_kw_per_node: float | None = None  # None: from NODE_POWER_KW_8GPU by GPU model
    # US industrial average retail electricity price (EIA Electric Power Monthly, 2024: about 8 cents/kWh).
    usd_per_kwh: float = 0.08
    # Average data center PUE (Uptime Institute Global Data Center Survey 2024: 1.56).
    pue: float = 1.56
    # The guide: $400K/year of operations for its 32-GPU (4-node) cluster -> $8,333/node-month. The guide does not
    # split power out of it, so with power added on top this default errs high by power's share.
    ops_usd_per_node_month: float = 400_000 / 12 / 4
    # Fraction of the month the nodes draw full power (1.0: the guide's 24/7 training).
    power_duty: float = 1.0


@dataclass(frozen=True)
class OwnedCost:
    nodes: int
    gpus_per_node: int
    capex_usd: float
    amortization_month_usd: float
    power_month_usd: float
    ops_month_usd: float
    notes: tuple[str, ...] = field(default=())

    @property
    def monthly_usd(self) -> float:
        """Amortized capex + power + ops."""
        return self.amortization_month_usd + self.power_month_usd + self.ops_month_usd

    @property
    def opex_month_usd(self) -> float:
        """What keeps costing after the purchase: power + ops."""
        return self.power_month_usd + self.ops_month_usd

    @property
    def hourly_usd(self) -> float:
        return self.monthly_usd / HOURS_PER_MONTH


def node_power_kw(gpu_model: str | None, gpus: int, params: OwnedCostParams) -> tuple[float, tuple[str, ...]]:
    if params.power_kw_per_node is not None:
        return params.power_kw_per_node, ()
    if gpu_model in NODE_POWER_KW_8GPU and gpus == 8:
        return NODE_POWER_KW_8GPU[gpu_model], ()
    if gpu_model in NODE_POWER_KW_8GPU:
        kw = NODE_POWER_KW_8GPU[gpu_model] / 8 * gpus
        return kw, (f"power {kw:.1f} kW/node scaled from the 8-GPU DGX figure",)
    kw = KW_PER_GPU_FALLBACK * max(gpus, 1)
    return kw, (f"power {kw:.1f} kW/node estimated from the DGX H100's 10.2 kW per 8 GPUs (no datasheet figure for {gpu_model})",)


def owned_cost(nodes: int, gpus_per_node: int, gpu_model: str | None, params: OwnedCostParams = OwnedCostParams()) -> OwnedCost:
    capex_node = params.capex_per_node_usd if params.capex_per_node_usd is not None else params.capex_per_gpu_usd * gpus_per_node
    capex = capex_node * nodes
    kw, notes = node_power_kw(gpu_model, gpus_per_node, params)
    power = kw * params.pue * HOURS_PER_MONTH * params.power_duty * params.usd_per_kwh * nodes
    return OwnedCost(
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        capex_usd=capex,
        amortization_month_usd=capex / (params.life_years * 12),
        power_month_usd=power,
        ops_month_usd=params.ops_usd_per_node_month * nodes,
        notes=notes,
    )


def break_even_months(capex_usd: float, rent_month_usd: float, own_opex_month_usd: float) -> float | None:
    """Months after which buying (capex up front, then opex) costs less than renting the same capacity.

    The guide's arithmetic: renting costs rent_month every month; owning costs capex once plus opex every month.
    They cross at capex / (rent_month - opex). None when renting costs no more than owning's running costs: then
    buying never pays back."""
    saving = rent_month_usd - own_opex_month_usd
    if saving <= 0:
        return None
    return capex_usd / saving
