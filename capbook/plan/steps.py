r"""The capstone: a capacity plan from a request log and a sweep.

:func:`capacity_plan` chains the book, one chapter per step; each step is a function of its
own that returns a frozen result with its numbers and its ``notes``, and the plan is those
results (:class:`CapacityPlan`):

1. **Hourly tokens** per model and tier from the request log (:meth:`capbook.logs.requestlog.RequestLog.hourly`,
   summed once into a :class:`LogAggregates`); the plan is for one model (one deployment, one
   sweep) and, by default, the interactive tier (batch work is deferred to troughs, not
   planned for at the peak): :func:`select_traffic` → :class:`Traffic`.
2. **Forecast** the output tokens at the horizon that matches the lead time of the decision
   (:data:`HORIZONS`: one week for reserved capacity already on hand, four for a quota or
   reservation request, twelve for a hardware order) and read the **P90 peak hour** of the
   forecast week (:meth:`capbook.forecast.tokens.TokenForecast.peak`). A short log is forecast with
   what it supports (calibrated bands, else the √h rule with fewer backtest origins); a log of
   less than four whole weeks, or with empty hours, cannot be forecast and the plan says so and
   uses the busiest observed hour (times an explicit weekly growth, 0 unless given):
   :func:`forecast_demand` → :class:`Demand`.
3. **Replicas from the rating**: the replica's two-number rating from the sweep at the slots
   the TPOT objective allows (:func:`capbook.sweeps.replicas.rating_from_sweep`), the linear mix and
   the headroom (:func:`capbook.sweeps.replicas.replicas_for_tokens`): :func:`rate_replica` →
   :class:`Replica`.
4. **Queueing check at the peak**, both models of the book: Erlang C for the pooled fleet
   (``P(wait > t) ≤ target``, :func:`capbook.queueing.replicas_pooled`) and the load-dependent
   model of continuous batching (TTFT tail, :func:`capbook.engine.loadqueue.replicas_needed`):
   :func:`check_queueing` → :class:`QueueingCheck`; and the engine model of
   :mod:`capbook.engine.predict` on one replica: :func:`check_engine` → :class:`EngineCheck`.
5. **The fleet simulation sets the serving count** (:func:`capbook.plan.replay.verify_plan` →
   :class:`capbook.plan.replay.Verification`): the log's busiest hours, time-scaled to the planned
   peak, through engine replicas behind a router (:mod:`capbook.sim.fleetsim`: continuous
   batching, chunked prefill, the KV cache, the step cost fitted to the sweep), two
   replications of up to 30,000 requests per fleet size. A size *meets* when the TTFT at the
   objective's quantile plus its 95 % margin is within the objective and the goodput less its
   margin reaches :attr:`SLO.goodput_share` (:func:`capbook.plan.replay.judge_fleet`); the
   **serving** count is the smallest size that meets, searched from the median of the models'
   counts (down while sizes meet or up while they miss, by doubling steps, then bisection; never
   below the saturation bound unless a size there meets; the size below is always simulated). Burst headroom
   (demand that climbs while new replicas start) and the failure spares stack on it
   (:func:`stack_fleet` → :class:`capbook.plan.fleet.FleetPlan`), giving the in-service count and
   the total. The rating, Erlang C, the load-dependent queue and the engine model on one
   replica are **cross-checks** shown beside it with their difference from the simulated count
   and the mechanism that explains it (:func:`capbook.plan.replay.explain_checks`: prefill stalls,
   KV cache, bursts, prompt tail); they are never stacked. When no fleet size can meet the
   objectives (the prefill of the long prompts alone exceeds the TTFT objective, or the fleet
   saturates up to the cap) or the simulation is skipped, the serving count falls back to
   Erlang C's and the plan says loudly, in its first line, its ``binding`` and its notes, that
   it is not verified and why.
6. **Per-tenant token-per-minute limits** that sum below what the in-service fleet serves
   (:func:`capbook.plan.fleet.allocate_tpm`): :func:`tenant_limits` → :class:`TenantLimits`.

The result, :class:`CapacityPlan`, prints as text, and exports a table (:meth:`~CapacityPlan.table`,
:meth:`~CapacityPlan.to_csv`), a Markdown review document (:meth:`~CapacityPlan.to_markdown`)
and an Altair chart (:meth:`~CapacityPlan.chart`).

Units: tokens per second for token rates, requests per second for arrival rates, seconds for
times, replicas as whole numbers.

The plan takes explicit inputs; which sample sweep goes with which sample model is decided by
:func:`capbook.app.datasets.plan_inputs`, which the CLI and the book ask for the defaults.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from capbook.engine import loadqueue
from capbook.engine.hardware import hardware_for
from capbook.engine.predict import predict
from capbook.engine.stepmodel import fitted_engine
from capbook.forecast import tokens as fc
from capbook.logs.aggregates import LogAggregates
from capbook.logs.stats import busiest_window, format_duration
from capbook.logs.scope import select_scope
from capbook.plan.fleet import allocate_tpm, plan_fleet, replicas_for_routing, waterfall_chart
from capbook.plan.replay import _SKIPPED, explain_checks, Verification, verify_plan
from capbook.slo import SLO
from capbook.sweeps.replicas import rating_from_sweep, ReplicaRating, replicas_for_tokens
from capbook.sweeps.sweep import choose_slots, Sweep
from capbook.validation import array, integer, nonnegative, number, positive, probability

__all__ = [
    "HORIZONS",
    "InfeasibleObjective",
    "CapacityPlan",
    "capacity_plan",
    "horizon_for_lead_time",
    "horizon_limit_weeks",
    "HORIZON_HISTORY_FACTOR",
    "GROWTH_PER_WEEK_RANGE",
    "MAX_DEMAND_SCALE",
    "peak_forecast",
    "PeakForecast",
    "Traffic",
    "select_traffic",
    "Demand",
    "forecast_demand",
    "Replica",
    "rate_replica",
    "QueueingCheck",
    "check_queueing",
    "EngineCheck",
    "check_engine",
    "stack_fleet",
    "ServingCheck",
    "check_serving",
    "TenantLimits",
    "tenant_limits",
]

#: Forecast horizons (weeks) and the decision each one feeds: the lead time of that decision.
HORIZONS: dict[int, str] = {
    1: "shift reserved capacity already on hand; set next week's autoscaling floor",
    4: "request quota or a cloud reservation",
    12: "order hardware or sign a capacity contract",
}

#: How far ahead a plan may look, as a multiple of its hourly history's length: a forecast
#: extrapolates at most as far ahead as the history it learnt from is long. The standard horizons
#: (:data:`HORIZONS`, up to twelve weeks) are always allowed; beyond the history they are marked rough.
HORIZON_HISTORY_FACTOR = 1.0
#: The weekly growth rates a plan extrapolates (-50 % to +100 % a week): ``growth_per_week`` for a
#: log too short to forecast, and the trend a forecast fits to the history.
GROWTH_PER_WEEK_RANGE = (-0.5, 1.0)
#: The most slots (replicas × slots) the load-dependent model solves; larger fleets are sized by
#: Erlang C and the rating alone (the model's memory grows with the slots).
LOADQ_MAX_SLOTS = 100_000
#: The most replicas capbook plans for one model: a peak that needs more by the sweep's rating is
#: refused (check the log's token counts and ``demand_scale``) before any model or simulation runs.
MAX_PLAN_REPLICAS = 100_000
#: The largest known-event overlay ``demand_scale`` (a thousand times the forecast).
MAX_DEMAND_SCALE = 1000.0


def horizon_limit_weeks(history_weeks: float) -> float:
    """The longest lead time (weeks) a plan makes from ``history_weeks`` weeks of hourly history.

    :data:`HORIZON_HISTORY_FACTOR` times the history's length, and never less than the longest
    standard horizon (:data:`HORIZONS`, twelve weeks).

    Examples
    --------
    >>> horizon_limit_weeks(4), horizon_limit_weeks(26)
    (12.0, 26.0)
    """
    weeks = nonnegative(history_weeks, "history_weeks")
    return float(max(max(HORIZONS), HORIZON_HISTORY_FACTOR * weeks))


# --------------------------------------------------------------------------------------------
# Objectives
# --------------------------------------------------------------------------------------------
class InfeasibleObjective(ValueError):
    """The deployment cannot meet the objectives at any load (its slowest level already misses
    the TPOT objective): a property of the configuration, not an input error. A ``ValueError``,
    so callers that treat every bad input alike still catch it."""


def horizon_for_lead_time(lead_time_weeks: float) -> int:
    """The forecast horizon (weeks) a decision with this lead time needs.

    Capacity ordered today arrives after the lead time, so the plan must cover the week it
    lands in: the smallest of :data:`HORIZONS` that is at least the lead time; beyond twelve
    weeks, the lead time rounded up.

    Examples
    --------
    >>> horizon_for_lead_time(2), horizon_for_lead_time(12), horizon_for_lead_time(13.2)
    (4, 12, 14)
    """
    lt = positive(lead_time_weeks, "lead_time_weeks")
    for h in sorted(HORIZONS):
        if lt <= h:
            return h
    return int(math.ceil(lt))


# --------------------------------------------------------------------------------------------
# The peak to plan for
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PeakForecast:
    """The planned peak hour at one horizon.

    Attributes
    ----------
    horizon_weeks : int
    output_tps : float
        Output tokens per second in the planned peak hour (the quantile line of the forecast
        week's busiest hour, or the observed peak when no forecast was possible).
    method : str
        ``"calibrated"``, ``"sqrt_h"`` or ``"observed"`` (no forecast).
    peak_hour : pandas.Timestamp or None
        Hour (UTC) of the forecast week's busiest point-forecast hour.
    point_tps : float
        Point forecast at that hour (tokens/s).
    note : str
        How the number was obtained, in a sentence (why a fallback was used).
    forecast : capbook.forecast.tokens.TokenForecast or None
        The forecast the number was read from (None for ``"observed"``), kept so that the
        forecast week is computed once per plan (:func:`capbook.cost.pricing.week_demand` reads
        its point forecast and backtest errors).
    min_fit_weeks, min_origins : int or None
        The rung of the ladder that forecast used.
    """

    horizon_weeks: int
    output_tps: float
    method: str
    peak_hour: pd.Timestamp | None
    point_tps: float
    note: str
    forecast: object = field(default=None, repr=False, compare=False)
    min_fit_weeks: int | None = field(default=None, repr=False, compare=False)
    min_origins: int | None = field(default=None, repr=False, compare=False)


_LADDER = (("calibrated", 4, 3), ("calibrated", 3, 1), ("sqrt_h", 4, 3), ("sqrt_h", 3, 1))


def peak_forecast(series: pd.Series, horizons: Sequence[int], *, quantile: float = 0.9,
                  growth_per_week: float = 0.0, observed_peak_tps: float | None = None) -> dict[int, PeakForecast]:
    """Planned peak output tokens/s per horizon, forecasting as much as the series allows.

    Parameters
    ----------
    series : pandas.Series
        Hourly output tokens (tokens per hour) on a complete UTC index.
    horizons : sequence of int
        Horizons in weeks.
    quantile : float
        Quantile of the forecast week's busiest hour to plan for (0.9: the P90 peak hour).
    growth_per_week : float
        Used only when no forecast is possible: weekly growth applied to the observed peak.
    observed_peak_tps : float, optional
        The observed peak (tokens/s) to use when no forecast is possible; default: the
        busiest hour of ``series``.

    Returns
    -------
    dict
        ``{horizon: PeakForecast}``. For each horizon the first method of the ladder that the
        series supports is used: calibrated bands (4 fit weeks, 3 origins), calibrated with 3
        fit weeks and 1 origin, the √h rule (4 and 3), the √h rule (3 and 1). With less than
        four whole weeks or an empty hour none works, and the observed peak is used.
    """
    q = probability(quantile, "quantile")
    g = number(growth_per_week, "growth_per_week", lo=GROWTH_PER_WEEK_RANGE[0], hi=GROWTH_PER_WEEK_RANGE[1])
    hs = sorted({int(h) for h in array(list(horizons), "horizons", lo=1, integer=True, nonempty=True, ndim=1)})
    name = fc.quantile_name(q)
    why = ""
    s = None
    try:
        s = fc.trim_to_whole_weeks(series)
        weekly = s.to_numpy().reshape(-1, fc.HOURS_PER_WEEK).sum(axis=1)
        if (weekly <= 0).any():
            raise ValueError(f"the series has a week with no tokens (from {s.index[fc.HOURS_PER_WEEK * int(np.argmax(weekly <= 0))]}); "
                             "the trend × weekly-shape model needs tokens in every week")
        # an hour with no tokens is a real zero; the log errors of the bands need a positive
        # number, so it counts as one token (a rounding of the hour, not a gap)
        s = s.clip(lower=1.0)
    except ValueError as exc:
        why, s = str(exc), None
    if observed_peak_tps is None:
        observed_peak_tps = float(series.max()) / 3600.0
    out: dict[int, PeakForecast] = {}
    for h in hs:
        got = None
        if s is not None:
            errors = []
            for method, mf, mo in _LADDER:
                try:
                    f = fc.forecast_tokens(s, h, quantiles=sorted({0.5, q}), method=method,
                                           min_fit_weeks=mf, min_origins=mo)
                except ValueError as exc:
                    errors.append(str(exc))
                    continue
                pk = f.peak().loc[h]
                weeks = len(s) // fc.HOURS_PER_WEEK
                lo_g, hi_g = GROWTH_PER_WEEK_RANGE
                if not lo_g <= f.growth <= hi_g:
                    raise ValueError(f"the history's fitted weekly growth {100 * f.growth:+.0f} % lies outside the "
                                     f"{100 * lo_g:+.0f} % to {100 * hi_g:+.0f} % a week a plan extrapolates; check "
                                     "the history (units, a change of scale between weeks), or give a history of "
                                     "the recent weeks only")
                note = (f"{method} bands from {weeks} whole weeks of history "
                        f"(fit ≥ {mf} weeks, {mo} backtest origin{'s' if mo > 1 else ''} or more); "
                        f"weekly growth {100 * f.growth:+.1f} %")
                if (method, mf, mo) != _LADDER[0]:
                    note += "; rough: too little history for the full calibrated method"
                if h > HORIZON_HISTORY_FACTOR * weeks:
                    note += f"; rough: {h} weeks ahead is further than the {weeks} weeks of history"
                got = PeakForecast(h, float(pk[name]) / 3600.0, method, pd.Timestamp(pk["peak_hour"]),
                                   float(pk["point"]) / 3600.0, note, forecast=f, min_fit_weeks=mf, min_origins=mo)
                break
            if got is None:
                why = errors[-1]
        if got is None:
            tps = observed_peak_tps * (1.0 + g) ** h
            got = PeakForecast(h, tps, "observed", None, tps,
                               f"no forecast ({why}); the busiest observed hour"
                               + (f" grown {100 * g:g} % a week" if g else " with no growth assumed"))
        out[h] = got
    return out


# --------------------------------------------------------------------------------------------
# The log, summed once
# --------------------------------------------------------------------------------------------
def _select(frame: pd.DataFrame, model, tier) -> pd.DataFrame:
    return select_scope(frame, model, tier)


# --------------------------------------------------------------------------------------------
# The steps of the plan, each a function returning a frozen result
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Traffic:
    """Step 1, :func:`select_traffic`: the model and tier the plan is for.

    Attributes
    ----------
    model : str
    tier : str or None
        None: every tier.
    hourly : pandas.DataFrame
        The rows of :attr:`LogAggregates.hourly` of that model and tier.
    notes : tuple of str
    """

    model: str
    tier: str | None
    hourly: pd.DataFrame = field(repr=False)
    notes: tuple = ()


def select_traffic(log: LogAggregates, model: str | None = None, tier: str | None = "interactive") -> Traffic:
    """The model (default: the only one, or the one with the most output tokens) and tier to plan.

    A plan is for one deployment, so for one model. The tier defaults to ``"interactive"``
    and falls back to every tier (with a note) when the log has no such tier.

    Raises
    ------
    ValueError
        For a model or tier not in the log, or a selection without output tokens.
    """
    hourly = log.hourly
    notes = []
    models = sorted(map(str, pd.unique(hourly["model"])))
    if log.history_label is not None:
        # the forecast reads the history, the rest of the plan the log: the model must be in both
        in_log = sorted(map(str, pd.unique(log.per_minute["model"])))
        if model is not None and model not in models:
            raise ValueError(f"the hourly history {log.history_label} has no rows for model {model!r}; it holds "
                             f"{models} (the request log holds {in_log}); pass history= the hourly history of "
                             "that model, or model= one that both hold")
        if model is not None and model not in in_log:
            raise ValueError(f"the request log has no requests of model {model!r}; it holds {in_log} (the hourly "
                             f"history {log.history_label} holds {models}); pass model= one that both hold")
        both = [m for m in models if m in in_log]
        if not both:
            raise ValueError(f"the hourly history {log.history_label} has no rows for the request log's model(s) "
                             f"{in_log}; it holds {models}; pass history= an hourly history of the log's model (and model= to choose among the models both hold)")
        if model is None and len(both) < len(models):
            hourly = hourly[hourly["model"].isin(both)]
            models = both
    if model is None:
        if len(models) > 1:
            tot = hourly.groupby("model")["output_tokens"].sum()
            model = str(tot.idxmax())
            notes.append(f"the log holds {len(models)} models {models}; planning {model!r} (most output "
                         "tokens); each model has its own replicas: plan the others with model=")
        else:
            model = models[0]
    elif model not in models:
        raise ValueError(f"model {model!r} is not in the request log; models are {models}")
    tiers = sorted(map(str, pd.unique(hourly.loc[hourly["model"] == model, "tier"])))
    if tier is not None and tier not in tiers:
        if tier == "interactive":
            notes.append(f"the log has no 'interactive' tier (tiers {tiers}); planning every tier")
            tier = None
        else:
            raise ValueError(f"tier {tier!r} is not in the request log for model {model!r}; tiers are {tiers}")
    sel = _select(hourly, model, tier)
    if log.history_label is not None and _select(log.per_minute, model, tier).empty:
        raise ValueError(f"the request log has no requests of model {model!r}" + (f", tier {tier!r}" if tier else "")
                         + f", which the hourly history {log.history_label} forecasts; pass tier= one that both hold")
    if log.history_label is not None and len(sel):
        hours = pd.DatetimeIndex(sel["period_start"])
        notes.append(f"forecast from the hourly history {log.history_label} ({(hours.max() - hours.min()).days / 7 + 1 / 168:.0f} "
                     f"weeks, {hours.min():%Y-%m-%d} to {hours.max():%Y-%m-%d}); lengths, burstiness, the busiest 60 "
                     f"minutes and the simulated requests from the request log ({log.log.span_s / 3600:.3g} h)")
    if sel["requests"].sum() == 0 or sel["output_tokens"].sum() == 0:
        raise ValueError(f"the request log has no requests with output tokens for model {model!r}"
                         + (f", tier {tier!r}" if tier else ""))
    return Traffic(model, tier, sel, tuple(notes))


@dataclass(frozen=True)
class Demand:
    """Step 2, :func:`forecast_demand`: the peak the plan is for.

    Attributes
    ----------
    lead_time_weeks : float
        Lead time of the decision; ``horizon_weeks`` the forecast horizon it needs.
    horizon_weeks : int
    quantile : float
        Quantile of the forecast week's busiest hour planned for.
    demand_scale : float
        Known-event overlay on top of the forecast.
    peaks : dict
        ``{horizon: PeakForecast}`` for 1, 4 and 12 weeks and the plan's horizon.
    observed_peak_output_tps : float
        Busiest 60 minutes of the log, output tokens per second.
    output_tps, input_tps, request_rate : float
        The planned peak: tokens per second and requests per second.
    input_per_output : float
        Input tokens per output token of the selection.
    mean_input_tokens, mean_output_tokens : float
        Tokens per request of the selection.
    notes : tuple of str
    busiest : dict or None
        The busiest 60 minutes of the selection by output tokens
        (:func:`capbook.logs.stats.busiest_window`: ``start``, ``end``, ``requests``,
        ``output_tps``, ``whole_log``, ...), the window ``capbook trace`` prints too.
    """

    lead_time_weeks: float
    horizon_weeks: int
    quantile: float
    demand_scale: float
    peaks: dict
    observed_peak_output_tps: float
    output_tps: float
    input_tps: float
    request_rate: float
    input_per_output: float
    mean_input_tokens: float
    mean_output_tokens: float
    notes: tuple = ()
    busiest: dict | None = field(default=None, repr=False)


def _observed_peak(log: LogAggregates, model, tier) -> dict:
    """Busiest 60 minutes by output tokens for the selection (the whole span for shorter logs):
    :func:`capbook.logs.stats.busiest_window`, the definition ``capbook trace`` prints too.

    A log spanning less than an hour (first to last arrival) may still touch 60 clock minutes
    (58.4 minutes from 18:15:46 do); its busiest 60 minutes are then all of it, over its span,
    not over 3600 s.
    """
    return busiest_window(_select(log.per_minute, model, tier), log.log.span_s, log.log.start, log.log.end)


def _hours_text(hours: pd.DatetimeIndex, most: int = 3) -> str:
    """'2026-01-17 12:00, 2026-01-17 13:00 UTC' (the first ``most`` hours)."""
    return ", ".join(f"{t:%Y-%m-%d %H:00}" for t in hours[:most]) + (", …" if len(hours) > most else "") + " UTC"


def forecast_demand(log: LogAggregates, traffic: Traffic, *, lead_time_weeks: float = 4,
                    quantile: float = 0.9, demand_scale: float = 1.0, growth_per_week: float = 0.0) -> Demand:
    """The planned peak: the P-``quantile`` peak hour of the forecast at the decision's horizon.

    The horizon is :func:`horizon_for_lead_time` of ``lead_time_weeks``; the forecast is
    :func:`peak_forecast` of the selection's hourly output tokens (the busiest observed 60
    minutes, grown by ``growth_per_week``, when the log cannot be forecast), times
    ``demand_scale``. Input tokens and requests follow from the selection's mix.
    """
    lead = positive(lead_time_weeks, "lead_time_weeks")
    q = probability(quantile, "quantile")
    scale = number(demand_scale, "demand_scale", lo=0.0, lo_open=True, hi=MAX_DEMAND_SCALE)
    growth = number(growth_per_week, "growth_per_week", lo=GROWTH_PER_WEEK_RANGE[0], hi=GROWTH_PER_WEEK_RANGE[1])
    sel = traffic.hourly
    s_out = sel.groupby("period_start")["output_tokens"].sum().astype(float).sort_index()
    s_out.index = pd.DatetimeIndex(s_out.index)
    notes = []
    # an hour inside the span with no row had no requests: a zero, not a gap
    full = pd.date_range(s_out.index.min(), s_out.index.max(), freq="h")
    absent = full.difference(s_out.index)
    if len(absent):
        s_out = s_out.reindex(full, fill_value=0.0)
        if log.history_label is not None:
            notes.append(f"the hourly history {log.history_label} has no row for {len(absent)} hour(s) inside its "
                         f"span ({_hours_text(absent)}): counted as hours with no requests")
    history_weeks = len(s_out) / 168.0
    limit = horizon_limit_weeks(history_weeks)
    horizon = horizon_for_lead_time(lead)
    if horizon > limit:
        what = (f"the hourly history {log.history_label}" if log.history_label is not None else "the request log")
        span = f"{history_weeks:.3g} weeks" if history_weeks >= 1 else f"{len(s_out)} hour(s)"
        raise ValueError(f"lead_time_weeks={lead:g} (a {horizon}-week horizon) is further ahead than {what} can "
                         f"tell: it spans {span}, and a plan looks at most "
                         f"{HORIZON_HISTORY_FACTOR:g}× its history's length ahead (never less than "
                         f"{max(HORIZONS)} weeks): at most {limit:g} weeks here; pass a lead_time_weeks of at most "
                         f"{math.floor(limit):g}, or a longer history")
    tot_in, tot_out, tot_req = (float(sel[c].sum()) for c in ("input_tokens", "output_tokens", "requests"))
    ratio = tot_in / tot_out
    busiest = _observed_peak(log, traffic.model, traffic.tier)
    observed = busiest["output_tps"]
    try:
        peaks = peak_forecast(s_out, sorted(set(HORIZONS) | {horizon}), quantile=q,
                              growth_per_week=growth, observed_peak_tps=observed)
    except ValueError as exc:
        src = f"the hourly history {log.history_label}" if log.history_label is not None else "the request log"
        raise ValueError(f"forecast from {src}: {exc}") from None
    pk = peaks[horizon]
    idle = s_out.index[(s_out <= 0).to_numpy()]
    if len(idle):
        notes.append(f"{len(idle)} hour(s) with no output tokens ({_hours_text(idle)}): hours of no demand, not "
                     + ("gaps" if pk.method == "observed" else "gaps, and forecast (one token each in the bands' "
                        "log errors)"))
    if pk.method == "observed":
        notes.append(f"forecast not possible: {pk.note}")
    elif pk.method != "calibrated" or "rough" in pk.note:
        notes.append(f"week-{horizon} forecast: {pk.note}")
    out_tps = pk.output_tps * scale
    mean_out = tot_out / tot_req
    if scale != 1:
        notes.append(f"demand scaled by {scale:g} on top of the forecast (an overlay for a known event)")
    return Demand(lead_time_weeks=lead, horizon_weeks=horizon, quantile=q, demand_scale=scale, peaks=peaks,
                  observed_peak_output_tps=observed, output_tps=out_tps, input_tps=out_tps * ratio,
                  request_rate=out_tps / mean_out, input_per_output=ratio, mean_input_tokens=tot_in / tot_req,
                  mean_output_tokens=mean_out, notes=tuple(notes), busiest=busiest)


@dataclass(frozen=True)
class Replica:
    """Step 3, :func:`rate_replica`: one replica at the slots the TPOT objective allows.

    Attributes
    ----------
    slo : SLO
        The objectives as checked (``tpot_percentile`` moves to one the sweep reports).
    slots : capbook.sweeps.sweep.SlotChoice
    service_time_s : float
        Mean seconds a request of the selection holds a slot at ``slots`` (T).
    rating : capbook.sweeps.replicas.ReplicaRating
    headroom : float
        Share of the rating planned on.
    need : capbook.sweeps.replicas.ReplicaNeed
        Replicas from the rating and headroom at the planned peak.
    notes : tuple of str
    """

    slo: SLO
    slots: object
    service_time_s: float
    rating: object
    headroom: float
    need: object
    notes: tuple = ()

    @property
    def floor(self) -> int:
        """Replicas 100 % busy with the token load (rating only, no headroom)."""
        return max(1, int(math.ceil(self.need.equivalents - 1e-9)))


def _split_rating(sweep, S: int, why: Exception):
    """A replica's rating when the sweep's input tokens/s at S exceed its concurrency-1 prefill rate.

    That happens when prompts are cached (prefix caching) or prefill is chunked into the decode
    steps, so the lowest level's TTFT is not the cost of a prompt at load. The measured operating
    point at S (output ``O`` and input ``I`` tokens/s) is kept exactly; the time is split as at the
    lowest level, where a request spends ``f = TTFT / (TTFT + output tokens × TPOT)`` of its time
    in prefill: ``R_in = I / f``, ``R_out = O / (1 - f)`` (so ``O / R_out + I / R_in = 1``).
    """
    tab = sweep.table
    n = tab["concurrency"].to_numpy(float)
    lo = tab.iloc[int(np.argmin(n))]
    f = float(lo["ttft_p50_s"]) / (float(lo["ttft_p50_s"]) + float(lo["mean_output_tokens"]) * float(lo["tpot_p50_s"]))
    out = float(np.interp(S, n, tab["output_throughput_tps"].to_numpy(float)))
    req = float(np.interp(S, n, tab["request_throughput_rps"].to_numpy(float)))
    inp = req * float(np.interp(S, n, tab["mean_input_tokens"].to_numpy(float)))
    if not (0 < f < 1 and out > 0 and inp > 0):
        raise ValueError(f"cannot rate a replica from sweep {sweep.name!r}: {why}") from None
    return ReplicaRating(out / (1 - f), inp / f,
                         source=f"{sweep.name} at concurrency {S:g}, {100 * f:.1f} % of the time in prefill")


def _checked_percentile(sweep, slo: SLO, notes: list) -> SLO:
    """The objectives with a TPOT percentile the sweep reports (:meth:`capbook.sweeps.sweep.Sweep.percentile_for`:
    the stricter one if it has it, else the median; a note says which)."""
    q_new, note = sweep.percentile_for("tpot", slo.tpot_percentile)
    if note is None:
        return slo
    notes.append(note)
    return dataclasses.replace(slo, tpot_percentile=q_new)


def rate_replica(sweep, demand: Demand, slo: SLO, headroom: float = 0.8) -> Replica:
    """Slots from the TPOT objective, the service time and the replica's rating from the sweep,
    and the replicas the rating and ``headroom`` give at the peak.

    Slots: :func:`capbook.sweeps.sweep.choose_slots`; rating: :func:`capbook.sweeps.replicas.rating_from_sweep`
    (or, where the sweep's input rate at S exceeds its prefill rate, the time split of
    ``_split_rating``); replicas: :func:`capbook.sweeps.replicas.replicas_for_tokens`.

    Raises
    ------
    ValueError
        When no measured concurrency meets the TPOT objective, or ``headroom`` is not in (0, 1].
    """
    h_room = probability(headroom, "headroom", hi_open=False)
    notes: list[str] = []
    slo = _checked_percentile(sweep, slo, notes)
    choice = choose_slots(sweep, slo.tpot_target_s, q=slo.tpot_percentile)
    if choice.S == 0:
        raise InfeasibleObjective(f"sweep {sweep.name!r} cannot meet p{slo.tpot_percentile} TPOT ≤ {slo.tpot_target_s:g} s "
                         f"at any measured concurrency ({choice.reason}); relax the TPOT objective or change hardware")
    S = int(choice.S)
    T = float(sweep.service_time_s(S, demand.mean_input_tokens, demand.mean_output_tokens))
    ratio = demand.input_per_output
    try:
        rating = rating_from_sweep(sweep, S)
    except ValueError as exc:
        rating = _split_rating(sweep, S, exc)
        tab = sweep.table
        sw_ratio = float(np.interp(S, tab["concurrency"], tab["mean_input_tokens"])
                         / np.interp(S, tab["concurrency"], tab["mean_output_tokens"]))
        msg = (f"rating: {exc}. The plan splits the replica's time at S between prefill and decode as at "
               f"the sweep's lowest level instead ({rating.source}): exact at the sweep's own mix "
               f"({sw_ratio:.1f} input tokens per output token)")
        if not 0.5 <= ratio / sw_ratio <= 2:
            msg += (f", an extrapolation for this log's {ratio:.1f}; if the sweep's prompts were cached (prefix "
                    "caching), the log's are unlikely to be, and the input rating is optimistic")
        notes.append(msg + "; measure prefill on its own to do better")
    need = replicas_for_tokens(demand.output_tps, demand.input_tps, rating, h_room)
    notes += [f"sweep: {n}" for n in getattr(sweep, "notes", [])]
    return Replica(slo, choice, T, rating, h_room, need, tuple(notes))


@dataclass(frozen=True)
class QueueingCheck:
    """Step 4, :func:`check_queueing`: the two queueing models of the book at the peak.

    Attributes
    ----------
    erlang_replicas : int
        Fewest pooled replicas meeting ``P(wait > wait_target_s) ≤ late_share`` (Erlang C).
    loadq_replicas : int or None
        Fewest pooled replicas meeting the TTFT tail in the load-dependent model of continuous
        batching (None when it does not apply; see ``notes``).
    notes : tuple of str
    """

    erlang_replicas: int
    loadq_replicas: int | None
    notes: tuple = ()


def check_queueing(sweep, demand: Demand, replica: Replica) -> QueueingCheck:
    """Erlang C (:func:`capbook.plan.fleet.replicas_for_routing`, pooled) and the load-dependent
    model (:func:`capbook.engine.loadqueue.replicas_needed`) at the planned peak."""
    slo, S, lam = replica.slo, int(replica.slots.S), demand.request_rate
    mean_in, mean_out = demand.mean_input_tokens, demand.mean_output_tokens
    erl = int(replicas_for_routing(lam, S, replica.service_time_s, slo.wait_target_s, slo.late_share, "pooled"))
    notes, lq_n = [], None
    pf_mean = float(sweep.prefill_time(mean_in))
    if erl * S > LOADQ_MAX_SLOTS:
        # the model's states grow with replicas × slots: beyond this its memory and time are not bounded
        notes.append(f"load-dependent model not used: {erl:,} replicas × {S} slots is more than the "
                     f"{LOADQ_MAX_SLOTS:,} slots it solves; Erlang C and the rating size the fleet")
    elif pf_mean >= slo.ttft_target_s:
        # TTFT >= prefill, so the model's search could only fail, slowly (it doubles to 2**20)
        notes.append(f"load-dependent model not used: the mean prompt ({mean_in:,.0f} tokens) alone takes "
                     f"{pf_mean:.2f} s to prefill, not less than the TTFT objective of {slo.ttft_target_s:g} s")
    else:
        try:
            lq_n = int(loadqueue.replicas_needed(sweep, lam, S, slo.ttft_target_s, slo.ttft_quantile,
                                                 input_tokens=mean_in, output_tokens=mean_out))
        except ValueError as exc:
            notes.append(f"load-dependent model not used: {exc}")
    return QueueingCheck(erl, lq_n, tuple(notes))


@dataclass(frozen=True)
class EngineCheck:
    """Step 5, :func:`check_engine`: the engine model of :mod:`capbook.engine.predict` on one replica.

    Attributes
    ----------
    model : str or None
        The model relied on (``"simulation"``); None when the sweep could not be fitted (the
        other fields are then None too; see ``notes``).
    saturation_rps : float or None
        Requests per second one replica saturates at.
    max_rate_rps : float or None
        Highest rate per replica meeting p99 TTFT within the objective (None: none does).
    replicas : int or None
        Replicas that rate implies for the planned peak.
    ttft_p99_s : float or None
        p99 TTFT per replica at the rate the serving count gives each.
    input_tokens, output_tokens : float or None
        Request lengths asked about (the selection's means).
    notes : tuple of str
    hardware : tuple of str
        The replica's hardware and model facts the engine model assumed, one line each with its
        source and the flag that overrides it (:meth:`capbook.engine.hardware.Hardware.assumptions`).
    extrapolation : str or None
        How far the prediction at the per-replica rate reaches past the measured points
        (:meth:`capbook.engine.stepmodel.EngineModel.extrapolation`).
    """

    model: str | None = None
    saturation_rps: float | None = None
    max_rate_rps: float | None = None
    replicas: int | None = None
    ttft_p99_s: float | None = None
    input_tokens: float | None = None
    output_tokens: float | None = None
    notes: tuple = ()
    hardware: tuple = ()
    extrapolation: str | None = None


def check_engine(sweep, demand: Demand, replica: Replica, serving: int, seed: int = 2026) -> EngineCheck:
    """The engine model fitted to the sweep, asked about requests of the log's mean lengths (the
    step cost is per token, so it carries over from the sweep's mix): its saturation rate, the
    highest rate meeting p99 TTFT within the objective, the replicas that implies for the peak,
    and its p99 TTFT at ``peak / serving``."""
    slo, lam = replica.slo, demand.request_rate
    mean_in, mean_out = demand.mean_input_tokens, demand.mean_output_tokens
    try:
        hw = getattr(sweep, "hardware", None) or hardware_for(sweep)
        facts = tuple(hw.assumptions())
    except (ValueError, AttributeError, KeyError) as exc:
        facts = (f"hardware facts not read: {exc}",)
    try:
        eng = fitted_engine(sweep)
        reach = getattr(eng, "extrapolation", None)   # how far the plan's per-replica rate lies past the sweep
        reach = (reach(lam / max(serving, 1)) if callable(reach) else reach) or None
        eng = dataclasses.replace(eng, prompt_tokens=float(mean_in), output_tokens=float(mean_out),
                                  output_quantiles=None, prompt_p99=None, notes=list(eng.notes))
        p = predict(sweep, lam / max(serving, 1), ttft_p99_target_s=slo.ttft_target_s, seed=seed, requests=2000,
                    models=("simulation",), engine=eng)
    except ValueError as exc:
        return EngineCheck(notes=(f"engine model not used: {exc}",), hardware=facts)
    sim = p.models["simulation"]
    mr = sim.max_rate_rps
    notes = ()
    if mr is None:
        notes = (f"engine model: no rate meets p99 TTFT ≤ {slo.ttft_target_s:g} s on one replica (its TTFT at "
                 "the lightest load is already above it)",)
    sat = sim.saturation_rps if math.isfinite(sim.saturation_rps) else None   # None: not predicted (refused)
    return EngineCheck("simulation", sat, mr, int(math.ceil(lam / mr - 1e-9)) if mr else None,
                       sim.ttft_p99_s, float(mean_in), float(mean_out), notes, facts,
                       None if reach is None else str(reach))


def stack_fleet(demand: Demand, replica: Replica, queue: QueueingCheck, engine: EngineCheck | None = None, *,
                serving: int | None = None, ramp_per_min: float = 0.0125, lag_min: float = 8.0, spares: int = 1,
                zones: int | None = None):
    """Step 8: burst headroom and failure spares on the serving count, by :func:`capbook.plan.fleet.plan_fleet`.

    ``serving`` is the smallest fleet the simulation verified (:func:`capbook.plan.replay.verify_plan`);
    without it (the simulation skipped or failed) the serving count is Erlang C's, marked as not
    verified. The other checks are never stacked on it with a maximum: they are cross-checks
    (:attr:`CapacityPlan.checks`). The burst headroom (demand climbing at ``ramp_per_min`` of the
    peak a minute for ``lag_min`` minutes) and the spares stack on the serving count.

    Returns
    -------
    capbook.plan.fleet.FleetPlan
    """
    lam = demand.request_rate
    ramp = nonnegative(ramp_per_min, "ramp_per_min")
    return plan_fleet(lam, int(replica.slots.S), replica.service_time_s, replica.slo.wait_target_s,
                      replica.slo.late_share, routing="pooled", ramp_per_min=ramp * lam, lag_min=lag_min,
                      spares=spares, zones=zones, serving=serving)


@dataclass(frozen=True)
class ServingCheck:
    """Step 7, :func:`check_serving`: the queueing models at the serving count.

    Attributes
    ----------
    erlang_late_share : float
        ``P(wait > wait_target_s)`` at the peak on the serving replicas (Erlang C).
    loadq_ttft_s : float or None
        TTFT at the objective's quantile in the load-dependent model on the serving replicas.
    notes : tuple of str
    """

    erlang_late_share: float
    loadq_ttft_s: float | None
    notes: tuple = ()


def check_serving(sweep, demand: Demand, replica: Replica, queue: QueueingCheck, fleet_plan) -> ServingCheck:
    """Erlang C's late share and the load-dependent model's TTFT on ``fleet_plan.serving`` replicas."""
    serving = fleet_plan.serving
    late = fleet_plan.late_share(serving)
    notes, lq_ttft = [], None
    if queue.loadq_replicas is not None:
        try:
            model_q = loadqueue.from_sweep(sweep, int(replica.slots.S), replicas=serving,
                                           input_tokens=demand.mean_input_tokens,
                                           output_tokens=demand.mean_output_tokens)
            lq_ttft = float(model_q.solve(demand.request_rate).ttft_quantile(replica.slo.ttft_quantile))
        except ValueError as exc:
            notes.append(f"load-dependent model's TTFT at the serving count not available: {exc}")
    return ServingCheck(late, lq_ttft, tuple(notes))


#: Tenants the plan lists one by one (by demand); the others share one "all others" row.
TOP_TENANTS = 20


@dataclass(frozen=True, eq=False)
class TenantLimits:
    """Step 8, :func:`tenant_limits`: per-tenant tokens-per-minute limits.

    Attributes
    ----------
    capacity_tpm : float
        Tokens per minute the in-service fleet serves at the headroom.
    tpm : pandas.DataFrame
        Every tenant, indexed by tenant: ``demand`` (its p99 minute of tokens, grown as the peak
        grew), ``limit`` (tokens per minute, integer, never below ``floor_tpm``),
        ``granted_share`` (limit / demand; 1 where demand is 0), ``at_floor`` (the floor set
        the limit) and ``group`` (``"top"``, or ``"all others"`` when the tenant shares the
        pooled row of :attr:`table`).
    table : pandas.DataFrame
        What the plan shows: the :data:`TOP_TENANTS` tenants with the largest demand, then, when
        there are more, one row ``all others (k tenants)`` whose demand is the p99 minute of
        their tokens together and whose limit is the budget they share.
    floor_tpm : int
        The least limit any tenant gets, tokens per minute: the p99 prompt plus the p99 output
        of one request of the planned traffic, so every tenant can send its largest requests;
        a tenant seen rarely or not in the busiest minutes (p99 minute 0) gets this, never 0.
    notes : tuple of str
    """

    capacity_tpm: float
    tpm: pd.DataFrame = field(repr=False)
    table: pd.DataFrame = field(default=None, repr=False)
    floor_tpm: int = 0
    notes: tuple = ()


def _request_floor(log: LogAggregates, traffic: Traffic) -> int:
    """Tokens of one large request of the planned traffic: p99 input + p99 output tokens."""
    by = ("model",) if traffic.tier is None else ("model", "tier")
    st = log.log.token_stats(by=by).reset_index()
    st = _select(st, traffic.model, traffic.tier)
    if st.empty:
        return 1
    p99 = st.groupby("tokens")["p99"].max()
    return max(1, int(math.ceil(float(p99.get("input_tokens", 0.0)) + float(p99.get("output_tokens", 0.0)))))


def tenant_limits(log: LogAggregates, traffic: Traffic, demand: Demand, replica: Replica, fleet_plan,
                  reserve: float = 0.1, top: int = TOP_TENANTS) -> TenantLimits:
    """Tenant limits that sum below what the in-service fleet serves at its rating.

    ``fleet_plan`` is the plan's stacked fleet (serving from the fleet simulation when it
    verified one). A tenant's demand is its p99 minute of tokens, grown as the peak grew. The
    ``top`` tenants by demand get limits of their own (:func:`capbook.plan.fleet.allocate_tpm`,
    max-min fair); when there are more, the others are allocated as one pool (their p99 minute
    together, weighted by their number: max-min fair per tenant) and each of them is capped at
    its own demand within the pool's limit. No limit is below the floor
    (:attr:`TenantLimits.floor_tpm`): a log whose tenant column is per user holds thousands of
    tenants that most minutes do not see, whose p99 minute is 0.
    """
    res = number(reserve, "tpm_reserve", lo=0, hi=1, hi_open=True)
    top = integer(top, "top", minimum=1)
    ratio, rating = demand.input_per_output, replica.rating
    per_rep_out = replica.headroom / (1.0 / rating.output_tps + ratio / rating.input_tps)
    capacity_tpm = 60.0 * fleet_plan.in_service * per_rep_out * (1.0 + ratio)
    observed = demand.observed_peak_output_tps
    growth = demand.output_tps / observed if observed > 0 else 1.0
    notes = []
    pooled = None
    if log.has_tenants:
        pm = _select(log.per_minute, traffic.model, traffic.tier)
        tok = (pm["input_tokens"] + pm["output_tokens"]).groupby([pm["tenant"], pm["period_start"]]).sum()
        d = (tok.groupby(level=0).quantile(0.99) * growth)
        d.index = d.index.astype(str)
        d = d.sort_index(kind="stable").sort_values(ascending=False, kind="stable")
        if len(d) > top + 1:
            rest = d.index[top:]
            per_min = tok[tok.index.get_level_values(0).astype(str).isin(rest)].groupby(level=1).sum()
            pooled = (f"all others ({len(rest):,} tenants)", float(per_min.quantile(0.99)) * growth, rest)
        demands = {k: float(v) for k, v in d.items()}
    else:
        demands = {"all callers": 60.0 * (demand.output_tps + demand.input_tps)}
        notes.append("the log has no tenant column: one limit for all callers")
    floor = _request_floor(log, traffic) if log.has_tenants else 0
    shown = dict(list(demands.items())[:top]) if pooled else dict(demands)
    if pooled:
        shown[pooled[0]] = pooled[1]
    alloc = allocate_tpm(capacity_tpm, {k: max(v, floor) for k, v in shown.items()}, reserve=res,
                         weights={pooled[0]: len(pooled[2])} if pooled else None)
    lim = np.maximum(alloc["limit"].to_numpy(), floor)
    table = pd.DataFrame({"demand": [shown[k] for k in alloc.index], "limit": lim}, index=alloc.index)
    table["tenants"] = 1
    if pooled:
        table.loc[pooled[0], "tenants"] = len(pooled[2])
    full = pd.DataFrame({"demand": pd.Series(demands, dtype=float)})
    full["group"] = "top"
    if pooled:   # the others: each capped at its own demand within the pool's limit, never below the floor
        others = full.index.isin(pooled[2])
        own = np.floor(full.loc[others, "demand"].to_numpy() + 1e-9).astype(np.int64)
        full["limit"] = table["limit"].reindex(full.index).fillna(0).astype(np.int64)
        full.loc[others, "limit"] = np.maximum(np.minimum(own, int(table.loc[pooled[0], "limit"])), floor)
        full.loc[others, "group"] = "all others"
    else:
        full["limit"] = table["limit"].reindex(full.index)
    full["limit"] = full["limit"].astype(np.int64)
    full.index.name = table.index.name = "tenant"
    for f in (full, table):
        dem = f["demand"].to_numpy(float)
        f["granted_share"] = np.where(dem > 0, f["limit"] / np.where(dem > 0, dem, 1.0), 1.0)
    full["at_floor"] = full["limit"] == floor
    if float(table["limit"].sum()) > capacity_tpm * (1.0 - res) + 1:
        notes.append(f"the floors lift the limits to {float(table['limit'].sum()):,.0f} tokens/min, above the "
                     f"budget of {capacity_tpm * (1.0 - res):,.0f}: the fleet is too small to give every tenant "
                     "one large request a minute")
    return TenantLimits(capacity_tpm, full[["demand", "limit", "granted_share", "at_floor", "group"]],
                        table[["demand", "limit", "granted_share", "tenants"]], floor, tuple(notes))


# --------------------------------------------------------------------------------------------
# The plan
# --------------------------------------------------------------------------------------------
_KIND = {"token load": "floor", "fleet simulation": "queueing", "Erlang C (not verified)": "queueing",
         "burst headroom": "burst", "failure spare": "spare", "total": "total"}


def _count_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """Replica counts as text: whole numbers, ``difference`` signed, "–" where missing."""
    def cell(col, x):
        if x is None or x != x:
            return "–"
        return f"{int(x):+d}" if col == "difference" else f"{int(x)}"
    return pd.DataFrame({c: [cell(c, x) for x in frame[c]] for c in frame.columns}, index=frame.index)


@dataclass(frozen=True, eq=False)
class CapacityPlan:
    """A capacity plan and every number behind it (build it with :func:`capacity_plan`).

    The plan is the results of its steps, each a frozen object with the numbers of one chapter
    and its own ``notes``; the numbers readers ask for most are also properties of the plan
    (``plan.output_tps`` is ``plan.demand.output_tps``, ``plan.serving`` is
    ``plan.fleet.serving``).

    Attributes
    ----------
    source : dict
        Where the data came from: ``requests``, ``sweep``, ``model``, ``tier``, and the sweep's ``gpu`` and
        ``tensor_parallel`` (None when it does not record them).
    traffic : Traffic
        The model and tier planned (:func:`select_traffic`).
    demand : Demand
        The planned peak (:func:`forecast_demand`): ``peaks``, ``output_tps``, ``input_tps``,
        ``request_rate``, ``mean_input_tokens``, ``mean_output_tokens``,
        ``observed_peak_output_tps``, ``horizon_weeks``, ``lead_time_weeks``, ``quantile``,
        ``demand_scale``.
    replica : Replica
        Slots, service time, rating and replicas by rating (:func:`rate_replica`): ``slo`` (the
        objectives as checked), ``slots``, ``service_time_s``, ``rating``, ``headroom``, ``need``.
    queue : QueueingCheck
        ``erlang_replicas`` and ``loadq_replicas`` at the peak (:func:`check_queueing`).
    engine_check : EngineCheck
        The engine model on one replica (:func:`check_engine`).
    fleet : capbook.plan.fleet.FleetPlan
        The serving count with the burst headroom and failure spare stacked on it
        (:func:`stack_fleet`): ``serving``, ``burst``, ``in_service``, ``spare``.
    at_serving : ServingCheck
        ``erlang_late_share`` and ``loadq_ttft_s`` on the serving replicas (:func:`check_serving`).
    limits : TenantLimits
        ``capacity_tpm`` and the per-tenant limits ``tpm`` (:func:`tenant_limits`).
    verification : Verification
        The fleet simulation's verdict (:func:`capbook.plan.replay.verify_plan`): ``status``, ``reason``, ``serving``,
        ``tried`` (every size simulated) and ``sim`` (the summary at the serving count).
    input_notes : tuple of str
        Notes on how the inputs were chosen (e.g. :func:`capbook.app.datasets.plan_inputs`).
    pricing : capbook.cost.pricing.PlanPricing or None
        The plan's cost, when priced (:func:`~capbook.cost.pricing.priced`); printed and exported with the plan.
    """

    source: dict
    traffic: Traffic
    demand: Demand
    replica: Replica
    queue: QueueingCheck
    engine_check: EngineCheck
    fleet: object
    at_serving: ServingCheck
    limits: TenantLimits
    verification: Verification = _SKIPPED
    input_notes: tuple = ()
    pricing: object = None
    autoscaling: object = None
    checks: object = None

    # -- the plan's numbers under their usual names (each read from the step that holds it) ----
    @property
    def lead_time_weeks(self) -> float:
        """Lead time of the decision, weeks (``demand.lead_time_weeks``)."""
        return self.demand.lead_time_weeks

    @property
    def horizon_weeks(self) -> int:
        """Forecast horizon the lead time needs, weeks (``demand.horizon_weeks``)."""
        return self.demand.horizon_weeks

    @property
    def quantile(self) -> float:
        """Quantile of the forecast week's busiest hour planned for (``demand.quantile``)."""
        return self.demand.quantile

    @property
    def demand_scale(self) -> float:
        """Known-event multiplier on top of the forecast (``demand.demand_scale``)."""
        return self.demand.demand_scale

    @property
    def peaks(self) -> dict:
        """``{horizon: PeakForecast}`` for 1, 4 and 12 weeks and the plan's horizon (``demand.peaks``)."""
        return self.demand.peaks

    @property
    def observed_peak_output_tps(self) -> float:
        """Busiest 60 minutes of the log, output tokens per second (``demand.observed_peak_output_tps``)."""
        return self.demand.observed_peak_output_tps

    @property
    def output_tps(self) -> float:
        """The planned peak, output tokens per second (``demand.output_tps``)."""
        return self.demand.output_tps

    @property
    def input_tps(self) -> float:
        """The planned peak, input tokens per second (``demand.input_tps``)."""
        return self.demand.input_tps

    @property
    def request_rate(self) -> float:
        """The planned peak, requests per second (``demand.request_rate``)."""
        return self.demand.request_rate

    @property
    def mean_input_tokens(self) -> float:
        """Input tokens per request of the selection (``demand.mean_input_tokens``)."""
        return self.demand.mean_input_tokens

    @property
    def mean_output_tokens(self) -> float:
        """Output tokens per request of the selection (``demand.mean_output_tokens``)."""
        return self.demand.mean_output_tokens

    @property
    def slo(self) -> SLO:
        """The objectives as checked (``tpot_percentile`` one the sweep reports) (``replica.slo``)."""
        return self.replica.slo

    @property
    def slots(self) -> object:
        """Slots per replica the TPOT objective allows (``replica.slots``)."""
        return self.replica.slots

    @property
    def service_time_s(self) -> float:
        """Mean seconds a request holds a slot at those slots (T) (``replica.service_time_s``)."""
        return self.replica.service_time_s

    @property
    def rating(self) -> object:
        """One replica's rating (``replica.rating``)."""
        return self.replica.rating

    @property
    def headroom(self) -> float:
        """Share of the rating planned on (``replica.headroom``)."""
        return self.replica.headroom

    @property
    def need(self) -> object:
        """Replicas from the rating and headroom at the planned peak (``replica.need``)."""
        return self.replica.need

    @property
    def floor(self) -> int:
        """Replicas 100 % busy with the token load (rating only, no headroom) (``replica.floor``)."""
        return self.replica.floor

    @property
    def erlang_replicas(self) -> int:
        """Replicas Erlang C asks for at the peak (``queue.erlang_replicas``)."""
        return self.queue.erlang_replicas

    @property
    def loadq_replicas(self) -> int | None:
        """Replicas the load-dependent queue asks for at the peak (``queue.loadq_replicas``)."""
        return self.queue.loadq_replicas

    @property
    def erlang_late_share(self) -> float:
        """Erlang C's share of late requests on the serving replicas (``at_serving.erlang_late_share``)."""
        return self.at_serving.erlang_late_share

    @property
    def loadq_ttft_s(self) -> float | None:
        """The load-dependent queue's TTFT on the serving replicas, seconds (``at_serving.loadq_ttft_s``)."""
        return self.at_serving.loadq_ttft_s

    @property
    def serving(self) -> int:
        """Serving replicas (the simulation's count when verified, else Erlang C's) (``fleet.serving``)."""
        return self.fleet.serving

    @property
    def burst(self) -> int:
        """Burst headroom replicas on top of the serving ones (``fleet.burst``)."""
        return self.fleet.burst

    @property
    def spares(self) -> int:
        """N+k failure spares asked for (``fleet.spares``)."""
        return self.fleet.spares

    @property
    def zones(self) -> int:
        """Zones the fleet is spread over (``fleet.zones``)."""
        return self.fleet.zones

    @property
    def in_service(self) -> int:
        """Serving plus burst replicas (``fleet.in_service``)."""
        return self.fleet.in_service

    @property
    def spare(self) -> int:
        """Failure spare replicas stacked on the fleet in service (``fleet.spare``)."""
        return self.fleet.spare

    @property
    def total(self) -> int:
        """Replicas to buy: serving, burst and spares (``fleet.total``)."""
        return self.fleet.total

    @property
    def capacity_tpm(self) -> float:
        """Tokens per minute the fleet carries within the objectives (``limits.capacity_tpm``)."""
        return self.limits.capacity_tpm

    @property
    def tpm(self) -> pd.DataFrame:
        """Per-tenant tokens-per-minute limits (``limits.tpm``)."""
        return self.limits.tpm

    @property
    def sim(self) -> dict:
        """The fleet simulation's summary at the serving count, empty when skipped (``verification.sim``)."""
        return self.verification.sim

    #: The plan's numbers under their usual names: property name -> the step that holds it.
    SHORTCUTS = {name: step for step, names in (
        ("demand", ("lead_time_weeks", "horizon_weeks", "quantile", "demand_scale", "peaks",
                    "observed_peak_output_tps", "output_tps", "input_tps", "request_rate", "mean_input_tokens",
                    "mean_output_tokens")),
        ("replica", ("slo", "slots", "service_time_s", "rating", "headroom", "need", "floor")),
        ("queue", ("erlang_replicas", "loadq_replicas")),
        ("at_serving", ("erlang_late_share", "loadq_ttft_s")),
        ("fleet", ("serving", "burst", "spares", "zones", "in_service", "spare", "total")),
        ("limits", ("capacity_tpm", "tpm")),
        ("verification", ("sim",))) for name in names}

    # -- the replica count -----------------------------------------------------------------
    @property
    def verified(self) -> bool | None:
        """True when the serving count is the smallest fleet the simulation verified, False when
        no fleet size met the objectives, None when the simulation was skipped."""
        return self.verification.met

    @property
    def verified_total(self) -> int | None:
        """The headline when it is verified (None when the simulation was skipped or failed)."""
        return self.total if self.verified else None

    @property
    def notes(self) -> tuple:
        """Caveats of every step, in order: fallbacks, mismatches, anything a reviewer should know."""
        out = ()
        for step in (self.traffic, self.demand, self.replica, self.queue, self.engine_check, self.verification,
                     self.at_serving, self.limits):
            out += step.notes
            if step is self.traffic:
                out += self.input_notes
        return out

    def _busiest_text(self) -> str:
        """The observed peak the plan grew from, named: the busiest 60 minutes (a sliding window,
        as ``capbook trace`` prints it beside the busiest clock hour), or the whole of a shorter log."""
        b = self.demand.busiest
        if b is None:
            return f"{self.observed_peak_output_tps:,.0f} output tokens/s"
        figures = (f"{b['requests']:,} requests of the planned traffic ({b['request_rate']:,.3g}/s), "
                   f"{b['output_tps']:,.0f} output tokens/s")
        if b["whole_log"]:
            span = "" if b["start"] is None or b["end"] is None else \
                f", {b['start']:%Y-%m-%d %H:%M:%S}–{b['end']:%H:%M:%S} UTC"
            return (f"the log spans {format_duration(b['seconds'])}, less than an hour, so its whole span stands "
                    f"for it{span}: {figures}")
        return (f"the busiest 60 minutes by output tokens, {b['start']:%Y-%m-%d %H:%M}–{b['end']:%H:%M} UTC (a "
                f"sliding window, not a clock hour; capbook trace prints both): {figures}")

    def headline(self) -> str:
        """The first line of :meth:`render`: the count, and how it was verified."""
        head = f"Capacity plan: {self.total} replicas of {self.source['model']} for week {self.horizon_weeks}"
        v = self.verification
        tail = f"{self.serving} serving + {self.burst.replicas} burst + {self.spare} spare"
        if v.status == "verified":
            return head + f" ({tail}; the serving count is the smallest fleet the simulation verifies)"
        if v.status == "impossible":
            return head + f" ({tail}, Erlang C's count) -- NOT VERIFIED: {v.reason}"
        if v.status == "not met":
            return head + f" ({tail}, Erlang C's count) -- NOT VERIFIED: the fleet simulation misses the " \
                f"objectives at every size tried; {v.reason}"
        return head + f" ({tail}; Erlang C's serving count, not verified by simulation)"

    @property
    def binding(self) -> str:
        """What set the serving count: ``"fleet simulation"`` or, unverified, ``"Erlang C"``."""
        return "fleet simulation" if self.verified else "Erlang C"

    def stages(self) -> pd.DataFrame:
        """The waterfall: token load → fleet simulation (or Erlang C, unverified) → burst →
        spare → total.

        Columns ``added`` (replicas the stage adds), ``replicas`` (running total) and ``kind``.
        """
        serving_stage = "fleet simulation" if self.verified else "Erlang C (not verified)"
        steps = [
            ("token load", min(self.floor, self.serving)),
            (serving_stage, self.serving - min(self.floor, self.serving)),
            ("burst headroom", self.burst.replicas),
            ("failure spare", self.spare),
        ]
        rows, n = [], 0
        for name, add in steps:
            n += add
            rows.append((name, add, n, _KIND[name]))
        rows.append(("total", self.total, self.total, "total"))
        return pd.DataFrame(rows, columns=["stage", "added", "replicas", "kind"]).set_index("stage")

    def cross_checks(self) -> pd.DataFrame:
        """The models beside the simulation: replicas each asks for at the peak, its difference
        from the simulated serving count, and why (:func:`capbook.plan.replay.explain_checks`)."""
        if self.checks is not None:
            return self.checks
        rows = [{"model": k, "replicas": n, "difference": None, "why": "the fleet simulation was skipped"}
                for k, n in self._check_counts().items()]
        return pd.DataFrame(rows).set_index("model")

    def cross_checks_shown(self) -> pd.DataFrame:
        """:meth:`cross_checks` for reading: whole counts, signed differences, and "–" where a
        model gives no count or there is no simulated count to compare with."""
        cc = self.cross_checks()
        return pd.concat([_count_cells(cc[["replicas", "difference"]]), cc[["why"]]], axis=1)

    def _check_counts(self) -> dict:
        return {"rating with headroom": int(max(self.need.replicas, self.floor)),
                "Erlang C": int(self.erlang_replicas),
                "load-dependent queue": None if self.loadq_replicas is None else int(self.loadq_replicas),
                "engine model, one replica": self.engine_check.replicas}

    def horizons(self) -> pd.DataFrame:
        """Planned peak and replicas (rating with headroom) per horizon, with the decision each
        horizon feeds."""
        ratio = self.input_tps / self.output_tps if self.output_tps > 0 else 0.0
        rows = []
        for h, p in sorted(self.peaks.items()):
            out = p.output_tps * self.demand_scale
            need = replicas_for_tokens(out, out * ratio, self.rating, self.headroom)
            rows.append({"horizon_weeks": h, "decision": HORIZONS.get(h, f"lead time of {h} weeks"),
                         "method": p.method, "peak_output_tps": out, "peak_input_tps": out * ratio,
                         "replicas_by_rating": need.replicas, "planned": h == self.horizon_weeks})
        return pd.DataFrame(rows).set_index("horizon_weeks")

    # -- exports -----------------------------------------------------------------------------
    def table(self) -> pd.DataFrame:
        """Every number of the plan, one row each: ``step``, ``quantity``, ``value``, ``unit``."""
        r = []

        def add(step, quantity, value, unit):
            r.append({"step": step, "quantity": quantity, "value": value, "unit": unit})

        pk = self.peaks[self.horizon_weeks]
        add("data", "request log", self.source["requests"], "")
        add("data", "sweep", self.source["sweep"], "")
        add("data", "model / tier", f"{self.source['model']} / {self.source['tier']}", "")
        add("objectives", "SLO", self.slo.describe(), "")
        add("forecast", "lead time", self.lead_time_weeks, "weeks")
        add("forecast", "horizon", self.horizon_weeks, "weeks")
        add("forecast", "method", pk.method, "")
        add("forecast", "observed peak hour, output", self.observed_peak_output_tps, "tokens/s")
        b = self.demand.busiest
        if b is not None:
            add("forecast", "observed peak hour: busiest 60 minutes by output tokens" if not b["whole_log"] else
                "observed peak hour: the whole log (shorter than an hour)",
                "" if b["start"] is None else f"{b['start']:%Y-%m-%dT%H:%M:%S}Z", "start (UTC)")
            add("forecast", "observed peak hour, requests", b["requests"], "requests")
        add("forecast", f"P{100 * self.quantile:g} peak hour, output", pk.output_tps, "tokens/s")
        if self.demand_scale != 1:
            add("forecast", "demand scale (overlay)", self.demand_scale, "x")
        add("peak", "output tokens", self.output_tps, "tokens/s")
        add("peak", "input tokens", self.input_tps, "tokens/s")
        add("peak", "requests", self.request_rate, "requests/s")
        add("peak", "mean input tokens per request", self.mean_input_tokens, "tokens")
        add("peak", "mean output tokens per request", self.mean_output_tokens, "tokens")
        add("replica", "slots (S)", self.slots.S, "sequences")
        add("replica", "service time (T)", self.service_time_s, "s")
        add("replica", "output rating", self.rating.output_tps, "tokens/s")
        add("replica", "input rating", self.rating.input_tps, "tokens/s")
        add("rating", "output replica-equivalents", self.need.output_equivalents, "replicas")
        add("rating", "input replica-equivalents", self.need.input_equivalents, "replicas")
        add("rating", "headroom", self.headroom, "share")
        add("rating", "replicas by rating", self.need.replicas, "replicas")
        add("queueing", "Erlang C replicas", self.erlang_replicas, "replicas")
        add("queueing", f"P(wait > {self.slo.wait_target_s:g} s) at the serving count", self.erlang_late_share, "share")
        add("queueing", "load-dependent replicas", self.loadq_replicas if self.loadq_replicas is not None else "n/a",
            "replicas")
        if self.loadq_ttft_s is not None:
            add("queueing", f"model p{100 * self.slo.ttft_quantile:g} TTFT at the serving count", self.loadq_ttft_s, "s")
        e = self.engine_check
        if e.model is not None:
            add("engine model", "model", e.model, "")
            add("engine model", "saturation per replica", e.saturation_rps, "requests/s")
            add("engine model", "highest rate per replica meeting p99 TTFT", e.max_rate_rps
                if e.max_rate_rps is not None else "none", "requests/s")
            add("engine model", "replicas the engine model needs", e.replicas or "n/a", "replicas")
            if e.ttft_p99_s is not None:
                add("engine model", "p99 TTFT per replica at the serving count", e.ttft_p99_s, "s")
        v = self.verification
        add("fleet", "serving replicas", self.serving, "replicas")
        add("fleet", "serving count set by", self.binding, "")
        add("fleet", "burst headroom", self.burst.replicas, "replicas")
        add("fleet", "in service through a failure", self.in_service, "replicas")
        add("fleet", "failure spare", self.spare, "replicas")
        add("fleet", "total replicas", self.total, "replicas")
        for name, row in self.cross_checks().iterrows():
            if row["replicas"] is not None and row["replicas"] == row["replicas"]:
                add("cross-check", f"{name}: replicas", int(row["replicas"]), "replicas")
                if row["difference"] is not None and row["difference"] == row["difference"]:
                    add("cross-check", f"{name}: difference from the simulation", int(row["difference"]), "replicas")
        add("limits", "fleet capacity", self.capacity_tpm, "tokens/min")
        lim = self.limits
        shown = lim.table if lim.table is not None else self.tpm
        for tenant, row in shown.iterrows():
            add("limits", f"limit for {tenant}", int(row["limit"]), "tokens/min")
        if lim.floor_tpm:
            add("limits", "least limit of any tenant (p99 prompt + p99 output of one request)", lim.floor_tpm,
                "tokens/min")
            add("limits", "tenants", len(self.tpm), "tenants")
        add("simulation", "verification", v.status, "")
        add("simulation", "verified replicas", self.verified_total if self.verified else "not verified", "replicas")
        if self.sim:
            add("simulation", "router", v.router, "")
            add("simulation", "serving replicas simulated", self.sim["replicas"], "replicas")
        if self.sim:
            add("simulation", f"p{100 * self.slo.ttft_quantile:g} TTFT", self.sim["ttft_q_s"], "s")
        for k, name, unit in (("ttft_p99_s", "p99 TTFT, first replication", "s"), ("tpot_p99_s", "p99 TPOT", "s"),
                              ("goodput_share", "goodput", "share"), ("slot_utilisation", "slot utilisation", "share"),
                              ("kv_utilisation", "KV-cache utilisation", "share")):
            if k in self.sim and not (k == "ttft_p99_s" and self.slo.ttft_quantile == 0.99):
                add("simulation", name, self.sim[k], unit)
        if self.sim:
            add("simulation", f"p{100 * self.slo.ttft_quantile:g} TTFT 95 % margin", self.sim["ttft_q_margin_s"], "s")
            add("simulation", "replications", self.sim["seeds"], "")
            add("simulation", "requests per replication", self.sim["replayed_requests"], "requests")
            add("simulation", "arrival rate replayed", self.sim["measured_rate"], "requests/s")
        if v.reason and not self.verified:
            add("simulation", "why not verified", v.reason, "")
        out = pd.DataFrame(r)
        if self.pricing is not None:
            out = pd.concat([out, self.pricing.table()], ignore_index=True)
        if self.autoscaling is not None:
            out = pd.concat([out, self.autoscaling.table()], ignore_index=True)
        return out

    def to_csv(self, path) -> Path:
        """Write :meth:`table` as CSV; returns the path."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        self.table().to_csv(p, index=False)
        return p

    def to_markdown(self, path=None) -> str:
        """The plan as a Markdown review document; written to ``path`` when given."""
        text = self.render(markdown=True)
        if path is not None:
            p = Path(path)
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, encoding="utf-8")
        return text

    def _hardware_lines(self, markdown: bool) -> list:
        """The "Hardware and model" section: the facts the engine model assumed, and how far its
        prediction extrapolates (when the engine states it)."""
        ec = self.engine_check
        facts = getattr(ec, "hardware", ()) or ()
        reach = getattr(ec, "extrapolation", None)
        if not facts and reach is None:
            return []
        md = _md_text if markdown else str
        out = [f"{'## ' if markdown else ''}Hardware and model", "",
               "What the engine model assumed of one replica, where each fact came from, and the flag that "
               "overrides it:", ""]
        out += [f"- {md(line)}" for line in facts]
        if reach is not None:
            out.append(f"- Extrapolation: {md(reach)}")
        return out + [""]

    def render(self, markdown: bool = False) -> str:
        """The plan as text for a terminal (or Markdown with ``markdown=True``)."""
        pk = self.peaks[self.horizon_weeks]
        h1 = "# " if markdown else ""
        h2 = "## " if markdown else ""
        md = _md_text if markdown else str     # names and paths are the reader's: no markup from them
        lines = [f"{h1}{md(self.headline())}", ""]
        lines += [f"- Data: {md(self.source['requests'])} (model {md(self.source['model'])}, tier "
                  f"{md(self.source['tier'])}); sweep {md(self.source['sweep'])}",
                  f"- Objectives: {self.slo.describe()}",
                  f"- Lead time {self.lead_time_weeks:g} weeks → forecast horizon {self.horizon_weeks} weeks "
                  f"({HORIZONS.get(self.horizon_weeks, 'custom horizon')})",
                  f"- Planned peak (P{100 * self.quantile:g} peak hour, {pk.method}): "
                  f"{self.output_tps:,.0f} output + {self.input_tps:,.0f} input tokens/s = "
                  f"{self.request_rate:,.3g} requests/s at {self.mean_output_tokens:,.0f} output tokens a request",
                  f"- Busiest observed hour: {self._busiest_text()}",
                  f"- Replica: S = {self.slots.S} slots, T = {self.service_time_s:.2f} s; rating "
                  f"{self.rating.output_tps:,.0f} output / {self.rating.input_tps:,.0f} input tokens/s",
                  f"- Serving replicas set by: {self.binding}"]
        v = self.verification
        if v.status in ("not met", "impossible"):
            lines.append(f"- **NOT VERIFIED**: {md(v.reason)}" if markdown else
                         f"- NOT VERIFIED: {v.reason}")
        elif v.status == "skipped":
            lines.append("- The fleet simulation was skipped: the serving count is Erlang C's, not verified "
                         "against the log")
        lines.append("")
        lines += self._hardware_lines(markdown)
        lines += [f"{h2}Replicas", "", _frame_text(self.stages()[["added", "replicas"]], markdown), ""]
        if self.sim:
            s = self.sim
            qn = f"p{100 * self.slo.ttft_quantile:g}"
            lines += [f"{h2}Fleet simulation", "",
                      f"{s['replayed_requests']:,} requests of the log's busiest hours, time-scaled to "
                      f"{self.request_rate:.3g} requests/s (replayed at {s['measured_rate']:.3g}), {s['seeds']} "
                      f"replications, through {s['replicas']} engine replica{'s' if s['replicas'] != 1 else ''} behind the {v.router} router "
                      f"(continuous batching, chunked prefill, KV cache, the step cost fitted to the sweep): "
                      f"{qn} TTFT {s['ttft_q_s']:.3f} s ± {s['ttft_q_margin_s']:.3f} s (95 %; objective "
                      f"{self.slo.ttft_target_s:g} s), p99 TPOT {1000 * s['tpot_p99_s']:.1f} ms, goodput "
                      f"{100 * s['goodput_share']:.2f} ± {100 * s['goodput_margin']:.2f} % of requests (target {100 * self.slo.goodput_share:g} %), "
                      f"slot utilisation {100 * s['slot_utilisation']:.1f} %"
                      + (f", KV cache {100 * s['kv_utilisation']:.1f} %" if s.get('kv_utilisation') == s.get('kv_utilisation')
                         else "") + f", {s['refused']:,} refused.", ""]
            tried = v.tried
            if tried is not None and len(tried):
                t = tried.copy()
                t["ttft_q_s"] = t["ttft_q_s"].round(3)
                t["ttft_q_margin_s"] = t["ttft_q_margin_s"].round(3)
                t["goodput_share"] = t["goodput_share"].round(4)
                t["goodput_margin"] = t["goodput_margin"].round(4)
                lines += [f"Fleet sizes simulated ({v.seconds:.1f} s; margins are 95 % half-widths):", "",
                          _frame_text(t[["ttft_q_s", "ttft_q_margin_s", "goodput_share", "goodput_margin", "seeds",
                                         "meets"]], markdown),
                          ""]
            if v.status == "verified":
                lines += [f"Reproduce: `capbook simulate --replicas {self.serving}` meets the objectives"
                          + (f", `--replicas {self.serving - 1}` does not" if self.serving > 1 else
                             " (one replica, the fewest there can be)")
                          + " (same log, sweep and objectives).", ""]
        cc = self.cross_checks()
        lines += [f"{h2}Cross-checks: the models beside the simulation", "",
                  _frame_text(_count_cells(cc[["replicas", "difference"]]), markdown), ""]
        lines += [f"- {md(name)}: {md(row['why'])}" for name, row in cc.iterrows()] + [""]
        lines += [f"{h2}Horizons", "", _frame_text(self.horizons()[["method", "peak_output_tps", "peak_input_tps",
                                                                     "replicas_by_rating", "decision"]], markdown), ""]
        lim = self.limits
        shown = lim.table if lim.table is not None else self.tpm
        cols = ["demand", "limit", "granted_share"] + (["tenants"] if len(shown) < len(self.tpm) else [])
        lines += [f"{h2}Per-tenant limits (tokens per minute)", "", _frame_text(shown[cols], markdown), ""]
        if lim.floor_tpm:
            more = (f" The {len(shown) - 1} tenants with the largest demand are listed; the other "
                    f"{len(self.tpm) - len(shown) + 1:,} share the last row: its demand is their p99 minute together, its "
                    "limit the budget they share, and each of them is also capped at its own demand (every "
                    "tenant's own limit is in tenants.csv, which capbook plan writes beside plan.csv)."
                    if len(shown) < len(self.tpm) else "")
            n = int((self.tpm["demand"] < lim.floor_tpm).sum())
            who = (f"{n:,} of {len(self.tpm):,} tenants have a p99 minute below it (rarely or never in the log's busy "
                   "minutes) and get that floor, never 0" if n else
                   "a tenant rarely or never in the log's busy minutes would get that floor, never 0")
            lines += [f"No limit is below {lim.floor_tpm:,} tokens per minute, the p99 prompt plus the p99 output "
                      f"of one request, so that every tenant can send its large requests: {who}.{more}", ""]
        if self.pricing is not None:
            lines += [self.pricing.render(markdown)]
        if self.autoscaling is not None:
            lines += [self.autoscaling.render(markdown)]
        if self.notes:
            lines += [f"{h2}Notes", ""] + [f"- {md(n)}" for n in self.notes] + [""]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()

    def chart(self):
        """Altair chart: the replica waterfall beside the planned peak per horizon."""
        import altair as alt

        from capbook import theme as charts
        st = self.stages().reset_index()
        water = waterfall_chart(st[["stage", "added", "kind"]],
                                title=f"{self.total} replicas for week {self.horizon_weeks}"
                                + ("" if self.verified else " (not verified by simulation)"))
        # each stage name on two lines, so the five labels fit their bars at any page width
        x = alt.X("stage:N", sort=list(st["stage"]), title="stage of the plan (replicas added)",
                  axis=alt.Axis(labelAngle=0, labelLimit=0, labelExpr=_two_lines(st["stage"])))
        water = water.copy()
        water.layer = [layer.encode(x=x) for layer in water.layer]
        hz = self.horizons().reset_index()
        hz["horizon"] = [f"{h} wk" for h in hz["horizon_weeks"]]
        hz["bar"] = np.where(hz["planned"], "this plan", "other horizons")
        bars = alt.Chart(hz).mark_bar(size=36).encode(
            x=alt.X("horizon:N", sort=list(hz["horizon"]), title="forecast horizon",
                    axis=alt.Axis(labelAngle=0)),
            y=alt.Y("replicas_by_rating:Q", title="replicas by rating (before checks)"),
            color=alt.Color("bar:N", scale=alt.Scale(domain=["this plan", "other horizons"],
                                                     range=[charts.PALETTE[0], charts.PALETTE[5]]),
                            legend=alt.Legend(title="horizon")),
            tooltip=["horizon:N", "method:N", alt.Tooltip("peak_output_tps:Q", format=",.0f", title="output tok/s"),
                     alt.Tooltip("replicas_by_rating:Q", title="replicas"), "decision:N"],
        ).properties(title="Replicas by rating per horizon", width=220, height=200)
        # stacked, not side by side: the two panels together must fit the book's content column;
        # each panel its own colour scale (the stage kinds, the planned horizon)
        return alt.vconcat(water, bars).resolve_scale(color="independent")

    def _repr_html_(self) -> str:
        """The Markdown document as HTML, for notebooks and the book's pages.

        Not ``_repr_markdown_``: the book's MyST parser would read that Markdown with its
        ``{{ }}`` substitutions (Jinja2) and roles, and the document holds the reader's file,
        model, tier and tenant names. The document escapes them (``_md_text``) and is rendered here
        by markdown-it with raw HTML, links, images, code spans and entities off as well, so every
        name is shown as written, as escaped text; without markdown-it
        the text document is shown, escaped, in a ``<pre>``.
        """
        import html

        try:
            from markdown_it import MarkdownIt
        except ImportError:  # pragma: no cover - markdown-it ships with the book's dependencies
            return f"<pre>{html.escape(self.render())}</pre>"
        text = self.render(markdown=True)  # names already escaped there (_md_text)
        md = MarkdownIt("commonmark", {"html": False}).enable("table").disable(
            ["link", "image", "autolink", "backticks", "entity", "html_inline"])
        return md.render(text)


def _two_lines(labels) -> str:
    """A Vega ``labelExpr`` that shows each label on two lines, split at its middle space."""
    import json

    def split(text):
        text = str(text)
        spaces = [i for i, ch in enumerate(text) if ch == " "]
        if not spaces:
            return [text]
        cut = min(spaces, key=lambda i: abs(2 * i - len(text)))
        return [text[:cut], text[cut + 1:]]

    table = json.dumps({str(t): split(t) for t in labels})
    return f"{table}[datum.label] || datum.label"


#: The characters of a name (model, tier, tenant, file) that Markdown could read as markup: HTML
#: (``<``, ``&``), links and images (``[``), code spans, emphasis, tables, math, strikethrough and
#: MyST roles and substitutions (``{``). A backslash before any ASCII punctuation is CommonMark's
#: escape: the character is shown as itself. ``_`` inside a word opens no emphasis and is kept
#: (:data:`_MD_UNDERSCORE` escapes the others).
_MD_SPECIAL = re.compile(r"([\\`*<>&\[\]{}|$~])")
#: An ``_`` that could open or close emphasis: not between two letters or digits.
_MD_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def _md_text(value) -> str:
    r"""``str(value)`` as Markdown text that renders as written and carries no markup (no HTML, link,
    image, code span, table cell break, math or MyST role): the plan document ``plan.md`` holds the
    reader's names and paths, and teams publish it.

    Examples
    --------
    >>> print(_md_text("x</script>[a](javascript:b) {{ c }} | $1 a_b _c_"))
    x\</script\>\[a\](javascript:b) \{\{ c \}\} \| \$1 a_b \_c\_
    """
    text = _MD_SPECIAL.sub(r"\\\1", str(value))
    text = _MD_UNDERSCORE.sub(r"\\_", text)
    return text.replace("\r", " ").replace("\n", " ").replace("\u2028", " ").replace("\u2029", " ")


def _frame_text(df: pd.DataFrame, markdown: bool) -> str:
    out = df.copy()
    for c in out.columns:
        if pd.api.types.is_float_dtype(out[c]):
            out[c] = [f"{v:,.3g}" if abs(v) < 10 else f"{v:,.0f}" for v in out[c]]
        elif pd.api.types.is_integer_dtype(out[c]) and not pd.api.types.is_bool_dtype(out[c]):
            out[c] = [f"{v:,}" for v in out[c]]
    if markdown:
        cols = [_md_text(out.index.name or "")] + [_md_text(c) for c in out.columns]
        lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for idx, row in out.iterrows():
            lines.append("| " + " | ".join([_md_text(idx)] + [_md_text(v) for v in row]) + " |")
        return "\n".join(lines)
    return out.to_string()


# --------------------------------------------------------------------------------------------
# Building the plan
# --------------------------------------------------------------------------------------------
def capacity_plan(log, sweep, *, model: str | None = None, tier: str | None = "interactive",
                  slo: SLO | None = None, lead_time_weeks: float = 4, quantile: float = 0.9,
                  headroom: float = 0.8, demand_scale: float = 1.0, growth_per_week: float = 0.0,
                  ramp_per_min: float = 0.0125, lag_min: float = 8.0, spares: int = 1,
                  zones: int | None = None, tpm_reserve: float = 0.1, simulate: bool = True,
                  sim_requests: int = 30_000, sim_seeds: int = 2,
                  router: str = "pooled", seed: int = 2026, sweep_label: str | None = None,
                  input_notes: Sequence[str] = ()) -> CapacityPlan:
    """Build the capacity plan for one model from a request log and a sweep.

    The plan is the chain of steps :func:`select_traffic` → :func:`forecast_demand` →
    :func:`rate_replica` → :func:`check_queueing` → :func:`check_engine` → :func:`stack_fleet`
    (:func:`capbook.plan.fleet.plan_fleet`) → :func:`check_serving` → :func:`tenant_limits` →
    :func:`capbook.plan.replay.verify_plan`. For the book's sample data (which sweep goes with which sample
    model), ask :func:`capbook.app.datasets.plan_inputs` for ``log``, ``sweep`` and the labels.

    Parameters
    ----------
    log : capbook.logs.requestlog.RequestLog or LogAggregates
        The request log (pass a :class:`LogAggregates` to plan one log several times).
    sweep : capbook.sweeps.sweep.Sweep
        The deployment's sweep.
    model : str, optional
        Model to plan (a plan is for one deployment). Default: the only model, or the one with
        the most output tokens (a note says so).
    tier : str or None
        Tier to plan for (default ``"interactive"`` when the log has it; ``None``: every tier).
    slo : SLO, optional
        Objectives (default :class:`SLO`).
    lead_time_weeks : float
        Lead time of the decision; the horizon is :func:`horizon_for_lead_time` of it.
    quantile : float
        Quantile of the forecast week's busiest hour to plan for (0.9 = the P90 peak hour).
    headroom : float
        Share of each replica's rating to plan on using, in (0, 1].
    demand_scale : float
        A known-event overlay on top of the forecast (a launch expected to bring 3× the
        traffic is 3), > 0.
    growth_per_week : float
        Weekly growth applied to the observed peak when the log is too short to forecast.
    ramp_per_min : float
        How fast demand can climb, as a share of the peak per minute (0.0125 = 1.25 % a
        minute).
    lag_min : float
        Minutes from the autoscaler's trigger to a new replica serving.
    spares, zones : int
        Failure policy: N+``spares``, and survive losing one of ``zones`` zones (optional).
    tpm_reserve : float
        Share of the fleet's tokens per minute kept out of every tenant limit, in [0, 1).
    simulate : bool
        Find the smallest serving fleet that meets the objectives in the fleet simulation
        (seconds). ``False`` takes Erlang C's count, marked as not verified.
    sim_requests : int
        Requests per replication of the fleet simulation (the busiest hours of the log,
        time-scaled to the peak).
    sim_seeds : int
        Replications per fleet size (two more where the TTFT quantile's margin straddles the
        objective).
    router : str
        The router simulated (:data:`capbook.sim.fleetsim.ROUTERS`; the book's load-aware
        ``"pooled"`` by default).
    seed : int
        Seed of the simulations.
    sweep_label : str, optional
        How the plan names the sweep (default: its name).
    input_notes : sequence of str
        Notes on how the inputs were chosen, printed with the plan's.

    Returns
    -------
    CapacityPlan

    Raises
    ------
    ValueError
        On invalid parameters, an unknown model or tier, a log with no requests of the
        selection, or a sweep whose slowest level already misses the TPOT objective.
    """
    slo = SLO() if slo is None else slo
    if not isinstance(slo, SLO):
        raise ValueError("slo must be a capbook.slo.SLO")
    if not isinstance(sweep, Sweep):
        raise ValueError(f"sweep must be a capbook.sweeps.sweep.Sweep, got {type(sweep).__name__}")
    n_replay = integer(sim_requests, "sim_requests", minimum=1)
    sums = LogAggregates.of(log)
    traffic = select_traffic(sums, model, tier)
    demand = forecast_demand(sums, traffic, lead_time_weeks=lead_time_weeks, quantile=quantile,
                             demand_scale=demand_scale, growth_per_week=growth_per_week)
    replica = rate_replica(sweep, demand, slo, headroom)
    if replica.need.replicas > MAX_PLAN_REPLICAS:
        raise ValueError(f"the planned peak ({demand.output_tps:,.4g} output tokens/s, {demand.request_rate:,.4g} "
                         f"requests/s of {demand.mean_output_tokens:,.0f} output tokens on average) needs "
                         f"{replica.need.replicas:,} replicas by the sweep's rating, more than the {MAX_PLAN_REPLICAS:,} "
                         "capbook plans for one model; check the token counts of the log (and of its hourly history), "
                         "demand_scale and growth_per_week")
    queue = check_queueing(sweep, demand, replica)
    engine = check_engine(sweep, demand, replica, max(replica.need.replicas, replica.floor, queue.erlang_replicas,
                                                      queue.loadq_replicas or 0), seed)
    stack = functools.partial(stack_fleet, demand, replica, queue, engine, ramp_per_min=ramp_per_min,
                              lag_min=lag_min, spares=spares, zones=zones)
    fleet_plan = stack()
    plan = CapacityPlan(
        source={"requests": sums.label, "sweep": sweep_label or getattr(sweep, "name", None) or "sweep",
                "model": traffic.model, "tier": traffic.tier or "all tiers",
                "gpu": sweep.config.get("gpu"), "tensor_parallel": sweep.config.get("tensor_parallel")},
        traffic=traffic, demand=demand, replica=replica, queue=queue, engine_check=engine, fleet=fleet_plan,
        at_serving=check_serving(sweep, demand, replica, queue, fleet_plan),
        limits=tenant_limits(sums, traffic, demand, replica, fleet_plan, tpm_reserve),
        input_notes=tuple(input_notes))
    if not simulate:
        return plan
    v = verify_plan(plan, sums, sweep, n_requests=n_replay, seeds=integer(sim_seeds, "sim_seeds", minimum=1),
                    seed=seed, router=router)
    if v.met:
        fleet_plan = stack(serving=v.serving)
        plan = dataclasses.replace(plan, fleet=fleet_plan, verification=v,
                                   at_serving=check_serving(sweep, demand, replica, queue, fleet_plan),
                                   limits=tenant_limits(sums, traffic, demand, replica, fleet_plan, tpm_reserve))
    else:
        plan = dataclasses.replace(plan, verification=v)
    checks = explain_checks(plan, sums, sweep, plan._check_counts(), n_requests=n_replay, seed=seed)
    return dataclasses.replace(plan, checks=checks)
