"""Charts of the *Pooling* and *Routing* chapters: what one shared queue is worth.

Both charts embed a grid that capbook computes when the page is built and let Vega-Lite
sliders pick a slice of it in the browser, so they stay interactive on the static site.

* :func:`safe_utilisation_chart`: the highest utilisation a pool of ``c`` slots can run at
  while at most a target share of requests waits longer than ``t`` (*Pooling*).
* :func:`late_share_chart`: the share of late requests against the number of replicas, for
  one shared queue and for a queue per replica, at a chosen peak demand (*Routing*).
* :func:`affinity_chart`: prefix-cache hits against time to first token for each router of
  a simulated fleet, prefix affinity at each load bound, at a chosen fleet size (*Routing*).
"""
from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from capbook.plan import fleet
from capbook import queueing as q
from capbook.validation import array, choice, integer, nonnegative, positive, probability, table
from capbook.theme import slider

__all__ = ["safe_utilisation_grid", "safe_utilisation_chart", "late_share_grid", "late_share_chart",
           "AFFINITY_COLUMNS", "affinity_chart"]

#: Pool sizes (slots) drawn by default: from one slot to a thousand, evenly on a log axis.
POOL_SIZES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 40, 48, 64, 80, 100, 128, 160, 200,
              256, 320, 400, 512, 640, 800, 1000)


def _bisect_safe_utilisation(c, t_over_T, late_share, iterations=60):
    # P(W > t) = C(c, rho c) exp(-c (1 - rho) t / T) increases with rho on (0, 1): bisection
    # on rho converges to the unique root, every grid point at once.
    c, t_over_T, late_share = np.broadcast_arrays(*(np.asarray(x, float) for x in (c, t_over_T, late_share)))
    lo, hi = np.zeros(c.shape), np.ones(c.shape)
    for _ in range(iterations):
        mid = (lo + hi) / 2
        meets = q.log_erlang_c(c, mid * c) - c * (1 - mid) * t_over_T <= np.log(late_share)
        lo, hi = np.where(meets, mid, lo), np.where(meets, hi, mid)
    return lo


def safe_utilisation_grid(service_time_s=8.0, slots=POOL_SIZES, thresholds=None, targets_pct=None):
    """Highest safe utilisation for every pool size, wait threshold and target share.

    Parameters
    ----------
    service_time_s : float
        Mean seconds a request holds a slot (T).
    slots : sequence of int
        Pool sizes ``c`` (slots behind one queue), each ≥ 1.
    thresholds : sequence of float, optional
        Wait thresholds ``t`` in seconds, each ≥ 0; default 0 to 4 s in steps of 0.5 s.
    targets_pct : sequence of float, optional
        Largest share of requests allowed to wait longer than ``t``, in percent (0 to 100,
        exclusive); default 1 to 10 %.

    Returns
    -------
    pandas.DataFrame
        One row per combination: ``c`` (slots), ``t`` (s), ``target`` (%) and ``safe`` (the
        highest utilisation ρ with ``P(W > t) ≤ target``, a fraction rounded to 4 decimals).
        Agrees with :func:`capbook.queueing.max_utilisation` to that precision.
    """
    ts = positive(service_time_s, "service_time_s")
    c = array(slots, "slots", lo=1, integer=True, nonempty=True, ndim=1)
    t = array(np.arange(0.0, 4.01, 0.5) if thresholds is None else thresholds, "thresholds", lo=0)
    p = array(np.arange(1, 11) if targets_pct is None else targets_pct, "targets_pct", lo=0, hi=100,
              lo_open=True, hi_open=True)
    gc, gt, gp = np.meshgrid(c, t, p, indexing="ij")
    safe = _bisect_safe_utilisation(gc, gt / ts, gp / 100)
    return pd.DataFrame({"c": gc.ravel().astype(int), "t": gt.ravel(), "target": gp.ravel(),
                         "safe": np.round(safe.ravel(), 4)})


def safe_utilisation_chart(service_time_s=8.0, slots=POOL_SIZES, thresholds=None, targets_pct=None,
                           wait_target_s=2.0, target_pct=5.0, rule=0.70):
    """Safe utilisation against pool size, with sliders for the wait threshold and target.

    Parameters
    ----------
    service_time_s, slots, thresholds, targets_pct
        As in :func:`safe_utilisation_grid` (seconds, slots, seconds, percent).
    wait_target_s : float
        Initial wait threshold on the slider, seconds (one of ``thresholds``).
    target_pct : float
        Initial target share on the slider, percent (one of ``targets_pct``).
    rule : float
        Utilisation drawn as a dashed "run at …" line, a fraction in (0, 1).

    Returns
    -------
    altair.LayerChart
        A line of ``safe`` against ``c`` (log axis) filtered by the sliders ``wait_t`` and
        ``target_pct``, with the safe arrival rate ``safe × c / T`` (requests per second) in
        the tooltip.
    """
    grid = safe_utilisation_grid(service_time_s, slots, thresholds, targets_pct)
    t0 = nonnegative(wait_target_s, "wait_target_s")
    p0 = positive(target_pct, "target_pct")
    r = probability(rule, "rule")
    for value, column, name in ((t0, "t", "wait_target_s"), (p0, "target", "target_pct")):
        if not np.isclose(grid[column], value).any():
            raise ValueError(f"{name} must be one of the grid's values {sorted(set(grid[column]))}, got {value}")
    t_values, p_values = np.unique(grid["t"]), np.unique(grid["target"])
    t_step = float(np.min(np.diff(t_values))) if len(t_values) > 1 else 1.0
    p_step = float(np.min(np.diff(p_values))) if len(p_values) > 1 else 1.0
    t_p = slider("wait_t", t0, float(t_values[0]), float(t_values[-1]), t_step,
                 f"wait threshold t (s), T = {service_time_s:g} s")
    p_p = slider("target_pct", p0, float(p_values[0]), float(p_values[-1]), p_step,
                 "target share waiting over t (%)")
    curve = alt.Chart(grid).transform_filter(
        "datum.t == wait_t && datum.target == target_pct"
    ).transform_calculate(rate=f"datum.safe * datum.c / {float(service_time_s)}").mark_line(point=True).encode(
        x=alt.X("c:Q", title="slots in the pool, c (log scale)", scale=alt.Scale(type="log")),
        y=alt.Y("safe:Q", title="highest utilisation meeting the SLO", axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1])),
        tooltip=[alt.Tooltip("c:Q", title="slots"),
                 alt.Tooltip("safe:Q", title="safe utilisation", format=".1%"),
                 alt.Tooltip("rate:Q", title="safe rate (req/s)", format=".2f")],
    )
    line = alt.Chart(pd.DataFrame({"y": [r], "label": [f"“run at {100 * r:.0f} %”"]}))
    line = line.mark_rule(strokeDash=[4, 4]).encode(y="y:Q") + line.mark_text(
        align="left", x=5, dy=-7).encode(y="y:Q", text="label:N")
    return (curve + line).add_params(t_p, p_p).properties(title="Safe utilisation grows with pool size")


def late_share_grid(slots, service_time_s, wait_target_s, demands, late_share=0.01, floor=1e-6):
    """Share of late requests against fleet size, pooled and with a queue per replica.

    Parameters
    ----------
    slots : int
        Slots per replica (S).
    service_time_s : float
        Mean seconds a request holds a slot (T).
    wait_target_s : float
        Wait threshold, seconds.
    demands : sequence of float
        Peak demands to tabulate, requests per second (each > 0).
    late_share : float
        Late-share budget, a fraction in (0, 1); the replica axis runs to twice the
        per-replica-queue answer for it.
    floor : float
        Shares below this are dropped (they leave a log-scale chart).

    Returns
    -------
    pandas.DataFrame
        Rows ``demand`` (req/s), ``replicas``, ``routing`` ("one shared queue" or "a queue per
        replica") and ``late`` = :func:`capbook.plan.fleet.late_share` (``"pooled"`` or
        ``"round-robin"``), for replica counts from two below the Little's-law floor to twice
        the per-replica-queue answer for ``late_share``.
    """
    s = integer(slots, "slots", minimum=1)
    ts = positive(service_time_s, "service_time_s")
    tt = nonnegative(wait_target_s, "wait_target_s")
    lams = array(demands, "demands", lo=0, lo_open=True, nonempty=True, ndim=1)
    p = probability(late_share, "late_share")
    fl = probability(floor, "floor")
    rows = []
    for lam in lams:
        n_max = max(2, int(2 * q.replicas_isolated(lam, s, ts, tt, p)))
        n = np.arange(max(1, int(np.ceil(lam * ts / s)) - 2), n_max + 1)
        for routing, label in (("pooled", "one shared queue"), ("round-robin", "a queue per replica")):
            late = np.asarray(fleet.late_share(n, s, lam, ts, tt, routing), dtype=float)
            rows.append(pd.DataFrame({"demand": lam, "replicas": n, "routing": label, "late": late}))
    grid = pd.concat(rows, ignore_index=True)
    return grid[grid["late"] >= fl].reset_index(drop=True)


def late_share_chart(slots, service_time_s, wait_target_s, late_share, demands, demand=None):
    """Late share against replicas for both queue models, with a peak-demand slider.

    Parameters
    ----------
    slots, service_time_s, wait_target_s, demands
        As in :func:`late_share_grid` (slots, seconds, seconds, requests per second); the
        demands must be evenly spaced, since the slider steps between them.
    late_share : float
        Late-share budget drawn as a dashed line, a fraction in (0, 1).
    demand : float, optional
        Initial demand on the slider, requests per second (one of ``demands``; default the
        first).

    Returns
    -------
    altair.LayerChart
        Lines of ``late`` (log axis) against ``replicas``, coloured by routing and filtered by
        the slider parameter ``demand``, plus the budget rule.
    """
    grid = late_share_grid(slots, service_time_s, wait_target_s, demands, late_share)
    p = probability(late_share, "late_share")
    lams = np.unique(np.asarray(demands, float))
    steps = np.diff(lams)
    if len(lams) > 1 and not np.allclose(steps, steps[0]):
        raise ValueError("demands must be evenly spaced for the slider")
    d0 = float(lams[0] if demand is None else positive(demand, "demand"))
    if not np.isclose(lams, d0).any():
        raise ValueError(f"demand must be one of demands, got {d0}")
    d_p = slider("demand", d0, float(lams[0]), float(lams[-1]), float(steps[0]) if len(lams) > 1 else 1.0,
                 "peak demand (req/s)")
    lines = alt.Chart(grid).mark_line(point=True).encode(
        x=alt.X("replicas:Q", title="replicas"),
        y=alt.Y("late:Q", title=f"share of requests waiting > {float(wait_target_s):g} s",
                scale=alt.Scale(type="log", domain=[1e-6, 1]), axis=alt.Axis(format="~%")),
        color=alt.Color("routing:N", title=None),
        tooltip=["routing:N", "replicas:Q", alt.Tooltip("late:Q", title=f"P(wait > {float(wait_target_s):g} s)", format=".3%")],
    ).transform_filter("datum.demand == demand")
    budget = alt.Chart(pd.DataFrame({"y": [p]})).mark_rule(strokeDash=[5, 4]).encode(y="y:Q")
    return (lines + budget).add_params(d_p).properties(
        title="Late requests against fleet size: one shared queue vs a queue per replica")


#: Columns :func:`affinity_chart` reads: one row per simulated fleet (a router at a fleet size).
AFFINITY_COLUMNS = ("replicas", "router", "affinity_slack", "cache_hit_share", "ttft_p50_s", "ttft_p99_s",
                    "goodput_share")


def affinity_chart(grid, replicas=None, quantile="p99", title="Cache hits against time to first token, by router"):
    """Cache hits against time to first token, per router, with a fleet-size slider.

    Each point is one simulated fleet (:func:`capbook.sim.fleetsim.simulate_fleet` and
    :meth:`~capbook.sim.fleetsim.FleetRun.summary`): across, the share of prompt tokens found in
    the prefix cache; up, the TTFT percentile chosen with the buttons. The prefix-affinity
    fleets are joined in the order of their load bound (``affinity_slack``, labelled on each
    point), from the bound that balances most to the loosest.

    Parameters
    ----------
    grid : pandas.DataFrame
        The :data:`AFFINITY_COLUMNS`: ``replicas``, ``router`` (a :data:`capbook.sim.fleetsim.ROUTERS`
        name), ``affinity_slack`` (outstanding requests; NaN for the other routers), and the
        summary's ``cache_hit_share`` (fraction), ``ttft_p50_s``, ``ttft_p99_s`` (seconds) and
        ``goodput_share`` (fraction). The fleet sizes must be evenly spaced, since the slider
        steps between them.
    replicas : int, optional
        Fleet size on the slider at first (default the smallest in ``grid``).
    quantile : {"p50", "p99"}
        TTFT percentile shown at first.
    title : str
        The chart's title.

    Returns
    -------
    altair.LayerChart
        Points (and, for prefix affinity, a line) of TTFT against ``cache_hit_share``,
        filtered by the slider parameter ``replicas`` and the radio parameter ``ttft_q``.
    """
    table(grid, "grid", AFFINITY_COLUMNS)
    q0 = choice(quantile, "quantile", ("p50", "p99"))
    sizes = np.unique(grid["replicas"].to_numpy(dtype=int))
    steps = np.diff(sizes)
    if len(sizes) > 1 and not np.all(steps == steps[0]):
        raise ValueError("grid: the fleet sizes (replicas) must be evenly spaced for the slider")
    n0 = int(sizes[0]) if replicas is None else integer(replicas, "replicas", minimum=1)
    if n0 not in sizes:
        raise ValueError(f"replicas must be one of the grid's fleet sizes {sizes.tolist()}, got {n0}")
    data = grid[list(AFFINITY_COLUMNS)].copy()
    affinity = data["router"] == "prefix-affinity"
    slack = data["affinity_slack"]
    data["label"] = np.where(affinity, slack.fillna(0).astype(int).astype(str), data["router"])
    data["order"] = np.where(affinity, slack.fillna(0), -1.0)
    n_p = slider("replicas", n0, float(sizes[0]), float(sizes[-1]), float(steps[0]) if len(sizes) > 1 else 1.0,
                 "replicas")
    q_p = alt.param(name="ttft_q", value=q0, bind=alt.binding_radio(options=["p50", "p99"], name="TTFT "))
    base = alt.Chart(data).transform_filter("datum.replicas == replicas").transform_fold(
        ["ttft_p50_s", "ttft_p99_s"], as_=["quantile", "ttft"]
    ).transform_filter("datum.quantile == 'ttft_' + ttft_q + '_s'")
    x = alt.X("cache_hit_share:Q", title="share of prompt tokens found in the prefix cache",
              axis=alt.Axis(format="%", tickCount=6, labelSeparation=6), scale=alt.Scale(zero=True))
    y = alt.Y("ttft:Q", title="time to first token (s), percentile chosen below", scale=alt.Scale(zero=True))
    routers = ["pooled", "jsq", "p2c", "random", "strict-round-robin", "prefix-affinity"]
    color = alt.Color("router:N", title=None, scale=alt.Scale(domain=[r for r in routers if r in set(data["router"])]))
    tooltip = [alt.Tooltip("router:N"), alt.Tooltip("affinity_slack:Q", title="slack (requests)"),
               alt.Tooltip("replicas:Q"), alt.Tooltip("cache_hit_share:Q", title="cache hits", format=".1%"),
               alt.Tooltip("ttft_p50_s:Q", title="TTFT p50 (s)", format=".2f"),
               alt.Tooltip("ttft_p99_s:Q", title="TTFT p99 (s)", format=".2f"),
               alt.Tooltip("goodput_share:Q", title="goodput", format=".1%")]
    line = base.transform_filter("datum.router == 'prefix-affinity'").mark_line(opacity=0.6).encode(
        x=x, y=y, color=color, order="order:Q")
    points = base.mark_point(size=70, filled=True).encode(x=x, y=y, color=color, tooltip=tooltip)
    labels = base.mark_text(align="left", dx=7, dy=-6, fontSize=11).encode(x=x, y=y, text="label:N", color=color)
    return (line + points + labels).add_params(n_p, q_p).properties(title=title)
