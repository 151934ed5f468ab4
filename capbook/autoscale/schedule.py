"""The capacity plan through the week: its schedule, the policies raced, the headroom rule checked.

The plan (:func:`capbook.plan.steps.capacity_plan`) sizes a static fleet for the planned peak hour. This
module asks what following the demand would cost, on the plan's own terms:

* :func:`design_week` — the week the static fleet was sized for: the forecast week's hourly shape
  scaled so that its busiest hour is the plan's peak (or, when the plan had no forecast, a
  borrowed real shape: the ServeGen week under ``data/demand``);
* :func:`forecast_schedule` — replicas per hour of week by the plan's own sizing rules
  (:class:`capbook.cost.pricing.FleetCurve`: the same Erlang C, engine model, burst headroom and spares as
  the static count, at each hour's demand), asked for one lag ahead;
* :func:`race_policies` — the static plan and each policy through that week in the autoscaling
  simulator (:mod:`capbook.autoscale.policies`): GPU-hours, dollars, goodput and p99 TTFT per hour, and the
  cheapest policy whose week meets the objectives (:class:`PolicyRace`);
* :func:`headroom_check` — the plan's burst headroom rule (ramp × lag) tested on a ramp.

>>> from capbook import datasets
>>> from capbook.plan.steps import capacity_plan
>>> inp = datasets.plan_inputs()
>>> plan = capacity_plan(**inp.arguments, simulate=False)
>>> week = design_week(plan)
>>> len(week), round(float(week["request_rate"].max()), 2) == round(plan.request_rate, 2)
(168, True)
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from capbook.autoscale.policies import (HOURS_PER_WEEK, Observation, ReactiveLatency, ReactiveUtilisation,
                                       ReactiveWaiting, ReplicaModel, Schedule, ScheduleReactive, Scaling, Static,
                                       simulate_autoscaling)
from capbook.cost.costs import FleetCurve, as_prices, replica_price, week_demand
from capbook.forecast.shapes import load_demand_shape
from capbook.logs.sql import minute_counts_sql, traffic_where
from capbook.parallel import run_all
from capbook.plan.fleet import burst_headroom
from capbook.logs.aggregates import LogAggregates
from capbook.logs.scope import select_scope
from capbook.plan.steps import _frame_text, _md_text
from capbook.sim.arrivals import RateArrivals, TokenLengths, _rate_cv_counts, rate_cv_from_log
from capbook.slo import SLO
from capbook.validation import nonnegative, positive, probability

__all__ = ["autoscaled", "design_week", "week_arrivals", "forecast_schedule", "standard_policies", "race_policies",
           "PolicyRace", "headroom_check", "hour_of_week", "PlanAutoscaling", "plan_autoscaling",
           "PLAN_CANDIDATES", "AUTOSCALE_MAX_REQUESTS", "AUTOSCALE_MAX_REPLICAS", "WeekTooLarge", "log_rate_cv"]


def hour_of_week(times) -> np.ndarray:
    """Hour of the week, 0 = Monday 00:00-01:00 UTC, of UTC timestamps."""
    t = pd.DatetimeIndex(pd.to_datetime(times, utc=True))
    return (t.day_of_week * 24 + t.hour).to_numpy(dtype=np.int64)


def _borrowed_shape() -> tuple[np.ndarray, str]:
    """The ServeGen week (first 7 days, hourly means) as a shape of 168 values with mean 1."""
    s = load_demand_shape()
    bin_s = float(s.attrs.get("bin_s", 600.0))
    per_hour = int(round(3600.0 / bin_s))
    v = s.to_numpy(dtype=float)[: HOURS_PER_WEEK * per_hour].reshape(HOURS_PER_WEEK, per_hour).mean(axis=1)
    return v / v.mean(), "the ServeGen m-large week (data/demand), borrowed: the plan had no forecast week"


def design_week(plan, *, quantile: float | None = None, shape=None) -> pd.DataFrame:
    """The week the plan's static fleet is sized for, hour by hour.

    The forecast week's point forecast (:func:`capbook.cost.pricing.week_demand`) scaled so that its
    busiest hour is the ``quantile`` of the week's peak (default the plan's own quantile, whose
    peak is the plan's ``output_tps``): the same shape, at the planned level.

    Parameters
    ----------
    plan : capbook.plan.steps.CapacityPlan
    quantile : float, optional
        Quantile of the week's busiest hour to scale to (default ``plan.quantile``).
    shape : array_like of 168 floats, optional
        A week's shape to use instead of the forecast's (any scale; hour 0 = the first hour of
        the run). Used, with a note, when the plan had no forecast: the ServeGen week.

    Returns
    -------
    pandas.DataFrame
        168 rows: ``start`` (UTC, or hours from 0 for a borrowed shape), ``hour_of_week``,
        ``output_tps`` (output tokens/s), ``request_rate`` (requests/s); ``attrs["note"]`` says
        where the shape came from.
    """
    q = plan.quantile if quantile is None else probability(quantile, "quantile", closed=True)
    note = None
    start = None
    if shape is None:
        try:
            wd = week_demand(plan)
            v, start = np.asarray(wd.point, dtype=float), wd.hours
            peak = wd.peak(q)
            note = f"the forecast week from {wd.hours[0]:%Y-%m-%d} scaled to its P{q * 100:g} peak hour"
        except ValueError:
            v, note = _borrowed_shape()
            peak = float(plan.output_tps)
    else:
        v = np.asarray(shape, dtype=float).ravel()
        if v.size != HOURS_PER_WEEK or not np.all(np.isfinite(v)) or (v < 0).any() or v.max() <= 0:
            raise ValueError(f"shape must hold {HOURS_PER_WEEK} finite non-negative values, not all zero")
        peak = float(plan.output_tps)
        note = "the given shape scaled to the plan's peak hour"
    out = v * (peak / v.max())
    if start is None:
        start = pd.date_range("2026-01-05", periods=HOURS_PER_WEEK, freq="h", tz="UTC")   # a Monday: labels only
    frame = pd.DataFrame({"start": start, "hour_of_week": hour_of_week(start), "output_tps": out,
                          "request_rate": out / float(plan.mean_output_tokens)})
    frame.attrs["note"] = note
    return frame


def _traffic(plan, log) -> pd.DataFrame:
    """The rows of the log the plan is for (its model and tier)."""
    frame = log.frame if isinstance(log, LogAggregates) else (log.to_pandas() if hasattr(log, "to_pandas") else log)
    return select_scope(frame, plan.source.get("model"), plan.source.get("tier"))


def _request_log(log):
    """The capbook.logs.requestlog.RequestLog behind ``log`` (a LogAggregates or the log), or None for a
    frame: a request log's traffic is summed in SQL on its engine, not read into pandas."""
    src = log.log if isinstance(log, LogAggregates) else log
    return src if hasattr(src, "query") and hasattr(src, "first_us") else None


def _traffic_where(plan) -> str:
    tier = plan.source.get("tier")
    return traffic_where(plan.source.get("model"), None if tier in (None, "all tiers") else tier)


#: The most (input, output) pairs per tier the design week resamples from a request log; a
#: larger log gives a deterministic sample of about this many (every row whose hash falls in one
#: bucket), so memory does not grow with the log.
LENGTH_PAIRS_MAX = 2_000_000


def _lengths(plan, log) -> TokenLengths:
    src = _request_log(log)
    if src is None:
        return TokenLengths.from_log(_traffic(plan, log))
    d = src.dialect
    where = _traffic_where(plan)
    per_tier = src.query(f"SELECT tier, count(*) AS n FROM req WHERE {where} GROUP BY ALL ORDER BY tier")
    parts = []
    for tier, n in zip(per_tier["tier"], per_tier["n"]):
        k = -(-int(n) // LENGTH_PAIRS_MAX)       # one row in k, by a hash of the row
        thin = f" AND {d.rowhash(['t', 'i', 'o'])} % {k} = 0" if k > 1 else ""
        rows = src.query(f"SELECT i AS input_tokens, o AS output_tokens FROM req WHERE {where} AND "
                         f"tier = '{str(tier).replace(chr(39), chr(39) * 2)}'{thin} ORDER BY t")
        rows["tier"] = str(tier)
        parts.append(rows)
    return TokenLengths.from_log(pd.concat(parts, ignore_index=True))


def week_arrivals(plan, log, week: pd.DataFrame | None = None, *, rate_cv: float = 0.0,
                  window_s: float = 60.0) -> RateArrivals:
    """Arrivals through :func:`design_week` with the log's (input, output) token pairs.

    Parameters
    ----------
    plan : capbook.plan.steps.CapacityPlan
    log : capbook.logs.requestlog.RequestLog or capbook.logs.aggregates.LogAggregates
        The plan's request log (lengths of its model and tier).
    week : pandas.DataFrame, optional
        A :func:`design_week` (default: the plan's).
    rate_cv, window_s : float
        Bursts on top of the hourly shape (:class:`capbook.sim.arrivals.RateArrivals`); measure them
        with :func:`capbook.sim.arrivals.rate_cv_from_log`.
    """
    week = design_week(plan) if week is None else week
    return RateArrivals(week["request_rate"].to_numpy(), 3600.0, rate_cv=rate_cv, window_s=window_s,
                        lengths=_lengths(plan, log))


def forecast_schedule(plan, sweep, week: pd.DataFrame | None = None, *, lead_s: float | None = None) -> Schedule:
    """Replicas per hour of the week by the plan's own sizing, asked for ``lead_s`` ahead.

    Each hour gets what the plan's pipeline buys for that hour's demand
    (:meth:`capbook.cost.pricing.FleetCurve.replicas`: the largest of the rating, Erlang C, the
    load-dependent and engine models, plus burst headroom and spares), so the busiest hour gets
    the static plan's count. Hours are indexed from the first hour of ``week``.

    Parameters
    ----------
    plan, sweep
        The plan and its sweep.
    week : pandas.DataFrame, optional
        A :func:`design_week` (default: the plan's).
    lead_s : float, optional
        How far ahead the schedule looks, seconds (default: the plan's scale-up lag).
    """
    week = design_week(plan) if week is None else week
    curve = FleetCurve(plan, sweep)
    counts = [curve.replicas(max(float(x), 1e-9)) for x in week["output_tps"]]
    lead = plan.fleet.lag_min * 60.0 if lead_s is None else nonnegative(lead_s, "lead_s")
    return Schedule(counts, step_s=3600.0, lead_s=lead)


def standard_policies(plan, sweep, week: pd.DataFrame | None = None, *, target: float = 0.65) -> dict:
    """The policies the book races: static, the forecast schedule, reactive on slots, on GPU
    utilisation, on waiting requests, on TTFT/goodput, and schedule plus reactive.

    Reactive policies keep the plan's failure spares on top (``extra``), as the static and
    scheduled fleets do.
    """
    week = design_week(plan) if week is None else week
    sched = forecast_schedule(plan, sweep, week)
    spares = int(plan.spare)
    return {
        "static": Static(int(plan.total)),
        "schedule": sched,
        "slot utilisation": ReactiveUtilisation(target, extra=spares),
        "GPU utilisation": ReactiveUtilisation(target, metric="gpu", extra=spares),
        "waiting": ReactiveWaiting(target, extra=spares),
        "TTFT and goodput": ReactiveLatency(plan.slo.ttft_target_s, plan.slo.goodput_share),
        "schedule + waiting": ScheduleReactive(sched, ReactiveWaiting(target, extra=spares)),
    }


@dataclass
class PolicyRace:
    """The policies through one week (build with :func:`race_policies`).

    Attributes
    ----------
    table : pandas.DataFrame
        One row per policy: ``policy``, ``gpu_hours``, ``usd`` (on-demand, when prices were
        given), ``saved`` (share of the static plan's GPU-hours saved), ``goodput``,
        ``ttft_p99_s``, ``worst_hour_ttft_p99_s``, ``hours_met``, ``meets`` (every hour met
        the objectives), ``refused``, ``replicas_min``, ``replicas_max``, ``scale_events``.
    results : dict
        Policy name → :class:`capbook.autoscale.policies.AutoscaleResult`.
    week : pandas.DataFrame
        The :func:`design_week` raced.
    scaling : capbook.autoscale.policies.Scaling
    note : str
        Where the week's shape came from.
    hours_simulated : int
    schedule : Schedule or None
        The forecast schedule raced (hour 0 = the week's first hour).
    static_gpu_hours : float
        GPU-hours of the static plan over the simulated hours (``plan.total`` replicas every
        hour: a static fleet needs no simulation to count).
    usd_per_gpu_hour : float or None
        On-demand price used for ``usd``.
    """

    table: pd.DataFrame
    results: dict
    week: pd.DataFrame
    scaling: Scaling
    note: str
    hours_simulated: int = HOURS_PER_WEEK
    schedule: Schedule | None = None
    static_gpu_hours: float = math.nan
    usd_per_gpu_hour: float | None = None

    @property
    def best(self) -> str | None:
        """The policy with the fewest GPU-hours among those whose week met the objectives (and
        fewer than the static plan); ``None`` if none did."""
        ok = self.table[self.table["meets"] & (self.table["gpu_hours"] < self.static_gpu_hours)]
        if ok.empty:
            return None
        return str(ok.sort_values(["gpu_hours", "policy"]).iloc[0]["policy"])


def race_policies(plan, sweep, log, policies: dict | None = None, *, scaling: Scaling | None = None,
                  week: pd.DataFrame | None = None, hours: slice | None = None, prices=None,
                  rate_cv: float = 0.0, seed: int = 2026, gpus: int | None = None) -> PolicyRace:
    """Run each policy through the plan's design week and compare them with the static plan.

    Parameters
    ----------
    plan, sweep, log
        The plan, its sweep and its request log (token lengths).
    policies : dict, optional
        Name → :class:`capbook.autoscale.policies.Policy` (default :func:`standard_policies`). The static
        plan's GPU-hours are counted without simulating it; include a ``"static"`` policy to
        see what its requests saw.
    scaling : capbook.autoscale.policies.Scaling, optional
        Default: the plan's lag (``lag_min``), at least the plan's spares + 1 replicas, at most
        twice the static count, HPA windows.
    week : pandas.DataFrame, optional
        A :func:`design_week` (default: the plan's).
    hours : slice, optional
        Simulate only these hours of the week (e.g. ``slice(24 * d, 24 * (d + 1))`` for one
        day); the schedule keeps its hour-of-week positions.
    prices : capbook.cost.prices.PriceTable or float, optional
        Prices for dollars (the plan's GPU, on demand), or USD per GPU-hour.
    rate_cv : float
        Bursts on top of the hourly shape (:func:`week_arrivals`).
    seed : int
        One seed for every policy: they see the same arrivals.
    gpus : int, optional
        GPUs per replica, for GPU-hours (replicas × GPUs per replica × hours). Default: the
        plan's ``tensor_parallel``, else 1.

    Returns
    -------
    PolicyRace
    """
    week = design_week(plan) if week is None else week
    pol = standard_policies(plan, sweep, week) if policies is None else dict(policies)
    rep = ReplicaModel.from_plan(plan, sweep, gpus=gpus)
    sc = scaling if scaling is not None else Scaling(
        lag_s=plan.fleet.lag_min * 60.0, min_replicas=int(plan.spare) + 1, max_replicas=2 * int(plan.total))
    h0 = 0 if hours is None else (hours.start or 0)
    h1 = HOURS_PER_WEEK if hours is None else (hours.stop or HOURS_PER_WEEK)
    if not 0 <= h0 < h1 <= HOURS_PER_WEEK:
        raise ValueError(f"hours must be a slice inside 0..{HOURS_PER_WEEK}, got {hours!r}")
    sub = week.iloc[h0:h1]
    arr = week_arrivals(plan, log, sub, rate_cv=rate_cv)
    obj = plan.slo
    usd_per_gpu_hour = None
    if isinstance(prices, (int, float)) and not isinstance(prices, bool):
        usd_per_gpu_hour = positive(prices, "prices")
    elif prices is not None:
        rp = replica_price(_PlanSweep(plan, sweep), as_prices(prices), tensor_parallel=rep.gpus)
        usd_per_gpu_hour = rp.on_demand_usd_per_hour / max(rp.gpus, 1)
    jobs = []
    for name, p in pol.items():
        if isinstance(p, Schedule):
            p = Schedule(p.replicas, step_s=p.step_s, lead_s=p.lead_s, offset_s=h0 * 3600.0)
        elif isinstance(p, ScheduleReactive):
            s = p.schedule
            p = ScheduleReactive(Schedule(s.replicas, step_s=s.step_s, lead_s=s.lead_s, offset_s=h0 * 3600.0),
                                 p.reactive)
        first = p.desired(_first_obs(rep)) if not isinstance(p, Static) else p.replicas
        first = max(first, int(math.ceil(float(sub["request_rate"].iloc[0]) * rep.service_time_s(arr.lengths)
                                         / rep.slots)) + int(plan.spare))
        s_run = Scaling(**{**sc.__dict__, "initial_replicas": min(max(first, sc.min_replicas), sc.max_replicas)})
        jobs.append((arr, rep, p, s_run, obj, seed))
    # the policies are independent simulations of the same arrivals: one per core
    done = run_all(_simulate_job, jobs)
    rows, results = [], {}
    for name, res in zip(pol, done):
        results[name] = res
        s = res.summary()
        s["policy"] = name
        s["meets"] = bool(s["hours_met"] >= 1.0)
        s["usd"] = None if usd_per_gpu_hour is None else s["gpu_hours"] * usd_per_gpu_hour
        rows.append(s)
    t = pd.DataFrame(rows)
    static = float(plan.total) * (h1 - h0) * rep.gpus        # a static fleet is up every hour: no simulation needed
    t["saved"] = 1.0 - t["gpu_hours"] / static
    cols = ["policy", "gpu_hours", "usd", "saved", "goodput", "ttft_p99_s", "worst_hour_ttft_p99_s", "hours_met",
            "meets", "refused", "replicas_min", "replicas_max", "scale_events", "requests"]
    sched = pol.get("schedule") if isinstance(pol.get("schedule"), Schedule) else None
    return PolicyRace(t[cols], results, week, sc, week.attrs.get("note", ""), h1 - h0, sched, static,
                      usd_per_gpu_hour)


def _simulate_job(job):
    arr, rep, p, s_run, obj, seed = job
    return simulate_autoscaling(arr, rep, p, s_run, slo=obj, seed=seed)


class _PlanSweep:
    """The plan's GPU and tensor parallel in a sweep's shape (for :func:`capbook.cost.prices.replica_price`)."""

    def __init__(self, plan, sweep):
        self.name = getattr(sweep, "name", "sweep")
        cfg = dict(getattr(sweep, "config", {}) or {})
        cfg.setdefault("gpu", plan.source.get("gpu"))
        cfg.setdefault("tensor_parallel", plan.source.get("tensor_parallel"))
        self.config = cfg


def _first_obs(rep):
    return Observation(0.0, 0, 0, 0, 0, rep.slots, 0.0, 0.0, 0.0, 0, 0, 0.0, 1.0)


def headroom_check(replica: ReplicaModel, lengths: TokenLengths | None, base_rate: float, *,
                   ramps_per_min=(0.5,), lags_min=(8.0,), warm_lag_min: float | None = None,
                   target: float = 0.65, ramp_min: float = 30.0, slo: SLO | None = None,
                   with_headroom: bool = True, planned: tuple | None = None, seed: int = 2026) -> pd.DataFrame:
    """Does the burst headroom rule (ramp × lag) hold p99 TTFT while demand climbs?

    For each ramp (requests/s gained per minute) and lag (minutes), demand holds at
    ``base_rate`` for 10 minutes, climbs linearly for ``ramp_min`` minutes and holds at the top
    for 10 more. The fleet scales on waiting requests at ``target`` (:class:`ReactiveWaiting`)
    with, on top, the burst headroom of :func:`capbook.plan.fleet.burst_headroom`: the replicas that
    carry ``ramp × lag`` requests/s at the target (or none, with ``with_headroom=False``). With
    ``warm_lag_min``, a warm standby pool takes scale-ups with that lag (it holds the replicas
    that carry what the demand gains during one cold lag, so it refills in time).

    ``planned=(ramp_per_min, lag_min)`` sizes the headroom for the ramp and lag the plan
    assumed, while the rows simulate the ramps and lags given: the question a plan must answer
    is what happens when the real ramp is faster, or the real lag longer, than assumed.

    Returns
    -------
    pandas.DataFrame
        One row per (ramp, lag): ``ramp_per_min`` (requests/s per minute), ``lag_min``,
        ``headroom_replicas``, ``ttft_p99_s`` (over the climb and the top), ``worst_minute_ttft_p99_s``,
        ``goodput``, ``held`` (p99 TTFT and goodput within the objectives), ``gpu_hours``,
        ``planned_ramp_per_min`` and ``planned_lag_min`` (what the headroom was sized for).
    """
    obj = SLO() if slo is None else slo
    base = positive(base_rate, "base_rate")
    T = replica.service_time_s(lengths)
    per_rep = replica.slots * probability(target, "target", lo_open=True) / T      # req/s a replica carries at target
    rows = []
    step = 10.0                                                                      # seconds per rate bin
    for ramp in np.atleast_1d(np.asarray(ramps_per_min, dtype=float)):
        n_hold, n_up = int(600 / step), int(ramp_min * 60 / step)
        rates = np.concatenate([np.full(n_hold, base), base + ramp / 60.0 * step * (np.arange(n_up) + 0.5),
                                np.full(n_hold, base + ramp * ramp_min)])
        arr = RateArrivals(rates, step, lengths=lengths)
        for lag in np.atleast_1d(np.asarray(lags_min, dtype=float)):
            eff_lag = lag if warm_lag_min is None else float(warm_lag_min)
            if planned is not None:
                p_ramp, p_lag = (nonnegative(planned[0], "planned ramp"), nonnegative(planned[1], "planned lag"))
                eff_ramp, eff_lag = p_ramp, (p_lag if warm_lag_min is None else float(warm_lag_min))
            else:
                eff_ramp = ramp
            extra = burst_headroom(eff_ramp, eff_lag, per_rep).replicas if with_headroom else 0
            start = int(math.ceil(base / per_rep - 1e-9)) + extra
            # the standby pool covers what the demand gains while one cold start refills it
            pool = 0 if warm_lag_min is None else burst_headroom(eff_ramp, lag, per_rep).replicas
            sc = Scaling(lag_s=lag * 60.0, warm_pool=pool, warm_lag_s=(warm_lag_min or 0.0) * 60.0,
                         min_replicas=1, max_replicas=10_000, initial_replicas=start)
            res = simulate_autoscaling(arr, replica, ReactiveWaiting(target, extra=extra), sc, slo=obj,
                                       report_s=60.0, seed=seed, record=True)
            rec = res.records
            climb = rec["arrival"] >= n_hold * step
            tt = rec.loc[climb, "ttft"].to_numpy()
            p99 = float(np.quantile(tt, obj.ttft_quantile)) if tt.size else 0.0
            good = float(np.mean(tt <= obj.ttft_target_s)) if tt.size else 1.0
            worst = float(res.hours.loc[res.hours["start_s"] >= n_hold * step, "ttft_p99_s"].max())
            rows.append({"ramp_per_min": float(ramp), "lag_min": float(lag),
                         "warm_lag_min": None if warm_lag_min is None else float(warm_lag_min),
                         "headroom_replicas": int(extra), "ttft_p99_s": p99, "worst_minute_ttft_p99_s": worst,
                         "goodput": good, "held": bool(p99 <= obj.ttft_target_s and good >= obj.goodput_share),
                         "gpu_hours": res.gpu_hours,
                         "planned_ramp_per_min": float(eff_ramp), "planned_lag_min": float(eff_lag)})
    return pd.DataFrame(rows)


#: The policies ``capbook plan`` races through the week (the others of :func:`standard_policies`
#: are raced in the book: GPU utilisation overspends, TTFT alone is late).
PLAN_CANDIDATES = ("schedule", "schedule + waiting", "waiting")


@dataclass
class PlanAutoscaling:
    """The plan's autoscaling section (build with :func:`plan_autoscaling`).

    Attributes
    ----------
    race : PolicyRace
        The candidates through the design week.
    schedule : Schedule
        The forecast schedule, hour 0 = the design week's first hour.
    static_gpu_hours : float
        GPU-hours per week of the static plan.
    policy : str or None
        The cheapest candidate whose week met the objectives (None: none did, and the static
        plan stands).
    autoscaled_gpu_hours : float
        GPU-hours per week under ``policy`` (the static figure when ``policy`` is None).
    lag_min : float
        Scale-up lag simulated, minutes.
    rate_cv : float
        Burstiness layered on the hourly shape (:class:`capbook.sim.arrivals.RateArrivals`).
    unreachable : str or None
        Why no fleet can meet the objectives, when the plan found that no size can (then no
        policy can either, and the GPU-hours compare fleets that all miss).
    gpus_per_replica : int or None
        GPUs per replica the hours were counted with: GPU-hours = replicas × GPUs per replica ×
        hours. None when neither the sweep nor the caller says it: the figures are then
        replica-hours (one GPU counted per replica), and the rows and text say so.
    """

    race: PolicyRace
    schedule: Schedule
    static_gpu_hours: float
    policy: str | None
    autoscaled_gpu_hours: float
    lag_min: float
    rate_cv: float = 0.0
    unreachable: str | None = None
    gpus_per_replica: int | None = None

    @property
    def hours_unit(self) -> str:
        """``"GPU-hours"`` when GPUs per replica are known, else ``"replica-hours"``."""
        return "GPU-hours" if self.gpus_per_replica else "replica-hours"

    def schedule_frame(self) -> pd.DataFrame:
        """``hour_of_week`` (0 = Monday 00:00 UTC) and ``replicas``, the schedule as
        ``schedule.csv`` holds it: each hour's replicas, to be asked for one lag before it."""
        how = self.race.week["hour_of_week"].to_numpy()
        out = pd.DataFrame({"hour_of_week": how, "replicas": self.schedule.replicas})
        return out.sort_values("hour_of_week").reset_index(drop=True)

    @property
    def saved(self) -> float:
        """Share of the static plan's GPU-hours the policy saves."""
        return 1.0 - self.autoscaled_gpu_hours / self.static_gpu_hours

    def table(self) -> pd.DataFrame:
        """Rows of the plan table with step ``autoscaling``."""
        u = self.hours_unit
        r = [(f"{u} per week (static)", self.static_gpu_hours, u),
             (f"{u} per week (autoscaled)", self.autoscaled_gpu_hours, u),
             ("policy", self.policy or "none met the objectives: static", ""),
             (f"{u} saved", self.saved, "share"),
             ("GPUs per replica", self.gpus_per_replica if self.gpus_per_replica else "not known", "GPUs"),
             ("scale-up lag simulated", self.lag_min, "min"),
             ("burstiness simulated (rate CV per minute)", self.rate_cv, ""),
             ("week simulated", self.race.note, "")]
        usd = self.race.usd_per_gpu_hour
        if usd is not None:
            r += [("USD per week (static, on demand)", self.static_gpu_hours * usd, "USD"),
                  ("USD per week (autoscaled, on demand)", self.autoscaled_gpu_hours * usd, "USD")]
        for _, row in self.race.table.iterrows():
            r.append((f"{row['policy']}: {u} per week", float(row["gpu_hours"]), u))
            r.append((f"{row['policy']}: hours meeting the objectives", float(row["hours_met"]), "share"))
        return pd.DataFrame([{"step": "autoscaling", "quantity": q, "value": v, "unit": u} for q, v, u in r])

    def render(self, markdown: bool = False) -> str:
        """The section as text (or Markdown)."""
        h2 = "## " if markdown else ""
        md = _md_text if markdown else str
        t = self.race.table
        u, g = self.hours_unit, self.gpus_per_replica
        lines = [f"{h2}Autoscaling through the week", "",
                 f"The week simulated: {md(self.race.note)}, with the log's minute-scale bursts (rate CV "
                 f"{self.rate_cv:.3f}); scale-up lag {self.lag_min:g} min; {int(t['requests'].iloc[0]):,} requests.",
                 "",
                 (f"GPU-hours are replicas × {g} GPU{'s' if g != 1 else ''} per replica × hours." if g else
                  "The sweep does not say how many GPUs a replica runs on, so the hours below are replica-hours "
                  "(multiply by GPUs per replica for GPU-hours; --tensor-parallel N with --prices says it)."),
                 ""]
        if self.policy is None and self.unreachable:
            lines.append(f"As the plan found, {md(self.unreachable)}. No scaling policy can help either: the static "
                         f"plan's {self.static_gpu_hours:,.0f} {u} per week stand, and the rows below compare "
                         "fleets that all miss.")
        elif self.policy is None:
            lines.append(f"No candidate policy met the objectives in every hour: the static plan's "
                         f"{self.static_gpu_hours:,.0f} {u} per week stand.")
        else:
            lines.append(f"Static plan: {self.static_gpu_hours:,.0f} {u} per week. Cheapest policy meeting the "
                         f"objectives in every hour: {self.policy}, {self.autoscaled_gpu_hours:,.0f} {u} "
                         f"({100 * self.saved:.0f} % fewer). The schedule is in schedule.csv.")
        show = t[["policy", "gpu_hours", "saved", "goodput", "worst_hour_ttft_p99_s", "hours_met", "replicas_min",
                  "replicas_max"]].copy()
        show["gpu_hours"] = show["gpu_hours"].round(0)
        show = show.rename(columns={"gpu_hours": u})
        show["saved"] = (100 * show["saved"]).round(1)
        show["goodput"] = show["goodput"].round(4)
        show["worst_hour_ttft_p99_s"] = show["worst_hour_ttft_p99_s"].round(2)
        show["hours_met"] = (100 * show["hours_met"]).round(1)
        show = show.rename(columns={"saved": "saved %", "hours_met": "hours met %",
                                    "worst_hour_ttft_p99_s": "worst-hour p99 TTFT s"}).set_index("policy")
        lines += ["", _frame_text(show, markdown), ""]
        return "\n".join(lines)


def log_rate_cv(plan, log, window_s: float = 60.0, trend_s: float = 600.0) -> float:
    """The burstiness of the plan's traffic in its log beyond the 10-minute trend
    (:func:`capbook.sim.arrivals.rate_cv_from_log` over the plan's model and tier); 0 for a log
    shorter than ``trend_s``."""
    src = _request_log(log)
    if src is not None:   # the counts per minute from SQL, not every arrival
        d = src.dialect
        where = _traffic_where(plan)
        n, lo, hi = src.query_one(f"SELECT count(*), min(t), max(t) FROM req WHERE {where}")
        if int(n) < 2 or (int(hi) - int(lo)) / 1e6 < trend_s:
            return 0.0
        per = int(round(trend_s / window_s))
        if per < 2 or abs(per * window_s - trend_s) > 1e-9 * trend_s:
            raise ValueError("trend_s must be a multiple (>= 2) of window_s")
        c = src.query(minute_counts_sql(d, where, int(lo), int(round(window_s * 1e6))))
        counts = np.bincount(c["w"].to_numpy(np.int64), weights=c["n"].to_numpy(float)).astype(np.int64)
        return _rate_cv_counts(counts, per, trend_s)
    t = _traffic(plan, log)["arrival_time"]
    secs = ((t - t.min()).dt.total_seconds() if pd.api.types.is_datetime64_any_dtype(t)
            else pd.to_numeric(t, errors="coerce") - float(pd.to_numeric(t, errors="coerce").min())).to_numpy(float)
    secs = secs[np.isfinite(secs)]
    if secs.size < 2 or secs.max() < trend_s:
        return 0.0
    return rate_cv_from_log(secs, window_s, trend_s)


#: The most requests :func:`plan_autoscaling` simulates in the design week (the sample gateway's
#: week at 40 requests/s holds about 24 million; measured peak memory about 1.6 GB for it).
AUTOSCALE_MAX_REQUESTS = 30_000_000
#: The most replicas :func:`plan_autoscaling` simulates (the sample plan has 29).
AUTOSCALE_MAX_REPLICAS = 5_000


class WeekTooLarge(ValueError):
    """The design week is beyond what :func:`plan_autoscaling` simulates (too many requests or
    replicas): the static plan stands without it."""


def plan_autoscaling(plan, sweep, log, *, candidates=PLAN_CANDIDATES, prices=None, rate_cv="log",
                     seed: int = 2026, gpus: int | None = None) -> PlanAutoscaling:
    """Race the candidate policies through the plan's design week and keep the cheapest that
    meets the objectives in every hour.

    Parameters
    ----------
    plan, sweep, log
        The plan, its sweep and its request log.
    candidates : sequence of str
        Names from :func:`standard_policies` (default :data:`PLAN_CANDIDATES`).
    prices : capbook.cost.prices.PriceTable or float, optional
        For dollars per week (a table, or USD per GPU-hour).
    rate_cv : float or "log"
        Bursts on top of the hourly shape; ``"log"`` (default) measures them in the plan's log
        (:func:`log_rate_cv`), so the policies face the log's minute-scale bursts as the replay
        check does.
    seed : int
    gpus : int, optional
        GPUs per replica (the priced plan's, or ``--tensor-parallel``). Default: the sweep's
        ``tensor_parallel``; when neither says, the hours are replica-hours and are named so.

    Returns
    -------
    PlanAutoscaling
    """
    if isinstance(rate_cv, str):
        if rate_cv != "log":
            raise ValueError(f"rate_cv must be a number >= 0 or 'log', got {rate_cv!r}")
        rate_cv = log_rate_cv(plan, log)
    week = design_week(plan)
    expected = float(week["request_rate"].sum()) * 3600.0
    if expected > AUTOSCALE_MAX_REQUESTS:
        raise WeekTooLarge(f"the design week holds {expected:,.0f} requests, more than the {AUTOSCALE_MAX_REQUESTS:,} "
                           "the autoscaling simulator replays (its memory grows with them, about 65 bytes a "
                           "request); the static plan stands without the simulated week")
    if int(plan.total) > AUTOSCALE_MAX_REPLICAS:
        raise WeekTooLarge(f"the plan's {int(plan.total):,} replicas are more than the {AUTOSCALE_MAX_REPLICAS:,} the "
                           "autoscaling simulator runs through a week (its time grows with them); the static plan "
                           "stands without the simulated week")
    std = standard_policies(plan, sweep, week)
    unknown = [c for c in candidates if c not in std]
    if unknown:
        raise ValueError(f"unknown candidate policy {unknown[0]!r}; choose from {sorted(std)}")
    if gpus is None and plan.source.get("tensor_parallel") is not None:
        gpus = int(plan.source["tensor_parallel"])
    race = race_policies(plan, sweep, log, {c: std[c] for c in candidates}, week=week, prices=prices,
                         rate_cv=rate_cv, seed=seed, gpus=gpus)
    best = race.best
    auto = race.static_gpu_hours if best is None else float(
        race.table.set_index("policy").loc[best, "gpu_hours"])
    v = plan.verification
    unreachable = v.reason.rstrip(".") if (v.status == "impossible" and v.reason) else None
    return PlanAutoscaling(race, std["schedule"], race.static_gpu_hours, best, auto, float(plan.fleet.lag_min),
                           float(rate_cv), unreachable, gpus)


def autoscaled(plan, sweep, log, *, candidates=None, rate_cv="log", seed: int = 2026):
    """``plan`` with an autoscaling section: candidate policies raced through the design week
    (:func:`plan_autoscaling`; about half a minute per candidate for a
    week at tens of requests per second).

    Parameters
    ----------
    plan : capbook.plan.steps.CapacityPlan
    sweep : capbook.sweeps.sweep.Sweep
        The plan's sweep.
    log : capbook.logs.requestlog.RequestLog or LogAggregates
        The plan's request log (token lengths).
    candidates : sequence of str, optional
        Policy names (default :data:`capbook.autoscale.schedule.PLAN_CANDIDATES`).
    rate_cv : float or "log"
        Bursts on top of the hourly shape (default: measured in the log,
        :func:`capbook.autoscale.schedule.log_rate_cv`).
    seed : int

    Returns
    -------
    capbook.plan.steps.CapacityPlan
        A copy of ``plan``.
    """
    prices = gpus = None
    if plan.pricing is not None:                      # the plan's own price, USD per GPU-hour on demand
        rp = plan.pricing.cost.replica
        prices = rp.on_demand_usd_per_hour / max(int(rp.gpus), 1)
        gpus = int(rp.gpus)                           # the GPUs the cost rows count (--tensor-parallel too)
    a = plan_autoscaling(plan, sweep, log, candidates=PLAN_CANDIDATES if candidates is None else candidates,
                         prices=prices, rate_cv=rate_cv, seed=seed, gpus=gpus)
    return dataclasses.replace(plan, autoscaling=a)
