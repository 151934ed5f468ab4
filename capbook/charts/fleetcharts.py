"""Charts of the fleet chapters: the plan waterfall with sliders, the alert hockey stick, and the
simulated fleet's throughput, goodput and retry timelines.

Every chart is built from data computed with capbook; the sliders of :func:`plan_waterfall`
and :func:`admission_budgets` are Vega-Lite parameters, so they keep working on the static
site (the browser recomputes the chart from the embedded rows).

>>> page_plan_total(17, 40, ramp_per_min=0.5, lag_min=8, zones=1)
20
"""
from __future__ import annotations

import math

import altair as alt
import numpy as np
import pandas as pd

from capbook.plan import fleet as _fleet
from capbook import queueing as _q
from capbook.theme import HEIGHT, PALETTE, WIDTH, slider
from capbook.validation import integer, nonnegative, positive, probability, table

__all__ = [
    "STAGES",
    "SLO_OPTIONS",
    "plan_grid",
    "page_plan_total",
    "plan_waterfall",
    "hockey_stick",
    "throughput_goodput",
    "admission_budgets",
    "retry_timeline",
]

#: Stages of a fleet plan, in the order of the waterfall.
STAGES = ["Little's-law floor", "queueing", "burst headroom", "failure spare", "total"]
_KINDS = ["floor", "queueing", "burst", "spare", "total"]
_KIND_COLOURS = [PALETTE[i] for i in (5, 0, 4, 3, 7)]

#: SLO targets offered by the waterfall's radio buttons: label → P(wait > t) allowed.
SLO_OPTIONS = {"0.1 %": 0.001, "1 %": 0.01, "5 %": 0.05}

# The page-side arithmetic of plan_fleet with spares=1 (burst at the pooled operating point,
# N+1, or the largest of `zones` zones). page_plan_total is its Python mirror.
_BURST = "max(0, ceil(fs_ramp * fs_lag * datum.q / datum.demand - 1e-9))"
_TOTAL = ("fs_zones >= 2 ? max(datum.before + 1, ceil(datum.before * fs_zones / (fs_zones - 1))) "
          ": datum.before + 1")


def plan_grid(slots, service_time_s, wait_target_s, demands=range(10, 101, 5), targets=None,
              routings=("pooled", "round-robin")) -> pd.DataFrame:
    """Precompute the floor and queueing stages of a plan for every slider position.

    Erlang C cannot run in the browser, so :func:`plan_waterfall` embeds these rows and
    computes burst headroom and spares in the page.

    Parameters
    ----------
    slots : int
        Slots per replica (S).
    service_time_s : float
        Seconds a request holds a slot (T), > 0.
    wait_target_s : float
        Wait threshold of the SLO, seconds.
    demands : iterable of float
        Peak demands, requests per second.
    targets : dict, optional
        SLO label → largest share of requests waiting over ``wait_target_s`` (default :data:`SLO_OPTIONS`).
    routings : sequence of str
        Routing policies of :func:`capbook.plan.fleet.replicas_for_routing`.

    Returns
    -------
    pandas.DataFrame
        One row per demand, routing, SLO and stage: ``demand`` (req/s), ``routing``, ``slo``,
        ``floor`` and ``q`` (replicas of the floor and of the queueing stage), ``i`` (stage
        index), ``stage`` and ``kind``.
    """
    s = integer(slots, "slots", minimum=1)
    ts = positive(service_time_s, "service_time_s")
    tt = nonnegative(wait_target_s, "wait_target_s")
    targets = SLO_OPTIONS if targets is None else dict(targets)
    if not targets:
        raise ValueError("targets must name at least one SLO")
    rows = []
    for lam in demands:
        lam = positive(lam, "demands")
        floor = int(_q.replicas_by_mean(lam, s, ts))
        for routing in routings:
            for label, target in targets.items():
                n_q = int(_fleet.replicas_for_routing(lam, s, ts, tt, probability(target, "targets"), routing))
                for i, (stage, kind) in enumerate(zip(STAGES, _KINDS)):
                    rows.append({"demand": lam, "routing": routing, "slo": label, "floor": floor,
                                 "q": n_q, "i": i, "stage": stage, "kind": kind})
    return pd.DataFrame(rows)


def page_plan_total(queueing, demand, ramp_per_min, lag_min, zones=1) -> int:
    """The total the waterfall page computes: queueing + burst headroom + spare (N+1 or a zone).

    The same arithmetic as :func:`capbook.plan.fleet.plan_fleet` with ``spares=1``; the tests check
    the two agree.

    Parameters
    ----------
    queueing : int
        Replicas of the queueing stage.
    demand : float
        Peak requests per second, > 0.
    ramp_per_min : float
        Demand ramp, req/s per minute, ≥ 0.
    lag_min : float
        Scale-up lag, minutes, ≥ 0.
    zones : int
        1 for N+1 in one zone; ≥ 2 to survive losing the largest zone.

    Returns
    -------
    int
        Replicas to buy.
    """
    n_q = integer(queueing, "queueing", minimum=1)
    lam = positive(demand, "demand")
    burst = max(0, math.ceil(nonnegative(ramp_per_min, "ramp_per_min") * nonnegative(lag_min, "lag_min")
                             * n_q / lam - 1e-9))
    before = n_q + burst
    z = integer(zones, "zones", minimum=1)
    return max(before + 1, math.ceil(before * z / (z - 1))) if z >= 2 else before + 1


def plan_waterfall(slots, service_time_s, wait_target_s, *, grid=None, peak=40, ramp_per_min=0.5, lag_min=8,
                   zones=1, routing="pooled", slo="1 %"):
    """The plan as a waterfall whose sliders recompute it on the static page.

    Parameters
    ----------
    slots : int
        Slots per replica (S).
    service_time_s : float
        Seconds a request holds a slot (T), > 0.
    wait_target_s : float
        Wait threshold of the SLO, seconds.
    grid : pandas.DataFrame, optional
        The rows of :func:`plan_grid` (computed here when not given).
    peak, ramp_per_min, lag_min, zones : float
        Initial slider positions: req/s (10 to 100 in steps of 5), req/s per minute, minutes,
        zones.
    routing : {"pooled", "round-robin"}
        Initial routing button.
    slo : str
        Initial SLO button, a key of :data:`SLO_OPTIONS`.

    Returns
    -------
    altair.LayerChart
        Bars (floating from ``start`` to ``end``) and labels, with the parameters ``fs_demand``,
        ``fs_ramp``, ``fs_lag``, ``fs_zones``, ``fs_routing`` and ``fs_slo``.
    """
    s = integer(slots, "slots", minimum=1)
    ts = positive(service_time_s, "service_time_s")
    if grid is None:
        grid = plan_grid(s, ts, wait_target_s)
    routings = list(dict.fromkeys(grid["routing"]))
    slos = list(dict.fromkeys(grid["slo"]))
    if routing not in routings:
        raise ValueError(f"routing must be one of {routings}, got {routing!r}")
    if slo not in slos:
        raise ValueError(f"slo must be one of {slos}, got {slo!r}")
    params = [
        slider("fs_demand", peak, 10, 100, 5, "peak demand (req/s)"),
        slider("fs_ramp", ramp_per_min, 0, 2, 0.1, "ramp (req/s per min)"),
        slider("fs_lag", lag_min, 0, 20, 1, "scale-up lag (min)"),
        slider("fs_zones", zones, 1, 4, 1, "zones"),
        alt.param(name="fs_routing", value=routing, bind=alt.binding_radio(options=routings, name="routing ")),
        alt.param(name="fs_slo", value=slo,
                  bind=alt.binding_radio(options=slos, name=f"P(wait > {wait_target_s:g} s) at most ")),
    ]
    base = (
        alt.Chart(grid)
        .transform_filter("datum.demand == fs_demand && datum.routing == fs_routing && datum.slo == fs_slo")
        .transform_calculate(b=_BURST)
        .transform_calculate(before="datum.q + datum.b")
        .transform_calculate(total=_TOTAL)
        .transform_calculate(
            start="datum.i == 0 ? 0 : datum.i == 1 ? datum.floor : datum.i == 2 ? datum.q "
                  ": datum.i == 3 ? datum.before : 0",
            end="datum.i == 0 ? datum.floor : datum.i == 1 ? datum.q : datum.i == 2 ? datum.before : datum.total",
        )
        .transform_calculate(added="datum.end - datum.start",
                             utilisation=f"datum.demand * {ts!r} / (datum.end * {s})")
        .transform_calculate(label="datum.i == 0 || datum.i == 4 ? '' + datum.end : '+' + datum.added",
                             top="max(datum.start, datum.end)")
    )
    x = alt.X("stage:N", sort=STAGES, title="step of the plan",
              axis=alt.Axis(labelAngle=0, labelLimit=120))
    colour = alt.Color("kind:N", scale=alt.Scale(domain=_KINDS, range=_KIND_COLOURS), legend=None)
    bars = base.mark_bar(size=48).encode(
        x=x, y=alt.Y("start:Q", title="replicas", scale=alt.Scale(domainMin=0)), y2="end:Q", color=colour,
        tooltip=["stage:N", alt.Tooltip("added:Q", title="replicas added"),
                 alt.Tooltip("end:Q", title="running total"),
                 alt.Tooltip("utilisation:Q", title="utilisation at peak", format=".1%")],
    )
    text = base.mark_text(dy=-8).encode(x=x, y="top:Q", text="label:N")
    return (bars + text).add_params(*params).properties(
        title="From the floor to the plan (N+1; zones ≥ 2 survive losing the largest zone)",
        width=WIDTH, height=HEIGHT,
    )


def hockey_stick(replicas, slots, service_time_s, wait_target_s, levels=None, utilisation=None):
    """P(wait > wait_target_s) and P(wait > 0) of a pooled fleet against slot utilisation, with alert levels.

    Parameters
    ----------
    replicas, slots : int
        Replicas and slots per replica (one M/M/c queue of ``replicas × slots`` slots).
    service_time_s : float
        Seconds a request holds a slot, > 0.
    wait_target_s : float
        Wait threshold, seconds.
    levels : dict, optional
        Label → slot utilisation at which to draw a dashed rule (e.g. the warn and breach
        levels of :func:`capbook.plan.fleet.alert_levels`).
    utilisation : array_like, optional
        Utilisations to draw, in (0, 1) (default 0.5 to 0.99).

    Returns
    -------
    altair.LayerChart
        Data rows ``slot utilisation``, ``signal`` and ``probability``.
    """
    c = integer(replicas, "replicas", minimum=1) * integer(slots, "slots", minimum=1)
    ts = positive(service_time_s, "service_time_s")
    tt = nonnegative(wait_target_s, "wait_target_s")
    u = np.linspace(0.5, 0.99, 200) if utilisation is None else np.asarray(utilisation, dtype=float)
    if u.size == 0 or np.any(~np.isfinite(u)) or np.any(u <= 0) or np.any(u >= 1):
        raise ValueError("utilisation must be finite values in (0, 1)")
    lam = u * c / ts
    stick = pd.DataFrame({
        "slot utilisation": u,
        f"P(wait > {tt:g} s)": np.asarray(_q.prob_wait_exceeds(tt, c, lam, ts), dtype=float),
        "P(wait > 0)": np.asarray(_q.prob_wait(c, lam, ts), dtype=float),
    }).melt("slot utilisation", var_name="signal", value_name="probability")
    curve = alt.Chart(stick).mark_line().encode(
        x=alt.X("slot utilisation:Q", title="slot utilisation (share of slots busy)",
                axis=alt.Axis(format="%"), scale=alt.Scale(domain=[float(u.min()), 1])),
        y=alt.Y("probability:Q", title="probability (share of requests)", axis=alt.Axis(format="%")),
        color=alt.Color("signal:N", title=None),
    )
    chart = curve
    if levels:
        # labels at staggered heights, so that two close levels do not print over each other
        lv = pd.DataFrame({"slot utilisation": [float(v) for v in levels.values()], "level": list(levels),
                           "label_at": [0.95 - 0.12 * i for i in range(len(levels))]})
        rules = alt.Chart(lv).mark_rule(strokeDash=[5, 4]).encode(x="slot utilisation:Q", tooltip=["level:N"])
        labels = alt.Chart(lv).mark_text(align="right", dx=-4).encode(
            x="slot utilisation:Q", y=alt.Y("label_at:Q", title="probability (share of requests)"),
            text="level:N")
        chart = curve + rules + labels
    return chart.properties(title=f"The hockey stick of {replicas} replicas x {slots} slots",
                            width=WIDTH, height=HEIGHT)


def _measures(df: pd.DataFrame, ids: list[str]) -> pd.DataFrame:
    table(df, "runs", [*ids, "throughput_rps", "goodput_rps"])
    out = df.melt(id_vars=ids, value_vars=["throughput_rps", "goodput_rps"], var_name="measure", value_name="rps")
    out["measure"] = out["measure"].map({"throughput_rps": "throughput", "goodput_rps": "goodput"})
    return out


_X_OFFERED = alt.X("offered_rps:Q", title="offered load (requests per second)", scale=alt.Scale(zero=False),
                   axis=alt.Axis(tickCount=7, labelOverlap=True, labelSeparation=6))
_Y_RPS = alt.Y("rps:Q", title="requests per second")


def throughput_goodput(runs: pd.DataFrame, title="No admission control: throughput holds, goodput collapses"):
    """Throughput and goodput against offered load, one line each.

    Parameters
    ----------
    runs : pandas.DataFrame
        One row per simulated load with ``offered_rps``, ``throughput_rps`` and ``goodput_rps``
        (requests per second, from :meth:`capbook.sim.slotsim.SimResult.summary`).
    title : str

    Returns
    -------
    altair.Chart
        Data rows ``offered_rps``, ``measure`` (throughput or goodput) and ``rps``.
    """
    long = _measures(runs.reset_index(drop=True), ["offered_rps"])
    return alt.Chart(long).mark_line(point=True).encode(
        x=_X_OFFERED, y=_Y_RPS, color=alt.Color("measure:N", title=None),
        tooltip=["measure:N", alt.Tooltip("offered_rps:Q", format=".2f"), alt.Tooltip("rps:Q", format=".2f")],
    ).properties(title=title, width=WIDTH, height=HEIGHT)


def admission_budgets(runs: pd.DataFrame, budget=0.5):
    """Throughput and goodput with an admission budget chosen on a slider, over the unguarded fleet.

    Parameters
    ----------
    runs : pandas.DataFrame
        Rows with ``offered_rps``, ``budget_s`` (admission wait budget, seconds; NaN for no
        admission control), ``throughput_rps`` and ``goodput_rps``. Each budget becomes a
        button.
    budget : float
        Initial budget on the slider, seconds.

    Returns
    -------
    altair.LayerChart
        Grey lines without admission control; coloured lines for the rows whose
        ``budget_s`` equals the radio-button parameter ``budget_s``.
    """
    table(runs, "runs", ["budget_s"])
    b = runs["budget_s"].to_numpy(dtype=float)
    have = b[np.isfinite(b)]
    if have.size == 0 or np.any(have <= 0):
        raise ValueError("budget_s must hold positive budgets (seconds) beside the NaN rows without admission control")
    options = sorted({float(v) for v in have})
    start = float(positive(budget, "budget"))
    if start not in options:
        raise ValueError(f"budget must be one of the budgets in runs {options}, got {budget!r}")
    plot = runs.assign(with_admission=np.isfinite(b))
    plot = _measures(plot, ["offered_rps", "budget_s", "with_admission"])
    param = alt.param(name="budget_s", value=start, bind=alt.binding_radio(
        options=options, labels=[f"{v:g} s" for v in options], name="admission wait budget "))
    enc = dict(x=_X_OFFERED, y=_Y_RPS, strokeDash=alt.StrokeDash("measure:N", title=None))
    baseline = alt.Chart(plot[~plot.with_admission]).mark_line(color="#999999").encode(**enc)
    chosen = alt.Chart(plot[plot.with_admission]).transform_filter("datum.budget_s == budget_s").mark_line(
        point=True, color=PALETTE[0]).encode(
        **enc, tooltip=["measure:N", alt.Tooltip("offered_rps:Q", format=".2f"), alt.Tooltip("rps:Q", format=".2f")])
    return (baseline + chosen).add_params(param).properties(
        title="Admission control keeps goodput near capacity (grey: no admission control)", width=WIDTH, height=HEIGHT)


def retry_timeline(timelines: pd.DataFrame, until_min=45, title="A spike and three client behaviours"):
    """Attempts arriving and goodput per minute, one colour per client behaviour.

    Parameters
    ----------
    timelines : pandas.DataFrame
        Rows of :meth:`capbook.sim.slotsim.SimResult.timeline` with ``minute``, ``clients``,
        ``attempts_rps`` and ``goodput_rps`` (per second).
    until_min : float
        Last minute drawn.
    title : str

    Returns
    -------
    altair.Chart
        Data rows ``minute``, ``clients``, ``measure`` and ``rps``.
    """
    table(timelines, "timelines", ["minute", "clients", "attempts_rps", "goodput_rps"])
    tl = timelines[timelines.minute < positive(until_min, "until_min")]
    long = tl.melt(id_vars=["minute", "clients"], value_vars=["attempts_rps", "goodput_rps"],
                   var_name="measure", value_name="rps")
    long["measure"] = long["measure"].map({"attempts_rps": "attempts arriving", "goodput_rps": "goodput"})
    return alt.Chart(long).mark_line().encode(
        x=alt.X("minute:Q", title="time (minutes)"), y=alt.Y("rps:Q", title="requests per second"),
        color=alt.Color("clients:N", title="clients"), strokeDash=alt.StrokeDash("measure:N", title=None),
        tooltip=["clients:N", "measure:N", "minute:Q", alt.Tooltip("rps:Q", format=".2f")],
    ).properties(title=title, width=WIDTH, height=HEIGHT)
