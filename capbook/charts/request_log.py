"""Charts of a gateway's request log (chapter *Know your traffic*).

Each function takes the tables that :class:`capbook.logs.requestlog.RequestLog` returns (or the numbers
computed from them) and returns an Altair chart, so a chapter cell makes one call per chart.
:func:`capacity_line_chart` binds its control to a Vega-Lite parameter and counts the hours
above the line in the browser, so it keeps working on the static site.
"""
from __future__ import annotations

from typing import Mapping

import altair as alt
import numpy as np
import pandas as pd

from capbook.theme import PALETTE, WIDTH, slider
from capbook.validation import array, integer, number, table as _table

__all__ = ["log_histogram", "token_histogram_chart", "dispersion_chart", "hourly_tokens_chart",
           "weekly_shape", "weekly_shape_chart", "capacity_line_chart"]

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")




def log_histogram(frame: pd.DataFrame, column: str = "output_tokens", by: str = "tier",
                  bins: int = 40) -> pd.DataFrame:
    """Share of each group's requests in logarithmically spaced bins of ``column``.

    Parameters
    ----------
    frame : pandas.DataFrame
        One row per request (``RequestLog.to_pandas()``).
    column : str
        The count to bin, e.g. ``"output_tokens"`` (tokens).
    by : str
        Grouping column; shares are of the group's requests.
    bins : int
        Number of log-spaced edges from 1 to ``max + 1`` before rounding to whole tokens
        (duplicate edges are merged).

    Returns
    -------
    pandas.DataFrame
        ``<by>, lo, hi`` (bin edges, tokens; ``hi`` excluded), ``mid`` (geometric middle) and
        ``share`` (of the group's requests). Counts below 1 (zero tokens) fall in no bin.
    """
    frame = _table(frame, "frame", [column, by])
    bins = integer(bins, "bins", minimum=2)
    values = array(frame[column].to_numpy(float), column, lo=0)
    edges = np.unique(np.round(np.logspace(0, np.log10(values.max() + 1), bins)))
    rows = []
    for key, g in frame.groupby(by):
        counts, _ = np.histogram(g[column].to_numpy(float), bins=edges)
        rows.append(pd.DataFrame({by: key, "lo": edges[:-1], "hi": edges[1:],
                                  "mid": np.sqrt(edges[:-1] * edges[1:]),
                                  "share": counts / max(len(g), 1)}))
    return pd.concat(rows, ignore_index=True)


def token_histogram_chart(frame: pd.DataFrame, column: str = "output_tokens", by: str = "tier",
                          bins: int = 40) -> alt.Chart:
    """Log-binned distribution of ``column`` per ``by`` group (see :func:`log_histogram`)."""
    hist = log_histogram(frame, column, by, bins)
    what = column.replace("_", " ")
    return alt.Chart(hist).mark_line(point=True, interpolate="monotone").encode(
        x=alt.X("mid:Q", scale=alt.Scale(type="log"), title=f"{what} per request (log-spaced bins)"),
        y=alt.Y("share:Q", title=f"share of the {by}'s requests in the bin", axis=alt.Axis(format="%")),
        color=alt.Color(f"{by}:N", title=by),
        tooltip=[f"{by}:N", alt.Tooltip("lo:Q", title="from"), alt.Tooltip("hi:Q", title="to (excl.)"),
                 alt.Tooltip("share:Q", format=".2%")],
    ).properties(title=f"{what.capitalize()} per request, by {by}")


def _idc_frame(idc: Mapping, name: str) -> pd.DataFrame:
    if not isinstance(idc, Mapping) or not idc:
        raise ValueError(f"{name} must be a non-empty mapping of window length (s) to dispersion")
    return pd.DataFrame({"window_s": array(list(idc), f"{name} windows", lo=0, lo_open=True),
                         "idc": array(list(idc.values()), f"{name} values", lo=0)})


def dispersion_chart(idc: Mapping) -> alt.LayerChart:
    """Index of dispersion of counts against the window length, with Poisson's 1 dashed.

    Parameters
    ----------
    idc : mapping
        Window length (seconds) to index of dispersion (variance / mean of the counts), as in
        ``RequestLog.arrival_stats()["idc"]``; or a mapping of group name (a tenant, a tier) to
        such a mapping, drawn as one line per group. Values of 0 (a perfectly steady stream)
        are left off the log scale.
    """
    if not isinstance(idc, Mapping) or not idc:
        raise ValueError("idc must be a non-empty mapping of window length (s) to dispersion")
    grouped = all(isinstance(v, Mapping) for v in idc.values())
    if grouped:
        df = pd.concat([_idc_frame(v, f"idc[{k!r}]").assign(group=str(k)) for k, v in idc.items()],
                       ignore_index=True)
    else:
        df = _idc_frame(idc, "idc").assign(group="all")
    df = df[df["idc"] > 0]
    if df.empty:
        raise ValueError("idc has no positive dispersion to draw on a log scale")
    poisson = pd.DataFrame({"window_s": [df.window_s.min(), df.window_s.max()], "idc": [1.0, 1.0]})
    enc = dict(
        x=alt.X("window_s:Q", scale=alt.Scale(type="log"), title="window length (s, log scale)"),
        y=alt.Y("idc:Q", scale=alt.Scale(type="log", domain=[min(0.5, float(df.idc.min())), 2 * float(df.idc.max())]),
                title="index of dispersion of counts (log scale)"),
        tooltip=(["group:N"] if grouped else []) + [alt.Tooltip("window_s:Q", title="window (s)"),
                                                    alt.Tooltip("idc:Q", format=".2f")],
    )
    if grouped:
        enc["color"] = alt.Color("group:N", title="")
    line = alt.Chart(df).mark_line(point=True).encode(**enc)
    ref = alt.Chart(poisson).mark_line(strokeDash=[4, 4], color="#888").encode(x="window_s:Q", y="idc:Q")
    return (line + ref).properties(title="Burstiness grows with the window: the dashed line is Poisson")


def hourly_tokens_chart(hourly: pd.DataFrame) -> alt.Chart:
    """Tokens per hour (input + output), one line per model and tier.

    Parameters
    ----------
    hourly : pandas.DataFrame
        ``RequestLog.hourly()`` or a gateway's history: ``period_start, model, tier,
        input_tokens, output_tokens`` (tokens per hour; rows of one hour, model and tier, e.g.
        per tenant, are summed).
    """
    hourly = _table(hourly, "hourly", ["period_start", "model", "tier", "input_tokens", "output_tokens"])
    hourly = hourly.groupby(["period_start", "model", "tier"], as_index=False, sort=False)[
        ["input_tokens", "output_tokens"]].sum()    # several rows of one hour (tenants) become one
    df = pd.DataFrame({"period_start": hourly["period_start"],
                       "series": hourly["model"].astype(str) + " · " + hourly["tier"].astype(str),
                       "total_tokens": hourly["input_tokens"] + hourly["output_tokens"]})
    return alt.Chart(df).mark_line(strokeWidth=1.2).encode(
        x=alt.X("period_start:T", title="hour (UTC)"),
        y=alt.Y("total_tokens:Q", title="tokens per hour (input + output)"),
        color=alt.Color("series:N", title="model · tier"),
        tooltip=["series", alt.Tooltip("period_start:T", format="%a %d %b %H:00"),
                 alt.Tooltip("total_tokens:Q", format=",")],
    ).properties(title="Hourly tokens per model and tier", width=WIDTH)


def weekly_shape(hourly: pd.DataFrame, value: str = "total_tokens") -> pd.DataFrame:
    """The mean hour of the week per tier: ``value`` averaged by weekday and hour (UTC).

    Parameters
    ----------
    hourly : pandas.DataFrame
        Hourly sums with ``period_start`` (UTC), ``tier`` and ``value``; several rows of one
        hour and tier (tenants, models) are summed first.
    value : str
        The column to average, e.g. ``"total_tokens"`` (tokens per hour) or ``"requests"``.

    Returns
    -------
    pandas.DataFrame
        ``tier, hour_of_week`` (0 = Monday 00:00 UTC … 167 = Sunday 23:00), ``day``, ``hour``,
        ``mean`` (``value`` per hour, averaged over the weeks) and ``weeks`` (hours averaged).
    """
    hourly = _table(hourly, "hourly", ["period_start", "tier", value])
    per = hourly.groupby(["period_start", "tier"], as_index=False)[value].sum()
    t = pd.to_datetime(per["period_start"], utc=True)
    per["hour_of_week"] = t.dt.day_of_week * 24 + t.dt.hour
    out = per.groupby(["tier", "hour_of_week"], as_index=False)[value].agg(["mean", "count"])
    out = out.rename(columns={"count": "weeks"})
    out["day"] = [_DAYS[h // 24] for h in out["hour_of_week"]]
    out["hour"] = out["hour_of_week"] % 24
    return out[["tier", "hour_of_week", "day", "hour", "mean", "weeks"]]


def weekly_shape_chart(hourly: pd.DataFrame, value: str = "total_tokens") -> alt.Chart:
    """The mean week (:func:`weekly_shape`): one line per tier, Monday 00:00 to Sunday 23:00 UTC.

    Parameters
    ----------
    hourly : pandas.DataFrame
        Hourly sums with ``period_start``, ``tier`` and ``value`` (e.g. a gateway's history).
    value : str
        The column to average (default tokens per hour, input + output).
    """
    shape = weekly_shape(hourly, value)
    what = value.replace("_", " ")
    return alt.Chart(shape).mark_line(strokeWidth=1.5).encode(
        x=alt.X("hour_of_week:Q", title="hour of the week (UTC; ticks at each day's midnight)",
                scale=alt.Scale(domain=[0, 168]),
                axis=alt.Axis(values=list(range(0, 168, 24)), labelExpr=
                              "['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'][floor(datum.value / 24)]")),
        y=alt.Y("mean:Q", title=f"{what} per hour, mean over the weeks"),
        color=alt.Color("tier:N", title="tier"),
        tooltip=["tier:N", "day:N", alt.Tooltip("hour:Q", title="hour (UTC)"),
                 alt.Tooltip("mean:Q", format=",.0f"), alt.Tooltip("weeks:Q", title="hours averaged")],
    ).properties(title="The average week, per tier", width=WIDTH)


def _nice_step(raw: float) -> float:
    """The smallest step of the form 1, 2 or 5 × 10^k that is at least ``raw`` (> 0)."""
    raw = max(float(raw), 1e-9)
    base = 10.0 ** np.floor(np.log10(raw))
    return float(next(m * base for m in (1, 2, 5, 10) if m * base >= raw * (1 - 1e-12)))


def capacity_line_chart(series: pd.DataFrame, start: float | None = None,
                        label: str = "tokens per hour (millions)") -> alt.LayerChart:
    """Hourly tokens against a capacity line the reader drags; the label counts hours above it.

    Parameters
    ----------
    series : pandas.DataFrame
        ``period_start`` and ``mtok`` (tokens in that hour, millions), one row per hour.
    start : float, optional
        Initial capacity line, million tokens per hour (default: the mean hour).
    label : str
        Title of the y axis (say which traffic it is).
    """
    series = _table(series, "series", ["period_start", "mtok"])[["period_start", "mtok"]]
    top = float(series["mtok"].max())
    start = float(series["mtok"].mean()) if start is None else number(start, "start", lo=0)
    step = _nice_step(1.2 * top / 1000)              # about a thousand positions, a round step
    decimals = max(0, -int(np.floor(np.log10(step))))
    hi = round(float(np.ceil(max(1.2 * top, 2 * step) / step) * step), decimals)
    value = round(min(max(round(start / step) * step, step), hi), decimals)
    cap = slider("cap_mtok", value, step, hi, step, "capacity (million tokens per hour)")
    base = alt.Chart(series).transform_calculate(
        over="datum.mtok > cap_mtok ? 'above capacity' : 'within capacity'")
    points = base.mark_circle(size=14).encode(
        x=alt.X("period_start:T", title="hour (UTC)"),
        y=alt.Y("mtok:Q", title=label),
        color=alt.Color("over:N", title="", scale=alt.Scale(domain=["within capacity", "above capacity"],
                                                           range=[PALETTE[0], PALETTE[1]])),
        tooltip=[alt.Tooltip("period_start:T", format="%a %d %b %H:00"), alt.Tooltip("mtok:Q", format=".2f")],
    )
    rule = alt.Chart(pd.DataFrame({"x": [0]})).transform_calculate(y="cap_mtok").mark_rule(
        strokeDash=[6, 3]).encode(y="y:Q")
    count = base.transform_calculate(o="datum.mtok > cap_mtok ? 1 : 0").transform_aggregate(
        above="sum(o)", hours="count()").transform_calculate(
        text="format(datum.above / datum.hours, '.1%') + ' of hours above capacity'").mark_text(
        align="left", x=8, y=12, fontSize=13).encode(text="text:N")
    return (points + rule + count).add_params(cap).properties(
        title="How many hours exceed a capacity line?", width=WIDTH)
