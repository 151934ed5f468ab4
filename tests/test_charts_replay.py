"""capbook.charts.replay: the embedded data equal the computation, the parameters exist, bad input is refused."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from capbook.charts import replay as rc


def _waits():
    rng = np.random.default_rng(7)
    return {
        (17, "pooled"): np.concatenate([np.zeros(900), rng.exponential(0.3, 100)]),
        (17, "random"): rng.exponential(2.0, 1000),
        (19, "pooled"): np.zeros(1000),
        (19, "random"): rng.exponential(0.5, 1000),
    }


def _data(spec):
    """The embedded rows of a chart (Altair moves a layer's data into named datasets)."""
    return {name: pd.DataFrame(rows) for name, rows in spec["datasets"].items()}


def test_wait_share_table_counts_strictly_longer_waits():
    waits = {(2, "pooled"): [0.0, 0.0, 0.5, 2.0]}
    table = rc.wait_share_table(waits, [0.0, 0.5, 1.0, 2.0])
    assert table["share"].tolist() == [0.5, 0.25, 0.25, 0.0]      # 0.5 s is not "longer than 0.5 s"
    assert set(table.columns) == {"replicas", "routing", "t", "share"}


def test_wait_share_table_matches_numpy_for_every_key_and_threshold():
    waits = _waits()
    grid = np.round(np.arange(0, 3.01, 0.25), 6)
    table = rc.wait_share_table(waits, grid)
    assert len(table) == len(waits) * grid.size
    for (n, routing), w in waits.items():
        got = table[(table.replicas == n) & (table.routing == routing)].set_index("t")["share"]
        np.testing.assert_allclose(got.to_numpy(), [np.mean(w > t) for t in grid])


def test_wait_share_chart_embeds_the_table_and_binds_both_parameters():
    waits = _waits()
    chart = rc.wait_share_chart(waits, 0.01, t_default=0.5, t_max=2.0, step=0.1, replicas_default=17, title="x")
    spec = chart.to_dict()
    params = {p["name"]: p for p in spec["params"]}
    assert params["t_wait"]["value"] == pytest.approx(0.5) and params["t_wait"]["bind"]["input"] == "range"
    assert params["t_wait"]["bind"]["max"] == 2.0
    assert params["fleet"]["value"] == 17 and params["fleet"]["bind"]["input"] == "radio"
    assert params["fleet"]["bind"]["options"] == [17, 19]
    frames = list(_data(spec).values())
    bars = next(f for f in frames if "routing" in f.columns)
    expected = rc.wait_share_table(waits, np.round(np.arange(0.0, 2.0 + 0.05, 0.1), 6))
    pd.testing.assert_frame_equal(bars.reset_index(drop=True), expected, check_dtype=False)
    rule = next(f for f in frames if list(f.columns) == ["share"])
    assert rule["share"].tolist() == [0.01]
    layer = spec["layer"][0]
    assert "t_wait" in layer["transform"][0]["filter"] and "fleet" in layer["transform"][0]["filter"]
    assert layer["encoding"]["x"]["field"] == "routing" and layer["encoding"]["y"]["field"] == "share"
    assert layer["encoding"]["x"]["sort"] == ["pooled", "random"]


def test_wait_share_chart_refuses_bad_input():
    with pytest.raises(ValueError, match="budget"):
        rc.wait_share_chart(_waits(), 1.5)
    with pytest.raises(ValueError, match="replicas_default"):
        rc.wait_share_chart(_waits(), 0.01, replicas_default=18)
    with pytest.raises(ValueError, match="t_default"):
        rc.wait_share_chart(_waits(), 0.01, t_default=9.0, t_max=5.0)
    with pytest.raises(ValueError, match="waits"):
        rc.wait_share_table({}, [0.0])
    with pytest.raises(ValueError, match="waits"):
        rc.wait_share_table({(2, "pooled"): [-1.0]}, [0.0])
    with pytest.raises(ValueError, match="pair"):
        rc.wait_share_table({"pooled": [1.0]}, [0.0])


def test_ttft_tail_chart_embeds_each_curve_and_both_rules():
    rng = np.random.default_rng(3)
    ttfts = {"17 replicas": rng.gamma(2.0, 0.3, 500), "capped": rng.gamma(2.0, 0.1, 500)}
    chart = rc.ttft_tail_chart(ttfts, 1.0, 0.01, x_max=2.0, step=0.1)
    spec = chart.to_dict()
    frames = list(_data(spec).values())
    lines = next(f for f in frames if "replay" in f.columns)
    grid = np.arange(0.0, 2.0 + 0.05, 0.1)
    for label, v in ttfts.items():
        got = lines[lines.replay == label]["share"].to_numpy()
        np.testing.assert_allclose(got, [np.mean(v > x) for x in grid])
    assert any(list(f.columns) == ["x"] and f["x"].tolist() == [1.0] for f in frames)
    assert any(list(f.columns) == ["share"] and f["share"].tolist() == [0.01] for f in frames)
    enc = spec["layer"][0]["encoding"]
    assert enc["color"]["field"] == "replay" and enc["color"]["sort"] == ["17 replicas", "capped"]
    assert enc["color"]["legend"]["labelLimit"] >= 300    # long labels are not cut off
    assert enc["x"]["title"].endswith("(s)")               # units on the axis


def test_ttft_tail_chart_refuses_bad_input():
    with pytest.raises(ValueError, match="target_s"):
        rc.ttft_tail_chart({"a": [0.1]}, 0.0, 0.01)
    with pytest.raises(ValueError, match="share"):
        rc.ttft_tail_chart({"a": [0.1]}, 1.0, 1.0)
    with pytest.raises(ValueError, match="samples"):
        rc.ttft_tail_chart({"a": []}, 1.0, 0.01)
    with pytest.raises(ValueError, match="samples"):
        rc.tail_share_table([0.1, 0.2], [0.0])


def test_minute_rate_table_counts_whole_bins_like_numpy():
    rng = np.random.default_rng(5)
    arrivals = {"recorded": np.sort(rng.uniform(0, 605, 2000)), "poisson": np.sort(rng.uniform(0, 605, 1900))}
    table = rc.minute_rate_table(arrivals, 605.0)
    assert set(table.columns) == {"replay", "minute", "rate"} and len(table) == 2 * 10   # the 5 s left over are dropped
    for label, t in arrivals.items():
        got = table[table.replay == label]["rate"].to_numpy()
        np.testing.assert_allclose(got, np.histogram(t, bins=np.arange(11) * 60.0)[0] / 60.0)
    assert table[table.replay == "recorded"]["minute"].tolist() == list(range(10))


def test_minute_rate_chart_embeds_the_rates_and_the_labelled_ceilings():
    arrivals = {"recorded": [1.0, 2.0, 61.0, 62.0, 63.0], "poisson": [10.0, 70.0]}
    chart = rc.minute_rate_chart(arrivals, {"16 replicas": 0.04, "17 replicas": 0.045}, 120.0, title="t")
    spec = chart.to_dict()
    frames = list(_data(spec).values())
    lines = next(f for f in frames if "replay" in f.columns)
    pd.testing.assert_frame_equal(lines.reset_index(drop=True), rc.minute_rate_table(arrivals, 120.0),
                                  check_dtype=False)
    assert lines[lines.replay == "recorded"]["rate"].tolist() == [2 / 60, 3 / 60]
    rules = next(f for f in frames if "ceiling" in f.columns)
    assert rules["ceiling"].tolist() == ["16 replicas", "17 replicas"] and rules["rate"].tolist() == [0.04, 0.045]
    enc = spec["layer"][0]["encoding"]
    assert enc["x"]["field"] == "minute" and enc["y"]["field"] == "rate" and enc["color"]["sort"] == ["recorded", "poisson"]
    assert spec["layer"][0]["mark"]["interpolate"] == "step-after"
    assert spec["layer"][2]["encoding"]["text"]["field"] == "ceiling"


def test_minute_rate_chart_refuses_bad_input():
    with pytest.raises(ValueError, match="ceilings"):
        rc.minute_rate_chart({"a": [1.0]}, {}, 60.0)
    with pytest.raises(ValueError, match="ceilings"):
        rc.minute_rate_chart({"a": [1.0]}, {"x": -1.0}, 60.0)
    with pytest.raises(ValueError, match="duration_s"):
        rc.minute_rate_table({"a": [1.0]}, 0.0)
    with pytest.raises(ValueError, match="bin_s"):
        rc.minute_rate_table({"a": [1.0]}, 30.0, 60.0)
    with pytest.raises(ValueError, match="arrivals"):
        rc.minute_rate_table({"a": [-1.0]}, 60.0)
    with pytest.raises(ValueError, match="arrivals"):
        rc.minute_rate_table([1.0], 60.0)
