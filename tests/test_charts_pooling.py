"""The Pooling and Routing charts: their embedded data is the computation, their sliders exist."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from capbook.plan import fleet
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
    chart = pooling.safe_utilisation_chart(8.0, [8, 80], [1.0, 2.0], [5, 10], wait_target_s=2.0, target_pct=5, rule=0.7)
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
        (lambda: pooling.safe_utilisation_chart(wait_target_s=0.7), "t"),
        (lambda: pooling.late_share_grid(32, 12.25, 0.5, []), "demands"),
        (lambda: pooling.late_share_chart(32, 12.25, 0.5, 1.5, [40]), "late_share"),
        (lambda: pooling.late_share_chart(32, 12.25, 0.5, 0.01, [10, 20, 40]), "demands"),
        (lambda: pooling.late_share_chart(32, 12.25, 0.5, 0.01, [10, 20], demand=15), "demand"),
    ],
)
def test_bad_input_names_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def _affinity_grid():
    rows = []
    for n in (10, 12, 14):
        for router, slack, hit, p50, p99 in [("pooled", None, 0.05, 1.0, 13.0), ("jsq", None, 0.06, 1.6, 16.0),
                                             ("prefix-affinity", 0, 0.1, 1.4, 15.5),
                                             ("prefix-affinity", 2, 0.2, 1.2, 16.0)]:
            rows.append({"replicas": n, "router": router, "affinity_slack": slack, "cache_hit_share": hit,
                         "ttft_p50_s": p50 / n * 10, "ttft_p99_s": p99, "goodput_share": 0.9})
    return pd.DataFrame(rows)


def test_affinity_chart_embeds_the_grid_with_a_fleet_slider_and_percentile_buttons():
    grid = _affinity_grid()
    spec = pooling.affinity_chart(grid, replicas=12, quantile="p50").to_dict()
    data = _data(spec)
    assert len(data) == len(grid)
    np.testing.assert_allclose(data["ttft_p50_s"], grid["ttft_p50_s"])
    np.testing.assert_allclose(data["cache_hit_share"], grid["cache_hit_share"])
    # prefix affinity is labelled and ordered by its bound; the other routers by their name
    assert data["label"].tolist()[:4] == ["pooled", "jsq", "0", "2"]
    assert data["order"].tolist()[:4] == [-1, -1, 0, 2]
    params = _params(spec)
    assert params["replicas"]["value"] == 12 and params["replicas"]["bind"]["step"] == 2
    assert (params["replicas"]["bind"]["min"], params["replicas"]["bind"]["max"]) == (10, 14)
    assert params["ttft_q"]["value"] == "p50" and params["ttft_q"]["bind"]["options"] == ["p50", "p99"]
    layer = spec["layer"][1]
    filters = [t.get("filter") for t in layer["transform"] if "filter" in t]
    assert "datum.replicas == replicas" in filters
    assert "datum.quantile == 'ttft_' + ttft_q + '_s'" in filters     # the folded column the buttons pick
    fold = next(t for t in layer["transform"] if "fold" in t)
    assert fold["fold"] == ["ttft_p50_s", "ttft_p99_s"]


def test_affinity_chart_refuses_what_it_cannot_draw():
    grid = _affinity_grid()
    with pytest.raises(ValueError, match="grid lacks column"):
        pooling.affinity_chart(grid.drop(columns="ttft_p99_s"))
    with pytest.raises(ValueError, match="replicas must be one of"):
        pooling.affinity_chart(grid, replicas=11)
    with pytest.raises(ValueError, match="quantile"):
        pooling.affinity_chart(grid, quantile="p90")
    with pytest.raises(ValueError, match="evenly spaced"):
        pooling.affinity_chart(grid.assign(replicas=grid["replicas"].replace(14, 18)))   # 10, 12, 18


def test_affinity_chart_on_a_simulated_fleet():
    """The chart reads FleetRun.summary's names as they are."""
    from capbook.engine.stepmodel import fit_engine
    from capbook.sim.fleetsim import simulate_fleet
    from capbook.sweeps.sweep import load_sample_sweep

    engine = fit_engine(load_sample_sweep("illustrative_chat"))
    rng = np.random.default_rng(3)
    n = 300
    base = [[0, 1] + [1000 * c + k for k in range(4)] for c in range(30)]   # 30 conversations, a shared prefix
    df = pd.DataFrame({"arrival_time": np.sort(rng.uniform(0, 200, n)), "input_tokens": 3000,
                       "output_tokens": 50, "hash_ids": [base[i % 30] for i in range(n)]})
    rows = [{"replicas": r, "router": router, "affinity_slack": slack,
             **simulate_fleet(engine, df, replicas=r, router=router, affinity_slack=slack, seed=1).summary(5.0, 0.1)}
            for r in (2, 4) for router, slack in (("pooled", None), ("prefix-affinity", 2))]
    spec = pooling.affinity_chart(pd.DataFrame(rows)).to_dict()
    data = _data(spec)
    assert len(data) == 4 and set(data["router"]) == {"pooled", "prefix-affinity"}
    aff = data[data["router"] == "prefix-affinity"]
    assert (aff["cache_hit_share"].to_numpy() > data[data["router"] == "pooled"]["cache_hit_share"].to_numpy()).all()
