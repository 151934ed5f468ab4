"""The charts of part 3 (variability, where the textbook breaks): data rows equal the computation.

Each chart is built on small inputs; the tests read the Vega-Lite spec (``chart.to_dict()``) and
check the embedded rows against the package's own functions, and that the sliders and menus are
parameters bound to inputs (so they work on the static site).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from capbook.engine import loadqueue as lq
from capbook import queueing as q
from capbook.charts import textbook as tb
from capbook.charts import variability as var
from capbook.sweeps.sweep import load_sample_sweep


def _datasets(spec: dict) -> list[list[dict]]:
    return list(spec["datasets"].values())


def _params(spec: dict) -> dict:
    return {p["name"]: p for p in spec.get("params", [])}


def _layer_params(spec: dict) -> dict:
    out = _params(spec)
    for layer in spec.get("layer", []):
        out.update(_params(layer))
    return out


# ---------------------------------------------------------------- variability


def test_dispersion_chart_rows_are_the_table():
    table = pd.DataFrame({0.1: [1.06, 0.99], 2.0: [1.93, 0.97], 60.0: [2.61, 0.79]},
                         index=["interactive", "without the agents"])
    spec = var.peak_dispersion_chart(table).to_dict()
    rows = [r for d in _datasets(spec) for r in d if "stream" in r]
    assert len(rows) == 6
    got = {(r["stream"], r["window_s"]): r["idc"] for r in rows}
    for stream in table.index:
        for w in table.columns:
            assert got[(stream, w)] == pytest.approx(table.loc[stream, w])
    layers = spec["layer"]
    assert layers[0]["encoding"]["x"]["scale"]["type"] == "log"
    assert [r["idc"] for d in _datasets(spec) for r in d if "stream" not in r] == [1.0]   # the Poisson rule


@pytest.mark.parametrize("bad", [pd.DataFrame(), pd.DataFrame({-1.0: [1.0]}), pd.DataFrame({1.0: [np.nan]})])
def test_dispersion_chart_rejects_bad_tables(bad):
    with pytest.raises(ValueError):
        var.peak_dispersion_chart(bad)


def test_allen_cunneen_grid_is_the_mmc_wait():
    grid = var.allen_cunneen_grid(32, 12.25, lo=0.6, hi=0.9, step=0.1)
    np.testing.assert_allclose(grid["utilisation"], [0.6, 0.7, 0.8, 0.9])
    np.testing.assert_allclose(grid["w_mmc"], q.mean_wait(32, grid["utilisation"] * 32 / 12.25, 12.25))


def test_allen_cunneen_chart_embeds_the_waits_and_binds_two_sliders():
    spec = var.allen_cunneen_chart(32, 12.25, ca2=2.0, sigma=1.2).to_dict()
    rows = max(_datasets(spec), key=len)
    grid = var.allen_cunneen_grid(32, 12.25)
    assert len(rows) == len(grid)
    np.testing.assert_allclose([r["w_mmc"] for r in rows], grid["w_mmc"])
    params = _params(spec)
    assert params["ca2"]["value"] == 2.0 and params["sigma"]["value"] == 1.2
    assert all(params[n]["bind"]["input"] == "range" for n in ("ca2", "sigma"))
    calc = [t for t in spec["transform"] if "calculate" in t]
    assert {t["as"]: t["calculate"] for t in calc}["Allen–Cunneen"] == var.AC_EXPRESSIONS["Allen–Cunneen"]
    # the browser's expression is the package's formula: evaluate it for one row
    row = rows[len(rows) // 2]
    w = row["w_mmc"] * (2.0 + np.exp(1.2**2) - 1) / 2
    lam = row["utilisation"] * 32 / 12.25
    assert w == pytest.approx(q.allen_cunneen_wait(32, lam, 12.25, 2.0, q.lognormal_cs2(1.2)))


@pytest.mark.parametrize("kwargs, name", [
    ({"slots": 0, "service_time_s": 12.25}, "slots"),
    ({"slots": 32, "service_time_s": -1.0}, "service_time_s"),
    ({"slots": 32, "service_time_s": 12.25, "ca2": -1.0}, "ca2"),
    ({"slots": 32, "service_time_s": 12.25, "sigma": 5.0}, "sigma"),
])
def test_allen_cunneen_chart_names_a_bad_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        var.allen_cunneen_chart(**kwargs)


def test_allen_cunneen_grid_refuses_a_bad_range():
    with pytest.raises(ValueError, match="hi"):
        var.allen_cunneen_grid(32, 12.25, lo=0.9, hi=0.5)


# ---------------------------------------------------------------- where the textbook breaks


@pytest.fixture(scope="module")
def sweep():
    return load_sample_sweep()


@pytest.fixture(scope="module")
def model(sweep):
    return lq.from_sweep(sweep, 32, replicas=2, input_tokens=1500.0, output_tokens=300.0)


def test_p99_ttft_curves_are_the_two_models(sweep, model):
    ts, pre = float(sweep.service_time_s(32, 1500.0, 300.0)), 1500.0 / sweep.prefill_rate_tps
    curves = tb.p99_ttft_curves(model, ts, pre, loads=[0.5, 0.9])
    assert list(curves["model"]) == [tb.MMC, tb.LD] * 2
    lam = 0.9 * model.max_throughput
    mmc = curves[(curves["load"] == 0.9) & (curves["model"] == tb.MMC)]["p99 TTFT (s)"].item()
    assert mmc == pytest.approx(float(q.wait_quantile(0.99, 64, lam, ts)) + pre)
    ld = curves[(curves["load"] == 0.9) & (curves["model"] == tb.LD)]["p99 TTFT (s)"].item()
    assert ld == pytest.approx(model.solve(lam).ttft_quantile(0.99), rel=0.01)   # read off a 2,000-point grid
    with pytest.raises(ValueError, match="loads"):
        tb.p99_ttft_curves(model, ts, pre, loads=[1.2])


def test_p99_ttft_chart_layers_lines_and_points():
    curves = pd.DataFrame({"load": [0.5, 0.5], "model": [tb.MMC, tb.LD], "p99 TTFT (s)": [1.0, 0.5]})
    sim = pd.DataFrame({"load": [0.5], "ttft_p99_s": [0.6], "other": ["x"]})
    spec = tb.p99_ttft_chart(curves, sim, title="t").to_dict()
    assert [layer["mark"]["type"] for layer in spec["layer"]] == ["line", "point"]
    assert [{"load": 0.5, "ttft_p99_s": 0.6, "who": "simulator (points)"}] in _datasets(spec)
    assert spec["layer"][1]["encoding"]["shape"]["field"] == "who"  # the points are in the legend
    with pytest.raises(ValueError, match="simulated"):
        tb.p99_ttft_chart(curves, sim.drop(columns="ttft_p99_s"), title="t")


def test_log_axes_carry_spaced_ticks_and_no_zero():
    spec = tb.kv_slots_chart(free_gib=55, slots_tpot=32).to_dict()
    assert spec["encoding"]["x"]["axis"]["values"] == tb.log_ticks(500, 131_072)
    # at 10 GiB and 128 layers the longest contexts fit no sequence: no 0 on the log axis
    assert {"filter": "datum.value >= 1"} in spec["transform"]
    assert tb.log_ticks(40, 450) == [50, 100, 200]  # 1, 2, 5 × 10^k: no 60 70 80 90 crowd


def test_kv_slots_chart_computes_the_package_slots_in_the_browser():
    spec = tb.kv_slots_chart(free_gib=55, slots_tpot=32).to_dict()
    params = _params(spec)
    assert {n: params[n]["value"] for n in ("free_gib", "layers", "kv_heads", "s_tpot")} == {
        "free_gib": 55, "layers": 32, "kv_heads": 8, "s_tpot": 32}
    assert all(p["bind"]["input"] == "range" for p in params.values())
    rows = max(_datasets(spec), key=len)
    assert rows[0]["context"] == 500 and rows[-1]["context"] == 131_072
    # the expression is the package's: bytes per token and slots for one context length
    assert lq.kv_bytes_per_token(32, 8, 128, 2) == 2 * 32 * 8 * 128 * 2
    free, ctx = 55 * 2**30, 8_000
    assert lq.kv_slots(free, lq.kv_bytes_per_token(32, 8, 128, 2), ctx) == int(free // (2 * 32 * 8 * 128 * 2 * ctx))
    calc = {t["as"]: t["calculate"] for t in spec["transform"] if "calculate" in t}
    assert calc["slots"] == tb.KV_EXPRESSIONS["slots"]
    big = _params(tb.kv_slots_chart(free_gib=800, slots_tpot=512).to_dict())   # a reader's bigger GPU
    assert big["free_gib"]["bind"]["max"] >= 800 and big["s_tpot"]["bind"]["max"] >= 512
    with pytest.raises(ValueError, match="slots_tpot"):
        tb.kv_slots_chart(free_gib=55, slots_tpot=0)


def test_prefill_chart_returns_the_sweeps_rows():
    chat = load_sample_sweep("llama8b_h100_chat")
    chart, data = tb.prefill_chart({"chat": chat})
    np.testing.assert_allclose(data["TPOT p50 (ms)"], 1000 * chat.table["tpot_p50_s"])
    rows = max(_datasets(chart.to_dict()), key=len)
    assert len(rows) == len(chat.table) and rows[0]["workload"] == "chat"
    with pytest.raises(ValueError, match="sweeps"):
        tb.prefill_chart({})


def test_saturation_chart_puts_the_plateau_first():
    sat = pd.DataFrame({"measured plateau": [100.0, 50.0], "M/M/c": [250.0, 120.0], "simulation": [110.0, 55.0]},
                       index=pd.Index(["a", "b"], name="variant"))
    spec = tb.saturation_chart(sat).to_dict()
    rows = max(_datasets(spec), key=len)
    assert len(rows) == 6 and {"variant": "a", "who": "M/M/c", "req/s": 250.0} in rows
    assert spec["encoding"]["color"]["scale"]["domain"] == ["measured plateau", "M/M/c", "simulation"]
    assert spec["encoding"]["shape"]["scale"]["range"][0] == "diamond"
    with pytest.raises(ValueError, match="saturation"):
        tb.saturation_chart(sat[["measured plateau"]])


def test_error_chart_filters_by_a_menu_over_the_error_points():
    fid = pd.DataFrame({
        "check": ["heldout", "heldout", "plateau", "fit"], "variant": ["v", "v", "v", "v"],
        "stage": ["s3", "s3", "", "s1"], "model": ["mmc", "simulation", "simulation", "mmc"],
        "quantity": ["ttft_p99_s", "ttft_p99_s", "saturation_rps", "ttft_p99_s"],
        "rate_rps": [10.0, 10.0, np.nan, 5.0], "predicted": [2.0, 1.1, 105.0, 1.0],
        "measured": [1.0, 1.0, 100.0, 1.0], "error": [1.0, 0.1, 0.05, 0.0]})
    pts = tb.error_points(fid, {"ttft_p99_s": "TTFT p99", "saturation_rps": "saturation rate"},
                          {"mmc": "M/M/c", "simulation": "simulation"}, {"ttft_p99_s": 0.3, "saturation_rps": 0.1})
    assert list(pts["error_pct"]) == pytest.approx([100.0, 10.0, 5.0])
    assert list(pts["where"]) == ["v · s3", "v · s3", "v · plateau"] and list(pts["target_pct"]) == [30.0, 30.0, 10.0]
    spec = tb.error_chart(pts, start="TTFT p99").to_dict()
    pick = _layer_params(spec)["quantity"]
    assert pick["value"] == "TTFT p99" and pick["bind"]["options"] == ["TTFT p99", "saturation rate"]
    assert len(max(_datasets(spec), key=len)) == 3
    with pytest.raises(ValueError, match="start"):
        tb.error_chart(pts, start="TPOT")


def test_chart_titles_round_and_name_units_and_modelled_data():
    """Issue 32: a title printed T = 12.2502 s; the prefill chart named no unit on x and hid
    that its sweeps are modelled."""
    spec = var.allen_cunneen_chart(32, 12.250237).to_dict()
    assert spec["title"].endswith("(32 slots, T = 12.25 s)")
    chart, _ = tb.prefill_chart({"chat": load_sample_sweep("llama8b_h100_chat")})
    spec = chart.to_dict()
    assert "modelled" in spec["title"]
    assert spec["encoding"]["x"]["title"].startswith("concurrency (sequences in flight")
    for enc in ("x", "y"):      # every axis has a title with its unit
        assert "title" in spec["encoding"][enc] or "(" in spec["encoding"][enc]["field"]


def test_two_entry_legends_are_not_cut_and_the_p99_axis_has_one_title():
    """Issue 32: legends cut "M/M/c, T at full slots" to "M/M/c, T at ful…" and the layered
    p99 chart titled its axis "p99 TTFT (s), ttft_p99_s"."""
    curves = pd.DataFrame({"load": [0.5, 0.5], "model": [tb.MMC, tb.LD], "p99 TTFT (s)": [1.0, 0.5]})
    spec = tb.p99_ttft_chart(curves, pd.DataFrame({"load": [0.5], "ttft_p99_s": [0.6]}), "t").to_dict()
    assert {layer["encoding"]["y"].get("title", layer["encoding"]["y"]["field"])
            for layer in spec["layer"]} == {"p99 TTFT (s)"}
    assert spec["layer"][0]["encoding"]["color"]["legend"]["labelLimit"] >= 400
    spec = var.allen_cunneen_chart(32, 12.25).to_dict()
    assert spec["encoding"]["color"]["legend"]["labelLimit"] >= 400
