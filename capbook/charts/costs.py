"""Charts of the chapter *What capacity costs*.

Both slider charts stay interactive on the static site: the data of every fleet size (or every
replica of the duration curve) is embedded in the page, and the price ratio the slider sets is
applied by Vega-Lite transforms in the browser. The expressions are module constants so that the
tests can evaluate them in Python against :mod:`capbook.cost.pricing`.
"""
from __future__ import annotations

import math

import altair as alt
import numpy as np
import pandas as pd

from capbook import validation
from capbook.validation import integer, number, positive
from capbook.theme import PALETTE, slider

__all__ = ["SATURATION_EXPRESSIONS", "RESERVE_EXPRESSIONS", "saturation_rows", "saturation_cost_chart",
           "reserve_chart", "objectives_chart"]

#: Vega expressions of :func:`saturation_cost_chart` (parameter ``log_kappa`` = log10 of the price ratio).
SATURATION_EXPRESSIONS = {
    "kappa": "pow(10, log_kappa)",
    "total_usd_per_week": "datum.capacity_usd_per_week + pow(10, log_kappa) * datum.usd_per_request"
                          " * datum.late_requests",
}

#: Vega expressions of :func:`reserve_chart` (parameter ``ratio`` = reserved / on-demand price).
RESERVE_EXPRESSIONS = {
    "reserve": "datum.share_of_hours >= ratio - 1e-12 ? 1 : 0",
    "on_demand_share": "datum.share_of_hours >= ratio - 1e-12 ? 0 : datum.share_of_hours",
    # after a joinaggregate of the two sums over every replica:
    "usd_per_week": "168 * datum.on_demand_usd_per_hour * (datum.reserved * ratio + datum.on_demand_hours)",
}


def saturation_rows(costs: pd.DataFrame, usd_per_request: float) -> pd.DataFrame:
    """The rows :func:`saturation_cost_chart` embeds: one per fleet size with a finite count of late requests.

    Parameters
    ----------
    costs : pandas.DataFrame
        :attr:`capbook.cost.pricing.OptimalQuantile.costs` (index ``replicas``; columns
        ``capacity_usd_per_week`` and ``late_requests`` at least).
    usd_per_request : float
        USD to serve one request at the rating (:attr:`~capbook.cost.pricing.OptimalQuantile.usd_per_request`).

    Returns
    -------
    pandas.DataFrame
        ``replicas``, ``capacity_usd_per_week``, ``late_requests``, ``usd_per_request``. Fleets too
        small to carry any peak (infinitely many late requests) are left out.
    """
    frame = costs.reset_index() if "replicas" not in costs.columns else costs
    validation.table(frame, "costs (OptimalQuantile.costs)", ["replicas", "capacity_usd_per_week", "late_requests"])
    upr = positive(usd_per_request, "usd_per_request")
    rows = frame[["replicas", "capacity_usd_per_week", "late_requests"]].astype(float)
    rows = rows[np.isfinite(rows["late_requests"]) & np.isfinite(rows["capacity_usd_per_week"])].copy()
    if rows.empty:
        raise ValueError("costs: no fleet size with a finite number of late requests")
    rows["replicas"] = rows["replicas"].astype(int)
    rows["usd_per_request"] = upr
    return rows.sort_values("replicas").reset_index(drop=True)


def saturation_cost_chart(costs: pd.DataFrame, usd_per_request: float, *, price_ratio: float,
                     conventional_replicas: int, conventional_label: str = "P90 plan",
                     log_kappa_range: tuple = (1.0, 6.0)):
    """Weekly capacity cost plus saturation cost against the fleet size, with a price-ratio slider.

    The total is ``capacity + κ × usd_per_request × late requests`` per week, computed in the
    browser from the slider (``log10 κ``: 3 means a late request costs as much as serving 1,000).
    The cheapest fleet is marked by a window transform (the first fleet of the lowest total,
    as :func:`capbook.cost.pricing.optimal_quantile` picks it), the conventional plan by a dashed rule.

    Parameters
    ----------
    costs : pandas.DataFrame
        :attr:`capbook.cost.pricing.OptimalQuantile.costs`.
    usd_per_request : float
        USD to serve one request at the rating.
    price_ratio : float
        The slider's start value κ (saturation price / ``usd_per_request``), > 0.
    conventional_replicas : int
        The conventional plan's fleet (drawn as a dashed rule).
    conventional_label : str
        Its name in the tooltip.
    log_kappa_range : tuple of float
        The slider's range in log10 κ.

    Returns
    -------
    altair.LayerChart
    """
    rows = saturation_rows(costs, usd_per_request)
    lo, hi = (number(v, "log_kappa_range", lo=-3, hi=9) for v in log_kappa_range)
    if not lo < hi:
        raise ValueError(f"log_kappa_range must be (low, high) with low < high, got {log_kappa_range!r}")
    kappa0 = positive(price_ratio, "price_ratio")
    # on the slider's grid (0.01): it shows 2.64, not 2.6379831304078722; the label gives κ to two
    # significant digits (≈ 440), the precision of a slider, not the text's exact figure
    start = round(float(np.clip(math.log10(kappa0), lo, hi)), 2)
    conv = integer(conventional_replicas, "conventional_replicas", minimum=1)
    param = slider("log_kappa", start, lo, hi, 0.01, "price ratio κ, log10 (3: a late request costs 1,000 served ones)")
    base = alt.Chart(rows).transform_calculate(**SATURATION_EXPRESSIONS)
    x = alt.X("replicas:Q", title="replicas in the fleet", scale=alt.Scale(zero=False))
    y = alt.Y("usd:Q", title="USD per week", scale=alt.Scale(type="log"))
    lines = base.transform_fold(["capacity_usd_per_week", "total_usd_per_week"], as_=["cost", "usd"]).transform_calculate(
        what="datum.cost == 'capacity_usd_per_week' ? 'capacity' : 'capacity + saturation'"
    ).mark_line(point=True).encode(
        x=x, y=y, color=alt.Color("what:N", title=None),
        tooltip=[alt.Tooltip("replicas:Q"), alt.Tooltip("what:N", title="cost"),
                 alt.Tooltip("usd:Q", title="USD per week", format=",.0f"),
                 alt.Tooltip("late_requests:Q", title="late requests per week", format=",.0f")])
    best = base.transform_window(
        rank="row_number()", sort=[alt.SortField("total_usd_per_week"), alt.SortField("replicas")]
    ).transform_filter("datum.rank == 1").transform_calculate(
        usd="datum.total_usd_per_week",
        label="'cheapest: ' + datum.replicas + ' replicas, ' + format(datum.total_usd_per_week, '$,.0f') + ' a week"
              " at κ ≈ ' + format(pow(10, log_kappa), ',.2r')")
    best_point = best.mark_point(size=160, shape="diamond", filled=True, color=PALETTE[2]).encode(
        x=x, y=y, tooltip=[alt.Tooltip("label:N", title="optimum")])
    best_text = best.mark_text(align="left", x=8, y=10, color=PALETTE[2], fontWeight="bold").encode(text="label:N")
    rule = alt.Chart(pd.DataFrame({"replicas": [conv], "plan": [f"{conventional_label}: {conv} replicas"]})).mark_rule(
        strokeDash=[4, 4]).encode(x="replicas:Q", tooltip=[alt.Tooltip("plan:N", title="conventional")])
    return (lines + rule + best_point + best_text).add_params(param).properties(
        title="Capacity plus saturation cost, per week")


def reserve_chart(duration: pd.DataFrame, on_demand_usd_per_hour: float, *, break_even_share: float):
    """The duration curve (share of hours each replica is needed) with a break-even slider.

    Bar ``k`` is the share of the week's hours that need at least ``k`` replicas. The slider
    sets the reserved / on-demand price ratio: the dashed line is that break-even share, the
    bars at or above it are reserved (coloured), and the title line gives the reserved count and
    the week's bill: ``168 × on-demand × (reserved × ratio + Σ share of the rest)``, as
    :func:`capbook.cost.pricing.reserve_split` prices the reserved floor plus on demand.

    Parameters
    ----------
    duration : pandas.DataFrame
        :attr:`capbook.cost.pricing.ReserveSplit.duration` (index ``replica``, column ``share_of_hours``).
    on_demand_usd_per_hour : float
        USD per replica-hour on demand.
    break_even_share : float
        The slider's start value (the price table's reserved / on-demand), in (0, 1].

    Returns
    -------
    altair.LayerChart
    """
    frame = duration.reset_index() if "replica" not in duration.columns else duration
    validation.table(frame, "duration (ReserveSplit.duration)", ["replica", "share_of_hours"])
    rows = frame[["replica", "share_of_hours"]].copy()
    rows["replica"] = rows["replica"].astype(int)
    rows["share_of_hours"] = rows["share_of_hours"].astype(float)
    if rows.empty or not rows["share_of_hours"].between(0, 1).all():
        raise ValueError("duration: share_of_hours must hold shares in [0, 1], one row per replica")
    rows["on_demand_usd_per_hour"] = positive(on_demand_usd_per_hour, "on_demand_usd_per_hour")
    b0 = number(break_even_share, "break_even_share", lo=0, hi=1, lo_open=True)
    # the price table's ratio on the slider's grid (0.01): the slider shows 0.64, not 0.6363636363636362
    param = slider("ratio", round(b0, 2), 0.05, 1.0, 0.01, "reserved / on-demand price (the break-even share)")
    base = alt.Chart(rows).transform_calculate(
        reserve=RESERVE_EXPRESSIONS["reserve"], on_demand_share=RESERVE_EXPRESSIONS["on_demand_share"])
    bars = base.transform_calculate(pay="datum.reserve == 1 ? 'reserved' : 'on demand'").mark_bar().encode(
        x=alt.X("replica:O", title="replica (1 = needed most often)"),
        y=alt.Y("share_of_hours:Q", title="share of the week's hours it is needed", axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("pay:N", title=None, scale=alt.Scale(domain=["reserved", "on demand"],
                                                             range=[PALETTE[0], PALETTE[4]])),
        tooltip=[alt.Tooltip("replica:O"), alt.Tooltip("share_of_hours:Q", title="share of hours", format=".1%"),
                 alt.Tooltip("pay:N", title="pay")])
    line = alt.Chart(pd.DataFrame({"row": [0]})).transform_calculate(y="ratio").mark_rule(
        strokeDash=[4, 4], color=PALETTE[1]).encode(y="y:Q")
    summary = base.transform_joinaggregate(
        reserved="sum(reserve)", on_demand_hours="sum(on_demand_share)"
    ).transform_calculate(usd_per_week=RESERVE_EXPRESSIONS["usd_per_week"]).transform_filter(
        "datum.replica == 1").transform_calculate(
        label="'break-even ' + format(ratio, '.0%') + ': reserve ' + datum.reserved + ', the rest on demand, '"
              " + format(datum.usd_per_week, '$,.0f') + ' a week'")
    text = summary.mark_text(align="right", x="width", y=-8, color=PALETTE[1]).encode(text="label:N")
    return (bars + line + text).add_params(param).properties(
        title="Reserve the replicas needed in more hours than the break-even share")


def objectives_chart(frame: pd.DataFrame):
    """The weekly cost of each TTFT objective as bars labelled in dollars.

    Parameters
    ----------
    frame : pandas.DataFrame
        :func:`capbook.cost.whatif.price_of_objectives` (index ``ttft_target_s``; ``replicas``,
        ``verified``, ``usd_per_week``).

    Returns
    -------
    altair.LayerChart
    """
    t = frame.reset_index() if "ttft_target_s" not in frame.columns else frame.copy()
    validation.table(t, "frame (price_of_objectives)", ["ttft_target_s", "replicas", "verified", "usd_per_week"])
    t = t[["ttft_target_s", "replicas", "verified", "usd_per_week"]].copy()
    t["objective"] = [f"TTFT ≤ {v:g} s" for v in t["ttft_target_s"]]
    t["label"] = [f"${u:,.0f} ({n} replicas)" for u, n in zip(t["usd_per_week"], t["replicas"])]
    t["verified"] = t["verified"].astype(str)
    # the fleet simulation's verdicts: verified in blue, failures in vermillion, skipped (Erlang C's count) in orange
    order = {"verified": PALETTE[0], "not met": PALETTE[1], "impossible": PALETTE[1], "skipped": PALETTE[4]}
    seen = list(dict.fromkeys(t["verified"]))
    domain = [v for v in order if v in seen] + [v for v in seen if v not in order]
    colours = [order.get(v, PALETTE[4]) for v in domain]
    enc_x = alt.X("objective:N", title="TTFT objective", sort=list(t["objective"]), axis=alt.Axis(labelAngle=0))
    bars = alt.Chart(t).mark_bar(size=60).encode(
        x=enc_x, y=alt.Y("usd_per_week:Q", title="USD per week"),
        color=alt.Color("verified:N", title="fleet simulation", scale=alt.Scale(domain=domain, range=colours)),
        tooltip=[alt.Tooltip("objective:N"), alt.Tooltip("replicas:Q"),
                 alt.Tooltip("verified:N", title="fleet simulation"),
                 alt.Tooltip("usd_per_week:Q", title="USD per week", format="$,.0f")])
    text = alt.Chart(t).mark_text(dy=-8).encode(x=enc_x, y="usd_per_week:Q", text="label:N")
    return (bars + text).properties(width=420, title="The price of the TTFT objective, per week")
