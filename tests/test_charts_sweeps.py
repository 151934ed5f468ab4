"""capbook.charts.sweeps: the sweep chapter's charts carry the sweep's own numbers.

Each chart is built on a small sweep; the tests read the embedded data back out of
``chart.to_dict()`` and compare it with the Sweep methods, and check that the interactive
chart's controls are Vega-Lite parameters bound to inputs (so it works on the static site).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from capbook.charts.sweeps import (
    latency_curves_chart,
    long_share_chart,
    percentile_frame,
    slider_frame,
    slots_slider_chart,
    tpot_limit_chart,
)
from capbook.sweeps.sweep import Sweep, choose_slots


def small_sweep(name="small", scale=1.0, mean=True):
    n = np.array([1.0, 2.0, 4.0, 8.0])
    tpot = np.array([0.010, 0.012, 0.016, 0.030]) * scale
    df = pd.DataFrame({
        "concurrency": n, "ttft_p50_s": 0.2, "ttft_p95_s": 0.3, "ttft_p99_s": [0.4, 0.45, 0.5, 0.9],
        "tpot_p50_s": tpot, "tpot_p95_s": tpot * 1.1, "tpot_p99_s": tpot * 1.2,
        "request_throughput_rps": n / (0.2 + 100 * tpot), "output_throughput_tps": n / tpot,
        "mean_input_tokens": 1000.0, "mean_output_tokens": 100.0, "num_requests": 50,
    })
    if mean:
        df["tpot_mean_s"] = tpot * 1.01
    return Sweep.from_frame(df, name=name)


def datasets_of(chart) -> list[pd.DataFrame]:
    return [pd.DataFrame(v) for v in chart.to_dict()["datasets"].values()]


def params_of(spec) -> dict:
    return {p["name"]: p for p in spec.get("params", [])}


def test_percentile_frame_is_the_table_in_long_form():
    sw = small_sweep()
    f = percentile_frame(sw, "tpot")
    assert sorted(f.percentile.unique()) == ["p50", "p95", "p99"] and len(f) == 12
    p95 = f[f.percentile == "p95"]
    np.testing.assert_allclose(p95.tpot_s, sw.table.tpot_p95_s)
    np.testing.assert_allclose(p95.tpot_ms, 1e3 * sw.table.tpot_p95_s)
    g = percentile_frame(sw, "ttft")
    np.testing.assert_allclose(g[g.percentile == "p99"].ttft_s, sw.table.ttft_p99_s)
    with pytest.raises(ValueError, match="metric"):
        percentile_frame(sw, "e2e")
    with pytest.raises(TypeError, match="Sweep"):
        percentile_frame(sw.table)


def test_latency_curves_chart_embeds_both_metrics():
    sw = small_sweep()
    chart = latency_curves_chart(sw)
    spec = chart.to_dict()
    assert len(spec["vconcat"]) == 2
    assert spec["vconcat"][0]["encoding"]["y"]["field"] == "tpot_ms"
    assert spec["vconcat"][1]["encoding"]["y"]["field"] == "ttft_s"
    assert spec["vconcat"][0]["encoding"]["x"]["scale"]["type"] == "log"
    data = datasets_of(chart)
    tp = next(d for d in data if "tpot_ms" in d)
    np.testing.assert_allclose(np.sort(tp.tpot_ms.to_numpy()), np.sort(percentile_frame(sw).tpot_ms.to_numpy()))


def test_tpot_limit_chart_draws_the_limit():
    sw = small_sweep()
    chart = tpot_limit_chart(sw, 15.0)
    data = datasets_of(chart)
    assert any(list(d.columns) == ["limit_ms"] and d.limit_ms.tolist() == [15.0] for d in data)
    with pytest.raises(ValueError, match="limit_ms"):
        tpot_limit_chart(sw, -1)


def test_slider_frame_holds_T_and_capacity_from_the_sweep():
    a, b = small_sweep("a"), small_sweep("b", scale=2.0)
    f = slider_frame({"a": a, "b": b}, q="mean")
    assert set(f.sweep) == {"a", "b"} and len(f) == 2 * 3 * 4
    fa = f[(f.sweep == "b") & (f.percentile == "p95")]
    np.testing.assert_allclose(fa.tpot_ms, 1e3 * b.table.tpot_p95_s)
    np.testing.assert_allclose(fa.T_s, b.service_time_s(b.concurrency, q="mean"))
    np.testing.assert_allclose(fa.cap_rps, b.concurrency / b.service_time_s(b.concurrency, q="mean"))
    # the median is available too; a sweep without the mean TPOT refuses q="mean"
    f50 = slider_frame({"a": a}, q=50)
    np.testing.assert_allclose(f50[f50.percentile == "p50"].T_s, a.service_time_s(a.concurrency, q=50))
    with pytest.raises(ValueError, match="tpot_mean_s"):
        slider_frame({"x": small_sweep(mean=False)}, q="mean")
    with pytest.raises(ValueError, match="non-empty mapping"):
        slider_frame({})


def test_slots_slider_chart_params_are_bound_and_S_is_computed_in_the_browser():
    sweeps = {"a": small_sweep("a"), "b": small_sweep("b", scale=2.0)}
    chart = slots_slider_chart(sweeps, initial="b", target_ms=40, margin_pct=10)
    spec = chart.to_dict()
    p = params_of(spec)
    assert set(p) == {"sweep_name", "pct", "target_ms", "margin_pct"}
    assert p["sweep_name"]["bind"]["input"] == "select" and p["sweep_name"]["bind"]["options"] == ["a", "b"]
    assert p["sweep_name"]["value"] == "b"
    assert p["pct"]["bind"]["input"] == "radio" and p["pct"]["value"] == "p95"
    assert p["target_ms"]["bind"]["input"] == "range" and p["target_ms"]["value"] == 40
    assert p["margin_pct"]["bind"]["input"] == "range" and p["margin_pct"]["value"] == 10
    # the prefix rule (every lower level passes) is a window transform over the embedded data
    text = str(spec)
    assert "prefix_ok" in text and "datum.sweep == sweep_name && datum.percentile == pct" in text
    data = datasets_of(chart)
    frame = next(d for d in data if "cap_rps" in d)
    pd.testing.assert_frame_equal(frame.reset_index(drop=True), slider_frame(sweeps).reset_index(drop=True),
                                  check_dtype=False)
    # replaying the browser's rule in Python gives choose_slots' S on the embedded rows
    rows = frame[(frame.sweep == "b") & (frame.percentile == "p95")].sort_values("concurrency")
    ok = np.minimum.accumulate((rows.tpot_ms <= 40 * 0.9).to_numpy()).astype(bool)
    assert rows.concurrency[ok].max() == choose_slots(sweeps["b"], 0.040, q=95, margin=0.10).S == 4
    with pytest.raises(ValueError, match="initial"):
        slots_slider_chart(sweeps, initial="zzz")
    with pytest.raises(ValueError, match="percentile"):
        slots_slider_chart(sweeps, percentile="p90")


def _js(expr: str, **env) -> float:
    """Evaluate one of the chart's arithmetic Vega expressions in Python (same operators)."""
    return eval(expr.replace("datum.", ""), {}, env)  # noqa: S307 - test-only, our own strings


def test_long_share_chart_computes_the_linear_mix_in_the_browser():
    from capbook.sweeps.sweep import capacity_vs_long_share

    sw = small_sweep()
    resweep = pd.DataFrame({"long_share": [0.0, 0.5], "resweep_rps": [1.0, 0.5], "S_resweep": [4, 2]})
    chart = long_share_chart(sw, 4, resweep, short=(1000, 100), long=(4000, 50))
    spec = chart.to_dict()
    p = params_of(spec)
    assert p["long_in"]["value"] == 4000 and p["long_in"]["bind"]["input"] == "range"
    assert p["long_out"]["value"] == 50 and p["long_out"]["bind"]["input"] == "range"
    calc = spec["layer"][0]["transform"][0]
    assert calc["calculate"] and calc["as"] == "T"
    exprs = {t["as"]: t["calculate"] for t in spec["layer"][0]["transform"] if "calculate" in t}
    ref = capacity_vs_long_share(sw, 4, (1000, 100), (4000, 50), shares=[0.0, 0.3, 1.0])
    for share, want, ceiling in zip(ref.long_share, ref.capacity_rps,
                                    sw.prefill_rate_tps / ((1 - ref.long_share) * 1000 + ref.long_share * 4000)):
        T = _js(exprs["T"], long_share=share, long_in=4000, long_out=50)
        assert _js(exprs["blended"], T=T) == pytest.approx(want, rel=1e-12)
        assert _js(exprs["ceiling"], long_share=share, long_in=4000) == pytest.approx(ceiling, rel=1e-12)
    data = datasets_of(chart)
    pts = next(d for d in data if "resweep_rps" in d)
    assert pts.resweep_rps.tolist() == [1.0, 0.5] and pts.label.iloc[0] == "re-swept model (4,000 / 50)"
    grid = next(d for d in data if list(d.columns) == ["long_share"])
    assert grid.long_share.iloc[0] == 0 and grid.long_share.iloc[-1] == 1 and len(grid) == 41
    # without re-sweep points the chart is the two lines alone
    assert "layer" not in long_share_chart(sw, 4).to_dict()
