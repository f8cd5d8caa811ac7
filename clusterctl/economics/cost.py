"""`clusterctl cost SPEC`: hourly and monthly cost per pool and in total, and rent-vs-buy break-even per GPU pool.

- aws pools: instances x the dated price of their market (clusterctl.catalog.prices); elastic pools cost their
  always-on `min` nodes per month, and say what one more node-hour and the full `max` cost.
- onprem pools: owned nodes, capex amortized over a life plus power and operations (clusterctl.economics.owned).
- local pools: lab nodes on this machine, no cost.
- rent vs buy (the guide's economics): for every GPU pool, what the same GPUs cost rented (on-demand, 24/7 unless a
  utilization is given) against bought (capex + power + ops), and after how many months buying pays back.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Iterable

from clusterctl.catalog.instances import INSTANCE_TYPES
from clusterctl.catalog.prices import DEFAULT_REGION, HOURS_PER_MONTH, PriceTable
from clusterctl.compile.model import ClusterPlan, PoolPlan
from clusterctl.economics.owned import OwnedCost, OwnedCostParams, break_even_months, owned_cost
from clusterctl.core.providers import traits
from clusterctl.spec.cluster import ClusterSpec

if TYPE_CHECKING:
    from rich.console import Console


@dataclass
class PoolCost:
    pool: str
    provider: str
    kind: str  # rented | owned | lab | controller
    nodes: int  # nodes costed every hour (elastic: min)
    gpus: int
    basis: str
    hourly_usd: float | None
    monthly_usd: float | None
    notes: list[str] = field(default_factory=list)
    max_nodes: int | None = None  # elastic pools
    hourly_max_usd: float | None = None  # elastic pools at max
    node_hour_usd: float | None = None
    owned: dict | None = None  # capex and monthly breakdown of owned pools


@dataclass
class RentVsBuy:
    pool: str
    nodes: int
    gpus: int
    rent_basis: str
    rent_month_usd: float | None
    buy_capex_usd: float
    own_opex_month_usd: float
    own_month_usd: float  # amortized capex + opex
    months: float | None
    verdict: str
    notes: list[str] = field(default_factory=list)


@dataclass
class CostReport:
    cluster: str
    prices: str
    utilization: float
    params: dict
    pools: list[PoolCost]
    rent_vs_buy: list[RentVsBuy]

    @property
    def total_hourly_usd(self) -> float:
        return sum(p.hourly_usd or 0.0 for p in self.pools)

    @property
    def total_monthly_usd(self) -> float:
        return sum(p.monthly_usd or 0.0 for p in self.pools)

    @property
    def complete(self) -> bool:
        """False when some pool could not be priced (its cost is missing from the total)."""
        return all(p.hourly_usd is not None for p in self.pools)

    def to_dict(self) -> dict:
        return {
            "cluster": self.cluster,
            "prices": self.prices,
            "utilization": self.utilization,
            "params": self.params,
            "pools": [asdict(p) for p in self.pools],
            "total": {"hourly_usd": round(self.total_hourly_usd, 2), "monthly_usd": round(self.total_monthly_usd, 2),
                      "complete": self.complete},
            "rent_vs_buy": [asdict(r) for r in self.rent_vs_buy],
        }


def rent_equivalent(gpu_model: str | None, gpus_per_node: int, prices: PriceTable, region: str = DEFAULT_REGION) -> str | None:
    """The AWS instance type that rents the same node (same GPU model and count), preferring one with a price."""
    types = sorted(t.name for t in INSTANCE_TYPES.values() if t.gpu == gpu_model and t.gpus == gpus_per_node)
    priced = [t for t in types if prices.quote(t, region, "on-demand").usd_per_hour is not None]
    return (priced or types or [None])[0]  # type: ignore[list-item]  # None: no instance type rents it


def _owned_dict(o: OwnedCost) -> dict:
    return {"capex_usd": round(o.capex_usd, 2), "amortization_month_usd": round(o.amortization_month_usd, 2),
            "power_month_usd": round(o.power_month_usd, 2), "ops_month_usd": round(o.ops_month_usd, 2)}


def aws_pool_cost(pool: PoolPlan, prices: PriceTable) -> PoolCost:
    q = prices.quote(pool.instance_type or "", pool.region or DEFAULT_REGION, pool.market or "on-demand")
    always_on = pool.static_count
    hourly = None if q.usd_per_hour is None else q.usd_per_hour * always_on
    pc = PoolCost(pool.name, pool.provider, "rented", always_on, pool.gpus_per_node * always_on,
                  q.basis if q.price is None or q.price.market == pool.market else f"{pool.market}, priced as {q.basis}", hourly,
                  None if hourly is None else hourly * HOURS_PER_MONTH, list(q.notes))
    if pool.elastic:
        pc.max_nodes = pool.max_count
        pc.node_hour_usd = q.usd_per_hour
        pc.hourly_max_usd = None if q.usd_per_hour is None else q.usd_per_hour * pool.max_count
        pc.notes.append(f"elastic: {always_on} node(s) always on (the monthly figure); each burst node-hour "
                        f"${q.usd_per_hour or 0:,.2f}, all {pool.max_count} nodes ${pc.hourly_max_usd or 0:,.2f}/h")
        for m in pool.fallback_markets:  # what a burst costs when the pool's own market has no capacity
            fq = prices.quote(pool.instance_type or "", pool.region or DEFAULT_REGION, m)
            price = "not priced" if fq.usd_per_hour is None else f"${fq.usd_per_hour:,.2f}"
            if fq.price is not None and fq.price.market != m:
                price += " (upper bound: on-demand)"
            pc.notes.append(f"fallback {m}: each burst node-hour {price} when {pool.market} has no capacity")
    return pc


def owned_pool_cost(pool: PoolPlan, params: OwnedCostParams) -> tuple[PoolCost, OwnedCost]:
    n = len(pool.nodes)
    o = owned_cost(n, pool.gpus_per_node, pool.gpu_model, params)
    basis = (f"owned: ${o.capex_usd:,.0f} capex over {params.life_years:g} y + power + ops")
    pc = PoolCost(pool.name, pool.provider, "owned", n, pool.gpus_per_node * n, basis, o.hourly_usd, o.monthly_usd,
                  list(o.notes), owned=_owned_dict(o))
    return pc, o


def rent_vs_buy(pool: PoolPlan, prices: PriceTable, params: OwnedCostParams, utilization: float) -> RentVsBuy | None:
    if not pool.gpus_per_node or traits(pool).lab:
        return None
    notes = []
    if traits(pool).rented:
        nodes = pool.static_count if not pool.elastic else pool.max_count
        if pool.elastic:
            notes.append(f"elastic pool sized at its max ({nodes} nodes)")
        itype, region = pool.instance_type, pool.region or DEFAULT_REGION
    else:
        nodes = len(pool.nodes)
        region = DEFAULT_REGION
        itype = rent_equivalent(pool.gpu_model, pool.gpus_per_node, prices, region)
    own = owned_cost(nodes, pool.gpus_per_node, pool.gpu_model, params)
    q = prices.quote(itype or "", region, "on-demand") if itype else None
    if q is None or q.usd_per_hour is None:
        why = f"no AWS instance type rents {pool.gpus_per_node} x {pool.gpu_model}" if not itype else f"no on-demand price for {itype}"
        return RentVsBuy(pool.name, nodes, nodes * pool.gpus_per_node, why, None, own.capex_usd, own.opex_month_usd,
                         own.monthly_usd, None, f"cannot compare: {why}", notes)
    notes += list(q.notes)
    rent_month = q.usd_per_hour * nodes * HOURS_PER_MONTH * utilization
    months = break_even_months(own.capex_usd, rent_month, own.opex_month_usd)
    life = params.life_years * 12
    if months is None:
        verdict = "rent: renting costs less than owning's power and ops alone"
    elif months > life:
        verdict = f"rent: buying pays back after {months:.1f} months, beyond the {params.life_years:g}-year life"
    else:
        verdict = (f"buy if you will use it {utilization:.0%} of the time for more than {months:.1f} months "
                   f"(the guide: buy only for 24/7 training of 18+ months)")
    return RentVsBuy(pool.name, nodes, nodes * pool.gpus_per_node,
                     f"{nodes} x {itype} on-demand ${q.usd_per_hour:g}/h at {utilization:.0%} use", rent_month,
                     own.capex_usd, own.opex_month_usd, own.monthly_usd, months, verdict, notes)


def estimate_cost(spec: ClusterSpec, plan: ClusterPlan | None = None, prices: PriceTable | None = None,
                  params: OwnedCostParams = OwnedCostParams(), utilization: float = 1.0) -> CostReport:
    """Pure: the spec (and its compiled plan) and the price table in, the report out."""
    from clusterctl.compile import compile_plan

    plan = plan or compile_plan(spec)
    prices = prices or PriceTable()
    pools: list[PoolCost] = []
    rvb: list[RentVsBuy] = []
    for pool in plan.pools:
        if traits(pool).rented:
            pools.append(aws_pool_cost(pool, prices))
        elif traits(pool).owned:
            pools.append(owned_pool_cost(pool, params)[0])
        else:
            n = len(pool.nodes)
            pools.append(PoolCost(pool.name, pool.provider, "lab", n, n * pool.gpus_per_node,
                                  "lab nodes on this machine", 0.0, 0.0))
        r = rent_vs_buy(pool, prices, params, utilization)
        if r is not None:
            rvb.append(r)
    ctl = plan.controller
    if traits(ctl).rented:
        region = spec.controller.region or next((p.region for p in plan.pools if p.region), DEFAULT_REGION)
        q = prices.quote(ctl.instance_type or spec.controller.instance_type, region, "on-demand")
        pools.append(PoolCost("controller", "aws", "controller", 1, 0, f"{spec.controller.instance_type}: {q.basis}",
                              q.usd_per_hour, None if q.usd_per_hour is None else q.usd_per_hour * HOURS_PER_MONTH,
                              list(q.notes)))
    else:
        pools.append(PoolCost("controller", ctl.provider, "controller", 1, 0,
                              "owned server without GPUs: not costed" if traits(ctl).owned else "lab node", 0.0, 0.0))
    return CostReport(plan.name, prices.name, utilization, asdict(params), pools, rvb)


# --- printers -------------------------------------------------------------------------------------------------

def _usd(v: float | None) -> str:
    return "n/a" if v is None else f"${v:,.2f}"


def print_cost(console: Console, report: CostReport) -> None:
    from rich.markup import escape
    from rich.table import Table

    notes: list[str] = []

    def ref(items: Iterable[str]) -> str:
        marks = []
        for n in items:
            notes.append(n)
            marks.append(f"[{len(notes)}]")
        return " ".join(marks)

    t = Table(title=f"clusterctl cost: {report.cluster} (prices: {report.prices})")
    for col in ("pool", "nodes", "GPUs", "$/hour", "$/month", "basis"):
        t.add_column(col, overflow="fold", justify="right" if col in ("nodes", "GPUs", "$/hour", "$/month") else "left")
    for p in report.pools:
        nodes = f"{p.nodes}" + (f" (max {p.max_nodes})" if p.max_nodes is not None else "")
        t.add_row(f"{p.pool} ({p.provider})", nodes, str(p.gpus), _usd(p.hourly_usd), _usd(p.monthly_usd),
                  escape(f"{p.basis} {ref(p.notes)}".strip()))
    t.add_row("[bold]total[/]", "", str(sum(p.gpus for p in report.pools)), f"[bold]{_usd(report.total_hourly_usd)}[/]",
              f"[bold]{_usd(report.total_monthly_usd)}[/]", "" if report.complete else "[red]incomplete: some pools unpriced[/]")
    console.print(t)
    if report.rent_vs_buy:
        r = Table(title="rent vs buy (capex up front + power + ops, against renting the same GPUs)")
        for col in ("pool", "GPUs", "rent $/month", "buy capex", "own $/month", "break-even"):
            r.add_column(col, overflow="fold", justify="left" if col == "pool" else "right")
        for x in report.rent_vs_buy:
            r.add_row(x.pool, str(x.gpus), _usd(x.rent_month_usd), _usd(x.buy_capex_usd), _usd(x.own_opex_month_usd),
                      "never" if x.months is None else f"{x.months:.1f} months")
        console.print(r)
        for x in report.rent_vs_buy:
            console.print(f"  {escape(x.pool)}: {escape(x.verdict)} (rent: {escape(x.rent_basis)}) {ref(x.notes)}".rstrip(),
                          highlight=False)
    for i, n in enumerate(notes, start=1):
        console.print(f"  [{i}] {escape(n)}", highlight=False)
    params = report.params
    console.print(f"owned nodes: capex ${params['capex_per_gpu_usd']:,.0f}/GPU over {params['life_years']:g} y, "
                  f"${params['usd_per_kwh']:g}/kWh at PUE {params['pue']:g}, "
                  f"ops ${params['ops_usd_per_node_month']:,.0f}/node-month; "
                  f"{HOURS_PER_MONTH:g} h/month", highlight=False)
