"""The price of one plan: its cost per hour, week and year and per token (:func:`plan_cost`), the
plan's sizing as a function of the peak (:class:`FleetCurve`), the forecast week as a
distribution (:func:`week_demand`), the price of the quantile and the quantile a price of
saturation calls for (:func:`optimal_quantile`), reserved against on-demand
(:func:`reserve_split`), and the plan with its price (:func:`price_plan`, :func:`priced`).
Units: US dollars, per GPU-hour for prices."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd

from capbook.cost.prices import as_prices, HOURS_PER_YEAR, replica_price, ReplicaPrice
from capbook.forecast import tokens as fc
from capbook.forecast.tokens import HOURS_PER_WEEK
from capbook.plan.steps import _md_text, stack_fleet
from capbook.validation import nonnegative, positive, probability

__all__ = ["PlanCost", "plan_cost", "FleetCurve", "WeekDemand", "week_demand", "price_of_quantiles",
           "OptimalQuantile", "optimal_quantile", "ReserveSplit", "reserve_split", "PlanPricing",
           "price_plan", "priced"]

# --------------------------------------------------------------------------------------------
# The cost of a plan
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PlanCost:
    """The cost of a plan's replicas (build it with :func:`plan_cost`).

    Attributes
    ----------
    replicas : int
        Replicas priced (the plan's headline count).
    replica : ReplicaPrice
    gpus : int
        ``replicas × replica.gpus``.
    usd_per_hour, usd_per_week, usd_per_year : float
        On demand, every hour of the week (a static fleet).
    reserved_usd_per_hour, reserved_usd_per_week, reserved_usd_per_year : float
        The same fleet reserved.
    output_tps, input_tps : float
        The planned peak, tokens per second.
    equivalents : float
        Replica-equivalents of work at the planned peak (``output/R_out + input/R_in``).
    mean_equivalents : float or None
        The same at the forecast week's mean load (None when the plan has no forecast).
    usd_per_m_output_at_rating, usd_per_m_input_at_rating : float
        USD per million tokens with every replica at its rating (the throughput at the slots the
        TPOT objective allows): the least a token can cost on this configuration within the
        objectives. On demand.
    usd_per_m_output, usd_per_m_input : float
        At the planned peak: the fleet's cost per hour shared between output and input tokens
        by the replica time they take (``N / E`` times the rating's price).
    usd_per_m_output_week, usd_per_m_input_week : float or None
        Over the forecast week (the static fleet's bill over its tokens at the week's mean load).
    notes : tuple of str
    """

    replicas: int
    replica: ReplicaPrice
    gpus: int
    usd_per_hour: float
    usd_per_week: float
    usd_per_year: float
    reserved_usd_per_hour: float
    reserved_usd_per_week: float
    reserved_usd_per_year: float
    output_tps: float
    input_tps: float
    equivalents: float
    mean_equivalents: float | None
    usd_per_m_output_at_rating: float
    usd_per_m_input_at_rating: float
    usd_per_m_output: float
    usd_per_m_input: float
    usd_per_m_output_week: float | None
    usd_per_m_input_week: float | None
    notes: tuple = ()

    def table(self) -> pd.DataFrame:
        """The rows ``cost`` adds to :meth:`capbook.plan.steps.CapacityPlan.table`: ``step``,
        ``quantity``, ``value``, ``unit``."""
        r = self.replica
        rows = [
            ("GPU", r.gpu, ""),
            ("GPUs per replica", r.gpus, "GPUs"),
            ("GPUs", self.gpus, "GPUs"),
            ("on-demand price", r.price.on_demand, "USD per GPU-hour"),
            ("reserved price", r.price.reserved, "USD per GPU-hour"),
            ("USD per hour", self.usd_per_hour, "USD"),
            ("USD per week", self.usd_per_week, "USD"),
            ("USD per year", self.usd_per_year, "USD"),
            ("USD per hour (reserved)", self.reserved_usd_per_hour, "USD"),
            ("USD per week (reserved)", self.reserved_usd_per_week, "USD"),
            ("USD per year (reserved)", self.reserved_usd_per_year, "USD"),
            ("USD per million output tokens", self.usd_per_m_output, "USD"),
            ("USD per million input tokens", self.usd_per_m_input, "USD"),
            ("USD per million output tokens at the rating", self.usd_per_m_output_at_rating, "USD"),
            ("USD per million input tokens at the rating", self.usd_per_m_input_at_rating, "USD"),
        ]
        if self.usd_per_m_output_week is not None:
            rows += [("USD per million output tokens over the forecast week", self.usd_per_m_output_week, "USD"),
                     ("USD per million input tokens over the forecast week", self.usd_per_m_input_week, "USD")]
        return pd.DataFrame([{"step": "cost", "quantity": q, "value": v, "unit": u} for q, v, u in rows])

    def render(self, markdown: bool = False) -> str:
        """The cost as a few lines of text (a section of the plan's review document)."""
        r = self.replica
        h2 = "## " if markdown else ""
        md = _md_text if markdown else str     # the GPU's and the notes' names are the reader's
        lines = [f"{h2}Cost", "",
                 f"- {self.replicas} replicas × {r.gpus} {md(r.gpu)} = {self.gpus} GPUs at {_usd(r.price.on_demand)} per "
                 f"GPU-hour on demand ({_usd(r.price.reserved)} reserved)",
                 f"- On demand: {_usd(self.usd_per_hour)} per hour, {_usd(self.usd_per_week, 0)} per week, "
                 f"{_usd(self.usd_per_year, 0)} per year",
                 f"- Reserved: {_usd(self.reserved_usd_per_hour)} per hour, {_usd(self.reserved_usd_per_week, 0)} per "
                 f"week, {_usd(self.reserved_usd_per_year, 0)} per year",
                 f"- Per million tokens at the planned peak: {_usd(self.usd_per_m_output)} output, "
                 f"{_usd(self.usd_per_m_input)} input ({self.replicas} replicas carry {self.equivalents:.1f} "
                 "replica-equivalents of work)",
                 f"- Per million tokens at the rating (every replica at the SLO's throughput): "
                 f"{_usd(self.usd_per_m_output_at_rating)} output, {_usd(self.usd_per_m_input_at_rating)} input"]
        if self.usd_per_m_output_week is not None:
            lines.append(f"- Per million tokens over the forecast week (mean load, {self.mean_equivalents:.1f} "
                         f"replica-equivalents): {_usd(self.usd_per_m_output_week)} output, "
                         f"{_usd(self.usd_per_m_input_week)} input")
        lines += [f"- {md(n)}" for n in self.notes]
        return "\n".join(lines) + "\n"


def _usd(x: float, digits: int = 2) -> str:
    """Dollars with ``digits`` decimals; amounts under ten cents keep two significant figures
    (a price per million input tokens can be a fraction of a cent)."""
    if digits == 2 and 0 < abs(x) < 0.1:
        return f"${x:.2g}"
    return f"${x:,.{digits}f}"


def plan_cost(plan, prices, *, sweep=None, gpu: str | None = None, tensor_parallel: int | None = None,
              replicas: int | None = None) -> PlanCost:
    """The cost of a capacity plan.

    Parameters
    ----------
    plan : capbook.plan.steps.CapacityPlan
    prices : PriceTable, path or DataFrame
    sweep : capbook.sweeps.sweep.Sweep, optional
        The plan's sweep, for its GPU and tensor-parallel degree (default: the ones the plan
        recorded from it, ``plan.source["gpu"]`` and ``plan.source["tensor_parallel"]``).
    gpu, tensor_parallel : optional
        Override or supply the GPU type and GPUs per replica (see :func:`~capbook.cost.prices.replica_price`).
    replicas : int, optional
        Replicas to price (default: the plan's headline :attr:`~capbook.plan.steps.CapacityPlan.total`).

    Returns
    -------
    PlanCost

    Examples
    --------
    The sample plan (25 replicas of one A100, the fleet its simulation verifies plus burst and
    spare) at the illustrative $2.20 per GPU-hour:

    >>> from capbook import datasets
    >>> from capbook.cost.prices import load_sample_prices
    >>> from capbook.plan.steps import capacity_plan
    >>> plan = capacity_plan(**datasets.plan_inputs().arguments)
    >>> c = plan_cost(plan, load_sample_prices())
    >>> c.gpus, round(c.usd_per_hour, 2), round(c.usd_per_week)
    (25, 55.0, 9240)
    """
    src = sweep if sweep is not None else _SweepConfig(plan)
    rp = replica_price(src, prices, gpu=gpu, tensor_parallel=tensor_parallel)
    n = int(plan.total if replicas is None else replicas)
    if n < 1:
        raise ValueError(f"replicas must be >= 1, got {replicas!r}")
    od, rs = n * rp.on_demand_usd_per_hour, n * rp.reserved_usd_per_hour
    rating = plan.rating
    out, inp = float(plan.output_tps), float(plan.input_tps)
    e_peak = out / rating.output_tps + inp / rating.input_tps
    per_out = rp.on_demand_usd_per_hour / (3600.0 * rating.output_tps) * 1e6
    per_in = rp.on_demand_usd_per_hour / (3600.0 * rating.input_tps) * 1e6
    notes = [rp.note] if rp.note else []
    e_mean = w_out = w_in = None
    try:
        wk = week_demand(plan)
    except ValueError as exc:
        notes.append(f"{_NO_WEEK}: {exc}")
    else:
        mean_out = float(wk.point.mean())
        e_mean = mean_out / rating.output_tps + mean_out * plan.demand.input_per_output / rating.input_tps
        w_out, w_in = per_out * n / e_mean, per_in * n / e_mean
    return PlanCost(n, rp, n * rp.gpus, od, od * HOURS_PER_WEEK, od * HOURS_PER_YEAR,
                    rs, rs * HOURS_PER_WEEK, rs * HOURS_PER_YEAR, out, inp, e_peak, e_mean,
                    per_out, per_in, per_out * n / e_peak, per_in * n / e_peak, w_out, w_in, tuple(notes))


_NO_WEEK = "no per-token cost over the forecast week"


class _SweepConfig:
    """The GPU and tensor-parallel degree a plan recorded from its sweep, in a sweep's shape."""

    def __init__(self, plan):
        self.name = plan.source.get("sweep", "sweep")
        self.config = {"gpu": plan.source.get("gpu"), "tensor_parallel": plan.source.get("tensor_parallel")}


# --------------------------------------------------------------------------------------------
# The plan's sizing as a function of the peak
# --------------------------------------------------------------------------------------------
class FleetCurve:
    """Replicas the plan buys for a peak of the plan's traffic mix, at any size.

    The plan's serving count is the smallest fleet its simulation verified at the planned peak
    (:func:`capbook.plan.replay.verify_plan`); that fixes the rate one replica carries within the
    objectives, ``plan.request_rate / plan.serving``. For another peak the serving count is that
    peak over this rate, rounded up (so at the plan's own peak it is exactly the plan's count),
    and the burst headroom and failure spares are stacked on it by the plan's own step
    (:func:`capbook.plan.steps.stack_fleet`). It does not simulate again: a much smaller peak
    pools less and needs a little more per request than this, a much larger one a little less
    (the pooling chapter); re-plan with ``demand_scale=`` to verify a different peak.

    Parameters
    ----------
    plan : capbook.plan.steps.CapacityPlan
    sweep : capbook.sweeps.sweep.Sweep
        The plan's sweep (kept for callers; the curve reads only the plan).
    """

    def __init__(self, plan, sweep):
        self.plan = plan
        self.sweep = sweep
        self._mean_out = float(plan.mean_output_tokens)
        fl = plan.fleet
        self._ramp_share = fl.ramp_per_min / fl.peak_rate if fl.peak_rate > 0 else 0.0
        self._lag = float(fl.lag_min)
        self._spares, self._zones = int(fl.spares), fl.zones
        self._per_replica_rps = float(plan.request_rate) / int(plan.serving)
        self._memo: dict[float, int] = {}

    def serving(self, output_tps: float) -> int:
        """Serving replicas for a peak of ``output_tps`` output tokens/s (before burst and spares)."""
        return self._stack(output_tps).serving

    def _stack(self, output_tps: float):
        # the plan's own step 8 (capbook.plan.steps.stack_fleet) on a demand of this peak
        x = positive(output_tps, "output_tps")
        lam = x / self._mean_out
        serving = max(1, int(math.ceil(lam / self._per_replica_rps - 1e-9)))
        demand = dataclasses.replace(self.plan.demand, request_rate=lam)
        return stack_fleet(demand, self.plan.replica, self.plan.queue, serving=serving,
                           ramp_per_min=self._ramp_share, lag_min=self._lag, spares=self._spares, zones=self._zones)

    def replicas(self, output_tps: float) -> int:
        """Total replicas (serving + burst + spares) for a peak of ``output_tps`` output tokens/s
        of the plan's mix."""
        x = float(output_tps)
        if x not in self._memo:
            self._memo[x] = int(self._stack(x).total)
        return self._memo[x]

    def capacity(self, replicas: int, rtol: float = 1e-9) -> float:
        """Highest peak (output tokens/s) that ``replicas`` total replicas carry by the plan's
        rules (0.0 when even a trickle needs more)."""
        n = int(replicas)
        tiny = 1e-6 * self.plan.output_tps
        if self.replicas(tiny) > n:
            return 0.0
        lo, hi = tiny, max(self.plan.output_tps, tiny)
        while self.replicas(hi) <= n:
            lo, hi = hi, 2.0 * hi
        while hi - lo > rtol * hi:
            mid = 0.5 * (lo + hi)
            if self.replicas(mid) <= n:
                lo = mid
            else:
                hi = mid
        return lo


# --------------------------------------------------------------------------------------------
# The forecast week as a distribution
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class WeekDemand:
    """The plan's forecast week as a distribution, hour by hour (build it with :func:`week_demand`).

    Hour ``h`` of the week has demand ``point[h] × exp(e)`` output tokens/s, with ``e`` drawn
    from ``log_errors`` (the backtest's out-of-sample log errors at the plan's horizon, the
    sample the forecast bands are quantiles of). The week's busiest hour has the sample
    ``peaks`` (one per backtest origin: its week of errors laid over the point forecast), the
    sample the planned peak is a quantile of.

    Attributes
    ----------
    hours : pandas.DatetimeIndex
        The 168 hours (UTC) of the forecast week.
    point : numpy.ndarray
        Point forecast per hour, output tokens/s (times the plan's demand scale).
    log_errors : numpy.ndarray
        Log errors, pooled over hours and origins.
    peaks : numpy.ndarray
        The week's busiest hour, one value per backtest origin, output tokens/s.
    method : str
        The forecast method (``"calibrated"`` or ``"sqrt_h"``).
    mean_output_tokens : float
        Output tokens per request, to count requests.
    """

    hours: pd.DatetimeIndex
    point: np.ndarray
    log_errors: np.ndarray
    peaks: np.ndarray
    method: str
    mean_output_tokens: float

    def peak(self, quantile: float) -> float:
        """The quantile of the week's busiest hour (output tokens/s), as the plan reads it (the
        linearly interpolated quantile of ``peaks``, :func:`capbook.forecast.tokens.forecast_tokens`)."""
        q = probability(quantile, "quantile", closed=True)
        return float(np.quantile(self.peaks, q))

    def peak_quantile(self, output_tps: float) -> float:
        """The quantile at which :meth:`peak` equals ``output_tps`` (0 or 1 outside the sample)."""
        p = np.sort(self.peaks)
        pos = np.linspace(0.0, 1.0, p.size)
        x = positive(output_tps, "output_tps")
        if x <= p[0]:
            return 0.0
        if x >= p[-1]:
            return 1.0
        return float(np.interp(x, p, pos))

    def band(self, quantile: float) -> np.ndarray:
        """The quantile line per hour (output tokens/s): each hour at its own quantile."""
        q = probability(quantile, "quantile")
        return self.point * float(np.exp(np.quantile(self.log_errors, q)))

    def excess(self, capacity_tps: float) -> float:
        """Expected output tokens per second above ``capacity_tps``, summed over the week's hours
        (multiply by 3600 for tokens over the week)."""
        k = nonnegative(capacity_tps, "capacity_tps")
        f = np.exp(np.sort(self.log_errors))
        d = self.point[:, None] * f[None, :]
        return float(np.maximum(d - k, 0.0).mean(axis=1).sum())

    def hours_over(self, capacity_tps: float) -> float:
        """Expected hours in the week with demand above ``capacity_tps``."""
        k = nonnegative(capacity_tps, "capacity_tps")
        d = self.point[:, None] * np.exp(self.log_errors)[None, :]
        return float((d > k).mean(axis=1).sum())

    def late_requests(self, capacity_tps: float) -> float:
        """Expected requests in the week beyond ``capacity_tps`` (served late or refused)."""
        return self.excess(capacity_tps) * 3600.0 / self.mean_output_tokens


def week_demand(plan) -> WeekDemand:
    """The plan's forecast week (at its horizon) as an hourly distribution.

    Read from the forecast the plan made (:attr:`capbook.plan.steps.PeakForecast.forecast` at
    the plan's horizon: its point forecast and backtest log errors), so that
    ``week_demand(plan).peak(plan.quantile)`` is the plan's planned peak and the forecast is
    not run again.

    Raises
    ------
    ValueError
        When the plan had no forecast (it used the busiest observed hour).
    """
    h = int(plan.horizon_weeks)
    pk = plan.peaks[h]
    if pk.method == "observed":
        raise ValueError("the plan's peak is the busiest observed hour (no forecast was possible), so there is no "
                         "forecast distribution to price quantiles on; give a longer hourly history")
    f = pk.forecast
    if f is None or f.error_weeks is None:
        raise ValueError("the plan's peak carries no forecast to read the week from (a PeakForecast built by hand?); "
                         "plan with capbook.plan.steps.capacity_plan")
    scale = float(plan.demand_scale)
    point = f.frame["point"].to_numpy().reshape(h, fc.HOURS_PER_WEEK)[h - 1]
    e = f.error_weeks[h - 1]
    peaks = (point[None, :] * np.exp(e)).max(axis=1)
    hours = f.frame.index[f.frame["horizon_week"].to_numpy() == h]
    return WeekDemand(pd.DatetimeIndex(hours), point / 3600.0 * scale, e.ravel(), peaks / 3600.0 * scale, f.method,
                      float(plan.mean_output_tokens))


# --------------------------------------------------------------------------------------------
# The price of the quantile, and the quantile a price of saturation calls for
# --------------------------------------------------------------------------------------------
def _weekly(replicas, rp: ReplicaPrice, basis: str) -> float:
    return replicas * rp.per_hour(basis) * HOURS_PER_WEEK


def price_of_quantiles(plan, sweep, prices, quantiles: Sequence[float] = (0.5, 0.9, 0.99), *,
                       saturation_usd: float | None = None, basis: str = "on_demand",
                       gpu: str | None = None, tensor_parallel: int | None = None) -> pd.DataFrame:
    """The weekly cost of planning to each quantile of the forecast week's busiest hour.

    Parameters
    ----------
    plan : capbook.plan.steps.CapacityPlan
    sweep : capbook.sweeps.sweep.Sweep
        The plan's sweep.
    prices : PriceTable, path or DataFrame
    quantiles : sequence of float
        Quantiles of the peak hour (0.9: the P90 peak hour).
    saturation_usd : float, optional
        Dollars per request served late or refused; adds the expected saturation cost.
    basis : {"on_demand", "reserved"}
        Price per replica-hour used.

    Returns
    -------
    pandas.DataFrame
        Index ``quantile``; ``peak_output_tps``, ``replicas``, ``capacity_output_tps`` (the
        highest peak those replicas carry by the plan's rules), ``usd_per_week``,
        ``extra_usd_per_week`` (against the plan's own quantile), ``hours_over`` and
        ``late_requests`` (expected per week beyond the capacity) and, with
        ``saturation_usd``, ``saturation_usd_per_week`` and ``total_usd_per_week``.
    """
    rp = replica_price(sweep, prices, gpu=gpu, tensor_parallel=tensor_parallel)
    wk = week_demand(plan)
    curve = FleetCurve(plan, sweep)
    c_s = None if saturation_usd is None else nonnegative(saturation_usd, "saturation_usd")
    rows = []
    base = _weekly(curve.replicas(wk.peak(plan.quantile)), rp, basis)
    for q in quantiles:
        qq = probability(q, "quantile")
        pk = wk.peak(qq)
        n = curve.replicas(pk)
        cap = curve.capacity(n)
        row = {"quantile": qq, "peak_output_tps": pk, "replicas": n, "capacity_output_tps": cap,
               "usd_per_week": _weekly(n, rp, basis)}
        row["extra_usd_per_week"] = row["usd_per_week"] - base
        row["hours_over"] = wk.hours_over(cap)
        row["late_requests"] = wk.late_requests(cap)
        if c_s is not None:
            row["saturation_usd_per_week"] = c_s * row["late_requests"]
            row["total_usd_per_week"] = row["usd_per_week"] + row["saturation_usd_per_week"]
        rows.append(row)
    return pd.DataFrame(rows).set_index("quantile")


@dataclass(frozen=True, eq=False)
class OptimalQuantile:
    """The fleet that minimises capacity cost plus saturation cost (see :func:`optimal_quantile`).

    Attributes
    ----------
    replicas : int
        The cheapest fleet in total (capacity + expected saturation) cost per week.
    quantile : float
        The peak-hour quantile to plan to for that fleet: the quantile of the busiest hour at
        the fleet's capacity (planning to any quantile in ``quantile_range`` buys it).
    quantile_range : tuple of float
        ``(lowest, highest)`` quantile whose plan buys ``replicas``.
    saturation_usd : float
        Dollars per request served late or refused, as given.
    usd_per_request : float
        What serving one request costs at the rating (the replica's price per second over the
        requests per second it carries at the rating, for the plan's mix).
    price_ratio : float
        ``saturation_usd / usd_per_request``: a late request costs this many served ones.
    costs : pandas.DataFrame
        Per fleet size (index ``replicas``): ``capacity_output_tps``, ``quantile`` (of the peak at
        that capacity), ``capacity_usd_per_week``, ``idle_usd_per_week``, ``hours_over``,
        ``late_requests``, ``saturation_usd_per_week``, ``total_usd_per_week``.
    conventional : pandas.Series
        The row of ``costs`` for the plan's own quantile's fleet.
    basis : str
    """

    replicas: int
    quantile: float
    quantile_range: tuple
    saturation_usd: float
    usd_per_request: float
    price_ratio: float
    costs: pd.DataFrame = field(repr=False)
    conventional: pd.Series = field(repr=False)
    basis: str = "on_demand"

    @property
    def saving_usd_per_week(self) -> float:
        """Total weekly cost of the conventional plan minus that of the optimum (≥ 0)."""
        return float(self.conventional["total_usd_per_week"] - self.costs.loc[self.replicas, "total_usd_per_week"])


def optimal_quantile(plan, sweep, prices, saturation_usd: float, *, basis: str = "on_demand",
                     span: int | None = None, gpu: str | None = None,
                     tensor_parallel: int | None = None) -> OptimalQuantile:
    """The fleet size, and the quantile, that minimise capacity cost plus saturation cost.

    With ``N`` replicas the fleet carries peaks up to ``K(N)`` output tokens/s by the plan's
    rules (:meth:`FleetCurve.capacity`). Each hour of the forecast week whose demand exceeds
    ``K(N)`` serves the excess late or refuses it; each such request costs ``saturation_usd``.
    The expected weekly cost is

    .. math::

        C(N) = N\\, p\\, 168 + c_s \\sum_{h=1}^{168} E\\big[(D_h - K(N))^+\\big]\\, \\frac{3600}{m},

    with ``p`` the replica's price per hour, ``D_h`` the hour's demand (the forecast
    distribution, :class:`WeekDemand`) and ``m`` output tokens per request. Every fleet size
    from one replica to ``span`` replicas past the plan at P99.9 is evaluated, so the minimum
    is exact for this cost model; the quantile reported is the peak-hour quantile at the
    optimum's capacity (0 when it is below every busiest hour the backtest saw). The idle cost
    is the capacity cost times ``1 − mean demand / K(N)`` (the whole capacity cost when the
    mean demand exceeds the capacity: then nothing is idle on average, but the formula's share
    is floored at 0). In the continuous limit the optimum satisfies
    ``expected hours over capacity = 168 × p × m / (3600 × c_s × k)`` with ``k`` output tokens/s
    per replica: a late request that costs ``ρ`` times a served one allows about ``168 / ρ``
    hours a week over capacity (:attr:`OptimalQuantile.price_ratio`).

    Requests above the capacity are counted late in full and those below it on time: a
    stylised account (a saturated fleet delays more than the excess, a fleet just below it
    delays less), for choosing a quantile, not for predicting the week's goodput.

    Parameters
    ----------
    plan : capbook.plan.steps.CapacityPlan
    sweep : capbook.sweeps.sweep.Sweep
    prices : PriceTable, path or DataFrame
    saturation_usd : float
        Dollars per request served late or refused (a product number), > 0.
    basis : {"on_demand", "reserved"}
    span : int, optional
        Fleet sizes evaluated beyond the plan at P99.9 (default: a third of it, at least 3).

    Returns
    -------
    OptimalQuantile
    """
    c_s = positive(saturation_usd, "saturation_usd")
    rp = replica_price(sweep, prices, gpu=gpu, tensor_parallel=tensor_parallel)
    wk = week_demand(plan)
    curve = FleetCurve(plan, sweep)
    hi = curve.replicas(wk.peak(0.999))
    extra = max(3, hi // 3) if span is None else int(span)
    rows = []
    mean_d = float(wk.point.mean()) * float(np.exp(wk.log_errors).mean())
    for n in range(1, hi + extra + 1):
        cap = curve.capacity(n)
        late = wk.late_requests(cap)  # a fleet too small to carry any load serves every request late
        cap_usd = _weekly(n, rp, basis)
        served = min(mean_d, cap) if cap > 0 else 0.0
        rows.append({"replicas": n, "capacity_output_tps": cap,
                     "quantile": wk.peak_quantile(cap) if cap > 0 else 0.0,
                     "capacity_usd_per_week": cap_usd,
                     "idle_usd_per_week": cap_usd * max(0.0, 1.0 - served / cap) if cap > 0 else cap_usd,
                     "hours_over": wk.hours_over(cap), "late_requests": late,
                     "saturation_usd_per_week": c_s * late})
    costs = pd.DataFrame(rows).set_index("replicas")
    costs["total_usd_per_week"] = costs["capacity_usd_per_week"] + costs["saturation_usd_per_week"]
    best = int(costs["total_usd_per_week"].idxmin())
    q_hi = float(costs.loc[best, "quantile"])
    q_lo = float(costs.loc[best - 1, "quantile"]) if best - 1 in costs.index else 0.0
    n_conv = curve.replicas(wk.peak(plan.quantile))
    if n_conv not in costs.index:  # pragma: no cover (the range spans P1..P99.9)
        raise ValueError("the plan's own fleet is outside the fleet sizes evaluated")
    # the rating: requests per second one replica carries with the plan's mix, at 100 %
    rating = plan.rating
    req_per_s = 1.0 / (plan.mean_output_tokens / rating.output_tps + plan.mean_input_tokens / rating.input_tps)
    per_req = rp.per_hour(basis) / 3600.0 / req_per_s
    return OptimalQuantile(best, q_hi, (q_lo, q_hi), c_s, per_req, c_s / per_req, costs, costs.loc[n_conv], basis)


# --------------------------------------------------------------------------------------------
# Reserved against on-demand
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class ReserveSplit:
    """How many replicas to reserve when the fleet follows the hour-of-week demand.

    Attributes
    ----------
    hourly : pandas.DataFrame
        One row per hour of the forecast week: ``period_start``, ``hour_of_week``,
        ``output_tps`` (the hour's demand at the plan's quantile) and ``replicas`` (what the
        plan's rules buy for it).
    duration : pandas.DataFrame
        Index ``replica`` (1 = the first replica); ``share_of_hours`` that need it at least,
        ``reserve`` (True when that share reaches the break-even).
    break_even_share : float
        ``reserved / on-demand`` price: a replica needed in more hours than this share is
        cheaper reserved.
    reserved : int
        Replicas to reserve.
    static_replicas : int
        The static plan's replicas (the plan's headline).
    usd_per_week : dict
        ``"static, on demand"``, ``"static, reserved"``, ``"following, on demand"``,
        ``"following, reserved floor + on demand"``.
    on_demand_replica_hours : float
        Replica-hours a week left to on demand (or autoscaling) in the split.
    replica : ReplicaPrice
    source : str
        ``"forecast"`` (the forecast week at the quantile) or ``"observed"`` (no forecast was
        possible: the last whole observed week, scaled so that its busiest hour is the planned
        peak).
    """

    hourly: pd.DataFrame = field(repr=False)
    duration: pd.DataFrame = field(repr=False)
    break_even_share: float
    reserved: int
    static_replicas: int
    usd_per_week: dict
    on_demand_replica_hours: float
    replica: ReplicaPrice
    source: str = "forecast"

    def table(self) -> pd.DataFrame:
        """The four ways to pay, per week, with the saving against the static reserved fleet."""
        t = pd.DataFrame({"usd_per_week": pd.Series(self.usd_per_week)})
        t["vs_static_reserved"] = t["usd_per_week"] / self.usd_per_week["static, reserved"] - 1.0
        return t


def reserve_split(plan, sweep, prices, *, quantile: float | None = None, gpu: str | None = None,
                  tensor_parallel: int | None = None) -> ReserveSplit:
    """Reserve the replicas busy often enough to beat the on-demand price; leave the rest on demand.

    Each hour of the forecast week gets the replicas the plan's rules buy for its demand at
    ``quantile`` (default the plan's), as if the fleet followed the week hour by hour (ideal
    autoscaling, its lag covered by the burst headroom). When the plan could not forecast, the
    last whole observed week stands in, scaled so that its busiest hour is the planned peak
    (``source="observed"``); a log of less than a week has no hour-of-week shape and raises. The ``k``-th replica is needed in a
    share ``s_k`` of the hours; reserved it costs ``r × 168`` a week, on demand ``o × 168 × s_k``,
    so reserve it when ``s_k ≥ r / o`` (the break-even share).

    Returns
    -------
    ReserveSplit
    """
    rp = replica_price(sweep, prices, gpu=gpu, tensor_parallel=tensor_parallel)
    curve = FleetCurve(plan, sweep)
    q = plan.quantile if quantile is None else probability(quantile, "quantile")
    try:
        wk = week_demand(plan)
        hours, demand, source = wk.hours, wk.band(q), "forecast"
    except ValueError as exc:
        hours, demand = _observed_week(plan, exc)
        source = "observed"
    n_h = np.array([curve.replicas(x) for x in demand], dtype=int)
    hourly = pd.DataFrame({"period_start": hours, "hour_of_week": np.arange(HOURS_PER_WEEK),
                           "output_tps": demand, "replicas": n_h})
    ks = np.arange(1, int(n_h.max()) + 1)
    share = np.array([(n_h >= k).mean() for k in ks])
    b = rp.price.break_even_share
    reserve = share >= b - 1e-12
    r = int(reserve.sum())  # share decreases with k, so the reserved replicas are the first r
    duration = pd.DataFrame({"share_of_hours": share, "reserve": reserve}, index=pd.Index(ks, name="replica"))
    od_hours = float(np.maximum(n_h - r, 0).sum())
    static = int(plan.total)
    usd = {"static, on demand": static * rp.on_demand_usd_per_hour * HOURS_PER_WEEK,
           "static, reserved": static * rp.reserved_usd_per_hour * HOURS_PER_WEEK,
           "following, on demand": float(n_h.sum()) * rp.on_demand_usd_per_hour,
           "following, reserved floor + on demand": r * rp.reserved_usd_per_hour * HOURS_PER_WEEK
           + od_hours * rp.on_demand_usd_per_hour}
    return ReserveSplit(hourly, duration, b, r, static, usd, od_hours, rp, source)


def _observed_week(plan, why: Exception) -> tuple[pd.DatetimeIndex, np.ndarray]:
    """The last whole observed week of the plan's traffic, scaled so its busiest hour is the
    planned peak: the hour-of-week shape when no forecast was possible."""
    sel = plan.traffic.hourly
    s = sel.groupby("period_start")["output_tokens"].sum().astype(float).sort_index()
    s.index = pd.DatetimeIndex(s.index)
    try:
        s = fc.trim_to_whole_weeks(s).iloc[-HOURS_PER_WEEK:]
    except ValueError as exc:
        raise ValueError(f"{why}; nor does the log cover a whole week of hours for an hour-of-week shape ({exc})") from None
    if s.max() <= 0:
        raise ValueError(f"{why}; and the log's last whole week has no output tokens")
    return pd.DatetimeIndex(s.index), s.to_numpy() * (float(plan.output_tps) / float(s.max()))


# --------------------------------------------------------------------------------------------
# A plan with its price: what capbook plan --prices writes
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class PlanPricing:
    """A plan's cost, its reserve split and the price of its quantile (see :func:`price_plan`).

    Attributes
    ----------
    cost : PlanCost
    reserve : ReserveSplit or None
        None when the plan has no forecast week (see ``notes``).
    quantiles : pandas.DataFrame or None
        :func:`price_of_quantiles` at P50, P90 and P99 (None without a forecast week).
    optimum : OptimalQuantile or None
        :func:`optimal_quantile` when a price of saturation was given.
    notes : tuple of str
    """

    cost: PlanCost
    reserve: ReserveSplit | None = None
    quantiles: pd.DataFrame | None = field(default=None, repr=False)
    optimum: OptimalQuantile | None = None
    notes: tuple = ()
    _plan_q: float = field(default=0.9, repr=False)

    def table(self) -> pd.DataFrame:
        """Rows with step ``cost`` for :meth:`capbook.plan.steps.CapacityPlan.table`."""
        rows = [self.cost.table()]
        extra = []
        if self.reserve is not None:
            r = self.reserve
            extra += [("break-even share of hours (reserved / on-demand price)", r.break_even_share, "share"),
                      ("replicas to reserve (following the week)", r.reserved, "replicas"),
                      ("on-demand replica-hours per week (following the week)", r.on_demand_replica_hours,
                       "replica-hours")]
            extra += [(f"USD per week, {k}", v, "USD") for k, v in r.usd_per_week.items()]
        if self.quantiles is not None:
            for q, row in self.quantiles.iterrows():
                extra += [(f"replicas at the P{100 * q:g} peak hour", int(row["replicas"]), "replicas"),
                          (f"USD per week at the P{100 * q:g} peak hour", float(row["usd_per_week"]), "USD")]
        if self.optimum is not None:
            o = self.optimum
            c = o.costs.loc[o.replicas]
            extra += [("price of saturation", o.saturation_usd, "USD per late request"),
                      ("price ratio (late request / served request)", o.price_ratio, "x"),
                      ("replicas minimising capacity + saturation cost", o.replicas, "replicas"),
                      ("peak-hour quantile of that fleet", o.quantile, "quantile"),
                      ("expected late requests per week at that fleet", float(c["late_requests"]), "requests"),
                      ("USD per week, capacity + saturation, at that fleet", float(c["total_usd_per_week"]), "USD"),
                      (f"USD per week, capacity + saturation, at the P{100 * self._plan_q:g} fleet",
                       float(o.conventional["total_usd_per_week"]), "USD")]
        rows.append(pd.DataFrame([{"step": "cost", "quantity": q, "value": v, "unit": u} for q, v, u in extra]))
        return pd.concat(rows, ignore_index=True)

    def render(self, markdown: bool = False) -> str:
        """The cost section of the plan's text and review document."""
        out = self.cost.render(markdown)
        if self.reserve is not None:
            r, rp = self.reserve, self.reserve.replica
            w = r.usd_per_week
            out += (f"- Reserved against on-demand: a replica needed in more than {100 * r.break_even_share:.0f} % of the "
                    f"hours (reserved / on-demand price) is cheaper reserved. Following the "
                    f"{'forecast' if r.source == 'forecast' else 'last observed'} week hour by hour, "
                    f"reserve {r.reserved} and buy {r.on_demand_replica_hours:,.0f} replica-hours a week on demand: "
                    f"{_usd(w['following, reserved floor + on demand'], 0)} a week, against "
                    f"{_usd(w['static, reserved'], 0)} for all {r.static_replicas} reserved and "
                    f"{_usd(w['static, on demand'], 0)} for all on demand (ideal scaling: it assumes the fleet "
                    "follows the hours)\n")
        if self.quantiles is not None:
            parts = [f"P{100 * q:g}: {int(row['replicas'])} replicas, {_usd(float(row['usd_per_week']), 0)}"
                     for q, row in self.quantiles.iterrows()]
            out += "- The price of the quantile (per week): " + "; ".join(parts) + "\n"
        if self.optimum is not None:
            o = self.optimum
            c = o.costs.loc[o.replicas]
            out += (f"- At {_usd(o.saturation_usd)} per late request ({o.price_ratio:,.0f} times the cost of serving one), "
                    f"capacity plus saturation is cheapest with {o.replicas} replicas ({_quantile_words(o.quantile)}; "
                    f"{float(c['late_requests']):,.0f} late requests expected a week): "
                    f"{_usd(float(c['total_usd_per_week']), 0)} a week, against "
                    f"{_usd(float(o.conventional['total_usd_per_week']), 0)} for the plan's "
                    f"P{100 * self._plan_q:g} fleet ({int(o.conventional.name)} replicas)\n")
        out += "".join(f"- {_md_text(n) if markdown else n}\n" for n in self.notes)
        return out


def _quantile_words(q: float) -> str:
    """Where a fleet's capacity falls among the forecast's busiest hours, in words."""
    if q <= 0:
        return "below the busiest hour of every backtest week"
    if q >= 1:
        return "above the busiest hour of every backtest week"
    return f"the P{100 * q:.0f} peak hour"


def price_plan(plan, sweep, prices, *, saturation_usd: float | None = None, gpu: str | None = None,
               tensor_parallel: int | None = None) -> PlanPricing:
    """Price a plan: :func:`plan_cost`, :func:`reserve_split` and :func:`price_of_quantiles`.

    Parameters
    ----------
    plan : capbook.plan.steps.CapacityPlan
    sweep : capbook.sweeps.sweep.Sweep
        The plan's sweep.
    prices : PriceTable, path or DataFrame
    saturation_usd : float, optional
        Dollars per request served late or refused: adds :func:`optimal_quantile`.
    gpu, tensor_parallel : optional
        The GPU type and GPUs per replica when the sweep does not record them.

    Returns
    -------
    PlanPricing
        Attach it with ``dataclasses.replace(plan, pricing=...)`` (or
        :meth:`capbook.cost.pricing.priced`) to print and export it with the plan.
    """
    table = as_prices(prices)
    cost = plan_cost(plan, table, sweep=sweep, gpu=gpu, tensor_parallel=tensor_parallel)
    if plan.verified is False:  # say so beside the dollars, not only in the headline
        cost = dataclasses.replace(cost, notes=cost.notes + (
            f"the {cost.replicas} replicas priced are Erlang C's count, which the fleet simulation could not verify: "
            "the price of a fleet that may still miss the objectives",))
    try:
        week_demand(plan)
    except ValueError as exc:
        # one note for what a forecast week would have given
        keep = tuple(n for n in cost.notes if not n.startswith(_NO_WEEK))
        if saturation_usd is not None:
            positive(saturation_usd, "saturation_usd")
            keep += ("no optimal quantile for the price of saturation: it needs a forecast distribution",)
        try:
            reserve = reserve_split(plan, sweep, table, gpu=gpu, tensor_parallel=tensor_parallel)
        except ValueError:
            return PlanPricing(dataclasses.replace(cost, notes=keep), None, None, None,
                               (f"no per-token cost over the forecast week, reserve split or price of the quantile: {exc}",))
        return PlanPricing(dataclasses.replace(cost, notes=keep), reserve, None, None,
                           (f"no per-token cost over the forecast week or price of the quantile: {exc}; the reserve split "
                            "uses the last whole observed week, scaled to the planned peak",))
    reserve = reserve_split(plan, sweep, table, gpu=gpu, tensor_parallel=tensor_parallel)
    quantiles = price_of_quantiles(plan, sweep, table, gpu=gpu, tensor_parallel=tensor_parallel)
    optimum = None if saturation_usd is None else optimal_quantile(plan, sweep, table, saturation_usd, gpu=gpu,
                                                                    tensor_parallel=tensor_parallel)
    return PlanPricing(cost, reserve, quantiles, optimum, (), float(plan.quantile))


def priced(plan, sweep, prices, *, saturation_usd: float | None = None, gpu: str | None = None,
           tensor_parallel: int | None = None):
    """``plan`` with its cost (:func:`price_plan`): its :meth:`~capbook.plan.steps.CapacityPlan.table`
    then holds rows with step ``cost`` and its :meth:`~capbook.plan.steps.CapacityPlan.render` a
    cost section.

    Parameters
    ----------
    plan : capbook.plan.steps.CapacityPlan
    sweep : capbook.sweeps.sweep.Sweep
        The plan's sweep.
    prices : capbook.cost.prices.PriceTable, path or DataFrame
        USD per GPU-hour per GPU type (:func:`capbook.cost.prices.read_prices`).
    saturation_usd : float, optional
        Dollars per request served late or refused: adds the fleet that minimises capacity
        plus saturation cost (:func:`capbook.cost.pricing.optimal_quantile`).
    gpu, tensor_parallel : optional
        The GPU type and GPUs per replica when the sweep does not record them.

    Returns
    -------
    capbook.plan.steps.CapacityPlan
        A copy of ``plan``.
    """
    return dataclasses.replace(plan, pricing=price_plan(plan, sweep, prices, saturation_usd=saturation_usd,
                                                        gpu=gpu, tensor_parallel=tensor_parallel))
