"""Charts of the forecasting part: the weekly shape, the quantile band, the static explorer and
the backtest's coverage by horizon.

The functions take numbers the chapters computed with :mod:`capbook.forecast.tokens` and
:mod:`capbook.forecast.scoring` (plain pandas objects) and only draw them; nothing here fits a model.
Sliders are Vega-Lite parameters over data embedded in the chart, so they keep working on the
static site.
"""
from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from capbook.validation import array, integer, table as _table
from capbook.theme import HEIGHT, PALETTE, slider

__all__ = ["fitted_shape_chart", "time_zone_chart", "forecast_band_chart", "forecast_explorer_chart", "coverage_chart"]

_DAYS = np.array(["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"])
_METHODS = ["calibrated", "sqrt_h"]
_METHOD_COLOUR = alt.Color("method:N", title="method",
                           scale=alt.Scale(domain=_METHODS, range=[PALETTE[0], PALETTE[1]]))
# The explorer's lines and bars share one colour scale (Vega-Lite merges the colour scales of a
# concatenated chart): both declare this one, so the actual series and the methods never conflict.
_EXPLORER_COLOUR_SCALE = alt.Scale(domain=["actual", *_METHODS], range=["#999999", PALETTE[0], PALETTE[1]])


def _series(s, name: str) -> pd.Series:
    if not isinstance(s, pd.Series) or not isinstance(s.index, pd.DatetimeIndex):
        raise ValueError(f"{name} must be a pandas Series indexed by UTC hours")
    return s


def fitted_shape_chart(shape, first_day: int = 0) -> alt.Chart:
    """Line chart of a fitted weekly shape.

    Parameters
    ----------
    shape : array-like
        168 shares of the week (fractions summing to 1), hour 0 first.
    first_day : int
        Weekday of hour 0 (0 = Monday), for the tooltip's day names.

    Returns
    -------
    altair.Chart
        One row per hour: ``hour of week``, ``share of the week (%)`` (percent) and ``day``.
    """
    s = array(shape, "shape", lo=0, nonempty=True).ravel()
    if len(s) != 168:
        raise ValueError(f"shape must have 168 hourly shares, got {len(s)}")
    d = integer(first_day, "first_day", minimum=0, maximum=6)
    h = np.arange(168)
    df = pd.DataFrame({"hour of week": h, "share of the week (%)": 100 * s, "day": _DAYS[(d + h // 24) % 7]})
    return alt.Chart(df, title="Fitted weekly shape").mark_line().encode(
        x=alt.X("hour of week:Q", title="hour of the week (h, UTC)", scale=alt.Scale(domain=[0, 168]),
              axis=alt.Axis(values=list(range(0, 169, 24)))),
        y=alt.Y("share of the week (%):Q"),
        tooltip=["day", "hour of week", alt.Tooltip("share of the week (%):Q", format=".3f")],
    ).properties(height=220)


def time_zone_chart(regions, total: str = "global") -> alt.Chart:
    """Weekly shapes of regions in different time zones and of their sum.

    Parameters
    ----------
    regions : pandas.DataFrame
        168 rows (hours of the week), one column per region with that region's tokens per hour
        as a share of one region's week (fractions), plus the column ``total`` (their sum).
    total : str
        Name of the column that holds the sum of the regions.

    Returns
    -------
    altair.Chart
        One row per hour and column: ``hour of week``, ``series`` (the column name) and
        ``share (%)`` (percent of one region's weekly tokens); the sum is drawn as a thicker line.
    """
    regions = _table(regions, "regions", [total])
    if len(regions) != 168 or regions.shape[1] < 2:
        raise ValueError("regions must have 168 hourly rows and at least one region besides the total")
    long = regions.reset_index(drop=True).rename_axis("hour of week").reset_index().melt(
        "hour of week", var_name="series", value_name="share (%)")
    long["share (%)"] = np.round(100 * long["share (%)"].to_numpy(float), 4)
    order = [c for c in regions.columns if c != total] + [total]
    return alt.Chart(long, title="Regional peaks fall in different hours").mark_line().encode(
        x=alt.X("hour of week:Q", title="hour of the week (h, UTC)", scale=alt.Scale(domain=[0, 168]),
              axis=alt.Axis(values=list(range(0, 169, 24)))),
        y=alt.Y("share (%):Q", title="tokens per hour (% of one region's week)"),
        color=alt.Color("series:N", title=None, sort=order,
                        scale=alt.Scale(domain=order, range=[*PALETTE[1:len(order)], PALETTE[0]])),
        strokeWidth=alt.condition(f"datum.series == '{total}'", alt.value(3), alt.value(1.2)),
        tooltip=["series", "hour of week", alt.Tooltip("share (%):Q", format=".3f")],
    ).properties(height=220)


def forecast_band_chart(history, actual, frame, *, lo: str = "p10", hi: str = "p90") -> alt.LayerChart:
    """The last training weeks, the held-out hours, the point forecast and a quantile band.

    Parameters
    ----------
    history, actual : pandas.Series
        Hourly tokens (tokens per hour, UTC index): the end of the training data and the
        held-out hours.
    frame : pandas.DataFrame
        ``TokenForecast.frame``: columns ``point``, ``lo`` and ``hi`` (tokens per hour) on the
        forecast hours.
    lo, hi : str
        Quantile columns of ``frame`` that bound the shaded band.

    Returns
    -------
    altair.LayerChart
        A band layer (``p10``/``p90`` in millions of tokens per hour, or the chosen columns) and
        a line layer with ``line`` in ``history``, ``actual (held out)``, ``point forecast``.
    """
    history, actual = _series(history, "history"), _series(actual, "actual")
    frame = _table(frame, "frame", ["point", lo, hi])

    def rows(s, line):  # millions of tokens, rounded to keep the page small
        return pd.DataFrame({"time": s.index, "tokens": np.round(s.to_numpy() / 1e6, 2), "line": line})

    lines = pd.concat([rows(history, "history"), rows(actual, "actual (held out)"),
                       rows(frame["point"], "point forecast")], ignore_index=True)
    band = pd.DataFrame({"period_start": frame.index, lo: np.round(frame[lo].to_numpy() / 1e6, 2),
                         hi: np.round(frame[hi].to_numpy() / 1e6, 2)})
    return (
        alt.Chart(band).mark_area(opacity=0.25, color=PALETTE[0]).encode(
            x=alt.X("period_start:T", title="hour (UTC)"),
            y=alt.Y(f"{lo}:Q", title="output tokens per hour (millions)"), y2=f"{hi}:Q")
        + alt.Chart(lines).mark_line(strokeWidth=1.2).encode(
            x="time:T", y="tokens:Q",
            color=alt.Color("line:N", title=None, scale=alt.Scale(
                domain=["history", "actual (held out)", "point forecast"],
                range=["#888888", PALETTE[1], PALETTE[0]])))
    ).properties(title=f"Point forecast and the {lo.upper()}–{hi.upper()} band (shaded)")


def forecast_explorer_chart(hourly, offsets) -> alt.VConcatChart:
    """The static explorer: held-out hours and two quantile lines, scored per horizon week.

    Four sliders (weekly growth %, noise %, horizon in weeks, quantile %) pick one
    precomputed series and one quantile; the browser rebuilds the lines and recomputes
    coverage and pinball loss from the embedded rows.

    Parameters
    ----------
    hourly : pandas.DataFrame
        One row per held-out hour and series: ``g`` (growth, % a week), ``s`` (noise, %),
        ``i`` (hour index from the forecast origin), ``a`` (actual) and ``p`` (point forecast),
        both in units of 10,000 tokens per hour.
    offsets : pandas.DataFrame
        ``key`` (``"g|s|horizon|quantile"``, quantile in %), ``off_cal`` and ``off_sqrt``: the
        log offsets of the calibrated and the √h quantile line.

    Returns
    -------
    altair.VConcatChart
        Lines (actual, calibrated, sqrt_h) over coverage and pinball-loss bars per horizon.
    """
    hourly = _table(hourly, "hourly", ["g", "s", "i", "a", "p"])
    offsets = _table(offsets, "offsets", ["key", "off_cal", "off_sqrt"])
    params = [slider("growth", 3.5, 0, 7, 3.5, "weekly growth (%)"), slider("noise", 8, 4, 12, 4, "noise (%)"),
              slider("horizon", 4, 1, 4, 1, "horizon (weeks)"), slider("quant", 90, 50, 95, 5, "quantile (%)")]
    base = (
        alt.Chart(hourly).add_params(*params)
        .transform_calculate(hw="floor(datum.i / 168) + 1", t="datum.i / 24",
                             actual="datum.a / 100", point="datum.p / 100")
        .transform_filter("datum.g == growth && datum.s == noise && datum.hw <= horizon")
        .transform_calculate(key="toString(datum.g) + '|' + toString(datum.s) + '|' + toString(datum.hw)"
                                 " + '|' + toString(quant)")
        .transform_lookup(lookup="key", from_=alt.LookupData(offsets, "key", ["off_cal", "off_sqrt"]))
        .transform_calculate(calibrated="datum.point * exp(datum.off_cal)",
                             sqrt_h="datum.point * exp(datum.off_sqrt)", q="quant / 100")
    )
    lines = base.transform_fold(["actual", *_METHODS], as_=["line", "value"]).mark_line(strokeWidth=1).encode(
        x=alt.X("t:Q", title="days after the forecast origin"),
        y=alt.Y("value:Q", title="output tokens per hour (millions)"),
        color=alt.Color("line:N", title=None, scale=_EXPLORER_COLOUR_SCALE),
    ).properties(height=230, title="Held-out hours and the chosen quantile line")
    pinball = "max(datum.q * (datum.actual - datum.{m}), (datum.q - 1) * (datum.actual - datum.{m}))"
    scored = (
        base.transform_calculate(**{f"cov_{m}": f"datum.actual <= datum.{m} ? 1 : 0" for m in _METHODS},
                                 **{f"pin_{m}": pinball.format(m=m) for m in _METHODS})
        .transform_aggregate(**{f"{k}_{m}": f"mean({k}_{m})" for k in ("cov", "pin") for m in _METHODS},
                             mean_actual="mean(actual)", groupby=["hw"])
        .transform_calculate(**{f"pinpct_{m}": f"100 * datum.pin_{m} / datum.mean_actual" for m in _METHODS})
    )

    def panel(prefix, title, **y):
        return (scored.transform_fold([f"{prefix}_{m}" for m in _METHODS], as_=["m", "value"])
                .transform_calculate(method=f"replace(datum.m, '{prefix}_', '')")
                .mark_bar().encode(x=alt.X("hw:O", title="horizon (weeks)"), xOffset="method:N",
                                   y=alt.Y("value:Q", title=title, **y),
                                   color=alt.Color("method:N", title=None, scale=_EXPLORER_COLOUR_SCALE),
                                   tooltip=["hw:O", "method:N", alt.Tooltip("value:Q", format=".3f")])
                .properties(width=250, height=180))

    target = alt.Chart(pd.DataFrame({"z": [0]})).transform_calculate(target="quant / 100").mark_rule(
        strokeDash=[4, 3]).encode(y="target:Q")
    coverage = panel("cov", "coverage (share of hours)", scale=alt.Scale(domain=[0, 1])) + target
    return alt.vconcat(lines, alt.hconcat(coverage, panel("pinpct", "pinball loss (% of mean)")))


def coverage_chart(grid) -> alt.HConcatChart:
    """Coverage and pinball loss of each method by horizon, with a quantile slider.

    Parameters
    ----------
    grid : pandas.DataFrame
        One row per method, quantile and horizon: ``method`` (``calibrated`` or ``sqrt_h``),
        ``quantile`` (percent, 50–95 in steps of 5), ``horizon`` (weeks), ``coverage``
        (share of hours at or under the line, 0–1) and ``pinball`` (% of the mean actual).

    Returns
    -------
    altair.HConcatChart
        Coverage (with the chosen quantile as a dashed rule) beside pinball loss.
    """
    grid = _table(grid, "grid", ["method", "quantile", "horizon", "coverage", "pinball"])
    quant = slider("quant", 90, 50, 95, 5, "quantile (%)")
    sel = alt.Chart(grid).add_params(quant).transform_filter("datum.quantile == quant")
    x = alt.X("horizon:Q", title="horizon (weeks)", scale=alt.Scale(domain=[1, int(grid["horizon"].max())]))

    def panel(col, title, **y):
        return sel.mark_line(point=True).encode(
            x=x, y=alt.Y(f"{col}:Q", title=title, **y), color=_METHOD_COLOUR,
            tooltip=["method", "horizon", alt.Tooltip(f"{col}:Q", format=".3f")],
        ).properties(width=260, height=min(HEIGHT, 220))

    target = alt.Chart(pd.DataFrame({"z": [0]})).transform_calculate(target="quant / 100").mark_rule(
        strokeDash=[4, 3]).encode(y="target:Q")
    return alt.hconcat(
        (panel("coverage", "coverage (share of hours)", scale=alt.Scale(domain=[0.4, 1.0])) + target).properties(
            title="Coverage of the quantile line"),
        panel("pinball", "pinball loss (% of mean)").properties(title="Pinball loss"))
