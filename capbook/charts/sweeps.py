"""Charts of a concurrency sweep (chapters *From a sweep to slots and service time* and *Mixed
workloads*).

Each function returns an Altair chart built on data computed here from
:class:`capbook.sweeps.sweep.Sweep` objects, so a chapter cell makes one call per chart. The
interactive chart (:func:`slots_slider_chart`) binds its controls to Vega-Lite parameters and
computes the pass/fail status, ``S``, ``T`` and capacity in the browser from embedded data, so
it keeps working on the static site.
"""
from __future__ import annotations

from typing import Mapping

import altair as alt
import numpy as np
import pandas as pd

from capbook.theme import PALETTE, slider
from capbook.sweeps.sweep import QUANTILES, Sweep
from capbook.validation import choice, number

__all__ = ["percentile_frame", "latency_curves_chart", "tpot_limit_chart", "slider_frame",
           "slots_slider_chart", "long_share_chart"]

#: Colours of the pass/fail status in :func:`slots_slider_chart`.
_STATUS = {"within limit": PALETTE[2], "beyond S": PALETTE[1]}


def _x_concurrency() -> alt.X:
    return alt.X("concurrency:Q", title="concurrency (requests in flight)",
                 scale=alt.Scale(type="log", base=2))


def _sweep(sweep, name: str = "sweep") -> Sweep:
    if not isinstance(sweep, Sweep):
        raise TypeError(f"{name} must be a capbook.sweeps.sweep.Sweep, not {type(sweep).__name__}")
    return sweep


def percentile_frame(sweep: Sweep, metric: str = "tpot") -> pd.DataFrame:
    """The sweep's p50/p95/p99 of one metric in long form, one row per level and percentile.

    Parameters
    ----------
    sweep : Sweep
    metric : {"tpot", "ttft"}
        Time per output token or time to first token.

    Returns
    -------
    pandas.DataFrame
        ``concurrency``, ``percentile`` (``"p50"``, ``"p95"``, ``"p99"``), ``<metric>_s``
        (seconds) and ``<metric>_ms`` (milliseconds). Percentiles the sweep lacks are left out.
    """
    sweep = _sweep(sweep)
    metric = choice(metric, "metric", ("tpot", "ttft"))
    t = sweep.table
    rows = [pd.DataFrame({"concurrency": t["concurrency"].to_numpy(float), "percentile": f"p{q}",
                          f"{metric}_s": t[f"{metric}_p{q}_s"].to_numpy(float)})
            for q in QUANTILES if sweep.has(metric, q)]
    if not rows:
        raise ValueError(f"sweep {sweep.name!r} has no {metric.upper()} percentile to draw")
    out = pd.concat(rows, ignore_index=True)
    out[f"{metric}_ms"] = out[f"{metric}_s"] * 1e3
    return out


def latency_curves_chart(sweep: Sweep, height: int = 240) -> alt.VConcatChart:
    """TPOT (ms) and TTFT (s) against concurrency, one line per percentile, stacked.

    Parameters
    ----------
    sweep : Sweep
    height : int
        Height of each of the two panels, pixels.
    """
    x = _x_concurrency()
    color = alt.Color("percentile:N", title="percentile")
    tpot = alt.Chart(percentile_frame(sweep, "tpot")).mark_line(point=True).encode(
        x=x, y=alt.Y("tpot_ms:Q", title="TPOT (ms)"), color=color,
        tooltip=["concurrency:Q", "percentile:N", alt.Tooltip("tpot_ms:Q", format=".1f")],
    ).properties(title="TPOT rises with concurrency", height=height)
    ttft = alt.Chart(percentile_frame(sweep, "ttft")).mark_line(point=True).encode(
        x=x, y=alt.Y("ttft_s:Q", title="TTFT (s)"), color=color,
        tooltip=["concurrency:Q", "percentile:N", alt.Tooltip("ttft_s:Q", format=".3f")],
    ).properties(title="TTFT: p50 flat, tail grows with bunching", height=height)
    return alt.vconcat(tpot, ttft)


def tpot_limit_chart(sweep: Sweep, limit_ms: float, height: int = 200) -> alt.LayerChart:
    """TPOT percentiles against concurrency with a dashed horizontal line at the limit.

    Parameters
    ----------
    sweep : Sweep
    limit_ms : float
        The TPOT limit (target less margin), milliseconds (> 0).
    height : int
        Chart height, pixels.
    """
    limit_ms = number(limit_ms, "limit_ms", lo=0, lo_open=True)
    lines = alt.Chart(percentile_frame(sweep, "tpot")).mark_line(point=True).encode(
        x=_x_concurrency(), y=alt.Y("tpot_ms:Q", title="TPOT (ms)"), color="percentile:N")
    rule = alt.Chart(pd.DataFrame({"limit_ms": [limit_ms]})).mark_rule(strokeDash=[6, 4]).encode(
        y="limit_ms:Q")
    return (lines + rule).properties(height=height)


def slider_frame(sweeps: Mapping[str, Sweep], q=None) -> pd.DataFrame:
    """Per sweep, level and TPOT percentile: the TPOT, T and capacity at that level.

    Parameters
    ----------
    sweeps : mapping of str to Sweep
        The sweeps to offer, by name.
    q : {50, 95, 99}, "mean" or None
        TPOT statistic for the service time ``T`` (``"mean"`` for Little's law; the sweep must
        have ``tpot_mean_s``). None: each sweep's :attr:`~capbook.sweeps.sweep.Sweep.holding_statistic`.

    Returns
    -------
    pandas.DataFrame
        ``sweep, concurrency, percentile, tpot_ms`` (the percentile judged against the
        target, ms), ``T_s`` (service time with the sweep's own mean lengths at that level,
        seconds) and ``cap_rps`` (``concurrency / T_s``, requests per second).
    """
    if not isinstance(sweeps, Mapping) or not sweeps:
        raise ValueError("sweeps must be a non-empty mapping of names to Sweep objects")
    rows = []
    for name, sw in sweeps.items():
        tab = _sweep(sw, f"sweeps[{name!r}]").table
        T = np.asarray(sw.service_time_s(tab["concurrency"].to_numpy(float), q=q), float)
        for p in QUANTILES:
            if not sw.has("tpot", p):
                continue
            rows.append(pd.DataFrame({
                "sweep": str(name), "concurrency": tab["concurrency"].to_numpy(float),
                "percentile": f"p{p}", "tpot_ms": tab[f"tpot_p{p}_s"].to_numpy(float) * 1e3,
                "T_s": T, "cap_rps": tab["concurrency"].to_numpy(float) / T,
            }))
    return pd.concat(rows, ignore_index=True)


def slots_slider_chart(sweeps: Mapping[str, Sweep], q=None, *, initial: str | None = None,
                       target_ms: float = 50, margin_pct: float = 10, percentile: str = "p95",
                       height: int = 300) -> alt.LayerChart:
    """Choosing S in the browser: pick a sweep, a percentile, a TPOT target and a margin.

    Levels are scanned upwards as :func:`capbook.sweeps.sweep.choose_slots` does: a level is *within
    limit* while it and every level below it have TPOT ≤ target × (1 − margin); the label shows
    S (the highest such level), and T and capacity there. All of it is computed by Vega-Lite
    transforms over the embedded :func:`slider_frame`, so it works on a static page.

    Parameters
    ----------
    sweeps : mapping of str to Sweep
        The sweeps offered in the drop-down, by name.
    q : {50, 95, 99}, "mean" or None
        TPOT statistic of the service time ``T`` shown in the label.
    initial : str, optional
        The sweep shown first (default: the first of ``sweeps``).
    target_ms, margin_pct : float
        Initial TPOT target (milliseconds) and margin (per cent).
    percentile : {"p50", "p95", "p99"}
        Initial percentile judged against the target.
    height : int
        Chart height, pixels.
    """
    frame = slider_frame(sweeps, q)
    names = list(frame["sweep"].unique())
    initial = names[0] if initial is None else choice(initial, "initial", names)
    percentile = choice(percentile, "percentile", [f"p{p}" for p in QUANTILES])
    sweep_param = alt.param(name="sweep_name", value=initial,
                            bind=alt.binding_select(options=names, name="sample sweep "))
    pct_param = alt.param(name="pct", value=percentile,
                          bind=alt.binding_radio(options=[f"p{p}" for p in QUANTILES], name="percentile "))
    target_param = slider("target_ms", number(target_ms, "target_ms", lo=10, hi=150), 10, 150, 1,
                          "TPOT target (ms)")
    margin_param = slider("margin_pct", number(margin_pct, "margin_pct", lo=0, hi=50), 0, 50, 1,
                          "margin (%)")
    x = _x_concurrency()
    base = alt.Chart(frame).transform_filter(
        "datum.sweep == sweep_name && datum.percentile == pct"
    ).transform_calculate(
        limit="target_ms * (1 - margin_pct / 100)",
        ok="datum.tpot_ms <= target_ms * (1 - margin_pct / 100) ? 1 : 0",
    ).transform_window(  # a level counts only if every level below it passes too
        prefix_ok="min(ok)", sort=[alt.SortField("concurrency")], frame=[None, 0]
    ).transform_calculate(status="datum.prefix_ok == 1 ? 'within limit' : 'beyond S'")
    line = base.mark_line(color="#888").encode(x=x, y=alt.Y("tpot_ms:Q", title="TPOT (ms)"))
    pts = base.mark_point(size=70, filled=True).encode(
        x=x, y="tpot_ms:Q",
        color=alt.Color("status:N", title="", scale=alt.Scale(domain=list(_STATUS),
                                                              range=list(_STATUS.values()))),
        tooltip=["concurrency:Q", alt.Tooltip("tpot_ms:Q", format=".1f"),
                 alt.Tooltip("T_s:Q", format=".2f"), alt.Tooltip("cap_rps:Q", format=".2f")],
    )
    rule = base.mark_rule(strokeDash=[6, 4], color="#444").encode(y="mean(limit):Q")
    label = base.transform_filter("datum.prefix_ok == 1").transform_joinaggregate(
        S="max(concurrency)"
    ).transform_filter("datum.concurrency == datum.S").transform_calculate(
        text="'S = ' + datum.S + ',  T = ' + format(datum.T_s, '.2f') + ' s,  capacity = '"
             " + format(datum.cap_rps, '.2f') + ' req/s'"
    ).mark_text(align="left", baseline="top", fontSize=14, dx=4).encode(
        x=alt.value(10), y=alt.value(10), text="text:N")
    return (line + pts + rule + label).add_params(
        sweep_param, pct_param, target_param, margin_param
    ).properties(title="Choosing S: the highest level whose TPOT stays within the limit", height=height)


def long_share_chart(sweep: Sweep, slots, resweep: pd.DataFrame | None = None,
                     short=(1500, 300), long=(8000, 200), *, q=None, height: int = 300) -> alt.LayerChart:
    """Capacity of one replica against the share of long prompts: blended estimate and ceiling.

    Two lines are computed in the browser from the long class's lengths, which the reader sets
    with two sliders (Vega-Lite parameters ``long_in`` and ``long_out``):

    * the blended estimate ``S / ((1 − p) T_short + p T_long)``, with each ``T`` from the
      sweep's prefill rate and its TPOT at ``slots`` (as :func:`capbook.sweeps.sweep.capacity_vs_long_share`);
    * the prefill ceiling ``prefill rate / ((1 − p) in_short + p in_long)``.

    Parameters
    ----------
    sweep : Sweep
    slots : int
        S, slots used by both classes.
    resweep : pandas.DataFrame, optional
        Points from a re-swept model, columns ``long_share``, ``resweep_rps`` (requests per
        second) and ``S_resweep``; drawn as black points for the initial lengths.
    short, long : (input_tokens, output_tokens)
        The two request classes, tokens; ``long`` gives the sliders' initial values.
    q : {50, 95, 99}, "mean" or None
        TPOT statistic of the service times (None: the sweep's
        :attr:`~capbook.sweeps.sweep.Sweep.holding_statistic`).
    height : int
        Chart height, pixels.
    """
    sweep = _sweep(sweep)
    slots = number(slots, "slots", lo=0, lo_open=True)
    q = sweep.holding_statistic if q is None else q
    t_short = float(sweep.service_time_s(slots, short[0], short[1], q))
    tpot = float(sweep.tpot(slots, q))
    rate = float(sweep.prefill_rate_tps)
    grid = pd.DataFrame({"long_share": np.round(np.linspace(0, 1, 41), 4)})
    long_in = slider("long_in", long[0], 1000, 32000, 500, "long prompt (input tokens)")
    long_out = slider("long_out", long[1], 50, 2000, 50, "long request (output tokens)")
    lines = alt.Chart(grid).transform_calculate(
        T=f"(1 - datum.long_share) * {t_short!r} + datum.long_share * (long_in / {rate!r} + long_out * {tpot!r})",
        blended=f"{slots!r} / datum.T",
        ceiling=f"{rate!r} / ((1 - datum.long_share) * {float(short[0])!r} + datum.long_share * long_in)",
    ).transform_fold(["blended", "ceiling"], as_=["estimate", "rps"]).transform_calculate(
        estimate="datum.estimate == 'blended' ? 'blended T (chat TPOT)' : 'prefill ceiling'"
    ).mark_line().encode(
        x=alt.X("long_share:Q", title="share of long-prompt requests", axis=alt.Axis(format="%")),
        y=alt.Y("rps:Q", title="requests per second per replica",
                scale=alt.Scale(domain=[0, 1.75 * slots / t_short], clamp=True)),
        color=alt.Color("estimate:N", title="estimate"),
        strokeDash=alt.StrokeDash("estimate:N", title="estimate"),
        tooltip=[alt.Tooltip("long_share:Q", format=".0%"), "estimate:N", alt.Tooltip("rps:Q", format=".2f")],
    )
    chart = lines
    if resweep is not None:
        pts = resweep[["long_share", "resweep_rps", "S_resweep"]].assign(
            label=f"re-swept model ({long[0]:,} / {long[1]:,})")
        chart = lines + alt.Chart(pts).mark_point(size=90, filled=True, color=PALETTE[7]).encode(
            x="long_share:Q", y="resweep_rps:Q", shape=alt.Shape("label:N", title="modelled re-sweep"),
            tooltip=[alt.Tooltip("long_share:Q", format=".0%"), "S_resweep:Q",
                     alt.Tooltip("resweep_rps:Q", format=".2f")])
    return chart.add_params(long_in, long_out).properties(
        title="Capacity vs share of long prompts: the blend overstates, the re-sweep tells", height=height)
