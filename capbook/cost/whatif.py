"""What-ifs that plan again: the cheapest configuration of one model (:func:`compare_configurations`),
the price of the TTFT objective (:func:`price_of_objectives`), of dedicated tenant pools
(:func:`price_of_pools`) and of regional pools (:func:`price_of_regions`). Units: US dollars."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from capbook.cost.prices import _basis, as_prices, replica_price, ReplicaPrice
from capbook.cost.pricing import _usd, _weekly, FleetCurve, plan_cost, week_demand
from capbook.forecast.tokens import HOURS_PER_WEEK
from capbook.logs.aggregates import LogAggregates
from capbook.logs.hourly import HOURLY_COLUMNS, read_token_csv
from capbook.logs.scope import select_scope
from capbook.plan.steps import InfeasibleObjective, capacity_plan
from capbook.slo import SLO
from capbook.sweeps.sweep import Sweep
from capbook.validation import number, positive

__all__ = ["Comparison", "compare_configurations", "price_of_objectives", "price_of_pools",
           "time_zone_regions", "price_of_regions"]

# --------------------------------------------------------------------------------------------
# The cheapest configuration
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Comparison:
    """Configurations of one model ranked by cost (build it with :func:`compare_configurations`).

    Attributes
    ----------
    table : pandas.DataFrame
        One row per configuration, cheapest first (ties: more requests per dollar at the rating
        first; those that cannot meet the objectives last):
        ``sweep``, ``gpu``, ``gpus_per_replica``, ``slots``, ``service_time_s``,
        ``requests_per_replica`` (at the rating), ``requests_per_usd`` (requests a dollar of
        replica time serves at the rating), ``serving``, ``burst``, ``spare``,
        ``replicas``, ``gpus``, ``usd_per_hour``, ``usd_per_week``,
        ``usd_per_m_output``, ``usd_per_m_input``, ``binding``, ``verified``, ``status``
        (``"ok"`` or ``"cannot meet"``) and ``reason``.
    plans : dict
        ``{sweep name: CapacityPlan}`` for the configurations that could be planned.
    basis : str
    """

    table: pd.DataFrame = field(repr=False)
    plans: dict = field(repr=False)
    basis: str = "on_demand"

    @property
    def winner(self) -> str | None:
        """The cheapest configuration that meets the objectives (its sweep name)."""
        ok = self.table[self.table["status"] == "ok"]
        return None if ok.empty else str(ok.iloc[0]["sweep"])

    def explain(self) -> str:
        """The ranking in sentences: the winner, by how much, and what binds on each."""
        t = self.table
        ok = t[t["status"] == "ok"]
        if ok.empty:
            return "No configuration meets the objectives: " + "; ".join(f"{r.sweep}: {r.reason}" for r in t.itertuples())
        w = ok.iloc[0]
        price = "on demand" if self.basis == "on_demand" else "reserved"
        lines = [f"Cheapest: {w['sweep']}, {w['replicas']} replicas × {w['gpus_per_replica']} {w['gpu']} = "
                 f"{w['gpus']} GPUs, {_usd(w['usd_per_hour'])} per hour {price} ({_usd(w['usd_per_week'], 0)} per "
                 f"week, {_usd(w['usd_per_m_output'])} per million output tokens at the planned peak)."]
        if len(ok) > 1:
            nxt = ok.iloc[1]
            if math.isclose(nxt["usd_per_hour"], w["usd_per_hour"], rel_tol=1e-9):
                lines.append(f"{nxt['sweep']} costs the same, {_usd(nxt['usd_per_hour'])} per hour: at this load both "
                             "are set by the smallest fleet the rules allow, not by throughput. The tie goes to the one "
                             f"that serves more requests per dollar at the rating ({w['requests_per_usd']:,.0f} against "
                             f"{nxt['requests_per_usd']:,.0f}): it has more room to grow.")
            else:
                same = w["binding"] == nxt["binding"]
                lines.append(f"The next, {nxt['sweep']}, costs {_usd(nxt['usd_per_hour'])} per hour: "
                             f"{100 * (nxt['usd_per_hour'] / w['usd_per_hour'] - 1):.0f} % more. At the rating "
                             f"{w['sweep']} serves {w['requests_per_usd']:,.0f} requests per dollar and {nxt['sweep']} "
                             f"{nxt['requests_per_usd']:,.0f}; "
                             + (f"both serving counts are set by {w['binding']}, so the price follows requests per "
                                "dollar, not the price of a GPU." if same else
                                f"{nxt['sweep']}'s serving count is set by {nxt['binding']}, {w['sweep']}'s by "
                                f"{w['binding']}."))
        for r in t.itertuples():
            if r.status == "ok":
                lines.append(f"- {r.sweep}: S = {r.slots} slots, {r.requests_per_replica:.2f} requests/s per replica "
                             f"at the rating; {r.serving} serving replicas set by {r.binding}, +{r.burst} burst, "
                             f"+{r.spare} spare = {r.replicas} replicas, {r.gpus} GPUs, "
                             f"{_usd(r.usd_per_hour)} per hour"
                             + ("" if r.verified else " (not verified by simulation)"))
            else:
                lines.append(f"- {r.sweep}: cannot meet the objectives: {r.reason}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.explain()


def _sweeps_named(sweeps) -> dict:
    if isinstance(sweeps, Mapping):
        items = list(sweeps.items())
    else:
        items = [(getattr(s, "name", None) or f"sweep {i + 1}", s) for i, s in enumerate(sweeps)]
    if not items:
        raise ValueError("sweeps: give at least one sweep")
    out = {}
    for name, s in items:
        if not isinstance(s, Sweep):
            raise ValueError(f"sweeps[{name!r}] must be a capbook.sweeps.sweep.Sweep, got {type(s).__name__}")
        if name in out:
            raise ValueError(f"sweeps: two sweeps are named {name!r}")
        out[str(name)] = s
    return out


def compare_configurations(log, sweeps, prices, *, basis: str = "on_demand", same_model: bool = True,
                           **plan_kwargs) -> Comparison:
    """The same plan on each configuration of one model, ranked by cost.

    Every sweep is planned by :func:`capbook.plan.steps.capacity_plan` on the same log and objectives
    (the smallest fleet its simulation verifies unless ``simulate=False``, burst, spare), then
    priced with :func:`~capbook.cost.pricing.plan_cost`. A configuration that cannot meet the TPOT objective at any
    measured concurrency (:class:`capbook.plan.steps.InfeasibleObjective`) is listed as
    ``"cannot meet"`` with the reason; any other error (an invalid argument) is raised.

    Parameters
    ----------
    log : capbook.logs.requestlog.RequestLog or capbook.logs.aggregates.LogAggregates
    sweeps : sequence or mapping of capbook.sweeps.sweep.Sweep
        The configurations (GPU types, tensor-parallel layouts) of one model.
    prices : PriceTable, path or DataFrame
    basis : {"on_demand", "reserved"}
        Price the ranking uses.
    same_model : bool
        Refuse sweeps of different models (they are not substitutes for one another).
    **plan_kwargs
        Passed to :func:`capbook.plan.steps.capacity_plan` (``slo``, ``quantile``, ``simulate`` …).

    Returns
    -------
    Comparison
    """
    _basis(basis)
    table = as_prices(prices)
    named = _sweeps_named(sweeps)
    models = {n: s.config.get("model") for n, s in named.items()}
    known = {m for m in models.values() if isinstance(m, str)}
    if same_model and len(known) > 1:
        raise ValueError("sweeps: the configurations are of different models ("
                         + ", ".join(f"{n}: {m}" for n, m in models.items())
                         + "); they are not substitutes for one another: compare the configurations of one model")
    sums = LogAggregates.of(log)
    rows, plans = [], {}
    for name, s in named.items():
        rp = replica_price(s, table)  # a missing price is an input error, not a losing candidate
        base = {"sweep": name, "gpu": rp.gpu, "gpus_per_replica": rp.gpus}
        try:
            p = capacity_plan(sums, s, sweep_label=name, **plan_kwargs)
        except InfeasibleObjective as exc:  # any other error is the caller's input: it propagates
            rows.append({**base, "status": "cannot meet", "reason": str(exc)})
            continue
        plans[name] = p
        c = plan_cost(p, table, sweep=s)
        rating = p.rating
        req = 1.0 / (p.mean_output_tokens / rating.output_tps + p.mean_input_tokens / rating.input_tps)
        rows.append({**base, "slots": int(p.slots.S), "service_time_s": p.service_time_s,
                     "requests_per_replica": req, "requests_per_usd": req * 3600.0 / rp.per_hour(basis),
                     "serving": p.serving, "burst": p.burst.replicas,
                     "spare": p.spare, "replicas": p.total, "gpus": c.gpus,
                     "usd_per_hour": c.usd_per_hour if basis == "on_demand" else c.reserved_usd_per_hour,
                     "usd_per_week": c.usd_per_week if basis == "on_demand" else c.reserved_usd_per_week,
                     "usd_per_m_output": c.usd_per_m_output * (1 if basis == "on_demand" else rp.price.break_even_share),
                     "usd_per_m_input": c.usd_per_m_input * (1 if basis == "on_demand" else rp.price.break_even_share),
                     "binding": p.binding, "verified": bool(p.verified), "status": "ok",
                     "reason": "" if p.verified or p.verified is None else p.verification.reason})
    cols = ["sweep", "gpu", "gpus_per_replica", "slots", "service_time_s", "requests_per_replica",
            "requests_per_usd", "serving",
            "burst", "spare", "replicas", "gpus", "usd_per_hour", "usd_per_week",
            "usd_per_m_output", "usd_per_m_input", "binding", "verified", "status", "reason"]
    t = pd.DataFrame(rows).reindex(columns=cols)
    t["_rank"] = (t["status"] != "ok").astype(int)
    # cheapest first; between equal prices, the one with more requests per dollar at the rating
    t = t.sort_values(["_rank", "usd_per_hour", "requests_per_usd"], ascending=[True, True, False],
                      kind="stable").drop(columns="_rank").reset_index(drop=True)
    for c in ("slots", "serving", "burst", "spare", "replicas", "gpus"):
        t[c] = t[c].astype(int) if t[c].notna().all() else t[c].astype("Int64")  # blank where it cannot meet
    return Comparison(t, plans, basis)


# --------------------------------------------------------------------------------------------
# The price of the objective, of dedicated pools, of regional pools
# --------------------------------------------------------------------------------------------
def _plan_row(label, p, rp: ReplicaPrice, basis: str) -> dict:
    v = p.verification
    return {"option": label, "replicas": int(p.total), "verified": v.status,
            "reason": "" if v.met or not v.reason else v.reason,
            "binding": p.binding, "usd_per_week": _weekly(p.total, rp, basis)}


def price_of_objectives(log, sweep, prices, ttft_targets_s: Sequence[float] = (0.5, 1.0, 2.0), *,
                        slo=None, basis: str = "on_demand", gpu: str | None = None,
                        tensor_parallel: int | None = None, **plan_kwargs) -> pd.DataFrame:
    """The weekly cost of each TTFT objective, the rest of the plan unchanged.

    Each target is planned by :func:`capbook.plan.steps.capacity_plan` (the fleet simulation included
    unless ``simulate=False``): a tighter TTFT tail moves the simulated count, not the rating.

    Returns
    -------
    pandas.DataFrame
        Index ``ttft_target_s``; ``replicas``, ``verified`` (the simulation's verdict), ``reason``
        (why the simulation could not verify it, empty when it did), ``binding``, ``usd_per_week``
        and ``extra_usd_per_week`` against the loosest target.
    """
    rp = replica_price(sweep, prices, gpu=gpu, tensor_parallel=tensor_parallel)
    base = SLO() if slo is None else slo
    sums = LogAggregates.of(log)
    rows = []
    for t in ttft_targets_s:
        tt = positive(t, "ttft_target_s")
        p = capacity_plan(sums, sweep, slo=dataclasses.replace(base, ttft_target_s=tt), **plan_kwargs)
        rows.append({"ttft_target_s": tt, **_plan_row(f"p{100 * base.ttft_quantile:g} TTFT ≤ {tt:g} s", p, rp, basis)})
    out = pd.DataFrame(rows).set_index("ttft_target_s").sort_index()
    out["extra_usd_per_week"] = out["usd_per_week"] - out["usd_per_week"].iloc[-1]
    return out.drop(columns="option")


def _tenant_hourly(log, history, tenant_col: str) -> pd.DataFrame:
    """Hourly sums per model, tier and tenant: from ``history`` when given, else from the log."""
    if history is None:
        return log.hourly(by=("model", "tier", tenant_col))
    frame = read_token_csv(history) if isinstance(history, (str, Path)) else history.copy()
    if tenant_col not in frame.columns:
        raise ValueError(f"history: no {tenant_col!r} column, so it cannot be split into pools; columns are "
                         f"{list(frame.columns)}")
    frame["period_start"] = pd.to_datetime(frame["period_start"], utc=True)
    sums = list(HOURLY_COLUMNS[3:])
    return frame.groupby(["period_start", "model", "tier", tenant_col], as_index=False, sort=True)[sums].sum()


def price_of_pools(log, sweep, prices, *, history=None, by: str = "tenant", basis: str = "on_demand",
                   gpu: str | None = None, tensor_parallel: int | None = None, **plan_kwargs) -> pd.DataFrame:
    """Dedicated pools per tenant against one shared pool, each planned by the same rules.

    Every tenant's traffic is planned on its own (its hourly history forecast, its busiest
    minutes, its own queueing, burst headroom and spare) and the pools summed; the shared pool
    is the plan of all of them together. The fleet simulation is skipped for all
    (``simulate=False``, Erlang C's counts) so that the comparison is model against model.

    Parameters
    ----------
    log : capbook.logs.requestlog.RequestLog or capbook.logs.aggregates.LogAggregates
        A log with a ``tenant`` column (summed once with :meth:`capbook.logs.aggregates.LogAggregates.of`
        is faster when it is planned again).
    history : path or DataFrame, optional
        Hourly sums with a ``tenant`` column (the sample gateway's ``hourly.csv``); default the
        log's own hours. With a :class:`~capbook.logs.aggregates.LogAggregates` that forecasts from a
        history, this must be that history split by tenant (the shared pool keeps the summed
        one).
    by : str
        The column that names the pools.

    Returns
    -------
    pandas.DataFrame
        One row per pool and a ``shared`` row and a ``dedicated (sum)`` row: ``replicas``,
        ``binding``, ``usd_per_week``, ``peak_output_tps``.
    """
    rp = replica_price(sweep, prices, gpu=gpu, tensor_parallel=tensor_parallel)
    kw = {**plan_kwargs, "simulate": False}
    if isinstance(log, LogAggregates):  # already summed (with its history, if any): history only splits the pools
        sums = log
        if history is None and sums.history_label is not None:
            raise ValueError(f"the log's forecast reads the history {sums.history_label}, which is not split by {by}; "
                             f"give history= with a {by!r} column so that every pool is forecast from the same weeks")
    else:
        sums = LogAggregates.of(log, history=history) if history is not None else LogAggregates.of(log)
    if not sums.has_tenants:
        raise ValueError(f"the request log has no {by!r} column: there are no pools to compare")
    hourly_t = _tenant_hourly(sums.log, history, by)
    minute = sums.per_minute
    shared = capacity_plan(sums, sweep, **kw)
    tier = shared.traffic.tier
    names = sorted(map(str, pd.unique(select_scope(minute, shared.traffic.model, tier or None)[by])))
    rows = []
    for t in names:
        h = hourly_t[hourly_t[by] == t].drop(columns=by)
        m = minute[minute[by] == t]
        if h.empty or h["output_tokens"].sum() <= 0:
            continue
        agg = dataclasses.replace(sums, label=f"{sums.label} [{by} {t}]", hourly=h, per_minute=m)
        p = capacity_plan(agg, sweep, **kw)
        rows.append({"pool": t, "replicas": p.total, "binding": p.binding, "peak_output_tps": p.output_tps,
                     "usd_per_week": _weekly(p.total, rp, basis)})
    ded = pd.DataFrame(rows)
    out = pd.concat([ded, pd.DataFrame([
        {"pool": "dedicated (sum)", "replicas": int(ded["replicas"].sum()), "binding": "",
         "peak_output_tps": float(ded["peak_output_tps"].sum()), "usd_per_week": float(ded["usd_per_week"].sum())},
        {"pool": "shared", "replicas": shared.total, "binding": shared.binding, "peak_output_tps": shared.output_tps,
         "usd_per_week": _weekly(shared.total, rp, basis)}])], ignore_index=True)
    return out.set_index("pool")


def time_zone_regions(week: np.ndarray, shifts: Mapping[str, int] | None = None,
                      shares: Mapping[str, float] | None = None) -> pd.DataFrame:
    """Split one week of hourly demand into regions whose days fall at other hours.

    Region ``r`` has ``share_r`` of the week's volume with the same weekly shape, shifted by
    ``shift_r`` hours (``np.roll``): what the same users would look like spread over time zones.

    Parameters
    ----------
    week : array of 168 floats
        Hourly demand (any unit).
    shifts : mapping, optional
        Region name → hours its day is shifted (default ``{"east": -7, "home": 0, "west": 6}``).
    shares : mapping, optional
        Region name → share of the volume (default equal).

    Returns
    -------
    pandas.DataFrame
        One column per region, 168 rows; the columns sum to the week's total volume.
    """
    w = np.asarray(week, dtype=float)
    if w.shape != (HOURS_PER_WEEK,):
        raise ValueError(f"week must hold {HOURS_PER_WEEK} hourly values, got shape {w.shape}")
    shifts = {"east": -7, "home": 0, "west": 6} if shifts is None else dict(shifts)
    if not shifts:
        raise ValueError("shifts: give at least one region")
    if shares is None:
        shares = {r: 1.0 / len(shifts) for r in shifts}
    if set(shares) != set(shifts):
        raise ValueError(f"shares name regions {sorted(shares)}, shifts name {sorted(shifts)}; give the same regions")
    tot = sum(number(v, f"shares[{k!r}]", lo=0) for k, v in shares.items())
    if tot <= 0:
        raise ValueError("shares must not all be 0")
    return pd.DataFrame({r: shares[r] / tot * np.roll(w, int(s)) for r, s in shifts.items()})


def price_of_regions(plan, sweep, prices, regions: pd.DataFrame | None = None, *, basis: str = "on_demand",
                     gpu: str | None = None, tensor_parallel: int | None = None) -> pd.DataFrame:
    """Regional pools, each sized for its own peak, against one global pool sized for the peak of the sum.

    Parameters
    ----------
    plan : capbook.plan.steps.CapacityPlan
    sweep : capbook.sweeps.sweep.Sweep
    prices : PriceTable, path or DataFrame
    regions : pandas.DataFrame, optional
        One column per region of hourly output tokens/s over the same hours (a region column of
        a gateway log, summed per hour). Default: the plan's forecast week split into three
        equal regions 7 hours east and 6 hours west of it (:func:`time_zone_regions`).

    Each pool's planned peak is its busiest hour times the plan's uplift (the planned peak over
    the busiest point-forecast hour: growth and the quantile), sized by :class:`FleetCurve`.

    Returns
    -------
    pandas.DataFrame
        One row per region, ``regional (sum)`` and ``global``: ``peak_output_tps``,
        ``replicas``, ``usd_per_week``.
    """
    rp = replica_price(sweep, prices, gpu=gpu, tensor_parallel=tensor_parallel)
    curve = FleetCurve(plan, sweep)
    wk = week_demand(plan)
    uplift = float(plan.output_tps) / float(wk.point.max())
    reg = time_zone_regions(wk.point) if regions is None else regions
    if not isinstance(reg, pd.DataFrame) or reg.empty:
        raise ValueError("regions must be a non-empty DataFrame, one column of hourly output tokens/s per region")
    rows = []
    for r in reg.columns:
        pk = float(reg[r].max()) * uplift
        n = curve.replicas(pk)
        rows.append({"pool": str(r), "peak_output_tps": pk, "replicas": n, "usd_per_week": _weekly(n, rp, basis)})
    out = pd.DataFrame(rows)
    g_pk = float(reg.sum(axis=1).max()) * uplift
    g_n = curve.replicas(g_pk)
    out = pd.concat([out, pd.DataFrame([
        {"pool": "regional (sum)", "peak_output_tps": float(out["peak_output_tps"].sum()),
         "replicas": int(out["replicas"].sum()), "usd_per_week": float(out["usd_per_week"].sum())},
        {"pool": "global", "peak_output_tps": g_pk, "replicas": g_n, "usd_per_week": _weekly(g_n, rp, basis)}])],
        ignore_index=True)
    return out.set_index("pool")


