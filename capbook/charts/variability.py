"""The chart of the chapter *Variability makes queues worse*: Allen–Cunneen against load.

The chart stays interactive on the static site: its two sliders (Ca² and the log-normal
shape σ of the service times) are Vega-Lite parameters, and the Allen–Cunneen curve is computed
in the browser from the M/M/c waits embedded in the page.

Examples
--------
>>> chart = allen_cunneen_chart(32, 12.25)
>>> rows = chart.to_dict()["datasets"]
>>> len(next(iter(rows.values())))     # utilisation 0.50, 0.505, ..., 0.98
97
"""
from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from capbook import queueing as q
from capbook.theme import HEIGHT, WIDTH, slider
from capbook.validation import integer, number, positive

__all__ = ["AC_EXPRESSIONS", "allen_cunneen_grid", "allen_cunneen_chart", "peak_dispersion_chart"]

#: Vega expressions of the chart (parameters ``ca2`` and ``sigma``; ``datum.w_mmc`` embedded).
AC_EXPRESSIONS = {
    "cs2": "exp(sigma * sigma) - 1",
    "M/M/c (Poisson, exponential)": "datum.w_mmc",
    "Allen–Cunneen": "datum.w_mmc * (ca2 + exp(sigma * sigma) - 1) / 2",
}


def allen_cunneen_grid(slots, service_time_s, lo=0.50, hi=0.98, step=0.005) -> pd.DataFrame:
    """The M/M/c mean wait on a grid of utilisations: the data the chart embeds.

    Parameters
    ----------
    slots : int
        c, slots behind one queue.
    service_time_s : float
        T, mean seconds a request holds a slot.
    lo, hi : float
        Utilisation range, each strictly between 0 and 1, ``lo < hi``.
    step : float
        Grid spacing (utilisation).

    Returns
    -------
    pandas.DataFrame
        Columns ``utilisation`` and ``w_mmc`` (mean wait of M/M/c, seconds).
    """
    c = integer(slots, "slots", minimum=1)
    t = positive(service_time_s, "service_time_s")
    lo = number(lo, "lo", lo=0, hi=1, lo_open=True, hi_open=True)
    hi = number(hi, "hi", lo=lo, hi=1, lo_open=True, hi_open=True)
    st = number(step, "step", lo=0, hi=hi - lo, lo_open=True)
    rho = np.round(np.arange(lo, hi + st / 5, st), 6)
    return pd.DataFrame({"utilisation": rho, "w_mmc": np.asarray(q.mean_wait(c, rho * c / t, t), dtype=float)})


def allen_cunneen_chart(slots, service_time_s, ca2=1.0, sigma=1.0) -> alt.Chart:
    """Allen–Cunneen mean wait against utilisation beside M/M/c, with sliders for Ca² and σ.

    The wait is ``W_q(M/M/c) × (Ca² + Cs²) / 2`` with ``Cs² = e^{σ²} − 1`` (log-normal service
    times), computed in the browser, so the sliders work on a static page.

    Parameters
    ----------
    slots, service_time_s
        As in :func:`allen_cunneen_grid`.
    ca2 : float
        Start value of the Ca² slider (0 to 10).
    sigma : float
        Start value of the slider for the log-normal shape σ of the service times (0 to 1.6).

    Returns
    -------
    altair.Chart
        Two lines (M/M/c and Allen–Cunneen) of the mean queue wait in seconds, log scale.
    """
    grid = allen_cunneen_grid(slots, service_time_s)
    a = number(ca2, "ca2", lo=0, hi=10)
    s = number(sigma, "sigma", lo=0, hi=1.6)
    models = ["M/M/c (Poisson, exponential)", "Allen–Cunneen"]
    return alt.Chart(grid).transform_calculate(**AC_EXPRESSIONS).transform_fold(
        models, as_=["model", "wait"]
    ).transform_filter("datum.wait > 0.001").mark_line().encode(
        x=alt.X("utilisation:Q", title="utilisation ρ", scale=alt.Scale(domain=[0.5, 0.98])),
        y=alt.Y("wait:Q", title="mean queue wait (s)", scale=alt.Scale(type="log")),
        color=alt.Color("model:N", title=None, sort=models,
                        legend=alt.Legend(columns=1, labelLimit=500)),
        strokeDash=alt.StrokeDash("model:N", legend=None),
        tooltip=[alt.Tooltip("utilisation:Q", format=".3f"), alt.Tooltip("model:N"),
                 alt.Tooltip("wait:Q", title="wait (s)", format=".3f"),
                 alt.Tooltip("cs2:Q", title="Cs²", format=".2f")],
    ).add_params(
        slider("ca2", a, 0.0, 10.0, 0.1, "Ca²"), slider("sigma", s, 0.0, 1.6, 0.05, "log-normal σ of service")
    ).properties(title=f"Variability multiplies the wait at every load ({int(slots)} slots, "
                       f"T = {float(service_time_s):.2f} s)")


def peak_dispersion_chart(table, title="Bursts show in the counts, at windows as long as a burst") -> alt.Chart:
    """Index of dispersion of counts against the window length, one line per arrival stream.

    Parameters
    ----------
    table : pandas.DataFrame
        One row per stream (the index names it), one column per window length in seconds; each
        value is the variance over the mean of the arrivals counted in windows of that length.
    title : str
        Chart title.

    Returns
    -------
    altair.Chart
        Lines with points of the index against the window (log scale, seconds), and a rule at 1,
        the value of a Poisson stream at every window.
    """
    if not isinstance(table, pd.DataFrame) or table.empty:
        raise ValueError("table must be a non-empty DataFrame: one row per stream, one column per window (s)")
    windows = np.array([positive(w, "table columns (window, s)") for w in table.columns], dtype=float)
    values = table.to_numpy(dtype=float)
    if not np.all(np.isfinite(values)) or np.any(values < 0):
        raise ValueError("table values (index of dispersion) must be finite and non-negative")
    rows = pd.DataFrame({"stream": np.repeat([str(i) for i in table.index], len(windows)),
                         "window_s": np.tile(windows, len(table)), "idc": values.ravel()})
    lines = alt.Chart(rows).mark_line(point=True).encode(
        x=alt.X("window_s:Q", title="window (s)", scale=alt.Scale(type="log")),
        y=alt.Y("idc:Q", title="variance / mean of the count"),
        color=alt.Color("stream:N", title=None, sort=[str(i) for i in table.index]),
        tooltip=[alt.Tooltip("stream:N"), alt.Tooltip("window_s:Q", title="window (s)"),
                 alt.Tooltip("idc:Q", title="index of dispersion", format=".2f")],
    )
    poisson = alt.Chart(pd.DataFrame({"idc": [1.0]})).mark_rule(strokeDash=[4, 4], color="gray").encode(y="idc:Q")
    return (lines + poisson).properties(title=title, width=WIDTH, height=HEIGHT)
