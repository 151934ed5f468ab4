"""Tests of the forecasting part's charts: each is built on small inputs and its embedded data,
encodings and slider parameters are checked against the computation."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from capbook.forecast import tokens as fc
from capbook.charts import forecasting as fchart

H = fc.HOURS_PER_WEEK


def _datasets(spec: dict) -> list[list[dict]]:
    return list(spec.get("datasets", {}).values())


def _params(spec) -> dict:
    """Every named parameter anywhere in the spec (the object hook sees each nested dict)."""
    found = {}

    def hook(d):
        found.update({p["name"]: p for p in d.get("params") or [] if isinstance(p, dict) and "name" in p})
        return d

    json.loads(json.dumps(spec), object_hook=hook)
    return found


# channels whose scale Vega-Lite shares across every view of a chart (layers and concatenations)
_SHARED_EVERYWHERE = {"color", "fill", "stroke", "opacity", "shape", "size", "strokeDash"}


def _scale_conflicts(spec: dict) -> list[str]:
    """Channels whose views declare different scale dicts for one shared scale.

    Vega-Lite merges the scale of a channel across the layers of a layer chart, and the colour
    (and other legend) scales across a concatenation too, unless ``resolve`` makes them
    independent; two views that declare different domains or ranges for the merged scale make it
    log "Conflicting scale property" in the browser."""
    found = []

    def encodings(node, channels):
        """(channel, scale dict or None) of node and every view inside it, for the channels."""
        out = [(ch, (enc or {}).get("scale")) for ch, enc in (node.get("encoding") or {}).items()
               if ch in channels and isinstance(enc, dict) and "field" in enc]
        for key in ("layer", "hconcat", "vconcat", "concat"):
            for child in node.get(key) or []:
                out += encodings(child, channels)
        if "spec" in node:
            out += encodings(node["spec"], channels)
        return out

    def check(node, channels, where):
        independent = {ch for ch, how in ((node.get("resolve") or {}).get("scale") or {}).items()
                       if how == "independent"}
        by_channel = {}
        for ch, scale in encodings(node, channels - independent):
            by_channel.setdefault(ch, []).append(json.dumps(scale, sort_keys=True))
        for ch, scales in by_channel.items():
            declared = {s for s in scales if s != "null"}
            if len(declared) > 1:
                found.append(f"{where}: {ch}: {sorted(declared)}")

    def walk(node, where):
        if "layer" in node:  # a layer chart shares every channel's scale
            check(node, {"x", "y", "x2", "y2", "xOffset", "yOffset"} | _SHARED_EVERYWHERE, where)
        for key in ("layer", "hconcat", "vconcat", "concat"):
            for i, child in enumerate(node.get(key) or []):
                walk(child, f"{where}.{key}[{i}]")

    check(spec, _SHARED_EVERYWHERE, "top")
    walk(spec, "top")
    return found


def test_scale_conflict_check_catches_a_conflict():
    import altair as alt
    df = pd.DataFrame({"x": [1, 2], "y": [1, 2], "c": ["a", "b"]})
    one = alt.Chart(df).mark_line().encode(x="x:Q", y="y:Q", color=alt.Color("c:N", scale=alt.Scale(domain=["a", "b"])))
    two = alt.Chart(df).mark_bar().encode(x="x:Q", y="y:Q", color=alt.Color("c:N", scale=alt.Scale(domain=["b"])))
    assert _scale_conflicts(alt.vconcat(one, two).to_dict())            # colour is shared across concat
    assert _scale_conflicts((one + two).to_dict())
    assert not _scale_conflicts(alt.vconcat(one, two).resolve_scale(color="independent").to_dict())
    assert not _scale_conflicts(alt.vconcat(one, one).to_dict())


@pytest.fixture(scope="module")
def small_forecast():
    series = fc.hourly_series(fc.synthetic_token_series(10, seed=1), "output_tokens")
    train, test = series.iloc[: 8 * H], series.iloc[8 * H :]
    return train, test, fc.forecast_tokens(train, 2, quantiles=(0.1, 0.5, 0.9))


def test_weekly_shape_chart_rows_are_the_shape_in_percent():
    shape = fc.weekly_profile(first_day=2)
    spec = fchart.fitted_shape_chart(shape, first_day=2).to_dict()
    (rows,) = _datasets(spec)
    assert len(rows) == H
    np.testing.assert_allclose([r["share of the week (%)"] for r in rows], 100 * shape)
    assert rows[0]["day"] == "Wed" and rows[24]["day"] == "Thu" and rows[-1]["day"] == "Tue"
    assert spec["encoding"]["x"]["field"] == "hour of week"
    assert spec["mark"]["type"] == "line"


def test_weekly_shape_chart_rejects_bad_input():
    with pytest.raises(ValueError, match="168"):
        fchart.fitted_shape_chart(np.ones(24) / 24)
    with pytest.raises(ValueError, match="first_day"):
        fchart.fitted_shape_chart(np.ones(H) / H, first_day=7)


def test_forecast_band_chart_embeds_history_actual_point_and_band(small_forecast):
    train, test, f = small_forecast
    hist = train.iloc[-H:]
    spec = fchart.forecast_band_chart(hist, test, f.frame).to_dict()
    band, lines = spec["layer"]
    band_rows = spec["datasets"][band["data"]["name"]]
    line_rows = pd.DataFrame(spec["datasets"][lines["data"]["name"]])
    np.testing.assert_allclose([r["p90"] for r in band_rows], np.round(f.frame["p90"].to_numpy() / 1e6, 2))
    np.testing.assert_allclose([r["p10"] for r in band_rows], np.round(f.frame["p10"].to_numpy() / 1e6, 2))
    counts = line_rows["line"].value_counts()
    assert counts["history"] == H and counts["actual (held out)"] == len(test) and counts["point forecast"] == 2 * H
    pts = line_rows[line_rows["line"] == "point forecast"]["tokens"].to_numpy()
    np.testing.assert_allclose(pts, np.round(f.frame["point"].to_numpy() / 1e6, 2))
    assert band["mark"]["type"] == "area" and band["encoding"]["y2"]["field"] == "p90"
    assert lines["encoding"]["color"]["field"] == "line"
    assert _scale_conflicts(spec) == []


def test_forecast_band_chart_checks_its_inputs(small_forecast):
    train, test, f = small_forecast
    with pytest.raises(ValueError, match="history"):
        fchart.forecast_band_chart(train.to_numpy(), test, f.frame)
    with pytest.raises(ValueError, match="p95"):
        fchart.forecast_band_chart(train, test, f.frame, hi="p95")


def test_forecast_explorer_chart_has_four_sliders_and_the_rows():
    hourly = pd.DataFrame({"g": 3.5, "s": 8, "i": np.arange(2 * H), "a": np.arange(2 * H) % 50 + 100,
                           "p": np.full(2 * H, 120)})
    offsets = pd.DataFrame([{"key": f"3.5|8|{h}|{q}", "off_cal": 0.01 * q / 90, "off_sqrt": 0.02 * h}
                            for h in (1, 2) for q in (50, 90)])
    spec = fchart.forecast_explorer_chart(hourly, offsets).to_dict()
    params = _params(spec)
    assert {"growth", "noise", "horizon", "quant"} <= set(params)
    assert all(params[n]["bind"]["input"] == "range" for n in ("growth", "noise", "horizon", "quant"))
    assert params["quant"]["value"] == 90
    data = _datasets(spec)
    assert any(len(d) == 2 * H and d[5]["a"] == 105 for d in data)
    assert any(len(d) == 4 and {"off_cal", "off_sqrt"} <= set(d[0]) for d in data)
    text = str(spec)
    assert "pinpct_sqrt_h" in text and "datum.actual <= datum.calibrated" in text
    # the lines (actual, calibrated, sqrt_h) and the bars (per method) share one colour scale
    assert _scale_conflicts(spec) == []
    with pytest.raises(ValueError, match="offsets"):
        fchart.forecast_explorer_chart(hourly, offsets.drop(columns="off_sqrt"))


def test_coverage_chart_rows_and_slider():
    grid = pd.DataFrame([{"method": m, "quantile": q, "horizon": h, "coverage": q / 100 + (0.01 * h if m == "sqrt_h" else 0),
                          "pinball": h + q / 100} for m in ("calibrated", "sqrt_h") for q in (50, 90) for h in (1, 2, 3)])
    spec = fchart.coverage_chart(grid).to_dict()
    (rows,) = [d for d in _datasets(spec) if len(d) == len(grid)]
    assert pd.DataFrame(rows)[list(grid.columns)].equals(grid)
    params = _params(spec)
    assert params["quant"]["bind"]["input"] == "range" and params["quant"]["value"] == 90
    left, right = spec["hconcat"]
    assert left["layer"][0]["encoding"]["y"]["field"] == "coverage"
    assert right["encoding"]["y"]["field"] == "pinball"
    assert left["layer"][0]["encoding"]["x"]["scale"]["domain"] == [1, 3]
    assert _scale_conflicts(spec) == []
    with pytest.raises(ValueError, match="pinball"):
        fchart.coverage_chart(grid.drop(columns="pinball"))


def test_time_zone_chart_rows_are_the_regions_and_their_sum():
    shape = fc.weekly_profile()
    regions = pd.DataFrame({"east": np.roll(shape, -7), "west": np.roll(shape, 6)})
    regions["global"] = regions.sum(axis=1)
    spec = fchart.time_zone_chart(regions).to_dict()
    (rows,) = _datasets(spec)
    got = pd.DataFrame(rows).pivot(index="hour of week", columns="series", values="share (%)")
    np.testing.assert_allclose(got[["east", "west", "global"]].to_numpy(), 100 * regions.to_numpy(), atol=1e-4)
    assert spec["encoding"]["color"]["scale"]["domain"] == ["east", "west", "global"]
    assert "global" in str(spec["encoding"]["strokeWidth"])
    assert _scale_conflicts(spec) == []
    with pytest.raises(ValueError, match="168"):
        fchart.time_zone_chart(regions.iloc[:24])
    with pytest.raises(ValueError, match="global"):
        fchart.time_zone_chart(regions.drop(columns="global"))
