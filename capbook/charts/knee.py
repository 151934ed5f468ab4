"""Charts of the first two chapters: a replica's request rate (Little's law) and the knee.

Both charts stay interactive on the static site: their sliders are Vega-Lite parameters and
every curve is computed in the browser by transforms over the data embedded in the page.

Examples
--------
>>> import numpy as np
>>> table = erlang_c_table(np.arange(1, 9), np.array([0.5, 0.9]))
>>> table.shape, float(table.query("c == 8 and rho == 0.9").C.item())
((16, 3), 0.7015)
>>> round(table_safe_utilisation(erlang_c_table(np.arange(1, 33), np.round(np.arange(0.3, 0.995, 0.01), 2)),
...                              32, 12.25, 0.5, 0.01), 2)
0.65
"""
from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from capbook import queueing as q
from capbook import validation
from capbook.sweeps.sweep import Sweep
from capbook.theme import PALETTE, slider
from capbook.validation import array, integer, nonnegative, number, positive, probability

__all__ = ["qps_by_output_chart", "tpot_expression", "erlang_c_table", "table_safe_utilisation", "knee_explorer_chart"]

#: Vega expressions of the request-rate chart (parameters ``S``, ``tpot_ms``, ``prefill``).
QPS_EXPRESSIONS = {
    "T": "prefill + datum.output_tokens * tpot_ms / 1000",
    "qps": "S / (prefill + datum.output_tokens * tpot_ms / 1000)",
}

#: Vega expressions of the knee explorer (parameters ``slots``, ``service_T``, ``wait_t``).
KNEE_EXPRESSIONS = {
    "mmc": "1 + datum.C / (datum.c * (1 - datum.rho))",
    "mm1": "1 / (1 - datum.rho)",
    "wait_s": "service_T * datum.C / (datum.c * (1 - datum.rho))",
    "tail": "datum.C * exp(-datum.c * (1 - datum.rho) * wait_t / service_T)",
}


def tpot_expression(levels, tpot_s, var: str = "S") -> str:
    """A Vega expression of TPOT (seconds) at ``var`` sequences in flight, interpolated linearly
    between a sweep's measured levels, as :meth:`capbook.sweeps.sweep.Sweep.tpot` does.

    Outside the measured range the end values hold (the chart's slider stays inside it).

    Parameters
    ----------
    levels : array_like of float
        Measured concurrency levels, increasing.
    tpot_s : array_like of float
        TPOT at each level, seconds.
    var : str
        Name of the Vega parameter holding the concurrency.
    """
    n = array(levels, "levels", lo=0, lo_open=True, nonempty=True, ndim=1)
    y = array(tpot_s, "tpot_s", lo=0, lo_open=True, nonempty=True, ndim=1)
    if len(n) != len(y) or np.any(np.diff(n) <= 0):
        raise ValueError("levels must increase and match tpot_s in length")
    expr = f"{float(y[-1])!r}"
    for i in range(len(n) - 2, -1, -1):
        slope = (float(y[i + 1]) - float(y[i])) / (float(n[i + 1]) - float(n[i]))
        piece = f"{float(y[i])!r} + ({var} - {float(n[i])!r}) * {slope!r}"
        expr = f"if({var} <= {float(n[i + 1])!r}, {piece}, {expr})"
    return f"if({var} <= {float(n[0])!r}, {float(y[0])!r}, {expr})"


def qps_by_output_chart(slots, tpot_s, prefill_s, output_tokens, max_output_tokens=2000, step=25,
                        sweep=None):
    """A replica's request rate S / T against the mean output length, with sliders.

    ``T = prefill + output tokens × TPOT`` and the rate ``S / T`` are computed in the browser
    from the sliders, so the chart works on a static page. Without ``sweep`` the sliders are
    slots, TPOT in ms and prefill in s, and TPOT is whatever the reader sets. With ``sweep``
    there is no TPOT slider: TPOT is the one the sweep measured at S sequences in flight
    (its mean TPOT, :attr:`capbook.sweeps.sweep.Sweep.holding_statistic`, interpolated between
    levels by :func:`tpot_expression`), so more slots bring a slower TPOT; a dashed line shows
    the rate if TPOT stayed at ``tpot_s`` (the reading the sweep refutes).

    Parameters
    ----------
    slots : int
        S, sequences in flight per replica (the slider's start value).
    tpot_s : float
        Time per output token, seconds (the slider shows milliseconds); with ``sweep``, the
        TPOT of the dashed fixed-TPOT line.
    prefill_s : float
        Prefill time of one request, seconds.
    output_tokens : float
        Mean output tokens of the workload, marked by a dashed rule (tokens).
    max_output_tokens : int
        Right end of the output-length axis, tokens.
    step : int
        Spacing of the output-length grid, tokens.
    sweep : capbook.sweeps.sweep.Sweep, optional
        A concurrency sweep; the slots slider spans its measured levels.

    Returns
    -------
    altair.LayerChart
        The line of requests per second per replica (log scale) and the marker rule.
    """
    s = integer(slots, "slots", minimum=1)
    tpot = positive(tpot_s, "tpot_s")
    pre = nonnegative(prefill_s, "prefill_s")
    out = positive(output_tokens, "output_tokens")
    st = integer(step, "step", minimum=1)
    top = integer(max_output_tokens, "max_output_tokens", minimum=st)

    grid = pd.DataFrame({"output_tokens": np.arange(st, top + 1, st)})
    x = alt.X("output_tokens:Q", title="mean output tokens per request (tokens)",
              axis=alt.Axis(tickCount=5, labelOverlap=True, labelFlush=True))
    y = alt.Y("qps:Q", title="requests per second per replica (req/s)", scale=alt.Scale(type="log"))
    tooltip = [
        alt.Tooltip("output_tokens:Q", title="output tokens"),
        alt.Tooltip("T:Q", title="T (s)", format=".2f"),
        alt.Tooltip("qps:Q", title="req/s per replica", format=".2f"),
    ]
    marker = alt.Chart(pd.DataFrame({"output_tokens": [out]})).mark_rule(strokeDash=[4, 4]).encode(x=x)
    if sweep is None:
        params = (
            slider("S", s, 4, 128, 4, "slots S"),
            slider("tpot_ms", tpot * 1000, 10, 120, 5, "TPOT (ms)"),
            slider("prefill", pre, 0.05, 2.0, 0.05, "prefill (s)"),
        )
        line = alt.Chart(grid).transform_calculate(**QPS_EXPRESSIONS).mark_line().encode(
            x=x, y=y, tooltip=tooltip)
        return (line + marker).add_params(*params).properties(
            title="The same replica, different mixes: QPS is a derived unit"
        )

    if not isinstance(sweep, Sweep):
        raise TypeError(f"sweep must be a capbook.sweeps.sweep.Sweep, not {type(sweep).__name__}")
    levels = np.asarray(sweep.concurrency, float)
    lo, hi = int(np.ceil(levels[0])), int(np.floor(levels[-1]))
    s = integer(slots, "slots", minimum=lo, maximum=hi)
    tpot_at = tpot_expression(levels, sweep.tpot(levels, sweep.holding_statistic))
    measured_label = "TPOT the sweep measures at S"
    fixed_label = f"TPOT held at {tpot * 1000:g} ms (what the sweep refutes)"
    measured = {
        "tpot_ms": f"1000 * ({tpot_at})",
        "T": f"prefill + datum.output_tokens * ({tpot_at})",
        "qps": f"S / (prefill + datum.output_tokens * ({tpot_at}))",
        "curve": f"'{measured_label}'",
    }
    fixed = {
        "T": f"prefill + datum.output_tokens * {tpot!r}",
        "qps": f"S / (prefill + datum.output_tokens * {tpot!r})",
        "curve": f"'{fixed_label}'",
    }
    params = (
        slider("S", s, lo, hi, 1, "slots S"),
        slider("prefill", pre, 0.05, 2.0, 0.05, "prefill (s)"),
    )
    domain = [measured_label, fixed_label]
    legend = alt.Legend(orient="bottom", labelLimit=400)
    color = alt.Color("curve:N", title=None, legend=legend,
                      scale=alt.Scale(domain=domain, range=PALETTE[:2]))
    dash = alt.StrokeDash("curve:N", title=None, legend=legend,
                          scale=alt.Scale(domain=domain, range=[[1, 0], [6, 4]]))
    line = alt.Chart(grid).transform_calculate(**measured).mark_line().encode(
        x=x, y=y, color=color, strokeDash=dash,
        tooltip=tooltip[:1] + [alt.Tooltip("tpot_ms:Q", title="TPOT at S (ms)", format=".1f")] + tooltip[1:])
    naive = alt.Chart(grid).transform_calculate(**fixed).mark_line().encode(
        x=x, y=y, color=color, strokeDash=dash, tooltip=tooltip)
    return (naive + line + marker).add_params(*params).properties(
        title="More slots, slower tokens: the rate S / T with the sweep's TPOT at S"
    )


def erlang_c_table(slots, utilisations):
    """Erlang C, the probability of waiting, on a grid of slot counts and utilisations.

    Parameters
    ----------
    slots : array_like of int
        Slot counts c (at least 1).
    utilisations : array_like of float
        Utilisations ρ in (0, 1).

    Returns
    -------
    pandas.DataFrame
        One row per (c, ρ): columns ``c``, ``rho`` and ``C`` = C(c, ρc), rounded to four
        significant digits (enough for a chart; it keeps the page small).
    """
    cs = array(slots, "slots", lo=1, integer=True, nonempty=True, ndim=1)
    rs = array(utilisations, "utilisations", lo=0, hi=1, lo_open=True, hi_open=True, nonempty=True, ndim=1)
    cc, rr = np.meshgrid(cs, rs, indexing="ij")
    values = np.asarray(q.erlang_c(cc, rr * cc))
    return pd.DataFrame({
        "c": cc.ravel().astype(int),
        "rho": rr.ravel(),
        "C": [float(f"{v:.4g}") for v in values.ravel()],
    })


def table_safe_utilisation(table, c, service_time_s, wait_target_s, late_share):
    """The highest utilisation meeting ``P(wait > wait_target_s) ≤ late_share``, read from an Erlang C table.

    The knee explorer draws this line in the browser; this is the same calculation in Python:
    find the grid step where the tail ``C e^{-c(1-ρ)t/T}`` crosses the target and interpolate
    log-linearly inside it (the tail is close to exponential in ρ there).
    :func:`capbook.queueing.max_utilisation` solves the same question exactly.

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`erlang_c_table`.
    c : int
        Slots behind the queue (a value in ``table.c``).
    service_time_s : float
        T, mean seconds in service.
    wait_target_s : float
        Wait threshold, seconds.
    late_share : float
        Largest acceptable share waiting longer than ``wait_target_s``, in (0, 1).

    Returns
    -------
    float
        Utilisation, dimensionless; ``nan`` if the tail does not cross the target on the grid.
    """
    cc = integer(c, "c", minimum=1)
    ts = positive(service_time_s, "service_time_s")
    tt = nonnegative(wait_target_s, "wait_target_s")
    p = probability(late_share, "late_share")
    g = table[table.c == cc].sort_values("rho")
    if g.empty:
        raise ValueError(f"c must be one of the table's slot counts, got {c!r}")
    r = g.rho.to_numpy()
    tail = g.C.to_numpy() * np.exp(-cc * (1 - r) * tt / ts)
    hit = np.flatnonzero((tail[:-1] <= p) & (tail[1:] > p))
    if hit.size == 0:
        return float("nan")
    i = hit[0]
    return float(r[i] + (r[i + 1] - r[i]) * np.log(p / tail[i]) / np.log(tail[i + 1] / tail[i]))


def knee_explorer_chart(table, slots=8, service_time_s=8.0, wait_t=2.0, target_pct=5):
    """Two panels over an Erlang C table: response-time multiple and the wait tail, with sliders.

    The top panel draws the M/M/c mean response time ``1 + C / (c(1-ρ))`` (a multiple of T)
    for the chosen slots against the M/M/1 curve ``1 / (1-ρ)``. The bottom panel draws
    ``P(wait > t) = C e^{-c(1-ρ)t/T}``, the target share as a dashed rule, and the highest
    utilisation meeting it (as :func:`table_safe_utilisation` computes it). Sliders: slots c,
    service time T (s), wait threshold t (s) and target share (%).

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`erlang_c_table`; the slots slider spans its slot counts.
    slots : int
        Starting slot count.
    service_time_s : float
        Starting T, seconds.
    wait_t : float
        Starting wait threshold t, seconds.
    target_pct : float
        Starting target share of requests waiting longer than t, percent.

    Returns
    -------
    altair.VConcatChart
    """
    validation.table(table, "table (from erlang_c_table)", ["c", "rho", "C"])
    lo, hi = int(table.c.min()), int(table.c.max())
    s = integer(slots, "slots", minimum=lo, maximum=hi)
    params = (
        slider("slots", s, lo, hi, 1, "slots c"),
        slider("service_T", positive(service_time_s, "service_time_s"), 1.0, 30.0, 0.25, "service time T (s)"),
        slider("wait_t", nonnegative(wait_t, "wait_t"), 0.0, 10.0, 0.25, "wait threshold t (s)"),
        slider("target_pct", number(target_pct, "target_pct", lo=0, hi=100, lo_open=True, hi_open=True), 1, 20, 1, "target share waiting over t (%)"),
    )
    x = alt.X("rho:Q", title="utilisation", axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0.3, 1.0]))
    selected = alt.Chart(table).transform_filter("datum.c == slots").transform_calculate(**KNEE_EXPRESSIONS)

    multiple_panel = selected.transform_fold(["mmc", "mm1"], as_=["model", "multiple"]).transform_calculate(
        curve="datum.model == 'mm1' ? 'M/M/1 (one server)' : 'M/M/c, c = ' + slots + ' slots'"
    ).mark_line().encode(
        x=x,
        y=alt.Y("multiple:Q", title="mean response time / T", scale=alt.Scale(type="log", domain=[1, 100])),
        color=alt.Color("curve:N", title=None, legend=alt.Legend(orient="top-left")),
        tooltip=[
            alt.Tooltip("rho:Q", title="utilisation", format=".0%"),
            alt.Tooltip("curve:N", title="model"),
            alt.Tooltip("multiple:Q", title="response / T", format=".2f"),
        ],
    ).properties(height=220, title="Mean response time against utilisation")

    tail_line = selected.mark_line(color=PALETTE[1]).encode(
        x=x,
        y=alt.Y("tail:Q", title="P(wait > t)", axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1])),
        tooltip=[
            alt.Tooltip("rho:Q", title="utilisation", format=".0%"),
            alt.Tooltip("tail:Q", title="P(wait > t)", format=".2%"),
            alt.Tooltip("wait_s:Q", title="mean wait (s)", format=".2f"),
        ],
    )
    target_rule = alt.Chart(pd.DataFrame({"row": [0]})).transform_calculate(y="target_pct / 100").mark_rule(
        strokeDash=[4, 4]
    ).encode(y="y:Q")
    # the same interpolation as table_safe_utilisation, in Vega
    safe = selected.transform_window(
        next_rho="lead(rho)", next_tail="lead(tail)", sort=[alt.SortField("rho")]
    ).transform_filter(
        "datum.tail <= target_pct / 100 && datum.next_tail > target_pct / 100"
    ).transform_calculate(
        safe_rho="datum.rho + (datum.next_rho - datum.rho) * log(target_pct / 100 / datum.tail)"
        " / log(datum.next_tail / datum.tail)"
    )
    safe_rule = safe.mark_rule(color=PALETTE[2]).encode(x="safe_rho:Q")
    safe_label = safe.transform_calculate(
        label="'meets the target up to ' + format(datum.safe_rho, '.0%')"
    ).mark_text(align="right", dx=-6, y=12, color=PALETTE[2]).encode(x="safe_rho:Q", text="label:N")
    tail_panel = (tail_line + target_rule + safe_rule + safe_label).properties(
        height=220, title="Share of requests waiting longer than t"
    )
    return alt.vconcat(multiple_panel, tail_panel).add_params(*params)
