"""Charts of the chapter *Autoscaling through the day*.

:func:`day_chart` draws a race of policies (:func:`capbook.autoscale.schedule.race_policies`): the
demand hour by hour above, the replicas each policy kept serving below. :func:`headroom_chart`
draws a grid of :func:`capbook.autoscale.schedule.headroom_check` rows with a slider for the scale-up
lag: every (ramp, lag) row is embedded in the page and the slider's value selects the rows shown
(:data:`HEADROOM_FILTER`), so it works on the static site with no kernel.
"""
from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from capbook import validation
from capbook.validation import number, positive
from capbook.theme import PALETTE, slider

__all__ = ["HEADROOM_FILTER", "TTFT_FLOOR_S", "TTFT_CEILING_S", "week_shapes_chart", "day_rows", "day_chart", "headroom_rows", "headroom_chart"]

#: Vega filter of :func:`headroom_chart`: the rows of the lag the slider (parameter ``lag``) selects
#: (to a microsecond: the browser's min + k × step may differ from the grid's lag in the last bit).
HEADROOM_FILTER = "abs(datum.lag_min - lag) < 1e-6"

#: Seconds: the log-scale bars of :func:`headroom_chart` start here (a p99 of 0 is drawn at it) …
TTFT_FLOOR_S = 0.01
#: … and stop here (an infinite p99, a run that refused requests, is drawn at it).
TTFT_CEILING_S = 1e4

_HEADROOM_COLUMNS = ["ramp_per_min", "lag_min", "headroom_replicas", "ttft_p99_s", "goodput", "held"]


def day_rows(race, *, bin_min: float = 10.0, first_hour: float = 0.0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows :func:`day_chart` embeds: demand per report bin, and replicas serving per policy.

    Parameters
    ----------
    race : capbook.autoscale.schedule.PolicyRace
        The policies raced.
    bin_min : float
        Minutes per point of the replicas lines (the mean of the control ticks in each bin).
    first_hour : float
        The hour of the day the race started at (``hours=slice(24 * d + h, ...)``: ``h``), so
        that ``hour`` reads as the hour of the day.

    Returns
    -------
    (pandas.DataFrame, pandas.DataFrame)
        ``demand``: ``hour`` (``first_hour`` + hours from the start of the race), ``rate`` (requests/s that
        arrived in that hour, the same for every policy: one seed; a last row closes the last
        hour at its end); ``replicas``: ``hour``,
        ``policy``, ``serving`` (mean replicas serving in the bin).
    """
    results = getattr(race, "results", None)
    if not isinstance(results, dict) or not results:
        raise ValueError("race must be a PolicyRace with at least one simulated policy (race_policies)")
    step = positive(bin_min, "bin_min") * 60.0
    h0 = number(first_hour, "first_hour", lo=0)
    first = next(iter(results.values()))
    h = first.hours
    starts = h["start_s"].to_numpy(float)
    width = float(np.diff(starts).min()) if starts.size > 1 else float(first.duration_s)
    # one more point at the end of the last bin, so that the step line draws the last bin too
    demand = pd.DataFrame({"hour": h0 + np.append(starts, starts[-1] + width) / 3600.0,
                           "rate": np.append(h["rate"].to_numpy(float), float(h["rate"].iloc[-1]))})
    parts = []
    for name, res in results.items():
        t = res.ticks
        b = np.floor(t["time_s"].to_numpy(float) / step).astype(np.int64)
        mean = pd.Series(t["serving"].to_numpy(float)).groupby(b).mean()
        parts.append(pd.DataFrame({"hour": h0 + mean.index.to_numpy() * step / 3600.0, "policy": str(name),
                                   "serving": mean.to_numpy()}))
    return demand, pd.concat(parts, ignore_index=True)


def day_chart(race, *, static_replicas: int | None = None, bin_min: float = 10.0, first_hour: float = 0.0,
              title: str | None = None, subtitle: str | None = None):
    """Demand through the race and the replicas each policy kept serving.

    Click a policy in the legend to pick it out (the others fade); shift-click adds more.

    Parameters
    ----------
    race : capbook.autoscale.schedule.PolicyRace
    static_replicas : int, optional
        The static plan's count, drawn as a dashed rule.
    bin_min : float
        Minutes per point of the replicas lines.
    first_hour : float
        The hour of the day the race started at (see :func:`day_rows`).
    title : str, optional
    subtitle : str, optional
        A line under the title, e.g. which replica was simulated ("on a modelled …").

    Returns
    -------
    altair.VConcatChart
    """
    demand, rows = day_rows(race, bin_min=bin_min, first_hour=first_hour)
    lo = float(demand["hour"].min())
    x = alt.X("hour:Q", title="time of day, hours", scale=alt.Scale(domain=[
        lo, float(max(demand["hour"].max(), rows["hour"].max()))], nice=False))
    top = alt.Chart(demand).mark_area(interpolate="step-after", opacity=0.35, color=PALETTE[4],
                                      line={"color": PALETTE[4]}).encode(
        x=x, y=alt.Y("rate:Q", title="requests/s"),
        tooltip=[alt.Tooltip("hour:Q", title="hour"), alt.Tooltip("rate:Q", title="requests/s", format=".1f")]
    ).properties(height=110, title=_title(title or "Demand, and the replicas each policy kept serving", subtitle))
    pick = alt.selection_point(fields=["policy"], bind="legend")
    order = list(dict.fromkeys(rows["policy"]))
    lines = alt.Chart(rows).mark_line(interpolate="step-after", strokeWidth=2).encode(
        x=x, y=alt.Y("serving:Q", title="replicas serving"),
        color=alt.Color("policy:N", title=None, sort=order, scale=alt.Scale(domain=order),
                        legend=alt.Legend(labelLimit=0)),   # whole policy names, never "…"
        opacity=alt.condition(pick, alt.value(1.0), alt.value(0.15)),
        tooltip=[alt.Tooltip("policy:N"), alt.Tooltip("hour:Q", title="hour", format=".2f"),
                 alt.Tooltip("serving:Q", title="replicas serving", format=".1f")]).add_params(pick)
    bottom = lines
    if static_replicas is not None:
        n = validation.integer(static_replicas, "static_replicas", minimum=1)
        rule = alt.Chart(pd.DataFrame({"replicas": [n], "label": [f"static fleet: {n} replicas"]})).mark_rule(
            strokeDash=[4, 4]).encode(y="replicas:Q", tooltip=[alt.Tooltip("label:N", title="static")])
        bottom = lines + rule
    return alt.vconcat(top, bottom.properties(height=260))


def _title(text: str, subtitle: str | None):
    return alt.TitleParams(text, subtitle=str(subtitle)) if subtitle else text


def headroom_rows(grid: pd.DataFrame) -> pd.DataFrame:
    """The rows :func:`headroom_chart` embeds: a full grid of ramps × evenly spaced lags.

    Parameters
    ----------
    grid : pandas.DataFrame
        :func:`capbook.autoscale.schedule.headroom_check` over several ramps and lags (columns
        ``ramp_per_min``, ``lag_min``, ``headroom_replicas``, ``ttft_p99_s``, ``goodput``,
        ``held`` at least), every (ramp, lag) exactly once, the lags evenly spaced (a slider
        moves in equal steps).

    Returns
    -------
    pandas.DataFrame
        Those columns plus ``verdict`` (``"held"`` or ``"broke"``), ``label`` (the headroom
        bought, for the bar's text), ``ttft_shown_s`` (the p99 clipped to
        [:data:`TTFT_FLOOR_S`, :data:`TTFT_CEILING_S`] for the log scale) and ``ttft_text``,
        sorted by lag and ramp.
    """
    validation.table(grid, "grid (headroom_check)", _HEADROOM_COLUMNS)
    rows = grid[_HEADROOM_COLUMNS].copy()
    rows["ramp_per_min"] = rows["ramp_per_min"].astype(float)
    rows["lag_min"] = rows["lag_min"].astype(float)
    rows["headroom_replicas"] = rows["headroom_replicas"].astype(int)
    rows["ttft_p99_s"] = rows["ttft_p99_s"].astype(float)
    rows["goodput"] = rows["goodput"].astype(float)
    rows["held"] = rows["held"].astype(bool)
    if rows.empty or rows.duplicated(["ramp_per_min", "lag_min"]).any():
        raise ValueError("grid must hold each (ramp_per_min, lag_min) once")
    ramps, lags = np.unique(rows["ramp_per_min"]), np.unique(rows["lag_min"])
    if len(rows) != ramps.size * lags.size:
        raise ValueError(f"grid must hold every ramp at every lag: {len(rows)} rows for {ramps.size} ramps "
                         f"× {lags.size} lags")
    if rows["ttft_p99_s"].isna().any() or (rows["ttft_p99_s"] < 0).any():
        raise ValueError("grid: ttft_p99_s must be a number >= 0 in every row (inf for a run that refused requests)")
    if lags.size > 1 and not np.allclose(np.diff(lags), lags[1] - lags[0]):
        raise ValueError(f"grid: the lags must be evenly spaced for a slider, got {list(lags)}")
    rows["verdict"] = np.where(rows["held"], "held", "broke")
    # the log-scale bar: at least 10 ms (a p99 of 0 has no logarithm), an infinite p99 drawn at 10^4 s
    rows["ttft_shown_s"] = rows["ttft_p99_s"].clip(lower=TTFT_FLOOR_S, upper=TTFT_CEILING_S)
    rows["ttft_text"] = [("∞" if not np.isfinite(v) else f"{v:,.2f}") + " s" for v in rows["ttft_p99_s"]]
    rows["label"] = [f"+{n}" for n in rows["headroom_replicas"]]
    return rows.sort_values(["lag_min", "ramp_per_min"]).reset_index(drop=True)


def headroom_chart(grid: pd.DataFrame, *, ttft_target_s: float, lag_min: float | None = None,
                   subtitle: str | None = None):
    """p99 TTFT during a ramp against the ramp's speed, with a slider for the scale-up lag.

    Each bar is one :func:`capbook.autoscale.schedule.headroom_check` row at the lag the slider sets
    (:data:`HEADROOM_FILTER`): blue where the burst headroom held the objectives, vermillion
    where it broke; the text on a bar is the headroom the fleet had bought. The dashed rule is
    the p99 TTFT objective.

    Parameters
    ----------
    grid : pandas.DataFrame
        See :func:`headroom_rows`.
    ttft_target_s : float
        The p99 TTFT objective, seconds.
    lag_min : float, optional
        The slider's start (a lag of the grid; default the smallest).
    subtitle : str, optional
        A line under the title, e.g. which replica was simulated ("on a modelled …").

    Returns
    -------
    altair.LayerChart
    """
    rows = headroom_rows(grid)
    obj = positive(ttft_target_s, "ttft_target_s")
    lags = np.unique(rows["lag_min"])
    start = float(lags[0]) if lag_min is None else number(lag_min, "lag_min")
    if not np.isclose(lags, start).any():
        raise ValueError(f"lag_min must be one of the grid's lags {list(lags)}, got {lag_min!r}")
    start = float(lags[np.isclose(lags, start)][0])
    step = float(lags[1] - lags[0]) if lags.size > 1 else 1.0
    param = slider("lag", start, float(lags[0]), float(lags[-1]), step, "scale-up lag, minutes")
    base = alt.Chart(rows).transform_filter(HEADROOM_FILTER)
    x = alt.X("ramp_per_min:O", title="ramp, requests/s gained per minute", axis=alt.Axis(labelAngle=0))
    top = max(float(rows["ttft_shown_s"].max()), obj) * 2
    y = alt.Y("ttft_shown_s:Q", title="p99 TTFT during the ramp, s",
              scale=alt.Scale(type="log", domain=[min(float(rows["ttft_shown_s"].min()), obj) / 2, top]))
    floor = min(float(rows["ttft_shown_s"].min()), obj) / 2
    # a bar on a log scale has no zero to start from: it starts at the bottom of the axis
    bars = base.mark_bar(size=50).encode(
        x=x, y=y, y2=alt.datum(floor), color=alt.Color("verdict:N", title=None, scale=alt.Scale(domain=["held", "broke"],
                                                                            range=[PALETTE[0], PALETTE[1]])),
        tooltip=[alt.Tooltip("ramp_per_min:O", title="ramp, req/s per min"), alt.Tooltip("lag_min:Q", title="lag, min"),
                 alt.Tooltip("headroom_replicas:Q", title="headroom replicas"),
                 alt.Tooltip("ttft_text:N", title="p99 TTFT"),
                 alt.Tooltip("goodput:Q", title="goodput", format=".2%"), alt.Tooltip("verdict:N")])
    text = base.mark_text(dy=-8).encode(x=x, y=y, text="label:N")
    rule = alt.Chart(pd.DataFrame({"ttft_s": [obj], "label": [f"objective: p99 TTFT ≤ {obj:g} s"]})).mark_rule(
        strokeDash=[4, 4], color=PALETTE[1]).encode(y="ttft_s:Q", tooltip=[alt.Tooltip("label:N", title="objective")])
    caption = alt.Chart(pd.DataFrame({"row": [0]})).transform_calculate(
        label="'scale-up lag ' + format(lag, '.4~g') + ' min: the bars are the ramps'").mark_text(
        align="left", x=4, y=-8, color=PALETTE[7]).encode(text="label:N")
    return (bars + text + rule + caption).add_params(param).properties(
        width=420, title=_title("Does the burst headroom hold p99 TTFT while demand climbs?", subtitle))


def week_shapes_chart(series: dict, *, title: str | None = None):
    """Weekly shapes side by side, each as a share of its own busiest hour.

    Parameters
    ----------
    series : dict
        Name → 168 hourly values (any unit; hour 0 = the week's first hour).
    title : str, optional

    Returns
    -------
    altair.Chart
    """
    if not isinstance(series, dict) or not series:
        raise ValueError("series must be a dict of name -> 168 hourly values")
    parts = []
    for name, values in series.items():
        v = validation.array(np.asarray(values, dtype=float), f"series[{name!r}]", lo=0.0, nonempty=True).ravel()
        if v.size != 168 or not v.max() > 0:
            raise ValueError(f"series[{name!r}] must hold 168 hourly values, not all zero; got {v.size}")
        parts.append(pd.DataFrame({"hour_of_week": np.arange(168), "series": str(name), "share_of_peak": v / v.max()}))
    rows = pd.concat(parts, ignore_index=True)
    order = list(series)
    return alt.Chart(rows).mark_line(strokeWidth=1.8).encode(
        x=alt.X("hour_of_week:Q", title="hour of the week, hours from its start", scale=alt.Scale(domain=[0, 168], nice=False),
                axis=alt.Axis(values=list(range(0, 169, 24)))),
        y=alt.Y("share_of_peak:Q", title="share of the busiest hour", axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("series:N", title=None, sort=order, scale=alt.Scale(domain=order),
                        legend=alt.Legend(labelLimit=0)),   # whole series names, never "…"
        tooltip=[alt.Tooltip("series:N"), alt.Tooltip("hour_of_week:Q", title="hour"),
                 alt.Tooltip("share_of_peak:Q", title="share of peak", format=".0%")]
    ).properties(title=title or "The week's shape")
