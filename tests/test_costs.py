"""Tests of capbook.cost.costs: price tables, the cost of a plan, the fleet as a function of the peak,
the forecast week as a distribution, the price of each choice, reserved against on-demand, and
the cheapest configuration.

Oracles: price tables written here and read back with the standard ``csv`` module; dollar
arithmetic worked on paper (each derivation is in a comment); :func:`capbook.plan.steps.capacity_plan`
at other demand scales (the pipeline ``FleetCurve`` re-solves); Monte Carlo draws from the
forecast's own error sample (seeded numpy Generator) for the expected excess and hours over
capacity; a brute-force search over a fine grid of planned quantiles for the optimal quantile;
a one-hour newsvendor with a linear fleet whose critical fractile is derived in closed form;
a brute-force search over the number of reserved replicas.

The sample plan (29 A100 replicas) is built once per module; everything else reuses it.
"""
from __future__ import annotations

import csv
import math
import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from capbook.cost import costs
from capbook.app import datasets
from capbook.forecast.tokens import HOURS_PER_WEEK
from capbook.cost.costs import (
    HOURS_PER_YEAR,
    PRICE_COLUMNS,
    FleetCurve,
    PriceTable,
    WeekDemand,
    as_prices,
    compare_configurations,
    load_sample_prices,
    optimal_quantile,
    plan_cost,
    price_of_objectives,
    price_of_pools,
    price_of_quantiles,
    price_of_regions,
    read_prices,
    replica_price,
    reserve_split,
    time_zone_regions,
    week_demand,
)
from capbook.plan.steps import SLO, LogAggregates, capacity_plan
from capbook.sweeps.sweep import Sweep, list_sample_sweeps, load_sample_sweep
from capbook.logs.requestlog import read_requests

HEADER = ",".join(PRICE_COLUMNS)
T0 = pd.Timestamp("2026-03-02 00:00:00", tz="UTC")


def _csv_prices(path) -> dict:
    """The price file read with the standard csv module: {gpu: (on demand, reserved)}."""
    with open(path, newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.reader(fh) if r and not r[0].lstrip().startswith("#")]
    assert tuple(rows[0]) == PRICE_COLUMNS
    return {r[0]: (float(r[1]), float(r[2])) for r in rows[1:]}


SAMPLE = _csv_prices(datasets.data_dir() / costs.SAMPLE_PRICES)


def _write(tmp_path, text: str, name: str = "prices.csv"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def _table(rows, source="test table") -> PriceTable:
    return PriceTable.from_frame(pd.DataFrame(rows, columns=list(PRICE_COLUMNS)), source)


# --------------------------------------------------------------------------------------------
# Module fixtures: the sample plan, built once
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def inputs():
    with pytest.MonkeyPatch.context() as mp:
        for var in ("CAPBOOK_REQUESTS", "CAPBOOK_SWEEP", "CAPBOOK_HISTORY", "CAPBOOK_PRICES"):
            mp.delenv(var, raising=False)
        return datasets.plan_inputs()


@pytest.fixture(scope="module")
def sums(inputs) -> LogAggregates:
    return inputs.arguments["log"]


@pytest.fixture(scope="module")
def sweep(inputs):
    return inputs.arguments["sweep"]


@pytest.fixture(scope="module")
def plan(inputs):
    return capacity_plan(**inputs.arguments)


@pytest.fixture(scope="module")
def unsimulated(inputs):
    """The sample plan without the fleet simulation (Erlang C's serving count)."""
    return capacity_plan(**inputs.arguments, simulate=False)


@pytest.fixture(scope="module")
def prices() -> PriceTable:
    return load_sample_prices()


@pytest.fixture(scope="module")
def curve(plan, sweep) -> FleetCurve:
    return FleetCurve(plan, sweep)


@pytest.fixture(scope="module")
def week(plan) -> WeekDemand:
    return week_demand(plan)


@pytest.fixture(scope="module")
def shared_curve(plan, sweep, curve):
    """The functions under test build FleetCurve(plan, sweep) themselves; hand them the module's
    curve for the sample plan (the same class, its memo shared) so the suite stays fast."""
    real = costs.FleetCurve

    def make(p, s):
        return curve if (p is plan and s is sweep) else real(p, s)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(costs, "FleetCurve", make)
        yield curve


@pytest.fixture(scope="module")
def small_log(tmp_path_factory):
    """Three hours of Poisson traffic without a tenant column: too short to forecast."""
    rng = np.random.default_rng(7)
    t = np.cumsum(rng.exponential(1 / 3.0, 40_000))
    t = t[t < 3 * 3600]
    n = t.size
    frame = pd.DataFrame({
        "arrival_time": T0 + pd.to_timedelta(np.round(t * 1e6).astype(np.int64), unit="us"),
        "input_tokens": rng.integers(500, 2500, n),
        "output_tokens": rng.integers(100, 500, n),
        "model": "m-chat", "tier": "interactive", "status": "served"})
    path = tmp_path_factory.mktemp("costs") / "short.parquet"
    frame.to_parquet(path, index=False)
    return read_requests(path)


@pytest.fixture(scope="module")
def short_plan(small_log, sweep):
    return capacity_plan(small_log, sweep, simulate=False)


def _a100() -> float:
    return SAMPLE["A100-SXM-80GB"][0]


# --------------------------------------------------------------------------------------------
# 1. Price tables
# --------------------------------------------------------------------------------------------
def test_read_prices_keeps_comments_and_numbers(tmp_path):
    p = _write(tmp_path, "# Illustrative, not quotes\n#  chosen 2026-12-01, with, commas\n"
                         f"{HEADER}\nX-1,2.00,1.30\n\nY 2,3,3\n")
    t = read_prices(p)
    assert t.comments == ("Illustrative, not quotes", "chosen 2026-12-01, with, commas")
    assert t.source == str(p)
    assert t.gpus == ["X-1", "Y 2"]
    assert list(t.frame.columns) == list(PRICE_COLUMNS)
    x = t.price("X-1")
    assert (x.gpu, x.on_demand, x.reserved) == ("X-1", 2.0, 1.3)
    # reserved 1.30 / on demand 2.00 = 0.65; equal prices break even at 1
    assert x.break_even_share == pytest.approx(0.65, rel=1e-15)
    assert t.price("Y 2").break_even_share == 1.0
    # as_prices accepts a table, a str path, a Path and a frame
    assert as_prices(t) is t
    assert as_prices(str(p)).gpus == as_prices(p).gpus == as_prices(t.frame).gpus == t.gpus
    with pytest.raises(ValueError, match="PriceTable, a path"):
        as_prices(42)


@pytest.mark.parametrize("body, where, words", [
    ("gpu,on_demand,reserved\nX,2,1\n", "line 2", ["the header is", HEADER]),
    (f"gpu,reserved_usd_per_gpu_hour,on_demand_usd_per_gpu_hour\nX,2,1\n", "line 2", ["it must be"]),
    (f"{HEADER}\nX,2.0,\n", "line 3 (X)", ["missing reserved_usd_per_gpu_hour"]),
    (f"{HEADER}\nX,,1\n", "line 3 (X)", ["missing on_demand_usd_per_gpu_hour"]),
    (f"{HEADER}\nX,two,1\n", "line 3 (X)", ["on_demand_usd_per_gpu_hour is not a number: 'two'"]),
    (f"{HEADER}\nX,0,0\n", "line 3 (X)", ["must be a positive number", "got 0"]),
    (f"{HEADER}\nX,2,-1\n", "line 3 (X)", ["reserved_usd_per_gpu_hour must be a positive", "got -1"]),
    (f"{HEADER}\nX,inf,1\n", "line 3 (X)", ["must be a positive"]),
    (f"{HEADER}\nX,1.00,2.00\n", "line 3 (X)", ["reserved price (2) is above", "on-demand price (1)", "swapped"]),
    (f"{HEADER}\nH100-SXM,4,2.5\nA100,2,1\nh100 sxm,4,2\n", "line 5", ["'h100 sxm' is priced twice",
                                                                       "first at line 3"]),
    (f"{HEADER}\n,2,1\n", "line 3", ["gpu column is empty"]),
    (f"{HEADER}\nX,2\n", "line 3", ["2 field(s), expected 3"]),
    (f"{HEADER}\nX,2,1,0.5\n", "line 3", ["4 field(s), expected 3"]),
    (f"{HEADER}\n", "", ["no price rows"]),
    ("# only a comment\n", "", ["no header"]),
])
def test_read_prices_errors_name_file_line_gpu_and_column(tmp_path, body, where, words):
    # one comment line first, so that "line N" counts the file's lines, comments included
    p = _write(tmp_path, "# a comment\n" + body)
    with pytest.raises(ValueError) as exc:
        read_prices(p)
    msg = str(exc.value)
    assert str(p) in msg
    assert where in msg
    for w in words:
        assert w in msg, (w, msg)


def test_read_prices_spreadsheet_export(tmp_path):
    # a byte-order mark, CRLF line ends, spaces around the cells and a quoted name with a comma
    p = tmp_path / "export.csv"
    p.write_bytes(("\ufeff# exported\r\n gpu , on_demand_usd_per_gpu_hour , reserved_usd_per_gpu_hour\r\n"
                   "\"H100, SXM\", 4.00 , 2.50\r\n").encode("utf-8"))
    t = read_prices(p)
    assert t.comments == ("exported",) and t.gpus == ["H100, SXM"]
    assert (t.price("h100 sxm").on_demand, t.price("h100 sxm").reserved) == (4.0, 2.5)


def test_read_prices_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        read_prices(tmp_path / "nope.csv")


def test_price_table_from_frame_errors_name_the_row():
    ok = {"gpu": "X", "on_demand_usd_per_gpu_hour": 2.0, "reserved_usd_per_gpu_hour": 1.0}
    with pytest.raises(ValueError, match=r"row 2 \(Y\): missing reserved_usd_per_gpu_hour"):
        PriceTable.from_frame(pd.DataFrame([ok, {**ok, "gpu": "Y", "reserved_usd_per_gpu_hour": np.nan}]))
    with pytest.raises(ValueError, match=r"my prices, row 3: the gpu column is empty"):
        PriceTable.from_frame(pd.DataFrame([ok, {**ok, "gpu": "Y"}, {**ok, "gpu": None}]), "my prices")
    with pytest.raises(ValueError, match=r"row 2: GPU 'x' is priced twice \(first at row 1\)"):
        PriceTable.from_frame(pd.DataFrame([ok, {**ok, "gpu": "x"}]))
    with pytest.raises(ValueError, match=r"row 1 \(X\): the reserved price \(3\) is above"):
        PriceTable.from_frame(pd.DataFrame([{**ok, "reserved_usd_per_gpu_hour": 3.0}]))
    with pytest.raises(ValueError, match=r"missing column\(s\) \['reserved_usd_per_gpu_hour'\]"):
        PriceTable.from_frame(pd.DataFrame([ok]).drop(columns="reserved_usd_per_gpu_hour"))
    with pytest.raises(ValueError, match="must be a DataFrame"):
        PriceTable.from_frame([ok])


def test_price_lookup_exact_by_parts_ambiguous_and_unknown():
    t = _table([("H100-SXM-80GB", 4.0, 2.5), ("A100-SXM-80GB", 2.2, 1.4), ("L4", 0.8, 0.5)])
    # exact: case, spaces, hyphens and underscores do not matter, and there is no note
    for name in ("H100-SXM-80GB", "h100 sxm 80gb", "h100_SXM-80GB", "H100SXM80GB"):
        pr, note = t.match(name)
        assert (pr.gpu, pr.on_demand, pr.reserved, note) == ("H100-SXM-80GB", 4.0, 2.5, "")
    assert t.price("l4").on_demand == 0.8
    # by parts: {h100, 80gb} (the vendor dropped) is in one row's parts only
    pr, note = t.match("nvidia-h100-80gb")
    assert pr.gpu == "H100-SXM-80GB" and pr.on_demand == 4.0
    assert "priced as 'H100-SXM-80GB'" in note and "80gb, h100" in note
    assert t.price("NVIDIA A100").gpu == "A100-SXM-80GB"
    # a part the row lacks (40gb) is no match: a 40 GB card is not priced as the 80 GB one
    with pytest.raises(ValueError, match="no price for GPU 'A100-40GB'"):
        t.price("A100-40GB")
    # a name of vendor words only has no parts: no match rather than matching everything
    with pytest.raises(ValueError, match="no price for GPU 'nvidia'"):
        t.price("nvidia")
    # ambiguous: both rows hold {h100, 80gb}
    t2 = _table([("H100-SXM-80GB", 4.0, 2.5), ("H100-PCIE-80GB", 3.0, 2.0)])
    with pytest.raises(ValueError, match="'nvidia-h100-80gb' could be any of H100-SXM-80GB, H100-PCIE-80GB"):
        t2.price("nvidia-h100-80gb")
    assert t2.price("h100 pcie 80gb").on_demand == 3.0  # the exact rule still picks one
    # unknown: the message lists the table's GPUs and the row to add
    with pytest.raises(ValueError) as exc:
        t.price("MI300X")
    msg = str(exc.value)
    assert "test table" in msg and "H100-SXM-80GB, A100-SXM-80GB, L4" in msg and "add a row 'MI300X," in msg


def test_shipped_price_table_reads_covers_sample_sweeps_and_says_illustrative(prices):
    # the same numbers as the csv module reads, in the file's order
    assert prices.gpus == list(SAMPLE)
    for gpu, (od, rs) in SAMPLE.items():
        pr = prices.price(gpu)
        assert (pr.on_demand, pr.reserved) == (od, rs)
        assert 0 < rs < od
    # every sample sweep's GPU is priced exactly (no "priced as" note)
    for name in list_sample_sweeps():
        s = load_sample_sweep(name)
        rp = replica_price(s, prices)
        assert rp.note == "", name
        assert rp.on_demand_usd_per_hour == pytest.approx(s.config["tensor_parallel"] * SAMPLE[rp.gpu][0])
    text = " ".join(prices.comments).lower()
    assert "not" in text and ("quote" in text) and "illustrative" in text
    assert re.search(r"\b20\d\d-\d\d-\d\d\b", text)


# --------------------------------------------------------------------------------------------
# 2. replica_price
# --------------------------------------------------------------------------------------------
def test_replica_price_gpus_from_tensor_parallel_and_overrides(prices):
    h100_od, h100_rs = SAMPLE["H100-SXM-80GB"]
    tp4 = replica_price(load_sample_sweep("llama70b_h100_tp4_chat"), prices)
    # 70B at TP 4: four H100s per replica, 4 × $4.00 = $16.00, 4 × $2.50 = $10.00 an hour
    assert (tp4.gpu, tp4.gpus) == ("H100-SXM-80GB", 4)
    assert tp4.on_demand_usd_per_hour == pytest.approx(4 * h100_od)
    assert tp4.reserved_usd_per_hour == pytest.approx(4 * h100_rs)
    assert tp4.per_hour("reserved") == tp4.reserved_usd_per_hour
    assert tp4.per_hour() == tp4.on_demand_usd_per_hour
    with pytest.raises(ValueError, match="basis must be 'on_demand' or 'reserved'"):
        tp4.per_hour("spot")
    tp8 = replica_price(load_sample_sweep("llama70b_h100_tp8_chat"), prices)
    assert tp8.gpus == 8 and tp8.on_demand_usd_per_hour == pytest.approx(8 * h100_od)
    s = load_sample_sweep("illustrative_chat")
    # overrides: price the A100 sweep as an L4, or as two GPUs per replica
    assert replica_price(s, prices, gpu="L4").on_demand_usd_per_hour == pytest.approx(SAMPLE["L4"][0])
    assert replica_price(s, prices, tensor_parallel=2).on_demand_usd_per_hour == pytest.approx(2 * _a100())
    with pytest.raises(ValueError, match="whole number of GPUs"):
        replica_price(s, prices, tensor_parallel=1.5)
    with pytest.raises(ValueError, match="whole number of GPUs"):
        replica_price(s, prices, tensor_parallel=0)
    with pytest.raises(ValueError, match="no price for GPU 'MI300X'"):
        replica_price(s, prices, gpu="MI300X")


def test_replica_price_sweep_without_gpu_or_tp_names_the_argument(prices):
    s = load_sample_sweep("illustrative_chat")
    bare = Sweep(s.table.drop(columns=["gpu", "tensor_parallel"]), name="bare")
    with pytest.raises(ValueError, match=r"'bare' does not record the GPU.*gpu='NAME'.*A100-SXM-80GB"):
        replica_price(bare, prices)
    with pytest.raises(ValueError, match=r"'bare' does not record its tensor-parallel.*tensor_parallel=N"):
        replica_price(bare, prices, gpu="A100-SXM-80GB")
    rp = replica_price(bare, prices, gpu="A100-SXM-80GB", tensor_parallel=2)
    assert rp.gpus == 2 and rp.on_demand_usd_per_hour == pytest.approx(2 * _a100())


# --------------------------------------------------------------------------------------------
# 3. plan_cost against hand-worked numbers
# --------------------------------------------------------------------------------------------
def _fake_plan(total=10, out_tps=5000.0, in_tps=10000.0, r_out=1000.0, r_in=4000.0):
    """A plan-like object with round numbers and no forecast (week_demand raises on it)."""
    return SimpleNamespace(total=total, output_tps=out_tps, input_tps=in_tps,
                           rating=SimpleNamespace(output_tps=r_out, input_tps=r_in),
                           source={"sweep": "fake", "gpu": "X", "tensor_parallel": 2},
                           horizon_weeks=1, peaks={1: SimpleNamespace(method="observed")})


def test_plan_cost_hand_worked_round_numbers():
    t = _table([("X", 3.0, 2.0)])
    c = plan_cost(_fake_plan(), t)
    # One replica = 2 GPUs × $3 = $6/h on demand, 2 × $2 = $4/h reserved; 10 replicas, 20 GPUs:
    # $60/h, 60 × 168 = $10,080/week, 60 × 8,760 = $525,600/year; reserved $40, $6,720, $350,400.
    assert (c.replicas, c.gpus, c.replica.gpus) == (10, 20, 2)
    assert (c.usd_per_hour, c.usd_per_week, c.usd_per_year) == pytest.approx((60.0, 10080.0, 525600.0))
    assert (c.reserved_usd_per_hour, c.reserved_usd_per_week, c.reserved_usd_per_year) == pytest.approx(
        (40.0, 6720.0, 350400.0))
    # At the rating: a replica-hour is $6 for 3600 × 1000 output tokens, so $6 / 3.6 M = $1.6667 per
    # million output tokens; for 3600 × 4000 input tokens $6 / 14.4 M = $0.41667 per million.
    assert c.usd_per_m_output_at_rating == pytest.approx(6.0 / 3.6, rel=1e-12)
    assert c.usd_per_m_input_at_rating == pytest.approx(6.0 / 14.4, rel=1e-12)
    # At the planned peak: E = 5000/1000 + 10000/4000 = 7.5 replica-equivalents on 10 replicas,
    # so each token costs 10/7.5 = 4/3 of its rating price: $20/9 per M output, $5/9 per M input.
    assert c.equivalents == pytest.approx(7.5, rel=1e-12)
    assert c.usd_per_m_output == pytest.approx(20.0 / 9.0, rel=1e-12)
    assert c.usd_per_m_input == pytest.approx(5.0 / 9.0, rel=1e-12)
    # The pair recovers the bill: 20/9 × 18 M/h + 5/9 × 36 M/h = 40 + 20 = $60/h.
    assert (c.usd_per_m_output * 5000 + c.usd_per_m_input * 10000) * 3600 / 1e6 == pytest.approx(60.0, rel=1e-12)
    # no forecast: no weekly per-token cost, and a note says why
    assert c.usd_per_m_output_week is None and c.usd_per_m_input_week is None and c.mean_equivalents is None
    assert any("no per-token cost over the forecast week" in n for n in c.notes)
    # the table holds the cost rows and leaves out the week's
    tab = c.table()
    assert set(tab["step"]) == {"cost"}
    vals = dict(zip(tab["quantity"], tab["value"]))
    assert vals["USD per hour"] == pytest.approx(60.0) and vals["GPUs"] == 20
    assert vals["USD per million output tokens"] == pytest.approx(20.0 / 9.0)
    assert "USD per million output tokens over the forecast week" not in vals
    text = c.render(markdown=True)
    assert text.startswith("## Cost") and "$60.00 per hour" in text and "$10,080 per week" in text
    # replicas override, and a count that cannot be priced
    assert plan_cost(_fake_plan(), t, replicas=3).usd_per_hour == pytest.approx(18.0)
    with pytest.raises(ValueError, match="replicas must be >= 1"):
        plan_cost(_fake_plan(), t, replicas=0)
    # a plan whose sweep did not record its GPU: the error asks for gpu=
    bare = _fake_plan()
    bare.source = {"sweep": "fake", "gpu": None, "tensor_parallel": 1}
    with pytest.raises(ValueError, match=r"'fake' does not record the GPU.*gpu='NAME'"):
        plan_cost(bare, t)
    assert plan_cost(bare, t, gpu="X").usd_per_hour == pytest.approx(10 * 3.0)
    # the GPU override wins over the plan's record
    t2 = _table([("X", 3.0, 2.0), ("Z", 1.0, 0.5)])
    assert plan_cost(_fake_plan(), t2, gpu="Z", tensor_parallel=1).usd_per_hour == pytest.approx(10.0)


def test_plan_cost_of_the_sample_plan_identities(plan, prices, week):
    c = plan_cost(plan, prices)
    od, rs = SAMPLE["A100-SXM-80GB"]
    n = plan.total
    assert c.replicas == n and c.gpus == n
    assert c.usd_per_hour == pytest.approx(n * od, rel=1e-12)
    assert c.usd_per_week == pytest.approx(n * od * 168, rel=1e-12)
    assert c.usd_per_year == pytest.approx(n * od * 8760, rel=1e-12)
    assert c.reserved_usd_per_week == pytest.approx(n * rs * 168, rel=1e-12)
    assert (HOURS_PER_WEEK, HOURS_PER_YEAR) == (7 * 24, 365 * 24)
    r = plan.rating
    # At the rating one replica-hour ($od) buys 3600 R_out output tokens, or 3600 R_in input
    # tokens, or any split: a share a of the hour on output and 1 − a on input costs
    # c_out a R_out 3600/1e6 + c_in (1 − a) R_in 3600/1e6 = a od + (1 − a) od = od.
    for a in (0.0, 0.3, 1.0):
        spend = (c.usd_per_m_output_at_rating * a * r.output_tps
                 + c.usd_per_m_input_at_rating * (1 - a) * r.input_tps) * 3600 / 1e6
        assert spend == pytest.approx(od, rel=1e-12)
    # At the planned peak the fleet's bill is shared by replica time:
    # (c_out × out + c_in × in) × 3600 / 1e6 = N × od (dollars per hour).
    per_hour = (c.usd_per_m_output * plan.output_tps + c.usd_per_m_input * plan.input_tps) * 3600 / 1e6
    assert per_hour == pytest.approx(c.usd_per_hour, rel=1e-12)
    e = plan.output_tps / r.output_tps + plan.input_tps / r.input_tps
    assert c.equivalents == pytest.approx(e, rel=1e-12)
    assert c.usd_per_m_output == pytest.approx(c.usd_per_m_output_at_rating * n / e, rel=1e-12)
    # Over the forecast week: the same bill over the week's mean load (point forecast, input in
    # the plan's input-per-output ratio).
    mean_out = float(week.point.mean())
    mean_in = mean_out * plan.demand.input_per_output
    per_hour_w = (c.usd_per_m_output_week * mean_out + c.usd_per_m_input_week * mean_in) * 3600 / 1e6
    assert per_hour_w == pytest.approx(c.usd_per_hour, rel=1e-12)
    assert c.mean_equivalents == pytest.approx(mean_out / r.output_tps + mean_in / r.input_tps, rel=1e-12)
    # the idle fleet of an average hour makes a token dearer than at the peak, dearer still than at the rating
    assert c.usd_per_m_output_week > c.usd_per_m_output > c.usd_per_m_output_at_rating
    vals = dict(zip(c.table()["quantity"], c.table()["value"]))
    assert vals["USD per hour"] == pytest.approx(n * od)
    assert vals["USD per million output tokens over the forecast week"] == c.usd_per_m_output_week
    assert f"${n * od:,.2f} per hour" in c.render()


# --------------------------------------------------------------------------------------------
# 4. FleetCurve
# --------------------------------------------------------------------------------------------
def test_fleet_curve_reproduces_the_plan(plan, curve):
    assert curve.replicas(plan.output_tps) == plan.total
    assert curve.serving(plan.output_tps) == plan.serving
    with pytest.raises(ValueError, match="output_tps"):
        curve.replicas(0.0)


def test_fleet_curve_is_the_plan_at_its_own_peak(plan, curve):
    assert curve.serving(plan.output_tps) == plan.serving and curve.replicas(plan.output_tps) == plan.total


@pytest.mark.parametrize("k", [0.5, 2.0])
def test_fleet_curve_against_a_verified_plan_at_other_demand_scales(inputs, plan, curve, k):
    # the independent pipeline: the whole plan re-run, and its fleet simulated again, with the peak
    # scaled by k; the curve scales the verified operating point instead, and pools less at a larger
    # peak (it may buy a few more there, never fewer)
    other = capacity_plan(**inputs.arguments, demand_scale=k)
    assert other.verified and other.output_tps == pytest.approx(k * plan.output_tps, rel=1e-12)
    n = curve.serving(k * plan.output_tps)
    assert n == math.ceil(k * plan.request_rate / (plan.request_rate / plan.serving) - 1e-9)
    assert other.serving <= n <= other.serving + max(2, math.ceil(0.06 * other.serving))
    # burst and spare stack on it by the plan's policies
    assert other.total <= curve.replicas(k * plan.output_tps) <= other.total + (n - other.serving) + 1
    # the scaled plan's week is the sample week scaled by k, and its peak the same quantile
    wk = week_demand(other)
    assert wk.point == pytest.approx(k * week_demand(plan).point, rel=1e-12)
    assert np.quantile(wk.peaks, other.quantile) == pytest.approx(other.output_tps, rel=1e-9)


def test_fleet_curve_is_monotone_and_capacity_inverts_it(plan, curve):
    peaks = np.geomspace(1e-3, 3.0, 80) * plan.output_tps
    n = np.array([curve.replicas(x) for x in peaks])
    assert (np.diff(n) >= 0).all()
    assert n[0] < plan.total < n[-1]
    caps = []
    for m in (n[0], 5, 12, plan.total - 1, plan.total, plan.total + 7):
        cap = curve.capacity(m)
        assert cap > 0
        # the highest peak m replicas carry: m suffice there and no longer just above it
        assert curve.replicas(cap) <= m < curve.replicas(cap * (1 + 1e-6))
        caps.append(cap)
    assert (np.diff(caps) >= 0).all()
    # fewer replicas than even a trickle needs (serving 1 + burst + spare) carry nothing
    assert curve.capacity(n[0] - 1) == 0.0
    assert curve.capacity(plan.total) >= plan.output_tps


# --------------------------------------------------------------------------------------------
# 5. WeekDemand
# --------------------------------------------------------------------------------------------
def test_week_demand_shape_and_the_plans_peak_sample(plan, week):
    assert len(week.hours) == 168 and week.point.shape == (168,)
    assert (week.hours[1:] - week.hours[:-1] == pd.Timedelta(hours=1)).all()
    assert week.log_errors.size % 168 == 0 and week.peaks.size == week.log_errors.size // 168
    # each origin's busiest hour: its week of errors laid over the point forecast
    e = week.log_errors.reshape(-1, 168)
    assert week.peaks == pytest.approx((week.point[None, :] * np.exp(e)).max(axis=1), rel=1e-12)
    # the plan's peak is the plan.quantile (linear) quantile of that sample
    assert np.quantile(week.peaks, plan.quantile) == pytest.approx(plan.output_tps, rel=1e-9)
    assert week.mean_output_tokens == plan.mean_output_tokens
    # at the quantiles that fall on a sample point, peak() is that point
    srt = np.sort(week.peaks)
    for i in (0, 3, srt.size // 2, srt.size - 1):
        assert week.peak(i / (srt.size - 1)) == pytest.approx(srt[i], rel=1e-12)
    assert week.peak(plan.quantile) == pytest.approx(plan.output_tps, rel=1e-3)


def test_week_demand_peak_at_the_plans_quantile_is_the_plans_peak(plan, week):
    assert week.peak(plan.quantile) == pytest.approx(plan.output_tps, rel=1e-9)


@pytest.mark.parametrize("weeks, method", [(5, "sqrt_h"), (8, "calibrated")])
def test_week_demand_reruns_the_plans_forecast_on_short_histories(sums, sweep, weeks, method):
    """Shorter histories take the ladder's other rungs (the sqrt(h) rule with 5 weeks, calibrated
    with 3 fit weeks and 1 origin with 8): the week re-run must still be the plan's forecast."""
    from capbook.forecast import tokens as fc

    h = pd.read_csv(datasets.data_dir() / datasets.GATEWAY_HISTORY)
    h["period_start"] = pd.to_datetime(h["period_start"], utc=True)
    h = h[h["period_start"] >= h["period_start"].max() - pd.Timedelta(hours=weeks * 168 - 1)]
    agg = LogAggregates.of(sums.log, history=h)
    p = capacity_plan(agg, sweep, simulate=False)
    pk = p.peaks[p.horizon_weeks]
    assert pk.method == method and (method == "sqrt_h" or "rough" in pk.note)
    wk = week_demand(p)
    assert wk.method == method
    assert wk.point.max() == pytest.approx(pk.point_tps, rel=1e-9)
    assert np.quantile(wk.peaks, p.quantile) == pytest.approx(p.output_tps, rel=1e-9)
    # the band at 0.9 is the forecast module's own 0.9 band for that week
    s = p.traffic.hourly.groupby("period_start")["output_tokens"].sum().astype(float).sort_index()
    s.index = pd.DatetimeIndex(s.index)
    mf, mo = (3, 1)
    f = fc.forecast_tokens(fc.trim_to_whole_weeks(s), p.horizon_weeks, quantiles=(0.5, 0.9), method=method,
                           min_fit_weeks=mf, min_origins=mo)
    band = f.band(0.9)[f.frame["horizon_week"] == p.horizon_weeks].to_numpy() / 3600
    assert wk.band(0.9) == pytest.approx(band, rel=1e-9)


def test_week_demand_peak_quantile_inverts_peak(week):
    for q in np.linspace(0.0, 1.0, 41):
        assert week.peak_quantile(week.peak(q)) == pytest.approx(q, abs=1e-9)
    assert week.peak_quantile(0.5 * week.peaks.min()) == 0.0
    assert week.peak_quantile(2.0 * week.peaks.max()) == 1.0
    qs = np.linspace(0.01, 0.99, 30)
    assert (np.diff([week.peak(q) for q in qs]) > 0).all()
    # the band at q is each hour at the q-quantile of the pooled errors
    assert week.band(0.5) == pytest.approx(week.point * np.exp(np.median(week.log_errors)), rel=1e-12)
    with pytest.raises(ValueError, match="quantile"):
        week.peak(1.5)


def test_week_demand_excess_against_monte_carlo(plan, week):
    """Oracle: draw each hour's demand by resampling the log errors (seeded), count directly."""
    rng = np.random.default_rng(20261201)
    m = 20_000
    e = rng.choice(week.log_errors, size=(168, m), replace=True)
    d = week.point[:, None] * np.exp(e)
    for k in (0.9 * week.point.max(), plan.output_tps * 0.97, week.band(0.5).max()):
        over = np.maximum(d - k, 0.0)
        ex_mc = over.mean(axis=1).sum()
        ex_se = math.sqrt((over.var(axis=1, ddof=1) / m).sum())
        assert ex_mc > 0
        assert week.excess(k) == pytest.approx(ex_mc, abs=5 * ex_se + 1e-12)
        hit = d > k
        h_mc = hit.mean(axis=1).sum()
        h_se = math.sqrt((hit.mean(axis=1) * (1 - hit.mean(axis=1)) / m).sum())
        assert week.hours_over(k) == pytest.approx(h_mc, abs=5 * h_se + 1e-12)
        assert week.late_requests(k) == pytest.approx(week.excess(k) * 3600 / plan.mean_output_tokens, rel=1e-12)
    # at zero capacity every token is excess and every hour is over
    assert week.excess(0.0) == pytest.approx((week.point[:, None] * np.exp(week.log_errors)[None, :]).mean(1).sum())
    assert week.hours_over(0.0) == 168.0
    assert week.excess(10 * week.peaks.max()) == 0.0 and week.hours_over(10 * week.peaks.max()) == 0.0
    with pytest.raises(ValueError, match="capacity_tps"):
        week.excess(-1.0)


def _hand_week(point, errors, peaks, mean_out=300.0) -> WeekDemand:
    hours = pd.date_range("2026-06-01", periods=168, freq="h", tz="UTC")
    return WeekDemand(hours, np.asarray(point, float), np.log(np.asarray(errors, float)),
                      np.asarray(peaks, float), "calibrated", mean_out)


def test_week_demand_hand_made():
    # 167 hours at 100 tokens/s and one at 200; demand is the point times 0.5, 1 or 2, equally likely
    point = np.full(168, 100.0)
    point[0] = 200.0
    w = _hand_week(point, [0.5, 1.0, 2.0], [150.0, 200.0, 400.0])
    # K = 150: a 100-hour exceeds it only at 200 (by 50): E = 50/3; the 200-hour at 200 and 400:
    # E = (50 + 250)/3 = 100. Week: 167 × 50/3 + 100 = 2883.33 token/s-hours.
    assert w.excess(150.0) == pytest.approx(167 * 50 / 3 + 100, rel=1e-12)
    # hours over: 1/3 of each 100-hour, 2/3 of the 200-hour: 167/3 + 2/3 = 169/3
    assert w.hours_over(150.0) == pytest.approx(169 / 3, rel=1e-12)
    # requests: excess × 3600 s / 300 tokens per request = 2883.33 × 12 = 34,600
    assert w.late_requests(150.0) == pytest.approx(34600.0, rel=1e-12)
    # K = 0: all demand, mean factor (0.5 + 1 + 2)/3 = 7/6 of the week's point total 16,900
    assert w.excess(0.0) == pytest.approx(16900 * 7 / 6, rel=1e-12)
    assert w.hours_over(0.0) == 168.0
    # K = 500: nothing exceeds it
    assert w.excess(500.0) == 0.0 and w.hours_over(500.0) == 0.0
    # peak: the plan's peak-hour quantile interpolates the sample (150, 200, 400) linearly, as
    # np.quantile does: the median is 200, the ends 150 and 400, q = 0.25 halfway between 150 and
    # 200 (175) and q = 0.75 halfway between 200 and 400 (300)
    assert w.peak(0.5) == pytest.approx(200.0, rel=1e-12)
    assert (w.peak(0.0), w.peak(1.0)) == pytest.approx((150.0, 400.0), rel=1e-12)
    assert w.peak(0.25) == pytest.approx(175.0, rel=1e-12)
    assert w.peak(0.75) == pytest.approx(300.0, rel=1e-12)
    assert w.peak_quantile(175.0) == pytest.approx(0.25, rel=1e-12)
    assert w.peak_quantile(300.0) == pytest.approx(0.75, rel=1e-12)
    assert w.peak_quantile(100.0) == 0.0 and w.peak_quantile(1000.0) == 1.0
    assert w.band(0.5) == pytest.approx(point, rel=1e-12)


def test_week_demand_without_a_forecast_raises(short_plan, prices):
    assert short_plan.peaks[short_plan.horizon_weeks].method == "observed"
    with pytest.raises(ValueError, match="no forecast"):
        week_demand(short_plan)
    c = plan_cost(short_plan, prices)  # the cost still prices the observed peak
    assert c.usd_per_hour == pytest.approx(short_plan.total * _a100())
    assert c.usd_per_m_output_week is None
    assert any("no forecast" in n for n in c.notes)


# --------------------------------------------------------------------------------------------
# 6. optimal_quantile
# --------------------------------------------------------------------------------------------
SATURATION_PRICES = (0.001, 0.01, 0.1, 1.0, 100.0)


@pytest.fixture(scope="module")
def optima(plan, sweep, prices, shared_curve):
    return {c: optimal_quantile(plan, sweep, prices, c) for c in SATURATION_PRICES}


@pytest.fixture(scope="module")
def grid_fleets(week, curve):
    """Brute force: the fleet the plan's rules buy at each quantile of a fine grid."""
    qs = np.linspace(0.001, 0.999, 999)
    return qs, np.array([curve.replicas(week.peak(q)) for q in qs])


def test_optimal_quantile_against_brute_force(plan, week, curve, optima, grid_fleets):
    p = _a100()
    qs, fleets = grid_fleets
    late = {n: week.late_requests(curve.capacity(n)) for n in np.unique(fleets)}
    within = 0
    for c_s, opt in optima.items():
        # expected weekly cost of planning to each grid quantile: capacity + saturation
        cost = np.array([n * p * 168 + c_s * late[n] for n in fleets])
        best = float(opt.costs.loc[opt.replicas, "total_usd_per_week"])
        assert best <= cost.min() + 1e-9
        if opt.replicas in late:  # the optimum is a fleet some quantile buys: the search finds it too
            within += 1
            assert best == pytest.approx(cost.min(), rel=1e-12)
            assert fleets[cost.argmin()] == opt.replicas
            lo, hi = opt.quantile_range
            assert lo <= hi
            # planning to any quantile inside the range buys the optimum: peak(q) ≤ K(N) ⇔ q ≤ hi,
            # peak(q) > K(N − 1) ⇔ q > lo
            inside = (qs > lo + 1e-6) & (qs < hi - 1e-6)
            assert inside.any() and (fleets[inside] == opt.replicas).all()
            assert (fleets[qs > hi + 1e-6] > opt.replicas).all() and (fleets[qs < lo - 1e-6] < opt.replicas).all()
        # the cost table, recomputed
        t = opt.costs
        for n, row in t.iterrows():
            cap = curve.capacity(n)
            assert row["capacity_output_tps"] == pytest.approx(cap, rel=1e-12)
            assert row["capacity_usd_per_week"] == pytest.approx(n * p * 168, rel=1e-12)
            assert row["saturation_usd_per_week"] == pytest.approx(c_s * week.late_requests(cap), rel=1e-12)
            assert row["total_usd_per_week"] == pytest.approx(n * p * 168 + c_s * week.late_requests(cap), rel=1e-12)
        assert opt.replicas == int(t["total_usd_per_week"].idxmin())
        # the conventional row is the plan's own fleet
        assert opt.conventional.name == curve.replicas(week.peak(plan.quantile))
        assert opt.saving_usd_per_week >= 0
        # a served request at the rating: price per second / requests per second at the rating
        r = plan.rating
        per_req = p / 3600 * (plan.mean_output_tokens / r.output_tps + plan.mean_input_tokens / r.input_tps)
        assert opt.usd_per_request == pytest.approx(per_req, rel=1e-12)
        assert opt.price_ratio == pytest.approx(c_s / per_req, rel=1e-12)
    assert within >= 2  # the comparison is not vacuous: several optima lie within the grid's reach


def test_optimal_quantile_against_every_fleet_size(week, curve, optima):
    """Brute force over every fleet size from 1 to past the search's end: C(N) = N p 168 + c_s late(K(N));
    where K(N) = 0 (a fleet too small to carry any load by the plan's rules) every request is late."""
    p = _a100()
    top = max(int(o.costs.index.max()) for o in optima.values()) + 5
    late = {}
    for n in range(1, top + 1):
        cap = curve.capacity(n)
        late[n] = week.late_requests(cap) if cap > 0 else week.late_requests(0.0)
    mean_d = float(week.point.mean() * np.exp(week.log_errors).mean())
    for c_s, opt in optima.items():
        cost = {n: n * p * 168 + c_s * late[n] for n in late}
        best = min(cost, key=cost.get)
        assert opt.replicas == best
        assert opt.costs.loc[best, "total_usd_per_week"] == pytest.approx(cost[best], rel=1e-12)
        # idle: the capacity cost times the share of the capacity the mean hour leaves unused
        for n, row in opt.costs.iterrows():
            cap = row["capacity_output_tps"]
            idle = n * p * 168 * (1 - min(mean_d, cap) / cap) if cap > 0 else n * p * 168
            assert row["idle_usd_per_week"] == pytest.approx(idle, rel=1e-9)


def test_optimal_quantile_cheap_saturation_finds_the_global_minimum(plan, sweep, prices, week, curve, shared_curve):
    c_s = 1e-4
    opt = optimal_quantile(plan, sweep, prices, c_s)
    assert opt.price_ratio < 1
    p = _a100()
    cost = {}
    for n in range(1, int(opt.costs.index.max()) + 1):
        cap = curve.capacity(n)
        cost[n] = n * p * 168 + c_s * week.late_requests(cap)
    assert opt.costs.loc[opt.replicas, "total_usd_per_week"] <= min(cost.values()) + 1e-9


def test_optimal_quantile_monotone_in_the_saturation_price(optima):
    n = [optima[c].replicas for c in SATURATION_PRICES]
    q = [optima[c].quantile for c in SATURATION_PRICES]
    assert all(a <= b for a, b in zip(n, n[1:])), n
    assert all(a <= b for a, b in zip(q, q[1:])), q
    assert n[0] < n[-1]
    with pytest.raises(ValueError, match="saturation_usd"):
        optimal_quantile(None, None, None, 0.0)


def test_optimal_quantile_marginal_condition_on_the_plan(optima):
    """At the optimum N: one more replica saves less saturation than it costs, one fewer saves
    less capacity cost than the saturation it adds (C(N ± 1) ≥ C(N), recomputed from parts)."""
    step = _a100() * 168
    for c_s, opt in optima.items():
        t, n = opt.costs, opt.replicas
        if n + 1 in t.index:
            assert c_s * (t.loc[n, "late_requests"] - t.loc[n + 1, "late_requests"]) <= step + 1e-9
        if n - 1 in t.index:
            assert step <= c_s * (t.loc[n - 1, "late_requests"] - t.loc[n, "late_requests"]) + 1e-9


class _LinearCurve:
    """A fleet of k output tokens/s per replica, no headroom, no spares: N = ceil(x / k)."""

    K = 20.0

    def __init__(self, plan, sweep):
        pass

    def replicas(self, x):
        return max(1, int(math.ceil(x / self.K - 1e-12)))

    def capacity(self, n):
        return n * self.K


def test_optimal_quantile_newsvendor_critical_fractile(monkeypatch):
    """One busy hour, a linear fleet: the continuous optimum sits at the critical fractile.

    C(N) = 168 p N + c_s (3600/m) E[(D − kN)^+]; dC/dN = 168 p − c_s (3600/m) k P(D > kN) = 0 gives
    P(D > K*) = 168 p m / (3600 c_s k). With p = $2, m = 300 tokens, k = 20 tokens/s and
    c_s = 168 × 2 × 300 / (3600 × 0.1 × 20) = 100,800 / 7,200 = $14, the fractile is 0.1.
    Discretely, C(N) − C(N−1) = 168 p − c_s (3600/m) ∫_{k(N−1)}^{kN} P(D > x) dx ≤ 0 ≤ C(N+1) − C(N)
    and the survival P(D > x) decreases, so P(D > k(N+1)) ≤ 0.1 ≤ P(D > k(N−1)).

    optimal_quantile takes a plan, not a distribution, so the week and the fleet are substituted
    (monkeypatch of capbook.cost.pricing.week_demand and capbook.cost.pricing.FleetCurve) by a hand-made one.
    """
    rng = np.random.default_rng(17)
    f = np.exp(rng.normal(0.0, 0.1, 2001))  # demand factors, lognormal σ = 0.1
    P, m, k, p = 10_000.0, 300.0, _LinearCurve.K, 2.0
    point = np.full(168, 1e-6)  # the other hours never reach one replica's capacity
    point[100] = P
    w = WeekDemand(pd.date_range("2026-06-01", periods=168, freq="h", tz="UTC"), point, np.log(f), P * f,
                   "calibrated", m)
    from capbook.cost import pricing

    monkeypatch.setattr(pricing, "week_demand", lambda plan: w)
    monkeypatch.setattr(pricing, "FleetCurve", _LinearCurve)
    target = 0.1
    c_s = 168 * p * m / (3600 * target * k)
    assert c_s == pytest.approx(14.0, rel=1e-12)
    fake_plan = SimpleNamespace(quantile=0.9, mean_output_tokens=m, mean_input_tokens=0.0,
                                rating=SimpleNamespace(output_tps=k, input_tps=1e9))
    fake_sweep = SimpleNamespace(name="linear", config={"gpu": "X", "tensor_parallel": 1})
    opt = optimal_quantile(fake_plan, fake_sweep, _table([("X", p, 1.0)]), c_s)
    n = opt.replicas
    d = P * f

    def surv(x):
        return float((d > x).mean())

    assert surv(k * (n + 1)) <= target <= surv(k * (n - 1))
    assert surv(k * n) == pytest.approx(target, abs=0.01)
    # the argmin of the cost computed directly from the demand sample (C is convex in N: a window suffices)
    ns = np.arange(n - 30, n + 31)
    direct = [168 * p * j + c_s * 3600 / m * (np.maximum(d - k * j, 0).mean()) for j in ns]
    assert ns[int(np.argmin(direct))] == n
    # expected hours over capacity at the optimum ≈ 168 p m / (3600 c_s k) (the docstring's limit)
    assert opt.costs.loc[n, "hours_over"] == pytest.approx(target, abs=0.01)
    # the quantile reported: the busiest hour is this one hour, so about 1 − 0.1
    assert opt.quantile == pytest.approx(1 - target, abs=0.01)
    # a served request costs p / 3600 × m / k at the rating; the ratio is c_s over it
    assert opt.usd_per_request == pytest.approx(p / 3600 * m / k, rel=1e-9)
    assert opt.price_ratio == pytest.approx(c_s / (p / 3600 * m / k), rel=1e-9)


# --------------------------------------------------------------------------------------------
# 7. reserve_split
# --------------------------------------------------------------------------------------------
def _split_cost(n_h, r, od, rs):
    """Weekly cost of reserving r replicas and running the rest of each hour on demand."""
    return r * rs * 168 + np.maximum(n_h - r, 0).sum() * od


def test_reserve_split_rule_and_the_four_ways(plan, sweep, prices, week, curve, shared_curve):
    s = reserve_split(plan, sweep, prices)
    od, rs = SAMPLE["A100-SXM-80GB"]
    h = s.hourly
    assert len(h) == 168 and list(h["hour_of_week"]) == list(range(168))
    assert h["output_tps"].to_numpy() == pytest.approx(week.band(plan.quantile), rel=1e-12)
    n_h = h["replicas"].to_numpy()
    assert list(n_h) == [curve.replicas(x) for x in week.band(plan.quantile)]
    assert s.break_even_share == pytest.approx(rs / od, rel=1e-12)
    # the duration curve: the k-th replica's share of hours, recomputed
    ks = np.arange(1, n_h.max() + 1)
    share = np.array([(n_h >= k).mean() for k in ks])
    assert s.duration["share_of_hours"].to_numpy() == pytest.approx(share)
    assert (s.duration.loc[s.duration["reserve"], "share_of_hours"] >= s.break_even_share).all()
    assert (s.duration.loc[~s.duration["reserve"], "share_of_hours"] < s.break_even_share).all()
    assert s.reserved == int((share >= rs / od).sum())
    assert n_h.min() <= s.reserved <= n_h.max()
    # the four ways to pay, by hand
    u = s.usd_per_week
    assert u["static, on demand"] == pytest.approx(plan.total * od * 168)
    assert u["static, reserved"] == pytest.approx(plan.total * rs * 168)
    assert u["following, on demand"] == pytest.approx(n_h.sum() * od)
    assert u["following, reserved floor + on demand"] == pytest.approx(_split_cost(n_h, s.reserved, od, rs))
    assert s.on_demand_replica_hours == pytest.approx(np.maximum(n_h - s.reserved, 0).sum())
    # brute force over the reserved count: the rule's r is the cheapest split
    all_r = [_split_cost(n_h, r, od, rs) for r in range(0, n_h.max() + 1)]
    assert u["following, reserved floor + on demand"] == pytest.approx(min(all_r), rel=1e-12)
    t = s.table()
    assert t.loc["static, reserved", "vs_static_reserved"] == 0.0
    assert t.loc["static, on demand", "vs_static_reserved"] == pytest.approx(od / rs - 1, rel=1e-12)
    # another quantile follows its own band
    s5 = reserve_split(plan, sweep, prices, quantile=0.5)
    assert s5.hourly["output_tps"].to_numpy() == pytest.approx(week.band(0.5), rel=1e-12)


def test_reserve_split_extreme_prices(plan, sweep, shared_curve):
    od = _a100()
    # reserved = on demand: break even at 1, reserve only what every hour needs
    same = reserve_split(plan, sweep, _table([("A100-SXM-80GB", od, od)]))
    n_h = same.hourly["replicas"].to_numpy()
    assert same.break_even_share == 1.0
    assert same.reserved == n_h.min()
    # reserved almost free: reserve every replica any hour needs, nothing left on demand
    cheap = reserve_split(plan, sweep, _table([("A100-SXM-80GB", od, 1e-4)]))
    assert cheap.reserved == n_h.max()
    assert cheap.on_demand_replica_hours == 0.0


# --------------------------------------------------------------------------------------------
# 8. compare_configurations
# --------------------------------------------------------------------------------------------
EIGHT_B = ("illustrative_chat", "llama8b_h100_chat", "llama8b_l4_chat")


@pytest.fixture(scope="module")
def comparison(sums, prices):
    return compare_configurations(sums, [load_sample_sweep(n) for n in EIGHT_B], prices, simulate=False)


def test_compare_configurations_ranks_by_cost(comparison, plan, unsimulated):
    t = comparison.table
    assert set(t["sweep"]) == set(EIGHT_B)
    l4 = t[t["sweep"] == "llama8b_l4_chat"].iloc[0]
    assert l4["status"] == "cannot meet" and "TPOT" in l4["reason"] and math.isnan(l4["usd_per_hour"])
    assert t.iloc[-1]["sweep"] == "llama8b_l4_chat"
    ok = t[t["status"] == "ok"]
    assert len(ok) == 2
    assert list(ok["usd_per_hour"]) == sorted(ok["usd_per_hour"])
    assert comparison.winner == ok.loc[ok["usd_per_hour"].idxmin(), "sweep"] == "llama8b_h100_chat"
    for _, r in ok.iterrows():
        p = comparison.plans[r["sweep"]]
        od = SAMPLE[r["gpu"]][0]
        assert r["replicas"] == p.total
        assert r["gpus"] == r["replicas"] * r["gpus_per_replica"]
        assert r["usd_per_hour"] == pytest.approx(r["replicas"] * r["gpus_per_replica"] * od, rel=1e-12)
        assert r["usd_per_week"] == pytest.approx(r["usd_per_hour"] * 168, rel=1e-12)
        req = 1 / (p.mean_output_tokens / p.rating.output_tps + p.mean_input_tokens / p.rating.input_tps)
        assert r["requests_per_replica"] == pytest.approx(req, rel=1e-12)
        assert not r["verified"]  # simulate=False: not replay-verified
        assert r["binding"] == p.binding
    # the illustrative row is the sample plan's count by the models
    assert ok.set_index("sweep").loc["illustrative_chat", "replicas"] == unsimulated.total
    text = comparison.explain()
    w, nxt = ok.iloc[0], ok.iloc[1]
    assert text.startswith("Cheapest: llama8b_h100_chat")
    assert f"{100 * (nxt['usd_per_hour'] / w['usd_per_hour'] - 1):.0f} % more" in text
    assert "llama8b_l4_chat: cannot meet the objectives" in text and str(comparison) == text


def test_compare_configurations_explain_prints_whole_replicas(comparison):
    w = comparison.table.iloc[0]
    n = int(w["replicas"])
    assert f"{n} replicas × 1 H100-SXM-80GB = {n} GPUs" in comparison.explain()


def test_compare_configurations_reserved_basis(sums, prices):
    c = compare_configurations(sums, [load_sample_sweep("llama8b_h100_chat")], prices, basis="reserved",
                               simulate=False)
    r = c.table.iloc[0]
    od, rs = SAMPLE["H100-SXM-80GB"]
    assert r["usd_per_hour"] == pytest.approx(r["replicas"] * rs, rel=1e-12)
    on_demand = plan_cost(c.plans["llama8b_h100_chat"], prices)
    assert r["usd_per_m_output"] == pytest.approx(on_demand.usd_per_m_output * rs / od, rel=1e-12)
    assert "reserved" in c.explain()


def test_compare_configurations_invalid_plan_argument_raises(sums, prices):
    with pytest.raises(ValueError, match="quantile"):
        compare_configurations(sums, [load_sample_sweep("illustrative_chat")], prices, quantile=1.5,
                               simulate=False)


def test_compare_configurations_input_errors(sums, prices):
    with pytest.raises(ValueError, match=r"different models.*Llama-3.1-8B.*Llama-3.1-70B"):
        compare_configurations(sums, [load_sample_sweep("illustrative_chat"),
                                      load_sample_sweep("llama70b_h100_tp4_chat")], prices, simulate=False)
    only_a100 = _table([("A100-SXM-80GB", 2.2, 1.4)])
    with pytest.raises(ValueError, match="no price for GPU 'H100-SXM-80GB'"):
        compare_configurations(sums, [load_sample_sweep("llama8b_h100_chat")], only_a100, simulate=False)
    with pytest.raises(ValueError, match="at least one sweep"):
        compare_configurations(sums, [], prices)
    with pytest.raises(ValueError, match=r"sweeps\['x'\] must be a capbook.sweeps.sweep.Sweep"):
        compare_configurations(sums, {"x": "not a sweep"}, prices)
    with pytest.raises(ValueError, match="basis"):
        compare_configurations(sums, [load_sample_sweep("illustrative_chat")], prices, basis="spot")


# --------------------------------------------------------------------------------------------
# 9. The price of quantiles, objectives, pools and regions
# --------------------------------------------------------------------------------------------
def test_price_of_quantiles(plan, sweep, prices, week, curve, shared_curve):
    qs = (0.1, 0.5, 0.7, 0.9, 0.95, 0.99)
    t = price_of_quantiles(plan, sweep, prices, qs, saturation_usd=0.05)
    p = _a100()
    assert list(t.index) == list(qs)
    assert (np.diff(t["replicas"]) >= 0).all() and (np.diff(t["peak_output_tps"]) > 0).all()
    base = curve.replicas(week.peak(plan.quantile)) * p * 168
    for q, r in t.iterrows():
        n = curve.replicas(week.peak(q))
        cap = curve.capacity(n)
        assert r["peak_output_tps"] == pytest.approx(week.peak(q), rel=1e-12)
        assert r["replicas"] == n
        assert r["capacity_output_tps"] == pytest.approx(cap, rel=1e-12) and cap >= r["peak_output_tps"]
        assert r["usd_per_week"] == pytest.approx(n * p * 168, rel=1e-12)
        assert r["extra_usd_per_week"] == pytest.approx(n * p * 168 - base, abs=1e-9)
        assert r["hours_over"] == pytest.approx(week.hours_over(cap), rel=1e-12)
        assert r["late_requests"] == pytest.approx(week.late_requests(cap), rel=1e-12)
        assert r["total_usd_per_week"] == pytest.approx(n * p * 168 + 0.05 * week.late_requests(cap), rel=1e-12)
    assert t.loc[0.9, "replicas"] == plan.total
    plain = price_of_quantiles(plan, sweep, prices)
    assert list(plain.index) == [0.5, 0.9, 0.99] and "saturation_usd_per_week" not in plain.columns
    res = price_of_quantiles(plan, sweep, prices, (0.9,), basis="reserved")
    assert res.loc[0.9, "usd_per_week"] == pytest.approx(plan.total * SAMPLE["A100-SXM-80GB"][1] * 168)
    with pytest.raises(ValueError, match="quantile"):
        price_of_quantiles(plan, sweep, prices, (1.5,))
    with pytest.raises(ValueError, match="saturation_usd"):
        price_of_quantiles(plan, sweep, prices, saturation_usd=-1.0)


def test_price_of_objectives(sums, sweep, prices, plan):
    t = price_of_objectives(sums, sweep, prices, (2.0, 0.5, 0.7, 1.0))
    p = _a100()
    assert list(t.index) == [0.5, 0.7, 1.0, 2.0]
    # 0.5 s is below the prefill of the log's long prompts: no fleet meets it, and the row says so
    assert t.loc[0.5, "verified"] == "impossible" and "prefill alone" in t.loc[0.5, "reason"]
    ok = t.loc[[0.7, 1.0, 2.0]]
    assert set(ok["verified"]) == {"verified"} and (ok["binding"] == "fleet simulation").all()
    # a looser TTFT objective never needs more replicas
    assert (np.diff(ok["replicas"]) <= 0).all()
    assert t["usd_per_week"].to_numpy() == pytest.approx(t["replicas"].to_numpy() * p * 168, rel=1e-12)
    assert t["extra_usd_per_week"].to_numpy() == pytest.approx(
        t["usd_per_week"].to_numpy() - t.loc[2.0, "usd_per_week"], abs=1e-9)
    # the default objective's row is the sample plan
    assert SLO().ttft_target_s == 1.0 and t.loc[1.0, "replicas"] == plan.total
    with pytest.raises(ValueError, match="ttft_target_s"):
        price_of_objectives(sums, sweep, prices, (0.0,), simulate=False)


def test_price_of_pools_dedicated_against_shared(sums, sweep, prices, plan, unsimulated):
    history = datasets.data_dir() / datasets.GATEWAY_HISTORY
    t = price_of_pools(sums.log, sweep, prices, history=history)
    p = _a100()
    pools = [i for i in t.index if i not in ("dedicated (sum)", "shared")]
    # the pools are the interactive tenants of the planned model in the history
    h = pd.read_csv(history)
    tenants = h.loc[(h["model"] == plan.traffic.model) & (h["tier"] == "interactive"), "tenant"]
    assert set(pools) == set(tenants.astype(str)) and len(pools) >= 2
    assert t.loc["dedicated (sum)", "replicas"] == t.loc[pools, "replicas"].sum()
    assert t.loc["dedicated (sum)", "peak_output_tps"] == pytest.approx(t.loc[pools, "peak_output_tps"].sum())
    assert t.loc["dedicated (sum)", "replicas"] >= t.loc["shared", "replicas"]
    assert t.loc["shared", "replicas"] == unsimulated.total
    assert t.loc["shared", "peak_output_tps"] == pytest.approx(plan.output_tps, rel=1e-12)
    assert t["usd_per_week"].to_numpy() == pytest.approx(t["replicas"].to_numpy() * p * 168, rel=1e-12)


def test_price_of_pools_errors(small_log, sweep, prices):
    with pytest.raises(ValueError, match="no 'tenant' column"):
        price_of_pools(small_log, sweep, prices)


def test_time_zone_regions():
    rng = np.random.default_rng(3)
    w = rng.uniform(1.0, 10.0, 168)
    t = time_zone_regions(w)
    assert list(t.columns) == ["east", "home", "west"] and len(t) == 168
    assert t.to_numpy().sum() == pytest.approx(w.sum(), rel=1e-12)
    for r, s in {"east": -7, "home": 0, "west": 6}.items():
        assert t[r].to_numpy() == pytest.approx(np.roll(w, s) / 3, rel=1e-12)
    # hour 10 of "west" is hour 4 of the week (shifted 6 hours later)
    assert t["west"].iloc[10] == pytest.approx(w[4] / 3)
    u = time_zone_regions(w, {"a": 0, "b": 12}, {"a": 1.0, "b": 3.0})
    assert u["a"].to_numpy() == pytest.approx(0.25 * w) and u["b"].to_numpy() == pytest.approx(0.75 * np.roll(w, 12))
    assert u.to_numpy().sum() == pytest.approx(w.sum(), rel=1e-12)
    with pytest.raises(ValueError, match="168"):
        time_zone_regions(w[:167])
    with pytest.raises(ValueError, match="same regions"):
        time_zone_regions(w, {"a": 0}, {"b": 1.0})
    with pytest.raises(ValueError, match="at least one region"):
        time_zone_regions(w, {})
    with pytest.raises(ValueError, match="must not all be 0"):
        time_zone_regions(w, {"a": 0}, {"a": 0.0})
    with pytest.raises(ValueError, match=r"shares\['a'\]"):
        time_zone_regions(w, {"a": 0}, {"a": -1.0})


def test_price_of_regions(plan, sweep, prices, week, curve, shared_curve):
    p = _a100()
    t = price_of_regions(plan, sweep, prices)
    uplift = plan.output_tps / week.point.max()
    regions = ["east", "home", "west"]
    # each region has a third of the week, rolled: its busiest hour is a third of the busiest point hour
    for r in regions:
        assert t.loc[r, "peak_output_tps"] == pytest.approx(plan.output_tps / 3, rel=1e-12)
        assert t.loc[r, "replicas"] == curve.replicas(t.loc[r, "peak_output_tps"])
    g = time_zone_regions(week.point).sum(axis=1).max() * uplift
    assert t.loc["global", "peak_output_tps"] == pytest.approx(g, rel=1e-12)
    assert t.loc["global", "replicas"] == curve.replicas(g)
    assert t.loc["regional (sum)", "replicas"] == t.loc[regions, "replicas"].sum()
    assert t.loc["regional (sum)", "replicas"] >= t.loc["global", "replicas"]
    assert t["usd_per_week"].to_numpy() == pytest.approx(t["replicas"].to_numpy() * p * 168, rel=1e-12)
    # two regions of the whole week each: each needs the plan, the global pool twice the peak
    two = price_of_regions(plan, sweep, prices, pd.DataFrame({"a": week.point, "b": week.point}))
    assert two.loc["a", "peak_output_tps"] == pytest.approx(plan.output_tps, rel=1e-12)
    assert two.loc["a", "replicas"] == two.loc["b", "replicas"] == plan.total
    assert two.loc["global", "replicas"] == curve.replicas(2 * plan.output_tps)
    assert two.loc["global", "replicas"] <= 2 * plan.total
    with pytest.raises(ValueError, match="non-empty DataFrame"):
        price_of_regions(plan, sweep, prices, pd.DataFrame())


# --------------------------------------------------------------------------------------------
# 10. Real data: the Azure conversation trace on the KubeCon vLLM sweep
# --------------------------------------------------------------------------------------------
def test_real_azure_conversation_on_kubecon_vllm(shared_dir, prices):
    from capbook.sweeps.importers import read_sweep

    log_path = shared_dir / "traces" / "AzureLLMInferenceTrace_conv.csv"
    sweep_dir = shared_dir / "realdata" / "inference-perf-kubecon-na-2025" / "vllm"
    if not log_path.is_file() or not sweep_dir.is_dir():
        pytest.skip(f"{log_path} or {sweep_dir} is not in ../shared")
    s = read_sweep(sweep_dir)
    assert s.config["gpu"] == "nvidia-h100-80gb"
    p = capacity_plan(read_requests(log_path), s, simulate=False)
    c = plan_cost(p, prices)
    assert any("priced as 'H100-SXM-80GB'" in n for n in c.notes)
    assert c.replica.gpu == "H100-SXM-80GB" and c.replica.gpus == 1
    od, rs = SAMPLE["H100-SXM-80GB"]
    assert c.usd_per_hour == pytest.approx(p.total * od, rel=1e-12)
    assert c.reserved_usd_per_week == pytest.approx(p.total * rs * 168, rel=1e-12)
    for v in (c.usd_per_hour, c.usd_per_year, c.usd_per_m_output, c.usd_per_m_input,
              c.usd_per_m_output_at_rating, c.usd_per_m_input_at_rating):
        assert math.isfinite(v) and v > 0
    per_hour = (c.usd_per_m_output * p.output_tps + c.usd_per_m_input * p.input_tps) * 3600 / 1e6
    assert per_hour == pytest.approx(c.usd_per_hour, rel=1e-12)
    assert c.usd_per_m_output_at_rating * p.rating.output_tps * 3600 / 1e6 == pytest.approx(od, rel=1e-12)
    # one hour of log: no forecast week, said in a note
    assert c.usd_per_m_output_week is None and any("no forecast" in n for n in c.notes)
    assert "priced as 'H100-SXM-80GB'" in c.render()


def test_forecast_runs_once_per_horizon_through_pricing_and_autoscaling(inputs, prices, monkeypatch):
    """One plan, priced and autoscaled, runs the forecast (and its backtest kernel) once per horizon
    of the ladder it used: week_demand, the pricing and the autoscaling read what Demand carries."""
    from capbook.autoscale.schedule import autoscaled
    from capbook.cost.costs import priced
    from capbook.forecast import tokens as fc

    counts = {"forecast": 0, "kernel": 0}
    real_forecast, real_kernel = fc.forecast_tokens, fc._rolling_errors_kernel

    def forecast(*a, **k):
        counts["forecast"] += 1
        return real_forecast(*a, **k)

    def kernel(*a, **k):
        counts["kernel"] += 1
        return real_kernel(*a, **k)

    monkeypatch.setattr(fc, "forecast_tokens", forecast)
    monkeypatch.setattr(fc, "_rolling_errors_kernel", kernel)
    p = capacity_plan(**inputs.arguments, simulate=False)
    horizons = sorted(p.peaks)
    assert horizons == [1, 4, 12] and all(p.peaks[h].method == "calibrated" for h in horizons)
    assert counts == {"forecast": 3, "kernel": 3}
    p = priced(p, inputs.arguments["sweep"], prices, saturation_usd=0.01)
    assert p.pricing.quantiles is not None and p.pricing.optimum is not None
    p = autoscaled(p, inputs.arguments["sweep"], inputs.arguments["log"], candidates=("schedule",))
    assert p.autoscaling is not None
    # before: 9 forecasts and 15 kernel runs (week_demand forecast again each time it was called)
    assert counts == {"forecast": 3, "kernel": 3}
    assert week_demand(p).peak(p.quantile) == pytest.approx(p.output_tps, rel=1e-9)
