"""AWS prices for `clusterctl cost`: a dated table shipped with clusterctl, refreshable from AWS when reachable.

Every row names its date and source. Prices are USD per instance-hour, Linux, shared tenancy, before taxes and
before any Savings Plan / EDP discount. They go stale: `refresh_prices()` rebuilds the table from the AWS Price List
API (on-demand) and EC2's spot price history, and the result can be saved (`PriceTable.to_json`) and passed to
`cost` instead of this one.

What is NOT in the table, and what `cost` does about it (it always says so in the row's notes):
- spot: AWS publishes no stable spot price (it moves with supply, per AZ). Without a refreshed table, a spot pool is
  costed at the on-demand price as an upper bound.
- reserved (an On-Demand Capacity Reservation): billed at the on-demand rate whether used or not.
- a region without a row: the us-east-1 price (P5 list prices are the same in the large US regions; elsewhere differ).
- instance types without a dated price here (p4de, p5e, p5en, p6-b200 on-demand): no number is invented; refresh.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Sequence

MARKETS = ("on-demand", "spot", "capacity-block")
DEFAULT_REGION = "us-east-1"
HOURS_PER_MONTH = 730.0  # 8760 h / 12, AWS's own monthly convention
HOURS_PER_YEAR = 8760.0


@dataclass(frozen=True)
class Price:
    instance_type: str
    region: str
    market: str  # on-demand | spot | capacity-block
    usd_per_hour: float
    as_of: str  # YYYY-MM or YYYY-MM-DD
    source: str

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.instance_type, self.region, self.market)


# Source A: AWS, "Announcing up to 45% price reduction for Amazon EC2 NVIDIA GPU-accelerated instances" (What's New,
#   June 2025: P5 on-demand down up to 45%, P4d/P4de up to 33%) and the EC2 On-Demand pricing page after it.
#   p5.48xlarge was $98.32/h at its July 2023 launch (EC2 pricing page; The Next Platform, 2023-07-27).
# Source B: AWS EC2 Capacity Blocks for ML pricing page, "effective instance hourly rate" (reservation fee + Linux OS
#   fee), rates published for blocks bought before 2025-01-01 (the page: "updated regularly ... next update January 1,
#   2025"). Capacity Block rates change every quarter or so: refresh before relying on them.
# Source C: EC2 On-Demand pricing page, m7i (price unchanged since the family's August 2023 launch).
SHIPPED: tuple[Price, ...] = (
    Price("p5.48xlarge", "us-east-1", "on-demand", 55.04, "2025-06", "A: EC2 on-demand after the June 2025 P5 price cut"),
    Price("p4d.24xlarge", "us-east-1", "on-demand", 21.96, "2025-06", "A: EC2 on-demand after the June 2025 P4 price cut"),
    Price("p5.48xlarge", "us-east-1", "capacity-block", 39.33, "2024-12", "B: Capacity Blocks effective hourly rate"),
    Price("p5.48xlarge", "us-east-2", "capacity-block", 39.33, "2024-12", "B: Capacity Blocks effective hourly rate"),
    Price("p5e.48xlarge", "us-east-2", "capacity-block", 43.26, "2024-12", "B: Capacity Blocks effective hourly rate"),
    Price("p4d.24xlarge", "us-east-2", "capacity-block", 14.75, "2024-12", "B: Capacity Blocks effective hourly rate"),
    Price("p4d.24xlarge", "us-west-2", "capacity-block", 14.75, "2024-12", "B: Capacity Blocks effective hourly rate"),
    Price("m7i.4xlarge", "us-east-1", "on-demand", 0.8064, "2025-06", "C: EC2 on-demand (m7i list price since 2023-08)"),
)


@dataclass(frozen=True)
class Quote:
    """A price for a pool's market, and how it was obtained (notes say what was assumed)."""

    usd_per_hour: float | None
    price: Price | None
    notes: tuple[str, ...] = ()

    @property
    def basis(self) -> str:
        if self.price is None:
            return "no price"
        p = self.price
        return f"{p.instance_type} {p.market} {p.region} ${p.usd_per_hour:g}/h (as of {p.as_of})"


class PriceTable:
    def __init__(self, prices: Iterable[Price] = SHIPPED, name: str = "shipped"):
        self.name = name
        self.prices = {p.key: p for p in prices}

    def get(self, instance_type: str, region: str, market: str) -> Price | None:
        return self.prices.get((instance_type, region, market))

    def _regional(self, instance_type: str, region: str, market: str) -> tuple[Price | None, list[str]]:
        p = self.get(instance_type, region, market)
        if p is not None:
            return p, []
        p = self.get(instance_type, DEFAULT_REGION, market)
        if p is not None and region != DEFAULT_REGION:
            return p, [f"no {market} price for {region} in the table: {DEFAULT_REGION}'s used"]
        alt = sorted((q for q in self.prices.values() if q.instance_type == instance_type and q.market == market),
                     key=lambda q: q.region)
        if alt:
            return alt[0], [f"no {market} price for {region} in the table: {alt[0].region}'s used"]
        return None, []

    def quote(self, instance_type: str, region: str, market: str) -> Quote:
        """The hourly price of one instance in a pool's market, falling back as the module docstring says."""
        if market in ("on-demand", "reserved"):
            p, notes = self._regional(instance_type, region, "on-demand")
            if market == "reserved":
                notes = ["capacity reservation: billed at the on-demand rate whether used or not", *notes]
            if p is None:
                return Quote(None, None, (f"no dated on-demand price for {instance_type} in the {self.name} table: refresh it",))
            return Quote(p.usd_per_hour, p, tuple(notes))
        p, notes = self._regional(instance_type, region, market)
        if p is not None:
            return Quote(p.usd_per_hour, p, tuple(notes))
        od, od_notes = self._regional(instance_type, region, "on-demand")
        if od is None:
            return Quote(None, None, (f"no {market} or on-demand price for {instance_type} in the {self.name} table: refresh it",))
        why = ("spot prices move with supply and are not in the shipped table" if market == "spot"
               else f"no {market} price in the {self.name} table")
        return Quote(od.usd_per_hour, od, (f"{why}: on-demand used as an upper bound", *od_notes))

    def to_json(self) -> str:
        return json.dumps({"name": self.name, "prices": [asdict(p) for p in sorted(self.prices.values(), key=lambda p: p.key)]},
                          indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> "PriceTable":
        data = json.loads(text)
        return cls(tuple(Price(**p) for p in data["prices"]), name=data.get("name", "saved"))

    def merged(self, other: "PriceTable") -> "PriceTable":
        """This table with other's rows winning (e.g. a refresh of a few types over the shipped table)."""
        t = PriceTable(tuple({**self.prices, **other.prices}.values()), name=f"{other.name}+{self.name}")
        return t


# --- refresh from AWS (needs credentials and the network; never called by the tests) -------------------------

# The Price List API names regions by their location (it also has a regionCode attribute since 2022).
_PRICING_ENDPOINT_REGION = "us-east-1"


def parse_price_list_item(item: str | dict) -> float | None:
    """One PriceList entry of pricing.get_products -> USD/hour of its OnDemand term (None if there is none)."""
    data = json.loads(item) if isinstance(item, str) else item
    for term in data.get("terms", {}).get("OnDemand", {}).values():
        for dim in term.get("priceDimensions", {}).values():
            usd = dim.get("pricePerUnit", {}).get("USD")
            if usd is not None and dim.get("unit") in ("Hrs", "Hours"):
                return float(usd)
    return None


def fetch_on_demand(instance_types: Sequence[str], regions: Sequence[str], session: Any = None, today: str | None = None) -> list[Price]:
    """On-demand Linux prices from the AWS Price List API (boto3 `pricing`, served from us-east-1)."""
    import datetime

    import boto3

    session = session or boto3.session.Session()
    client = session.client("pricing", region_name=_PRICING_ENDPOINT_REGION)
    today = today or datetime.date.today().isoformat()
    out = []
    for it in instance_types:
        for region in regions:
            filters = [
                {"Type": "TERM_MATCH", "Field": "instanceType", "Value": it},
                {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
                {"Type": "TERM_MATCH", "Field": "operatingSystem", "Value": "Linux"},
                {"Type": "TERM_MATCH", "Field": "tenancy", "Value": "Shared"},
                {"Type": "TERM_MATCH", "Field": "preInstalledSw", "Value": "NA"},
                {"Type": "TERM_MATCH", "Field": "capacitystatus", "Value": "Used"},
                {"Type": "TERM_MATCH", "Field": "licenseModel", "Value": "No License required"},
            ]
            resp = client.get_products(ServiceCode="AmazonEC2", Filters=filters, MaxResults=10)
            prices = [p for p in map(parse_price_list_item, resp.get("PriceList", [])) if p]
            if prices:
                out.append(Price(it, region, "on-demand", min(prices), today, "AWS Price List API (get_products)"))
    return out


def fetch_spot(instance_types: Sequence[str], regions: Sequence[str], session: Any = None, today: str | None = None) -> list[Price]:
    """Current spot prices (Linux/UNIX) from EC2's spot price history: the mean over the region's AZs."""
    import datetime

    import boto3

    session = session or boto3.session.Session()
    now = datetime.datetime.now(datetime.timezone.utc)
    today = today or now.date().isoformat()
    out = []
    for region in regions:
        ec2 = session.client("ec2", region_name=region)
        for it in instance_types:
            resp = ec2.describe_spot_price_history(InstanceTypes=[it], ProductDescriptions=["Linux/UNIX"],
                                                   StartTime=now, EndTime=now)
            latest: dict[str, float] = {}
            for h in sorted(resp.get("SpotPriceHistory", []), key=lambda h: h["Timestamp"]):
                latest[h["AvailabilityZone"]] = float(h["SpotPrice"])
            if latest:
                mean = sum(latest.values()) / len(latest)
                out.append(Price(it, region, "spot", round(mean, 4), today,
                                 f"EC2 DescribeSpotPriceHistory, mean of {len(latest)} AZs"))
    return out


def refresh_prices(instance_types: Sequence[str], regions: Sequence[str], session: Any = None) -> PriceTable:
    """A fresh table for these types and regions (on-demand + spot), to save and use in place of the shipped one."""
    prices = fetch_on_demand(instance_types, regions, session) + fetch_spot(instance_types, regions, session)
    return PriceTable(tuple(prices), name="refreshed")
