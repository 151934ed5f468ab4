"""The charts of Little's law and the knee: embedded data, browser expressions, sliders."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from capbook import queueing as q
from capbook.charts import knee


class _Datum:
    def __init__(self, row):
        self.__dict__.update(row)


def _eval(expr: str, row: dict, **params) -> float:
    """Evaluate one of the chart's Vega expressions in Python on one data row."""
    return eval(expr, {"exp": math.exp, "log": math.log}, {"datum": _Datum(row), **params})


def _datasets(spec: dict) -> list[list[dict]]:
    return list(spec["datasets"].values())


def _params(spec: dict) -> dict:
    return {p["name"]: p for p in spec.get("params", [])}


def test_qps_chart_embeds_the_grid_and_computes_s_over_t_in_the_browser():
    chart = knee.qps_by_output_chart(32, 0.040, 0.25, 300, max_output_tokens=200, step=50)
    spec = chart.to_dict()
    rows = max(_datasets(spec), key=len)
    assert [r["output_tokens"] for r in rows] == [50, 100, 150, 200]
    params = _params(spec)
    assert {"S", "tpot_ms", "prefill"} <= set(params)
    assert params["S"]["value"] == 32 and params["S"]["bind"]["input"] == "range"
    assert params["tpot_ms"]["value"] == pytest.approx(40.0)
    # the browser's expression gives capbook's S / T for every row
    for r in rows:
        got = _eval(knee.QPS_EXPRESSIONS["qps"], r, S=32, tpot_ms=40.0, prefill=0.25)
        assert got == pytest.approx(q.replica_capacity(32, 0.25 + r["output_tokens"] * 0.040))
    # the workload is marked at its mean output length
    assert any(d == [{"output_tokens": 300}] for d in _datasets(spec))
    calcs = [t for layer in spec["layer"] for t in layer.get("transform", []) if "calculate" in t]
    assert {t["as"] for t in calcs} == {"T", "qps"}


def test_erlang_c_table_matches_capbook():
    table = knee.erlang_c_table(np.arange(1, 5), np.array([0.5, 0.8]))
    assert list(table.columns) == ["c", "rho", "C"] and len(table) == 8
    for r in table.itertuples():
        assert r.C == pytest.approx(q.prob_wait(r.c, r.rho * r.c / 3.0, 3.0), rel=1e-3)
    # one server: C = rho
    assert table[table.c == 1].C.tolist() == [0.5, 0.8]


def test_knee_chart_embeds_the_table_and_its_expressions_are_erlang_c():
    table = knee.erlang_c_table(np.arange(1, 17), np.round(np.arange(0.30, 0.995, 0.01), 2))
    spec = knee.knee_explorer_chart(table, slots=8, service_time_s=8.0, wait_t=2.0, target_pct=5).to_dict()
    rows = max(_datasets(spec), key=len)
    assert len(rows) == len(table)
    assert pd.DataFrame(rows)[["c", "rho", "C"]].equals(table)
    params = _params(spec)
    assert set(params) >= {"slots", "service_T", "wait_t", "target_pct"}
    assert params["slots"]["value"] == 8 and params["slots"]["bind"]["max"] == 16
    assert all(p["bind"]["input"] == "range" for p in params.values())
    row = next(r for r in rows if r["c"] == 8 and r["rho"] == 0.9)
    lam = 0.9 * 8 / 8.0
    assert _eval(knee.KNEE_EXPRESSIONS["wait_s"], row, service_T=8.0) == pytest.approx(
        q.mean_wait(8, lam, 8.0), rel=1e-3)
    assert _eval(knee.KNEE_EXPRESSIONS["tail"], row, service_T=8.0, wait_t=2.0) == pytest.approx(
        q.prob_wait_exceeds(2.0, 8, lam, 8.0), rel=1e-3)
    assert _eval(knee.KNEE_EXPRESSIONS["mm1"], row) == pytest.approx(q.mm1_response_multiple(0.9))
    assert len(spec["vconcat"]) == 2


@pytest.mark.parametrize("args", [(8, 8.0, 2.0, 0.05), (32, 12.25, 0.5, 0.01), (64, 8.0, 1.0, 0.02)])
def test_table_safe_utilisation_agrees_with_the_solver(args):
    table = knee.erlang_c_table(np.arange(1, 65), np.round(np.arange(0.30, 0.995, 0.01), 2))
    assert knee.table_safe_utilisation(table, *args) == pytest.approx(q.max_utilisation(*args), abs=0.003)


def test_bad_inputs_name_the_argument():
    with pytest.raises(ValueError, match="^slots"):
        knee.qps_by_output_chart(0, 0.04, 0.25, 300)
    with pytest.raises(ValueError, match="^tpot_s"):
        knee.qps_by_output_chart(32, -1, 0.25, 300)
    with pytest.raises(ValueError, match="^utilisations"):
        knee.erlang_c_table([8], [0.5, 1.0])
    with pytest.raises(ValueError, match="^slots"):
        knee.erlang_c_table([0.5], [0.5])
    table = knee.erlang_c_table([8], [0.5, 0.9])
    with pytest.raises(ValueError, match="^c must be one of"):
        knee.table_safe_utilisation(table, 9, 8.0, 2.0, 0.05)
    with pytest.raises(ValueError, match="^table"):
        knee.knee_explorer_chart(pd.DataFrame({"x": [1]}))
    with pytest.raises(ValueError, match="^target_pct"):
        knee.knee_explorer_chart(table, target_pct=150)


def _eval_vega(expr: str, row: dict, **params) -> float:
    """Evaluate a Vega expression using ``if(test, a, b)`` in Python."""
    return eval(expr.replace("if(", "_if("), {"_if": lambda t, a, b: a if t else b},
                {"datum": _Datum(row), **params})


def test_tpot_expression_interpolates_like_the_sweep():
    from capbook.sweeps.sweep import load_sample_sweep

    sweep = load_sample_sweep("illustrative_chat")
    levels = sweep.concurrency
    expr = knee.tpot_expression(levels, sweep.tpot(levels, "mean"))
    for n in [1, 2, 3, 5, 12, 20, 32, 40, 47.5, 64]:
        assert _eval_vega(expr, {}, S=n) == pytest.approx(sweep.tpot(n, "mean"), rel=1e-12)
    with pytest.raises(ValueError, match="^levels"):
        knee.tpot_expression([2, 1], [0.01, 0.02])


def test_qps_chart_with_a_sweep_uses_the_measured_tpot_at_s():
    from capbook.sweeps.sweep import load_sample_sweep

    sweep = load_sample_sweep("illustrative_chat")
    chart = knee.qps_by_output_chart(32, 0.040, 0.25, 300, max_output_tokens=200, step=50, sweep=sweep)
    spec = chart.to_dict()
    params = _params(spec)
    assert set(params) == {"S", "prefill"}                     # no free TPOT slider
    assert params["S"]["bind"]["min"] == 1 and params["S"]["bind"]["max"] == 64
    assert params["S"]["bind"]["step"] == 1 and params["S"]["value"] == 32
    fixed, measured = (layer["transform"] for layer in spec["layer"][:2])
    qps = next(t["calculate"] for t in measured if t["as"] == "qps")
    qps_fixed = next(t["calculate"] for t in fixed if t["as"] == "qps")
    rows = max(_datasets(spec), key=len)
    for S in (1, 8, 16, 32, 40, 64):
        for r in rows:
            want = S / sweep.service_time_s(S, input_tokens=0, output_tokens=r["output_tokens"])
            # the browser's rate: S / (prefill + tokens x TPOT(S)) from the sweep, in capbook
            got = _eval_vega(qps, r, S=S, prefill=0.0)
            assert got == pytest.approx(want, rel=1e-12)
    # at 32 slots the sweep's TPOT is the running example's 40 ms: both lines meet
    r = rows[-1]
    assert _eval_vega(qps, r, S=32, prefill=0.25) == pytest.approx(
        _eval_vega(qps_fixed, r, S=32, prefill=0.25), rel=1e-3)
    # doubling the slots to 64 does not double the rate, the fixed-TPOT line does
    ratio = _eval_vega(qps, r, S=64, prefill=0.25) / _eval_vega(qps, r, S=32, prefill=0.25)
    assert 1.0 < ratio < 1.5
    assert _eval_vega(qps_fixed, r, S=64, prefill=0.25) / _eval_vega(qps_fixed, r, S=32, prefill=0.25) == pytest.approx(2)
    # the x axis cannot print overlapping labels
    assert spec["layer"][0]["encoding"]["x"]["axis"]["labelOverlap"] is True
    with pytest.raises(ValueError, match="^slots"):
        knee.qps_by_output_chart(128, 0.04, 0.25, 300, sweep=sweep)
    with pytest.raises(TypeError, match="^sweep"):
        knee.qps_by_output_chart(32, 0.04, 0.25, 300, sweep="illustrative_chat")
