"""`clusterctl cost`: hand-computed cases, the guide's rent-vs-buy example, the dated price table and its fallbacks."""

from __future__ import annotations

import json

import pytest

from clusterctl.catalog.prices import HOURS_PER_MONTH, HOURS_PER_YEAR, SHIPPED, Price, PriceTable, parse_price_list_item
from clusterctl.economics.cost import estimate_cost, print_cost, rent_equivalent
from clusterctl.economics.owned import OwnedCostParams, break_even_months, owned_cost
from clusterctl.validate import load_valid
from tests.conftest import ROOT
from tests.helpers import edited, load_dict


def example(name):
    return load_valid(ROOT / "examples" / name)


# --- the guide's example ------------------------------------------------------------------------------------------

def test_guides_rent_vs_buy_example():
    """The guide: "AWS p5 instances with H100s cost $150/hour for 32 GPUs. Over a year, you'll spend $1.3M. Buying
    costs $1.5M upfront plus $400K/year in ops." """
    rent_year = 150 * HOURS_PER_YEAR
    assert rent_year == 1_314_000  # "$1.3M"
    rent_month = 150 * HOURS_PER_MONTH  # 109,500
    ops_month = 400_000 / 12  # 33,333.33
    months = break_even_months(1_500_000, rent_month, ops_month)
    # By hand: 1,500,000 / (109,500 - 33,333.33) = 1,500,000 / 76,166.67 = 19.69 months -- in line with the guide's
    # advice to buy only when "training 24/7 for at least 18 months".
    assert months == pytest.approx(19.69, abs=0.01)
    # The same through owned_cost with the guide's figures (power folded into its ops figure, as the guide does).
    params = OwnedCostParams(capex_per_gpu_usd=1_500_000 / 32, power_kw_per_node=0.0, ops_usd_per_node_month=400_000 / 12 / 4)
    own = owned_cost(4, 8, "h100-sxm", params)
    assert own.capex_usd == pytest.approx(1_500_000)
    assert own.opex_month_usd * 12 == pytest.approx(400_000)
    assert break_even_months(own.capex_usd, rent_month, own.opex_month_usd) == pytest.approx(months)
    # Half-time use: renting at 50% costs 54,750/month; buying pays back after 1.5M / 21,416.67 = 70 months.
    assert break_even_months(1_500_000, rent_month * 0.5, ops_month) == pytest.approx(70.04, abs=0.01)
    # Renting for less than owning's running cost: never pays back.
    assert break_even_months(1_500_000, 30_000, ops_month) is None


def test_owned_cost_by_hand():
    own = owned_cost(4, 8, "h100-sxm")  # the defaults
    assert own.capex_usd == pytest.approx(4 * 8 * 46_875)  # 1.5M
    assert own.amortization_month_usd == pytest.approx(1_500_000 / 48)  # 31,250
    # DGX H100 10.2 kW x PUE 1.56 x 730 h x $0.08/kWh = $929.26 per node-month
    assert own.power_month_usd == pytest.approx(4 * 10.2 * 1.56 * 730 * 0.08)
    assert own.power_month_usd == pytest.approx(3717.04, abs=0.01)
    assert own.ops_month_usd == pytest.approx(4 * 8333.33, abs=0.02)
    assert own.monthly_usd == pytest.approx(31_250 + 3717.04 + 33_333.33, abs=0.02)
    assert own.hourly_usd == pytest.approx(own.monthly_usd / 730)
    # Explicit parameters win; unknown GPU models get an estimate that says so.
    mine = owned_cost(2, 8, "b200", OwnedCostParams(capex_per_node_usd=500_000, life_years=5, usd_per_kwh=0.10, pue=1.2,
                                                      ops_usd_per_node_month=2000))
    assert mine.capex_usd == 1_000_000 and mine.amortization_month_usd == pytest.approx(1_000_000 / 60)
    assert mine.power_month_usd == pytest.approx(2 * 14.3 * 1.2 * 730 * 0.10)
    assert owned_cost(1, 4, "l40s").notes[0].startswith("power 5.1 kW/node estimated")


# --- the examples ------------------------------------------------------------------------------------------------

def test_aws_spot_pool():
    r = estimate_cost(example("aws-p5-spot.yaml"))
    p5 = r.pools[0]
    assert (p5.pool, p5.nodes, p5.gpus) == ("p5", 16, 128)
    assert p5.hourly_usd == pytest.approx(16 * 55.04)  # 880.64
    assert p5.monthly_usd == pytest.approx(16 * 55.04 * 730)  # 642,867.20
    assert "upper bound" in p5.notes[0]  # no dated spot price: on-demand, said so
    ctl = r.pools[-1]
    assert ctl.hourly_usd == pytest.approx(0.8064)
    assert r.total_hourly_usd == pytest.approx(880.64 + 0.8064)
    assert r.total_monthly_usd == pytest.approx((880.64 + 0.8064) * 730)
    assert r.complete
    # Buying 16 nodes: 6.0M; renting them on-demand 24/7: 642,867.20/month; owning costs 16 x 9,262.59/month to run.
    rvb = r.rent_vs_buy[0]
    assert rvb.buy_capex_usd == pytest.approx(6_000_000)
    assert rvb.months == pytest.approx(6_000_000 / (642_867.20 - 16 * (929.2608 + 8333.3333)), abs=0.01)  # 12.13


def test_onprem_pool_and_rent_equivalent():
    r = estimate_cost(example("onprem-64xh100-ib.yaml"))
    gpu = r.pools[0]
    assert gpu.kind == "owned" and gpu.nodes == 64 and gpu.gpus == 512
    assert gpu.owned["capex_usd"] == pytest.approx(24_000_000)
    assert gpu.monthly_usd == pytest.approx(24_000_000 / 48 + 64 * (929.2608 + 8333.3333), abs=0.05)
    rvb = r.rent_vs_buy[0]
    assert rvb.rent_basis == "64 x p5.48xlarge on-demand $55.04/h at 100% use"
    assert rvb.months == pytest.approx(375_000 / (55.04 * 730 - (929.2608 + 8333.3333)), abs=0.01)
    assert rvb.verdict.startswith("buy if you will use it 100% of the time for more than 12.1 months")
    # At 30% utilization renting costs 12,053.76/node-month against 9,262.59 to run an owned one: 134 months > life.
    r30 = estimate_cost(example("onprem-64xh100-ib.yaml"), utilization=0.3).rent_vs_buy[0]
    assert r30.months == pytest.approx(375_000 / (55.04 * 730 * 0.3 - 9262.5941), abs=0.05)
    assert r30.verdict.startswith("rent: buying pays back after 134.")


def test_hybrid_elastic_burst():
    r = estimate_cost(example("hybrid-burst.yaml"))
    owned, burst, ctl = r.pools
    assert burst.nodes == 0 and burst.max_nodes == 32 and burst.hourly_usd == 0 and burst.monthly_usd == 0
    assert burst.node_hour_usd == pytest.approx(55.04) and burst.hourly_max_usd == pytest.approx(32 * 55.04)
    assert any("us-west-2" in n and "us-east-1's used" in n for n in burst.notes)
    assert ctl.hourly_usd == 0 and "not costed" in ctl.basis
    assert r.total_monthly_usd == pytest.approx(owned.monthly_usd)
    assert [x.nodes for x in r.rent_vs_buy] == [8, 32]


def test_fallback_market_node_hour_is_in_the_notes():
    spot_first = load_dict(edited("hybrid-burst.yaml", lambda d: d["pools"][1].update(market="spot", fallback_markets=["on-demand"])))
    burst = estimate_cost(spot_first.spec).pools[1]
    assert "fallback on-demand: each burst node-hour $55.04 when spot has no capacity" in burst.notes
    od_first = load_dict(edited("hybrid-burst.yaml", lambda d: d["pools"][1].update(fallback_markets=["spot"])))
    burst = estimate_cost(od_first.spec).pools[1]
    # No spot price is shipped: the on-demand price stands in, and the note says it is an upper bound.
    assert "fallback spot: each burst node-hour $55.04 (upper bound: on-demand) when on-demand has no capacity" in burst.notes


def test_lab_costs_nothing():
    r = estimate_cost(example("lab.yaml"))
    assert r.total_hourly_usd == 0 and r.rent_vs_buy == []


def test_unpriced_instance_type_is_not_invented():
    spec = load_dict(edited("aws-p5-spot.yaml", lambda d: d["pools"][0].update(instance_type="p5en.48xlarge"))).spec
    r = estimate_cost(spec)
    assert r.pools[0].hourly_usd is None and not r.complete
    assert "no spot or on-demand price for p5en.48xlarge" in r.pools[0].notes[0]
    assert r.rent_vs_buy[0].months is None and "cannot compare" in r.rent_vs_buy[0].verdict
    # A refreshed table fills it in.
    fresh = PriceTable((Price("p5en.48xlarge", "us-east-1", "spot", 30.0, "2026-01-01", "test"),
                        Price("p5en.48xlarge", "us-east-1", "on-demand", 60.0, "2026-01-01", "test")), name="refreshed")
    r = estimate_cost(spec, prices=PriceTable().merged(fresh))
    assert r.pools[0].hourly_usd == pytest.approx(16 * 30.0) and r.pools[0].notes == []
    assert r.complete


def test_capacity_block_and_reserved_markets():
    cb = load_dict(edited("aws-p5-spot.yaml", lambda d: d["pools"][0].update(market="capacity-block",
                                                                            capacity_reservation_id="cr-0123456789abcdef0"))).spec
    assert estimate_cost(cb).pools[0].hourly_usd == pytest.approx(16 * 39.33)
    rs = load_dict(edited("aws-p5-spot.yaml", lambda d: d["pools"][0].update(market="reserved",
                                                                            capacity_reservation_id="cr-0123456789abcdef0"))).spec
    pool = estimate_cost(rs).pools[0]
    assert pool.hourly_usd == pytest.approx(16 * 55.04) and "whether used or not" in pool.notes[0]


# --- the price table ----------------------------------------------------------------------------------------------

def test_every_shipped_price_is_dated_and_sourced():
    for p in SHIPPED:
        assert p.usd_per_hour > 0 and len(p.as_of) >= 7 and p.as_of[:2] == "20" and p.source
        assert p.market in ("on-demand", "spot", "capacity-block")
    assert len({p.key for p in SHIPPED}) == len(SHIPPED)


def test_price_table_round_trip():
    t = PriceTable()
    back = PriceTable.from_json(t.to_json())
    assert back.prices == t.prices and back.name == "shipped"


def test_rent_equivalent():
    assert rent_equivalent("h100-sxm", 8, PriceTable()) == "p5.48xlarge"
    assert rent_equivalent("a100-40gb", 8, PriceTable()) == "p4d.24xlarge"
    assert rent_equivalent("h200", 8, PriceTable()) == "p5e.48xlarge"  # no price, but the type exists
    assert rent_equivalent("l40s", 8, PriceTable()) is None


def test_price_list_parsing():
    """The shape AWS's Price List API returns (pricing.get_products PriceList entries are JSON strings)."""
    item = json.dumps({"product": {"attributes": {"instanceType": "p5.48xlarge"}}, "terms": {"OnDemand": {
        "ABC.JRTCKXETXF": {"priceDimensions": {"ABC.JRTCKXETXF.6YS6EN2CT7": {
            "unit": "Hrs", "pricePerUnit": {"USD": "55.0400000000"}, "description": "$55.04 per On Demand Linux p5.48xlarge Instance Hour"}}}}}})
    assert parse_price_list_item(item) == 55.04
    assert parse_price_list_item({"terms": {}}) is None


def test_refresh_with_stubbed_aws():
    """fetch_on_demand / fetch_spot against botocore's Stubber (no network, no credentials used)."""
    import datetime

    import boto3
    from botocore.stub import ANY, Stubber

    from clusterctl.catalog.prices import fetch_on_demand, fetch_spot

    session = boto3.session.Session(aws_access_key_id="x", aws_secret_access_key="y", region_name="us-east-1")
    clients = {}

    class FakeSession:
        def client(self, name, region_name=None):
            return clients[name]

    pricing = session.client("pricing", region_name="us-east-1")
    ec2 = session.client("ec2", region_name="us-east-1")
    clients.update(pricing=pricing, ec2=ec2)
    item = json.dumps({"terms": {"OnDemand": {"T": {"priceDimensions": {"D": {"unit": "Hrs", "pricePerUnit": {"USD": "55.04"}}}}}}})
    with Stubber(pricing) as sp, Stubber(ec2) as se:
        sp.add_response("get_products", {"PriceList": [item], "FormatVersion": "aws_v1"},
                        {"ServiceCode": "AmazonEC2", "Filters": ANY, "MaxResults": 10})
        now = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
        se.add_response("describe_spot_price_history", {"SpotPriceHistory": [
            {"AvailabilityZone": "us-east-1a", "InstanceType": "p5.48xlarge", "ProductDescription": "Linux/UNIX", "SpotPrice": "20.0", "Timestamp": now},
            {"AvailabilityZone": "us-east-1b", "InstanceType": "p5.48xlarge", "ProductDescription": "Linux/UNIX", "SpotPrice": "30.0", "Timestamp": now},
        ]}, {"InstanceTypes": ["p5.48xlarge"], "ProductDescriptions": ["Linux/UNIX"], "StartTime": ANY, "EndTime": ANY})
        od = fetch_on_demand(["p5.48xlarge"], ["us-east-1"], session=FakeSession(), today="2026-01-01")
        spot = fetch_spot(["p5.48xlarge"], ["us-east-1"], session=FakeSession(), today="2026-01-01")
    assert od == [Price("p5.48xlarge", "us-east-1", "on-demand", 55.04, "2026-01-01", "AWS Price List API (get_products)")]
    assert spot[0].usd_per_hour == 25.0 and spot[0].market == "spot" and "2 AZs" in spot[0].source


def test_printer_and_json():
    from rich.console import Console

    r = estimate_cost(example("hybrid-burst.yaml"))
    con = Console(record=True, width=200)
    print_cost(con, r)
    text = con.export_text()
    assert "total" in text and "$136,600.75" in text and "12.1 months" in text and "[1]" in text
    doc = json.loads(json.dumps(r.to_dict()))
    assert doc["total"]["monthly_usd"] == pytest.approx(136_600.75, abs=0.01) and doc["total"]["complete"] is True
