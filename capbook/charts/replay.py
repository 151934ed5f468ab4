"""Charts of *Replaying a trace*: who waits for a slot, and who gets a late first token.

:func:`wait_share_chart` draws, for each routing policy, the share of replayed requests that
waited longer than ``t`` for a slot; a slider moves ``t`` and radio buttons pick the fleet size.
Both are Vega-Lite parameters that filter data embedded in the page, so the chart stays
interactive on the static site. :func:`ttft_tail_chart` draws the share of requests whose
first token came later than ``x`` seconds, one line per replay, against the TTFT target.
:func:`minute_rate_chart` draws the arrival rate of each minute of a replay against the rate a
fleet completes requests at full batch: the minutes above a fleet's ceiling are where its queue
grows.

Examples
--------
>>> import numpy as np
>>> waits = {(2, "pooled"): np.array([0.0, 0.0, 0.6, 2.0]), (2, "random"): np.array([0.0, 1.0, 3.0, 4.0])}
>>> table = wait_share_table(waits, np.array([0.0, 0.5, 1.0]))
>>> table.query("routing == 'random' and t == 0.5").share.item()
0.75
"""
from __future__ import annotations

from collections.abc import Mapping

import altair as alt
import numpy as np
import pandas as pd

from capbook.theme import PALETTE, WIDTH, slider
from capbook.validation import array, integer, nonnegative, positive, probability

__all__ = ["wait_share_table", "wait_share_chart", "tail_share_table", "ttft_tail_chart", "minute_rate_table",
           "minute_rate_chart"]


def _tail_share(values, name: str, grid) -> np.ndarray:
    """Share of ``values`` (checked: ≥ 0, not empty) strictly above each point of ``grid``."""
    v = np.sort(array(values, name, lo=0).ravel())
    if v.size == 0:
        raise ValueError(f"{name} is empty: no requests to count")
    return 1.0 - np.searchsorted(v, grid, side="right") / v.size


def _grid(top, step, top_name: str, step_name: str):
    """The grid 0, step, ..., top (seconds, rounded to µs) and the checked ``top`` and ``step``."""
    hi, st = positive(top, top_name), positive(step, step_name)
    return np.round(np.arange(0.0, hi + st / 2, st), 6), hi, st


def _share_y(title: str) -> alt.Y:
    """A share axis from 0 to 1, symlog so that 0.1 % and 1 % stay apart from 0."""
    return alt.Y("share:Q", title=title, scale=alt.Scale(type="symlog", constant=0.001, domain=[0, 1]),
                 axis=alt.Axis(format=".1~%", values=[0, 0.001, 0.01, 0.1, 0.3, 1]))


def wait_share_table(waits: Mapping, t_grid) -> pd.DataFrame:
    """Share of requests waiting longer than ``t``, per fleet size, routing policy and ``t``.

    Parameters
    ----------
    waits : mapping of (int, str) to array_like
        ``(replicas, routing) -> waits``: each request's wait for a slot, seconds (≥ 0).
    t_grid : array_like
        Wait thresholds, seconds (≥ 0).

    Returns
    -------
    pandas.DataFrame
        Columns ``replicas``, ``routing``, ``t`` (s) and ``share`` (fraction of the requests
        whose wait exceeds ``t``), one row per key and threshold.
    """
    if not isinstance(waits, Mapping) or not waits:
        raise ValueError("waits must be a non-empty mapping (replicas, routing) -> waits in seconds")
    grid = array(t_grid, "t_grid", lo=0)
    rows = []
    for key, w in waits.items():
        if not (isinstance(key, tuple) and len(key) == 2):
            raise ValueError(f"waits: each key must be a (replicas, routing) pair, got {key!r}")
        n = integer(key[0], "waits key replicas", minimum=1)
        rows.append(pd.DataFrame({"replicas": n, "routing": str(key[1]), "t": np.round(grid, 6),
                                  "share": _tail_share(w, f"waits[{key!r}]", grid)}))
    return pd.concat(rows, ignore_index=True)


def wait_share_chart(waits: Mapping, budget: float, *, t_default: float = 0.5, t_max: float = 5.0,
                     step: float = 0.1, replicas_default: int | None = None, title: str = "") -> alt.LayerChart:
    """Bars of the share of requests waiting longer than ``t``, per routing policy.

    The slider ``t_wait`` (seconds) and the radio buttons ``fleet`` (replicas) are Vega-Lite
    parameters; the bars are the rows of :func:`wait_share_table` that match both, so the
    chart works on a static page. A dashed rule marks the budget.

    Parameters
    ----------
    waits : mapping of (int, str) to array_like
        ``(replicas, routing) -> waits`` in seconds, as for :func:`wait_share_table`. The
        routing policies are drawn in the order they first appear.
    budget : float
        Largest acceptable share of requests waiting longer than the SLO's threshold, in (0, 1).
    t_default : float
        Threshold the slider starts at, seconds.
    t_max : float
        Right end of the slider, seconds (> 0).
    step : float
        Slider step, seconds (> 0).
    replicas_default : int, optional
        Fleet size selected at first; default the smallest.
    title : str
        Chart title.

    Returns
    -------
    altair.LayerChart
    """
    p = probability(budget, "budget")
    grid, top, st = _grid(t_max, step, "t_max", "step")
    t0 = nonnegative(t_default, "t_default")
    if t0 > top:
        raise ValueError(f"t_default={t0} is beyond t_max={top}")
    table = wait_share_table(waits, grid)
    sizes = sorted(table["replicas"].unique().tolist())
    n0 = sizes[0] if replicas_default is None else integer(replicas_default, "replicas_default")
    if n0 not in sizes:
        raise ValueError(f"replicas_default={n0} is not one of the fleet sizes in waits: {sizes}")
    order = list(dict.fromkeys(table["routing"]))
    t_param = slider("t_wait", round(t0 / st) * st, 0.0, top, st, "wait threshold t (s)")
    fleet = alt.param(name="fleet", value=int(n0),
                      bind=alt.binding_radio(options=[int(n) for n in sizes], name="replicas "))
    bars = alt.Chart(table).transform_filter(
        f"abs(datum.t - t_wait) < {st / 100:g} && datum.replicas == fleet"
    ).mark_bar().encode(
        x=alt.X("routing:N", sort=order, title="routing policy"),
        y=_share_y("share of requests waiting longer than t"),
        color=alt.Color("routing:N", sort=order, legend=None, scale=alt.Scale(range=PALETTE)),
        tooltip=[alt.Tooltip("replicas:Q"), "routing:N", alt.Tooltip("t:Q", title="t (s)"),
                 alt.Tooltip("share:Q", format=".3%")],
    )
    rule = alt.Chart(pd.DataFrame({"share": [p]})).mark_rule(strokeDash=[4, 4]).encode(y="share:Q")
    return (bars + rule).add_params(t_param, fleet).properties(width=WIDTH, title=title)


def tail_share_table(samples: Mapping, x_grid) -> pd.DataFrame:
    """Share of requests above each ``x``, one curve per labelled sample.

    Parameters
    ----------
    samples : mapping of str to array_like
        ``label -> values`` (seconds, ≥ 0), e.g. each replayed request's TTFT.
    x_grid : array_like
        Points at which to count, seconds (≥ 0).

    Returns
    -------
    pandas.DataFrame
        Columns ``replay`` (the label), ``x`` (s) and ``share`` (fraction of values above ``x``).
    """
    if not isinstance(samples, Mapping) or not samples:
        raise ValueError("samples must be a non-empty mapping label -> values in seconds")
    grid = array(x_grid, "x_grid", lo=0)
    rows = []
    for label, v in samples.items():
        rows.append(pd.DataFrame({"replay": str(label), "x": np.round(grid, 6),
                                  "share": _tail_share(v, f"samples[{label!r}]", grid)}))
    return pd.concat(rows, ignore_index=True)


def ttft_tail_chart(ttfts: Mapping, target_s: float, share: float, *, x_max: float = 3.0, step: float = 0.02,
                    title: str = "") -> alt.LayerChart:
    """Lines of the share of requests whose TTFT exceeds ``x``, one per replay.

    A vertical rule marks the TTFT target and a horizontal one the share the quantile target
    allows (0.01 for a p99 target): a replay meets the target where its line passes below the
    crossing of the two rules.

    Parameters
    ----------
    ttfts : mapping of str to array_like
        ``label -> TTFT of each replayed request``, seconds (≥ 0).
    target_s : float
        TTFT target, seconds (> 0).
    share : float
        Share of requests the target may miss, in (0, 1) (1 − the quantile).
    x_max : float
        Right end of the TTFT axis, seconds (> 0).
    step : float
        Spacing of the TTFT grid, seconds (> 0).
    title : str
        Chart title.

    Returns
    -------
    altair.LayerChart
    """
    tgt = positive(target_s, "target_s")
    p = probability(share, "share")
    grid, top, _ = _grid(x_max, step, "x_max", "step")
    table = tail_share_table(ttfts, grid)
    order = list(dict.fromkeys(table["replay"]))
    lines = alt.Chart(table).mark_line(interpolate="step-after").encode(
        x=alt.X("x:Q", title="TTFT x (s)", scale=alt.Scale(domain=[0, top])),
        y=_share_y("share of requests with TTFT above x"),
        color=alt.Color("replay:N", sort=order, title=None, scale=alt.Scale(range=PALETTE),
                        legend=alt.Legend(labelLimit=400)),   # whole labels, not cut off
        strokeDash=alt.StrokeDash("replay:N", sort=order, legend=None),
        tooltip=["replay:N", alt.Tooltip("x:Q", title="x (s)"), alt.Tooltip("share:Q", format=".2%")],
    )
    target = alt.Chart(pd.DataFrame({"x": [tgt]})).mark_rule(strokeDash=[4, 4]).encode(x="x:Q")
    allowed = alt.Chart(pd.DataFrame({"share": [p]})).mark_rule(strokeDash=[4, 4]).encode(y="share:Q")
    return (lines + target + allowed).properties(width=WIDTH, title=title)


def minute_rate_table(arrivals: Mapping, duration_s: float, bin_s: float = 60.0) -> pd.DataFrame:
    """Arrival rate in each whole bin of ``bin_s`` seconds, one series per labelled replay.

    Parameters
    ----------
    arrivals : mapping of str to array_like
        ``label -> arrival times`` of a replay, seconds from its start (≥ 0).
    duration_s : float
        Length of the replays, seconds (> 0); only the whole bins in ``[0, duration_s)`` are counted.
    bin_s : float
        Bin length, seconds (> 0; 60 = minutes), at most ``duration_s``.

    Returns
    -------
    pandas.DataFrame
        Columns ``replay`` (the label), ``minute`` (start of the bin, minutes from the start of the
        replay) and ``rate`` (arrivals in the bin divided by ``bin_s``, requests per second).
    """
    if not isinstance(arrivals, Mapping) or not arrivals:
        raise ValueError("arrivals must be a non-empty mapping label -> arrival times in seconds")
    span, width = positive(duration_s, "duration_s"), positive(bin_s, "bin_s")
    n_bins = int(span // width)
    if n_bins < 1:
        raise ValueError(f"bin_s={width} is longer than duration_s={span}: no whole bin to count")
    edges = np.arange(n_bins + 1) * width
    rows = []
    for label, t in arrivals.items():
        counts, _ = np.histogram(array(t, f"arrivals[{label!r}]", lo=0).ravel(), bins=edges)
        rows.append(pd.DataFrame({"replay": str(label), "minute": np.round(edges[:-1] / 60.0, 6),
                                  "rate": counts / width}))
    return pd.concat(rows, ignore_index=True)


def minute_rate_chart(arrivals: Mapping, ceilings: Mapping, duration_s: float, *, bin_s: float = 60.0,
                      title: str = "") -> alt.LayerChart:
    """Step lines of the arrival rate per bin, one per replay, under labelled horizontal ceilings.

    A ceiling is typically the rate a fleet completes requests at full batch (replicas × slots ÷
    holding time): in a bin above it the fleet's queue grows, and it drains only in bins below.

    Parameters
    ----------
    arrivals : mapping of str to array_like
        ``label -> arrival times`` (seconds from the start, ≥ 0), as for :func:`minute_rate_table`.
    ceilings : mapping of str to float
        ``label -> rate``, requests per second (> 0), each drawn as a dashed rule with its label.
    duration_s : float
        Length of the replays, seconds (> 0).
    bin_s : float
        Bin length, seconds (> 0).
    title : str
        Chart title.

    Returns
    -------
    altair.LayerChart
    """
    if not isinstance(ceilings, Mapping) or not ceilings:
        raise ValueError("ceilings must be a non-empty mapping label -> requests per second")
    rules = pd.DataFrame({"ceiling": [str(k) for k in ceilings],
                          "rate": [positive(v, f"ceilings[{k!r}]") for k, v in ceilings.items()]})
    table = minute_rate_table(arrivals, duration_s, bin_s)
    order = list(dict.fromkeys(table["replay"]))
    lo = min(table["rate"].min(), rules["rate"].min())
    hi = max(table["rate"].max(), rules["rate"].max())
    pad = 0.05 * (hi - lo) if hi > lo else 1.0
    y = alt.Y("rate:Q", title="arrivals (requests/s)", scale=alt.Scale(domain=[max(0.0, lo - pad), hi + pad]))
    lines = alt.Chart(table).mark_line(interpolate="step-after").encode(
        x=alt.X("minute:Q", title=f"time in the replay (min; bins of {bin_s:g} s)"),
        y=y,
        color=alt.Color("replay:N", sort=order, title=None, scale=alt.Scale(range=PALETTE)),
        tooltip=["replay:N", alt.Tooltip("minute:Q", title="minute"), alt.Tooltip("rate:Q", format=".2f")],
    )
    rule = alt.Chart(rules).mark_rule(strokeDash=[4, 4], color="#555").encode(y="rate:Q")
    text = alt.Chart(rules).mark_text(align="left", dx=4, dy=-6, color="#555").encode(
        x=alt.value(0), y="rate:Q", text="ceiling:N")
    return (lines + rule + text).properties(width=WIDTH, title=title)
