"""The Pooling and Routing charts: their embedded data is the computation, their sliders exist."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from capbook import fleet
from capbook import queueing as q
from capbook.charts import pooling


def _data(spec: dict) -> pd.DataFrame:
    """The data set of the chart's first layer as a DataFrame."""
    layer = spec["layer"][0]
    name = layer.get("data", spec.get("data", {})).get("name")
    return pd.DataFrame(spec["datasets"][name])


def _params(spec: dict) -> dict:
    return {p["name"]: p for p in spec.get("params", [])}


def test_safe_grid_agrees_with_the_solver():
    grid = pooling.safe_utilisation_grid(8.0, [1, 8, 40, 160], [0.0, 2.0], [1, 5])
    assert len(grid) == 4 * 2 * 2
    for row in grid.itertuples():
        assert row.safe == pytest.approx(q.max_utilisation(row.c, 8.0, row.t, row.target / 100), abs=1e-4)
    # bigger pools run hotter at every threshold and target
    assert grid.groupby(["t", "target"]).safe.apply(lambda s: s.is_monotonic_increasing).all()


def test_safe_chart_embeds_the_grid_and_binds_two_sliders():
    chart = pooling.safe_utilisation_chart(8.0, [8, 80], [1.0, 2.0], [5, 10], t=2.0, target_pct=5, rule=0.7)
    spec = chart.to_dict()
    data = _data(spec)
    expected = pooling.safe_utilisation_grid(8.0, [8, 80], [1.0, 2.0], [5, 10])
    pd.testing.assert_frame_equal(data[expected.columns].astype(expected.dtypes), expected)
    params = _params(spec)
    assert params["wait_t"]["value"] == 2.0 and params["wait_t"]["bind"]["input"] == "range"
    assert params["target_pct"]["value"] == 5 and params["target_pct"]["bind"]["max"] == 10
    curve = spec["layer"][0]
    assert curve["encoding"]["x"]["field"] == "c" and curve["encoding"]["y"]["field"] == "safe"
    assert any("wait_t" in str(t.get("filter", "")) for t in curve["transform"])
    rule_data = spec["datasets"][spec["layer"][1]["data"]["name"]]
    assert rule_data == [{"y": 0.7, "label": "“run at 70 %”"}]


def test_late_share_grid_is_fleet_late_share():
    grid = pooling.late_share_grid(32, 12.25, 0.5, [20, 40])
    assert set(grid.routing) == {"one shared queue", "a queue per replica"}
    for (lam, label), part in grid.groupby(["demand", "routing"]):
        routing = "pooled" if label == "one shared queue" else "round-robin"
        np.testing.assert_allclose(part.late, fleet.late_share(part.replicas.to_numpy(), 32, lam, 12.25, 0.5, routing))
    at40 = grid[grid.demand == 40]
    pooled = at40[at40.routing == "one shared queue"]
    # the first pooled count under 1 % is the pooled answer
    assert pooled[pooled.late <= 0.01].replicas.min() == q.replicas_pooled(40, 32, 12.25, 0.5, 0.01)
    assert (grid.late >= 1e-6).all()


def test_late_share_chart_has_the_demand_slider_and_budget():
    spec = pooling.late_share_chart(32, 12.25, 0.5, 0.01, [20, 30, 40], demand=40).to_dict()
    params = _params(spec)
    assert params["demand"]["value"] == 40 and params["demand"]["bind"]["step"] == 10
    data = _data(spec)
    assert set(data.demand) == {20, 30, 40}
    assert spec["layer"][1]["mark"]["type"] == "rule"


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: pooling.safe_utilisation_grid(-1.0), "service_time"),
        (lambda: pooling.safe_utilisation_grid(8.0, [0, 8]), "slots"),
        (lambda: pooling.safe_utilisation_grid(8.0, targets_pct=[0]), "targets_pct"),
        (lambda: pooling.safe_utilisation_chart(t=0.7), "t"),
        (lambda: pooling.late_share_grid(32, 12.25, 0.5, []), "demands"),
        (lambda: pooling.late_share_chart(32, 12.25, 0.5, 1.5, [40]), "target"),
        (lambda: pooling.late_share_chart(32, 12.25, 0.5, 0.01, [10, 20, 40]), "demands"),
        (lambda: pooling.late_share_chart(32, 12.25, 0.5, 0.01, [10, 20], demand=15), "demand"),
    ],
)
def test_bad_input_names_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()
