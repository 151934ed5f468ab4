"""capbook.charts.costs: what the browser computes from the sliders equals capbook.cost.costs.

The Vega-Lite transforms of each chart are read from its spec and run in Python on the rows the
page embeds (calculate, then the window or joinaggregate), and the result is compared with
hand-worked cases and with the package's own optimiser at other prices.
"""
from __future__ import annotations

import math
import re

import pandas as pd
import pytest

from capbook.cost import costs
from capbook.charts.costs import (RESERVE_EXPRESSIONS, SATURATION_EXPRESSIONS, objectives_chart, reserve_chart,
                                  saturation_cost_chart, saturation_rows)


class _Datum:
    def __init__(self, row):
        self.__dict__.update(row)


def _py(expr: str) -> str:
    """A Vega expression as Python: ``a ? b : c`` → ``(b) if (a) else (c)``."""
    m = re.fullmatch(r"(.+?) \? (.+?) : (.+)", expr)
    return f"({m.group(2)}) if ({m.group(1)}) else ({m.group(3)})" if m else expr


def _eval(expr: str, row: dict, **params):
    return eval(_py(expr), {"pow": pow, "math": math}, {"datum": _Datum(row), **params})


def _layers(spec):
    return spec["layer"]


def _rows(spec, layer):
    return spec["datasets"][layer.get("data", spec.get("data", {})).get("name") or spec["data"]["name"]]


def _browser_argmin(spec, log_kappa: float) -> int:
    """Run the chart's 'cheapest' layer in Python: calculate, window row_number by its sort, filter rank 1."""
    layer = next(l for l in _layers(spec) if any("window" in t for t in l.get("transform", [])))
    rows = [dict(r) for r in _rows(spec, layer)]
    for t in layer["transform"]:
        if "calculate" in t:
            for r in rows:
                r[t["as"]] = _eval(t["calculate"], r, log_kappa=log_kappa)
        elif "window" in t:
            assert [(w["op"], w["as"]) for w in t["window"]] == [("row_number", "rank")]
            keys = [s["field"] for s in t["sort"]]
            assert all(s.get("order", "ascending") == "ascending" for s in t["sort"])
            rows.sort(key=lambda r: tuple(r[k] for k in keys))
            for i, r in enumerate(rows):
                r["rank"] = i + 1
        elif "filter" in t:
            assert t["filter"] == "datum.rank == 1"
            rows = [r for r in rows if r["rank"] == 1]
            break
    assert len(rows) == 1
    return int(rows[0]["replicas"])


def _hand_costs():
    # Five fleet sizes, each replica $100 a week; late requests fall tenfold per replica.
    return pd.DataFrame({"capacity_usd_per_week": [100.0, 200, 300, 400, 500],
                         "late_requests": [1000.0, 100, 10, 1, 0]},
                        index=pd.Index([1, 2, 3, 4, 5], name="replicas"))


def test_saturation_argmin_by_hand():
    # usd_per_request $0.01. At kappa = 10 a late request costs $0.10: totals 200, 210, 301, 400.1, 500 -> 1.
    # At kappa = 1,000 it costs $10: totals 10,100, 1,200, 400, 410, 500 -> 3.
    # At kappa = 100,000 ($1,000): 1,000,100, 100,200, 10,300, 1,400, 500 -> 5.
    spec = saturation_cost_chart(_hand_costs(), 0.01, price_ratio=1000, conventional_replicas=4).to_dict()
    assert _browser_argmin(spec, 1.0) == 1
    assert _browser_argmin(spec, 3.0) == 3
    assert _browser_argmin(spec, 5.0) == 5
    p = {q["name"]: q for q in spec["params"]}["log_kappa"]
    assert p["value"] == 3.0 and p["bind"]["input"] == "range" and (p["bind"]["min"], p["bind"]["max"]) == (1.0, 6.0)
    # the conventional fleet is the dashed rule
    assert any(r == {"replicas": 4, "plan": "P90 plan: 4 replicas"} for d in spec["datasets"].values() for r in d)


def test_saturation_ties_go_to_the_smaller_fleet():
    # kappa = 100 ($1 a late request): totals 1,100, 300, 310, 401, 500 -> 2; make 3 tie with 2 by hand:
    t = _hand_costs()
    t.loc[3, "capacity_usd_per_week"] = 290.0            # 290 + 10 = 300 = 200 + 100
    spec = saturation_cost_chart(t, 0.01, price_ratio=100, conventional_replicas=3).to_dict()
    assert _browser_argmin(spec, 2.0) == 2 == int(t.assign(tot=t.capacity_usd_per_week + t.late_requests).tot.idxmin())


def test_saturation_rows_drop_fleets_that_carry_nothing():
    t = _hand_costs()
    t.loc[1, "late_requests"] = float("inf")             # optimal_quantile's mark of a fleet with no capacity
    rows = saturation_rows(t, 0.01)
    assert list(rows["replicas"]) == [2, 3, 4, 5] and (rows["usd_per_request"] == 0.01).all()
    total = _eval(SATURATION_EXPRESSIONS["total_usd_per_week"], rows.iloc[0].to_dict(), log_kappa=2.0)
    assert total == pytest.approx(200 + 100 * 0.01 * 100)


def _hand_duration():
    return pd.DataFrame({"share_of_hours": [1.0, 1.0, 0.75, 0.5, 0.25]}, index=pd.Index([1, 2, 3, 4, 5], name="replica"))


def _browser_reserve(spec, ratio: float) -> tuple[int, float]:
    """Run the chart's summary layer in Python: calculate, joinaggregate sums, calculate, filter replica 1."""
    layer = next(l for l in _layers(spec) if any("joinaggregate" in t for t in l.get("transform", [])))
    rows = [dict(r) for r in _rows(spec, layer)]
    for t in layer["transform"]:
        if "calculate" in t:
            if t["as"] == "label":
                continue
            for r in rows:
                r[t["as"]] = _eval(t["calculate"], r, ratio=ratio)
        elif "joinaggregate" in t:
            for agg in t["joinaggregate"]:
                assert agg["op"] == "sum"
                s = sum(r[agg["field"]] for r in rows)
                for r in rows:
                    r[agg["as"]] = s
        elif "filter" in t:
            assert t["filter"] == "datum.replica == 1"
            rows = [r for r in rows if r["replica"] == 1]
    assert len(rows) == 1
    return int(rows[0]["reserved"]), float(rows[0]["usd_per_week"])


def test_reserve_chart_by_hand():
    # on demand $2 a replica-hour. Break-even 0.6: replicas needed in 100, 100 and 75 % of hours are reserved
    # (3); the rest run 0.5 + 0.25 of the week on demand. Bill: 168 × 2 × (3 × 0.6 + 0.75) = 856.80.
    # Break-even 0.8: reserve 2; 168 × 2 × (2 × 0.8 + 1.5) = 1,041.60. Break-even 1.0: reserve 2 (shares of
    # exactly 1 still reach it), 168 × 2 × (2 + 1.5) = 1,176.
    spec = reserve_chart(_hand_duration(), 2.0, break_even_share=0.6).to_dict()
    assert _browser_reserve(spec, 0.6) == (3, pytest.approx(856.8))
    assert _browser_reserve(spec, 0.8) == (2, pytest.approx(1041.6))
    assert _browser_reserve(spec, 1.0) == (2, pytest.approx(1176.0))
    p = {q["name"]: q for q in spec["params"]}["ratio"]
    assert p["value"] == 0.6 and p["bind"]["input"] == "range"
    assert set(RESERVE_EXPRESSIONS) == {"reserve", "on_demand_share", "usd_per_week"}


def test_objectives_chart_labels_dollars():
    frame = pd.DataFrame({"replicas": [22, 25, 25], "verified": ["impossible", "verified", "verified"],
                          "binding": ["x", "y", "z"], "usd_per_week": [8131.2, 9240.0, 9240.0]},
                         index=pd.Index([0.5, 1.0, 2.0], name="ttft_target_s"))
    spec = objectives_chart(frame).to_dict()
    rows = next(iter(spec["datasets"].values()))
    assert [r["label"] for r in rows] == ["$8,131 (22 replicas)", "$9,240 (25 replicas)", "$9,240 (25 replicas)"]
    assert [r["objective"] for r in rows] == ["TTFT ≤ 0.5 s", "TTFT ≤ 1 s", "TTFT ≤ 2 s"]
    # the fleet simulation's verdicts keep their colours whatever the order of the rows: verified blue,
    # impossible vermillion
    scale = spec["layer"][0]["encoding"]["color"]["scale"]
    assert scale == {"domain": ["verified", "impossible"], "range": ["#0072B2", "#D55E00"]}


@pytest.mark.parametrize("call, name", [
    (lambda: saturation_rows(pd.DataFrame({"x": [1]}), 0.01), "costs"),
    (lambda: saturation_rows(_hand_costs(), 0), "usd_per_request"),
    (lambda: saturation_cost_chart(_hand_costs(), 0.01, price_ratio=-1, conventional_replicas=2), "price_ratio"),
    (lambda: saturation_cost_chart(_hand_costs(), 0.01, price_ratio=10, conventional_replicas=0), "conventional_replicas"),
    (lambda: saturation_cost_chart(_hand_costs(), 0.01, price_ratio=10, conventional_replicas=2, log_kappa_range=(3, 1)),
     "log_kappa_range"),
    (lambda: reserve_chart(pd.DataFrame({"share": [1.0]}), 2.0, break_even_share=0.5), "duration"),
    (lambda: reserve_chart(_hand_duration(), 2.0, break_even_share=1.5), "break_even_share"),
    (lambda: reserve_chart(_hand_duration(), -2.0, break_even_share=0.5), "on_demand_usd_per_hour"),
    (lambda: objectives_chart(pd.DataFrame({"replicas": [1]})), "frame"),
])
def test_bad_arguments_name_themselves(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()


# --------------------------------------------------------------------------------------------
# Against capbook.cost.costs on the sample plan
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sample_plan():
    from capbook.app import datasets
    from capbook.plan.steps import capacity_plan

    inp = datasets.plan_inputs(datasets.load_gateway())
    plan = capacity_plan(**inp.arguments, simulate=False)
    return plan, inp.sweep, costs.load_sample_prices()


def test_browser_optimum_is_optimal_quantile_at_every_ratio(sample_plan):
    plan, sweep, prices = sample_plan
    opt = costs.optimal_quantile(plan, sweep, prices, 1.0)
    conv = int(opt.conventional.name)
    spec = saturation_cost_chart(opt.costs, opt.usd_per_request, price_ratio=opt.price_ratio,
                            conventional_replicas=conv).to_dict()
    seen = set()
    for log_kappa in (1.5, 2.5, 3.0, 3.64, 4.5, 5.5):
        kappa = 10 ** log_kappa
        want = costs.optimal_quantile(plan, sweep, prices, kappa * opt.usd_per_request).replicas
        got = _browser_argmin(spec, log_kappa)
        assert got == want, (log_kappa, got, want)
        seen.add(want)
    assert len(seen) >= 3           # the ratios span different optima, so the test can tell them apart
    # the slider slides log10 kappa in hundredths and opens on the sample's ratio rounded to that
    # step (it shows 2.64, not 2.6379831304078722); its label names kappa, not rho (utilisation)
    p = {q["name"]: q for q in spec["params"]}["log_kappa"]
    assert p["bind"]["step"] == 0.01 and p["value"] == round(math.log10(opt.price_ratio), 2)
    assert p["value"] != math.log10(opt.price_ratio) and str(p["value"]) == f"{p['value']:.2f}"
    assert "κ" in p["bind"]["name"] and "ρ" not in p["bind"]["name"]
    assert _browser_argmin(spec, p["value"]) == opt.replicas   # the text's optimum at the opening


def test_browser_reserve_count_is_reserve_split_at_other_prices(sample_plan):
    plan, sweep, prices = sample_plan
    split = costs.reserve_split(plan, sweep, prices)
    od = split.replica.on_demand_usd_per_hour
    spec = reserve_chart(split.duration, od, break_even_share=split.break_even_share).to_dict()
    seen = set()
    for ratio in (0.3, 0.5, split.break_even_share, 0.85):
        g = split.replica.price
        scaled = costs.PriceTable.from_frame(pd.DataFrame({
            "gpu": [g.gpu], "on_demand_usd_per_gpu_hour": [g.on_demand],
            "reserved_usd_per_gpu_hour": [ratio * g.on_demand]}))
        other = costs.reserve_split(plan, sweep, scaled)
        got = _browser_reserve(spec, ratio)
        assert got[0] == other.reserved, ratio
        assert got[1] == pytest.approx(other.usd_per_week["following, reserved floor + on demand"], rel=1e-9)
        seen.add(other.reserved)
    assert len(seen) >= 3
    # the chart opens on the price table's own ratio rounded to the slider's step (the slider shows
    # 0.64, not 0.6363636363636362): the same replicas reserved as the text quotes
    start = {q["name"]: q for q in spec["params"]}["ratio"]["value"]
    assert start == round(split.break_even_share, 2) and start != split.break_even_share
    assert _browser_reserve(spec, start)[0] == split.reserved
