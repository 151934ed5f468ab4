"""capbook.charts.request_log: the traffic chapter's charts carry the log's own numbers.

Each chart is built on a small hand-made table; the tests read the embedded data back out of
``chart.to_dict()`` and check it against the computation, and that the capacity slider is a
Vega-Lite parameter bound to an input (so it works on the static site).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from capbook.charts.request_log import (
    capacity_line_chart,
    dispersion_chart,
    hourly_tokens_chart,
    log_histogram,
    token_histogram_chart,
    weekly_shape,
    weekly_shape_chart,
)


def datasets_of(chart) -> list[pd.DataFrame]:
    return [pd.DataFrame(v) for v in chart.to_dict()["datasets"].values()]


def requests():
    return pd.DataFrame({"tier": ["a"] * 5 + ["b"] * 3,
                         "output_tokens": [0, 1, 10, 100, 1000, 5, 50, 500]})


def test_log_histogram_counts_each_group():
    f = requests()
    h = log_histogram(f, "output_tokens", by="tier", bins=5)
    edges = np.unique(np.round(np.logspace(0, np.log10(1001), 5)))
    for tier, g in f.groupby("tier"):
        counts, _ = np.histogram(g.output_tokens, bins=edges)
        np.testing.assert_allclose(h[h.tier == tier].share, counts / len(g))
    # a zero-token request (throttled) falls in no bin but counts in its tier
    assert h[h.tier == "a"].share.sum() == pytest.approx(4 / 5)
    np.testing.assert_allclose(h.mid, np.sqrt(h.lo * h.hi))
    with pytest.raises(ValueError, match="lacks column"):
        log_histogram(f, "input_tokens")
    with pytest.raises(ValueError, match="output_tokens"):
        log_histogram(f.assign(output_tokens=-f.output_tokens))


def test_token_histogram_chart_embeds_the_histogram():
    f = requests()
    chart = token_histogram_chart(f, bins=5)
    spec = chart.to_dict()
    assert spec["encoding"]["x"]["scale"]["type"] == "log" and spec["encoding"]["color"]["field"] == "tier"
    pd.testing.assert_frame_equal(datasets_of(chart)[0], log_histogram(f, bins=5), check_dtype=False)


def test_dispersion_chart_draws_the_measured_values_and_poisson():
    idc = {1.0: 1.4, 60.0: 9.0, 3600.0: 375.0}
    chart = dispersion_chart(idc)
    data = datasets_of(chart)
    measured = next(d for d in data if len(d) == 3)
    assert measured.window_s.tolist() == [1.0, 60.0, 3600.0] and measured.idc.tolist() == [1.4, 9.0, 375.0]
    ref = next(d for d in data if len(d) == 2)
    assert ref.idc.tolist() == [1.0, 1.0] and ref.window_s.tolist() == [1.0, 3600.0]
    assert chart.to_dict()["layer"][0]["encoding"]["y"]["scale"]["domain"] == [0.5, 750.0]
    with pytest.raises(ValueError, match="non-empty"):
        dispersion_chart({})


def test_hourly_tokens_chart_sums_input_and_output_per_series():
    t = pd.to_datetime(["2026-01-01T00:00Z", "2026-01-01T01:00Z"])
    hourly = pd.DataFrame({"period_start": list(t) * 2, "model": ["m"] * 4, "tier": ["i", "i", "b", "b"],
                           "input_tokens": [10, 20, 30, 40], "output_tokens": [1, 2, 3, 4]})
    d = datasets_of(hourly_tokens_chart(hourly))[0]
    assert d.series.tolist() == ["m · i", "m · i", "m · b", "m · b"]
    assert d.total_tokens.tolist() == [11, 22, 33, 44]
    # rows per tenant of the same hour and series are summed into one point
    two = pd.concat([hourly, hourly.assign(input_tokens=1, output_tokens=0)], ignore_index=True)
    assert datasets_of(hourly_tokens_chart(two))[0].total_tokens.tolist() == [12, 23, 34, 45]
    with pytest.raises(ValueError, match="lacks column"):
        hourly_tokens_chart(hourly.drop(columns="tier"))


def test_capacity_line_chart_slider_counts_hours_in_the_browser():
    s = pd.DataFrame({"period_start": pd.date_range("2026-01-01", periods=4, freq="h", tz="UTC"),
                      "mtok": [1.0, 2.0, 3.0, 6.0]})
    chart = capacity_line_chart(s, label="interactive tokens per hour (millions)")
    spec = chart.to_dict()
    (p,) = spec["params"]
    assert p["name"] == "cap_mtok" and p["bind"]["input"] == "range"
    assert p["value"] == 3.0 and p["bind"]["max"] == pytest.approx(7.2)  # the mean hour; 1.2 x the peak
    assert spec["layer"][0]["encoding"]["y"]["title"] == "interactive tokens per hour (millions)"
    text = str(spec)
    assert "datum.mtok > cap_mtok" in text and "of hours above capacity" in text
    d = next(d for d in datasets_of(chart) if "mtok" in d)
    assert d.mtok.tolist() == [1.0, 2.0, 3.0, 6.0]
    assert capacity_line_chart(s, start=2.5).to_dict()["params"][0]["value"] == 2.5


def test_capacity_line_chart_slider_has_a_round_step_and_round_values():
    """The slider moves in steps of 1, 2 or 5 × 10^k from a round start: no 2.6379831304078722."""
    s = pd.DataFrame({"period_start": pd.date_range("2026-01-01", periods=3, freq="h", tz="UTC"),
                      "mtok": [40.0, 109.51234, 311.0]})
    (p,) = capacity_line_chart(s, start=109.51234).to_dict()["params"]
    b = p["bind"]
    assert b["step"] == 0.5 and b["min"] == 0.5 and b["max"] == 373.5
    assert p["value"] == 109.5 and repr(p["value"]) == "109.5"
    for v in (b["min"], b["max"], p["value"]):
        assert abs(v / b["step"] - round(v / b["step"])) < 1e-9   # on the step grid


def test_dispersion_chart_draws_one_line_per_group():
    idc = {"web": {1.0: 1.1, 10.0: 1.5}, "etl": {1.0: 0.0, 10.0: 0.0}, "agents": {1.0: 5.5, 10.0: 11.0}}
    chart = dispersion_chart(idc)
    measured = next(d for d in datasets_of(chart) if "group" in d)
    # the steady etl stream (dispersion 0) cannot sit on a log axis and is left off
    assert measured.group.tolist() == ["web", "web", "agents", "agents"]
    assert measured.idc.tolist() == [1.1, 1.5, 5.5, 11.0]
    layer = chart.to_dict()["layer"][0]
    assert layer["encoding"]["color"]["field"] == "group"
    assert layer["encoding"]["y"]["scale"]["domain"] == [0.5, 22.0]
    with pytest.raises(ValueError, match="positive"):
        dispersion_chart({"etl": {1.0: 0.0}})
    with pytest.raises(ValueError, match="non-empty"):
        dispersion_chart({"web": {}})


def hours(weeks=2):
    t = pd.date_range("2026-01-05", periods=168 * weeks, freq="h", tz="UTC")   # a Monday
    rows = []
    for tier, scale in (("interactive", 10), ("batch", 1)):
        for tenant in ("a", "b"):
            rows.append(pd.DataFrame({"period_start": t, "tier": tier, "tenant": tenant,
                                      "total_tokens": scale * (np.arange(len(t)) % 168 + np.arange(len(t)) // 168)}))
    return pd.concat(rows, ignore_index=True)


def test_weekly_shape_averages_each_hour_of_the_week_over_the_weeks():
    w = weekly_shape(hours())
    inter = w[w.tier == "interactive"].set_index("hour_of_week")
    assert len(inter) == 168 and (inter.weeks == 2).all()
    # two tenants summed (x2), week 0 and week 1 (+1) averaged: 2 * (h + 0.5)
    np.testing.assert_allclose(inter["mean"], 2 * (np.arange(168) + 0.5) * 10)
    assert inter.loc[0, "day"] == "Mon" and inter.loc[167, "day"] == "Sun" and inter.loc[30, "hour"] == 6
    with pytest.raises(ValueError, match="lacks column"):
        weekly_shape(hours().drop(columns="tier"))


def test_weekly_shape_chart_embeds_the_shape_with_day_ticks():
    chart = weekly_shape_chart(hours())
    d = datasets_of(chart)[0]
    pd.testing.assert_frame_equal(d[["tier", "hour_of_week", "mean"]],
                                  weekly_shape(hours())[["tier", "hour_of_week", "mean"]], check_dtype=False)
    enc = chart.to_dict()["encoding"]
    assert enc["x"]["axis"]["values"] == [0, 24, 48, 72, 96, 120, 144] and enc["color"]["field"] == "tier"
