"""The charts of the chapter *Where the textbook breaks*.

* :func:`p99_ttft_chart`: p99 TTFT against load for M/M/c with T at full slots and the
  load-dependent model, with the simulator's points;
* :func:`kv_slots_chart`: slots from KV-cache memory against context length, computed in the
  browser from four sliders (so it works on the static site);
* :func:`prefill_chart`: TPOT against concurrency for two workloads on the same GPU;
* :func:`saturation_chart`: a real engine's measured plateau beside three models' saturation rates;
* :func:`error_chart`: the models' errors at held-out stages, one quantity at a time (a menu
  bound to a Vega-Lite parameter, so it works on the static site).

Examples
--------
>>> chart = kv_slots_chart(free_gib=55, slots_tpot=32)
>>> sorted(p["name"] for p in chart.to_dict()["params"])
['free_gib', 'kv_heads', 'layers', 's_tpot']
"""
from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from capbook import queueing as q
from capbook.theme import PALETTE, slider
from capbook.validation import array, integer, nonnegative, positive

__all__ = ["KV_EXPRESSIONS", "p99_ttft_curves", "p99_ttft_chart", "kv_slots_chart", "prefill_chart",
           "saturation_chart", "error_points", "error_chart"]

MMC = "M/M/c, T at full slots"
LD = "load-dependent model"

#: Vega expressions of the KV-cache chart (parameters ``free_gib``, ``layers``, ``kv_heads``,
#: ``s_tpot``; head dimension 128, bf16 values).
KV_EXPRESSIONS = {
    "bytes_per_token": "2 * layers * kv_heads * 128 * 2",
    "memory_slots": "floor(free_gib * 1073741824 / (2 * layers * kv_heads * 128 * 2 * datum.context))",
    "slots": "min(s_tpot, floor(free_gib * 1073741824 / (2 * layers * kv_heads * 128 * 2 * datum.context)))",
}


# One legend entry a row, never cut: the labels here are long and there are only two or three.
FULL_LABELS = alt.Legend(columns=1, labelLimit=500)


def log_ticks(lo: float, hi: float) -> list[float]:
    """Tick values 1, 2 and 5 times a power of ten between ``lo`` and ``hi`` (a log axis whose
    labels do not crowd).

    Examples
    --------
    >>> log_ticks(40, 450)
    [50, 100, 200]
    >>> log_ticks(500, 131072)
    [500, 1000, 2000, 5000, 10000, 20000, 50000, 100000]
    """
    out = []
    for k in range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1):
        for m in (1, 2, 5):
            v = m * 10.0 ** k
            if lo <= v <= hi:
                out.append(int(v) if v >= 1 else v)
    return out


def p99_ttft_curves(model, service_time_s, prefill_s, loads=None, grid_s=None) -> pd.DataFrame:
    """p99 TTFT against load: M/M/c with ``T`` at full slots beside the load-dependent model.

    Parameters
    ----------
    model : capbook.engine.loadqueue.LoadDependentQueue
        The load-dependent model of the pool (its ``servers`` and ``max_throughput`` set the
        M/M/c pool and the load scale).
    service_time_s : float
        T(S), seconds a request holds a slot when the batch is full (M/M/c's one service time).
    prefill_s : float
        Prefill time added to M/M/c's wait, seconds.
    loads : array_like, optional
        Loads as shares of the saturation rate, each in (0, 1); default 0.30, 0.31, ..., 0.96.
    grid_s : array_like, optional
        TTFT grid the model's p99 is read off, seconds; default 2,000 points from 0.2 to 300 s.

    Returns
    -------
    pandas.DataFrame
        Columns ``load``, ``model`` and ``p99 TTFT (s)``, one row per load and model.
    """
    t = positive(service_time_s, "service_time_s")
    pre = nonnegative(prefill_s, "prefill_s")
    ld = np.round(np.arange(0.30, 0.961, 0.01), 2) if loads is None else array(loads, "loads", lo=0, hi=1,
                                                                              lo_open=True, hi_open=True)
    xs = np.geomspace(0.2, 300.0, 2_000) if grid_s is None else array(grid_s, "grid_s", lo=0, lo_open=True)
    rows = []
    for load in ld:
        lam = float(load) * model.max_throughput
        tail = np.asarray(model.solve(lam).prob_ttft_exceeds(xs))
        rows.append({"load": float(load), "model": MMC,
                     "p99 TTFT (s)": float(q.wait_quantile(0.99, model.servers, lam, t)) + pre})
        rows.append({"load": float(load), "model": LD, "p99 TTFT (s)": float(xs[np.argmax(tail <= 0.01)])})
    return pd.DataFrame(rows)


def p99_ttft_chart(curves: pd.DataFrame, simulated: pd.DataFrame, title: str,
                   subtitle: str | None = None) -> alt.LayerChart:
    """Lines of p99 TTFT against load for the analytical models, points for the simulator.

    Parameters
    ----------
    curves : pandas.DataFrame
        From :func:`p99_ttft_curves`: ``load``, ``model``, ``p99 TTFT (s)``.
    simulated : pandas.DataFrame
        The simulator's results: ``load`` (share of saturation) and ``ttft_p99_s`` (seconds).
    title : str
        Chart title (short: it must fit the column).
    subtitle : str, optional
        A second line under the title (what was modelled, which sweep).

    Returns
    -------
    altair.LayerChart
        Log-scale lines and black points ("simulator" in the legend); tooltips give the values.
    """
    for col in ("load", "model", "p99 TTFT (s)"):
        if col not in curves:
            raise ValueError(f"curves must have a column {col!r}")
    for col in ("load", "ttft_p99_s"):
        if col not in simulated:
            raise ValueError(f"simulated must have a column {col!r}")
    lines = alt.Chart(curves).mark_line().encode(
        x=alt.X("load:Q", title="load (share of saturation rate)"),
        y=alt.Y("p99 TTFT (s):Q", scale=alt.Scale(type="log")),
        color=alt.Color("model:N", title=None, legend=FULL_LABELS),
        tooltip=["model:N", alt.Tooltip("load:Q", format=".2f"), alt.Tooltip("p99 TTFT (s):Q", format=".3f")],
    )
    sim = simulated[["load", "ttft_p99_s"]].assign(who="simulator (points)")
    points = alt.Chart(sim).mark_point(size=80, filled=True, color="black").encode(
        x="load:Q", y=alt.Y("ttft_p99_s:Q", title="p99 TTFT (s)", scale=alt.Scale(type="log")),
        shape=alt.Shape("who:N", title=None, legend=FULL_LABELS),
        tooltip=[alt.Tooltip("load:Q"), alt.Tooltip("ttft_p99_s:Q", title="simulated p99 TTFT (s)", format=".3f")],
    )
    return (lines + points).properties(
        title=alt.TitleParams(title, subtitle=subtitle) if subtitle else title)


def kv_slots_chart(free_gib, slots_tpot, layers=32, kv_heads=8) -> alt.Chart:
    """Sequences per replica that fit in the KV cache, against context length, with sliders.

    Per token the cache holds ``2 × layers × KV heads × 128 × 2`` bytes (head dimension 128,
    bf16); the slots are ``min(S from the TPOT target, free memory / bytes per sequence)``. All
    of it is computed in the browser from the sliders.

    Parameters
    ----------
    free_gib : float
        Start value of the free-memory slider, GiB (the slider spans 10 to 600 GiB or more).
    slots_tpot : int
        Start value of the slider for S from the TPOT target, sequences (8 to 256 or more).
    layers, kv_heads : int
        Start values of the model-shape sliders.

    Returns
    -------
    altair.Chart
        Two lines on log axes: slots from memory (grey) and the slots you get (blue).
    """
    f = positive(free_gib, "free_gib")
    s = integer(slots_tpot, "slots_tpot", minimum=1)
    ly = integer(layers, "layers", minimum=1)
    kh = integer(kv_heads, "kv_heads", minimum=1)
    ctx = pd.DataFrame({"context": np.unique(np.round(np.geomspace(500, 131_072, 120)).astype(int))})
    return alt.Chart(ctx).transform_calculate(**KV_EXPRESSIONS).transform_fold(
        ["memory_slots", "slots"], as_=["what", "value"]
    ).transform_filter(
        "datum.value >= 1"  # too little memory for one sequence: no point on a log axis
    ).mark_line().encode(
        x=alt.X("context:Q", title="tokens per sequence (input + output)", scale=alt.Scale(type="log"),
                axis=alt.Axis(values=log_ticks(500, 131_072), format="~s")),
        y=alt.Y("value:Q", title="sequences per replica", scale=alt.Scale(type="log")),
        color=alt.Color("what:N", title=None, scale=alt.Scale(domain=["memory_slots", "slots"],
                                                              range=["#bbbbbb", PALETTE[0]]),
                        legend=alt.Legend(labelExpr="datum.label == 'memory_slots' ? "
                                                    "'slots KV-cache memory allows' : 'slots you get'")),
        tooltip=[alt.Tooltip("context:Q", format=","), "what:N", alt.Tooltip("value:Q", format=",")],
    ).add_params(
        slider("free_gib", round(f), min(10, round(f)), max(600, round(f)), 1, "free KV memory (GiB)"),
        slider("layers", ly, min(16, ly), max(128, ly), 1, "layers"),
        slider("kv_heads", kh, 1, max(64, kh), 1, "KV heads"),
        slider("s_tpot", s, min(8, s), max(256, s), 8, "slots from TPOT target"),
    ).properties(title=alt.TitleParams("Slots from KV-cache memory and the slots you get",
                                       subtitle="grey: memory allows; blue: you get. Head dim 128, bf16"))


def prefill_chart(sweeps: dict) -> tuple[alt.Chart, pd.DataFrame]:
    """TPOT p50 against concurrency for several workloads (sweeps) on the same model and GPU.

    Parameters
    ----------
    sweeps : dict of str to capbook.sweeps.sweep.Sweep
        Workload label → its sweep (each table has ``concurrency``, ``tpot_p50_s`` and
        ``prefill_share``).

    Returns
    -------
    (altair.Chart, pandas.DataFrame)
        The chart (log-2 concurrency axis) and its data: ``workload``, ``concurrency``,
        ``TPOT p50 (ms)``, ``prefill share of engine time``.
    """
    if not sweeps:
        raise ValueError("sweeps must name at least one workload")
    data = pd.concat([pd.DataFrame({
        "workload": name, "concurrency": sw.table["concurrency"], "TPOT p50 (ms)": 1000 * sw.table["tpot_p50_s"],
        "prefill share of engine time": sw.table["prefill_share"]}) for name, sw in sweeps.items()],
        ignore_index=True)
    chart = alt.Chart(data).mark_line(point=True).encode(
        x=alt.X("concurrency:Q", title="concurrency (sequences in flight, log scale)",
                scale=alt.Scale(type="log", base=2)),
        y=alt.Y("TPOT p50 (ms):Q"),
        color=alt.Color("workload:N", title=None, legend=FULL_LABELS),
        tooltip=["workload:N", "concurrency:Q", alt.Tooltip("TPOT p50 (ms):Q", format=".1f"),
                 alt.Tooltip("prefill share of engine time:Q", format=".2f")],
    ).properties(title="Same model, same GPU (modelled sweeps): long prompts slow every stream")
    return chart, data


def saturation_chart(saturation: pd.DataFrame) -> alt.Chart:
    """Each variant's measured plateau beside the models' saturation rates (log scale).

    Parameters
    ----------
    saturation : pandas.DataFrame
        Indexed by variant; the first column is the measured plateau, the next up to three the
        models' saturation rates, requests per second.

    Returns
    -------
    altair.Chart
        One row per variant; black diamonds for the plateau, coloured shapes for the models.
    """
    if saturation.shape[1] < 2 or saturation.shape[1] > 4:
        raise ValueError("saturation must have a measured column and one to three model columns")
    who = list(saturation.columns)
    long = saturation.rename_axis("variant").reset_index().melt(id_vars="variant", var_name="who",
                                                                value_name="req/s")
    return alt.Chart(long).mark_point(filled=True, size=110, opacity=0.9).encode(
        x=alt.X("req/s:Q", title="saturation rate (requests/s, log scale)",
                scale=alt.Scale(type="log", domain=[0.8 * long["req/s"].min(), 1.2 * long["req/s"].max()]),
                axis=alt.Axis(values=log_ticks(0.8 * long["req/s"].min(), 1.2 * long["req/s"].max()))),
        y=alt.Y("variant:N", title=None, sort=list(saturation.index), axis=alt.Axis(labelLimit=230)),
        color=alt.Color("who:N", title=None, scale=alt.Scale(domain=who, range=["#000000"] + PALETTE[:len(who) - 1])),
        shape=alt.Shape("who:N", title=None, scale=alt.Scale(
            domain=who, range=["diamond", "circle", "square", "triangle-up"][:len(who)])),
        tooltip=["variant:N", "who:N", alt.Tooltip("req/s:Q", format=".1f")],
    ).properties(width=360, height=220, title=alt.TitleParams(
        "One vLLM replica: measured plateau and three models", subtitle="fitted on the lowest stable stages only"))


def error_points(fid: pd.DataFrame, quantities: dict, names: dict, targets: dict) -> pd.DataFrame:
    """The held-out and plateau errors of a fidelity table, one row per point of the chart.

    Parameters
    ----------
    fid : pandas.DataFrame
        From :func:`capbook.engine.fidelity.fidelity`: ``check``, ``variant``, ``stage``, ``model``,
        ``quantity``, ``rate_rps``, ``predicted``, ``measured``, ``error`` (a fraction).
    quantities, names : dict
        Quantity and model codes → the labels shown.
    targets : dict
        Quantity code → the target for the absolute error (a fraction).

    Returns
    -------
    pandas.DataFrame
        ``what``, ``where``, ``model``, ``rate_rps``, ``predicted``, ``measured``, ``error_pct``,
        ``target_pct`` (errors and targets in per cent).
    """
    pts = fid[fid["check"].isin(["heldout", "plateau"]) & fid["quantity"].isin(list(quantities))]
    pts = pts.dropna(subset=["error"]).copy()
    pts["what"] = pts["quantity"].map(quantities)
    pts["where"] = pts["variant"] + " · " + np.where(pts["check"] == "plateau", "plateau", pts["stage"].astype(str))
    pts["model"] = pts["model"].map(names)
    pts["error_pct"] = 100 * pts["error"]
    pts["target_pct"] = 100 * pts["quantity"].map(targets)
    return pts[["what", "where", "model", "rate_rps", "predicted", "measured", "error_pct", "target_pct"]]


def error_chart(points: pd.DataFrame, start: str) -> alt.LayerChart:
    """The models' errors for one quantity at a time, chosen in a menu, over the target band.

    Parameters
    ----------
    points : pandas.DataFrame
        From :func:`error_points`.
    start : str
        The quantity shown first (one of ``points["what"]``).

    Returns
    -------
    altair.LayerChart
        Grey target band, a zero rule and one point per stage and model; the menu is a
        Vega-Lite parameter, so the chart works on a static page.
    """
    options = list(dict.fromkeys(points["what"]))
    if start not in options:
        raise ValueError(f"start must be one of {options}, got {start!r}")
    models = list(dict.fromkeys(points["model"]))
    pick = alt.param(name="quantity", value=start, bind=alt.binding_select(options=options, name="quantity "))
    base = alt.Chart(points).transform_filter(alt.datum.what == pick)
    band = base.transform_aggregate(t="max(target_pct)").transform_calculate(lo="-datum.t").mark_rect(
        color="#e8e8e8").encode(x="lo:Q", x2="t:Q")
    dots = base.mark_point(filled=True, size=80, opacity=0.85).encode(
        x=alt.X("error_pct:Q", title="predicted / measured − 1 (%); grey: the target band"),
        y=alt.Y("where:N", title=None, sort=None, axis=alt.Axis(labelLimit=320)),
        color=alt.Color("model:N", title=None, scale=alt.Scale(domain=models, range=PALETTE[:len(models)])),
        shape=alt.Shape("model:N", title=None, scale=alt.Scale(
            domain=models, range=["circle", "square", "triangle-up", "diamond"][:len(models)])),
        tooltip=["where:N", "model:N", "what:N",
                 alt.Tooltip("rate_rps:Q", title="requested rate (req/s)", format=".1f"),
                 alt.Tooltip("measured:Q", format=".4g"), alt.Tooltip("predicted:Q", format=".4g"),
                 alt.Tooltip("error_pct:Q", title="error (%)", format="+.1f")],
    )
    zero = alt.Chart(pd.DataFrame({"x": [0.0]})).mark_rule(color="#444").encode(x="x:Q")
    return (band + zero + dots).add_params(pick).properties(width=260, height=260, title=alt.TitleParams(
        "Errors at the held-out stages and the plateau", subtitle="choose the quantity below the chart"))
