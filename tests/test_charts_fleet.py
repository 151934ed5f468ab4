"""The charts of the fleet chapters (capbook.charts.fleetcharts): real content, not just "it runs"."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from capbook.plan import fleet
from capbook import queueing as q
from capbook.charts import fleetcharts as fc

S, T, T_SLO = 32, 12.25, 0.5


def _datasets(spec: dict) -> list[list[dict]]:
    return list(spec.get("datasets", {}).values())


def _params(spec: dict) -> dict:
    out = {}
    for p in spec.get("params", []):
        out[p["name"]] = p
    for layer in spec.get("layer", []):
        for p in layer.get("params", []):
            out[p["name"]] = p
    return out


@pytest.fixture(scope="module")
def grid():
    return fc.plan_grid(S, T, T_SLO, demands=[20, 40], targets={"1 %": 0.01, "5 %": 0.05})


def test_plan_grid_holds_the_floor_and_the_queueing_answer(grid):
    assert len(grid) == 2 * 2 * 2 * len(fc.STAGES)
    for row in grid.drop_duplicates(["demand", "routing", "slo"]).itertuples():
        target = {"1 %": 0.01, "5 %": 0.05}[row.slo]
        assert row.q == fleet.replicas_for_routing(row.demand, S, T, T_SLO, target, row.routing)
        assert row.floor == q.replicas_by_mean(row.demand, S, T)
    assert list(grid["stage"].iloc[: len(fc.STAGES)]) == fc.STAGES
    # the running example: 40 req/s pooled at 1 % needs 17 after a floor of 16
    ex = grid[(grid.demand == 40) & (grid.routing == "pooled") & (grid.slo == "1 %")].iloc[0]
    assert (ex.floor, ex.q) == (16, 17)


@pytest.mark.parametrize("demand", [10, 40, 75, 100])
@pytest.mark.parametrize("routing", ["pooled", "round-robin"])
@pytest.mark.parametrize("ramp,lag,zones", [(0.5, 8, 1), (1.3, 17, 3), (2.0, 20, 2), (0.7, 3, 4), (0.0, 0, 1)])
def test_page_arithmetic_matches_plan_fleet(demand, routing, ramp, lag, zones):
    p = fleet.plan_fleet(demand, S, T, T_SLO, 0.01, routing=routing, ramp_per_min=ramp, lag_min=lag,
                         spares=1, zones=None if zones == 1 else zones)
    assert fc.page_plan_total(p.serving, demand, ramp, lag, zones) == p.total


def test_plan_waterfall_embeds_the_grid_and_binds_every_control(grid):
    spec = fc.plan_waterfall(S, T, T_SLO, grid=grid).to_dict()
    rows = _datasets(spec)
    assert len(rows) == 1 and len(rows[0]) == len(grid)
    assert pd.DataFrame(rows[0])[["demand", "q", "floor"]].equals(grid[["demand", "q", "floor"]])
    params = _params(spec)
    for name, kind in [("fs_demand", "range"), ("fs_ramp", "range"), ("fs_lag", "range"), ("fs_zones", "range"),
                       ("fs_routing", "radio"), ("fs_slo", "radio")]:
        assert params[name]["bind"]["input"] == kind, name
    assert params["fs_demand"]["value"] == 40 and params["fs_slo"]["bind"]["options"] == ["1 %", "5 %"]
    text = str(spec)
    assert "fs_ramp * fs_lag * datum.q / datum.demand" in text and "fs_zones - 1" in text
    assert spec["layer"][0]["mark"]["type"] == "bar" and spec["layer"][1]["mark"]["type"] == "text"


def test_plan_waterfall_refuses_unknown_buttons(grid):
    with pytest.raises(ValueError, match="slo"):
        fc.plan_waterfall(S, T, T_SLO, grid=grid, slo="0.1 %")
    with pytest.raises(ValueError, match="routing"):
        fc.plan_waterfall(S, T, T_SLO, grid=grid, routing="p2c")


def test_hockey_stick_rows_are_erlang_c():
    u = np.array([0.6, 0.8, 0.9])
    spec = fc.hockey_stick(20, S, T, T_SLO, levels={"warn": 0.85, "breach": 0.93}, utilisation=u).to_dict()
    data = [pd.DataFrame(d) for d in _datasets(spec)]
    curve = next(d for d in data if "signal" in d.columns)
    lam = u * 20 * S / T
    late = curve[curve.signal == "P(wait > 0.5 s)"].sort_values("slot utilisation")["probability"].to_numpy()
    np.testing.assert_allclose(late, q.prob_wait_exceeds(T_SLO, 20 * S, lam, T), rtol=1e-12)
    any_wait = curve[curve.signal == "P(wait > 0)"].sort_values("slot utilisation")["probability"].to_numpy()
    np.testing.assert_allclose(any_wait, q.prob_wait(20 * S, lam, T), rtol=1e-12)
    levels = next(d for d in data if "level" in d.columns)
    assert dict(zip(levels.level, levels["slot utilisation"])) == {"warn": 0.85, "breach": 0.93}
    assert levels["label_at"].nunique() == 2          # close levels: labels at different heights
    layers = spec["layer"]
    assert layers[0]["encoding"]["x"]["title"].startswith("slot utilisation")
    assert layers[0]["encoding"]["y"]["title"].startswith("probability")
    with pytest.raises(ValueError, match="utilisation"):
        fc.hockey_stick(20, S, T, T_SLO, utilisation=[0.5, 1.0])
    with pytest.raises(ValueError, match="replicas"):
        fc.hockey_stick(0, S, T, T_SLO)


def _runs():
    return pd.DataFrame({
        "offered_rps": [8.0, 10.0, 8.0, 10.0, 8.0, 10.0],
        "budget_s": [np.nan, np.nan, 0.25, 0.25, 0.5, 0.5],
        "throughput_rps": [8.0, 9.9, 7.9, 9.5, 8.0, 9.6],
        "goodput_rps": [7.9, 1.0, 7.9, 9.4, 7.9, 9.2],
    })


def test_throughput_goodput_rows_are_the_summaries():
    runs = _runs()[lambda d: d.budget_s.isna()]
    spec = fc.throughput_goodput(runs).to_dict()
    rows = pd.DataFrame(_datasets(spec)[0])
    good = rows[rows.measure == "goodput"].set_index("offered_rps")["rps"]
    assert good.to_dict() == {8.0: 7.9, 10.0: 1.0}
    assert spec["encoding"]["color"]["field"] == "measure"
    with pytest.raises(ValueError, match="goodput_rps"):
        fc.throughput_goodput(runs.drop(columns="goodput_rps"))


def test_admission_budgets_slider_filters_in_the_browser():
    spec = fc.admission_budgets(_runs(), budget=0.5).to_dict()
    params = _params(spec)
    p = params["budget_s"]
    assert p["bind"]["input"] == "radio" and p["value"] == 0.5
    assert p["bind"]["options"] == [0.25, 0.5] and p["bind"]["labels"] == ["0.25 s", "0.5 s"]
    assert "datum.budget_s == budget_s" in str(spec)
    rows = pd.concat([pd.DataFrame(d) for d in _datasets(spec)])
    chosen = rows[rows.with_admission & (rows.budget_s == 0.5) & (rows.measure == "goodput")]
    assert chosen.set_index("offered_rps")["rps"].to_dict() == {8.0: 7.9, 10.0: 9.2}
    assert len(rows[~rows.with_admission]) == 4
    with pytest.raises(ValueError, match="budget"):
        fc.admission_budgets(_runs().assign(budget_s=np.nan))
    with pytest.raises(ValueError, match="budget"):
        fc.admission_budgets(_runs(), budget=1.0)


def test_retry_timeline_keeps_minutes_before_the_cut():
    tl = pd.DataFrame({"minute": [0, 10, 50, 0, 10, 50], "clients": ["a"] * 3 + ["b"] * 3,
                       "attempts_rps": [1.0, 2, 3, 4, 5, 6], "goodput_rps": [0.5, 1, 1.5, 2, 2.5, 3]})
    rows = pd.DataFrame(_datasets(fc.retry_timeline(tl, until_min=45).to_dict())[0])
    assert sorted(rows.minute.unique()) == [0, 10] and len(rows) == 8
    b = rows[(rows.clients == "b") & (rows.measure == "attempts arriving")].set_index("minute")["rps"]
    assert b.to_dict() == {0: 4.0, 10: 5.0}
    with pytest.raises(ValueError, match="attempts_rps"):
        fc.retry_timeline(tl.drop(columns="attempts_rps"))
