"""Step 7 of the capacity plan: the smallest fleet that the fleet simulation verifies.

:func:`verify_plan` replays the log's busiest hours, time-scaled to the planned peak
(:func:`capbook.sim.arrivals.stack_busy_periods`), through fleets of engine replicas
(:mod:`capbook.sim.fleetsim`: continuous batching, chunked prefill, the KV cache, the fitted step
cost) behind the plan's router, and finds the **smallest serving count** whose TTFT at the
objective's quantile and goodput meet the objectives. That count is the plan's headline before
burst headroom and the failure spare; Erlang C, the load-dependent queue and the rating are
cross-checks beside it (:func:`explain_checks` says why each differs).

Each fleet size is run on ``seeds`` replications (each stacks the busy hours in another order
and draws its own client overheads); the TTFT quantile and goodput come with 95 % confidence
margins from batch means (ten batches of consecutive requests per replication, their variances
pooled over the replications). A size meets the
objectives when it meets them with that confidence; while a margin straddles its objective, the
replications are doubled (up to :data:`MAX_SEEDS`) before deciding.

:func:`simulate_serving` runs one fleet size the same way (what ``capbook simulate`` prints).

Examples
--------
>>> from capbook import datasets, plan
>>> p = plan.capacity_plan(**datasets.plan_inputs(datasets.plan_log(), None).arguments, simulate=False)
>>> p.verification.status
'skipped'
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from capbook.engine.stepmodel import ExtrapolationError, fitted_engine
from capbook.logs.aggregates import LogAggregates
from capbook.logs.sql import busy_hours_sql, busy_rows_sql, traffic_where
from capbook.parallel import run_all
from capbook.sim.arrivals import _stack_chosen, stack_busy_periods
from capbook.sim.fleetsim import router_name, simulate_fleet
from capbook.validation import integer

if TYPE_CHECKING:  # the plan imports this module; its types are only annotations here
    from capbook.plan.steps import CapacityPlan

__all__ = ["Verification", "verify_plan", "replay_plan", "simulate_serving", "replay_requests", "busy_hours",
           "explain_checks", "judge_fleet", "check_fleet", "SIM_CAP_MAX", "SIM_BUDGET_S", "MAX_SEEDS"]

#: Most serving replicas the search tries.
SIM_CAP_MAX = 1000
#: Wall-clock seconds the search may spend (it stops and says so beyond).
SIM_BUDGET_S = 120.0
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
         19: 2.093, 29: 2.045, 39: 2.023, 49: 2.010}


@dataclass(frozen=True, eq=False)
class Verification:
    """Step 7, :func:`verify_plan`: the smallest serving fleet the simulation verifies.

    Attributes
    ----------
    status : str
        ``"verified"`` (a fleet size meets the objectives; ``serving`` is the smallest),
        ``"not met"`` (none up to ``cap`` did), ``"impossible"`` (no fleet size can; see
        ``reason``) or ``"skipped"``.
    met : bool or None
        None when skipped.
    reason : str
        A sentence.
    serving : int or None
        Smallest serving count meeting the objectives (None unless verified).
    cap : int or None
        Most serving replicas the search would try.
    tried : pandas.DataFrame or None
        One row per fleet size simulated: ``ttft_q_s`` (TTFT at the objective's quantile over
        every replication), ``ttft_q_margin_s`` (95 % confidence half-width), ``goodput_share``,
        ``goodput_margin`` (95 % half-width), ``seeds``, ``meets``.
    seconds : float
        Wall-clock time of the search.
    sim : dict
        :meth:`capbook.sim.fleetsim.FleetRun.summary` of the headline fleet (the first
        replication) plus ``replicas``, ``replayed_requests``, ``measured_rate``,
        ``ttft_q_s``, ``ttft_q_margin_s``, ``seeds``, ``router``; empty when skipped.
    router : str
        The router simulated.
    notes : tuple of str
    replay : Replayed or None
        The replay data and the first replication of every fleet size the search simulated, for
        :func:`explain_checks` to read instead of simulating them again (None when skipped).
    """

    status: str
    met: bool | None
    reason: str
    serving: int | None = None
    cap: int | None = None
    tried: pd.DataFrame | None = field(default=None, repr=False)
    seconds: float = 0.0
    sim: dict = field(default_factory=dict, repr=False)
    router: str = "pooled"
    notes: tuple = ()
    replay: "Replayed | None" = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, eq=False)
class Replayed:
    """What :func:`verify_plan` replayed, kept so that the plan's later checks reuse it.

    Attributes
    ----------
    data : pandas.DataFrame
        :func:`replay_requests` of the plan's peak (``n_requests`` rows at most).
    n_requests : int
        Requests per replication asked for.
    seed : int
        Seed of the simulations.
    router : str
        The router simulated.
    first : dict
        Serving replicas -> replication ``k = 0`` of that fleet size (what
        :func:`simulate_serving` with ``seeds=1`` runs), for every size the search judged.
    """

    data: pd.DataFrame = field(repr=False)
    n_requests: int
    seed: int
    router: str
    first: dict = field(default_factory=dict, repr=False)

    def matches(self, n_requests: int, seed: int, router: str) -> bool:
        """True when a replay of ``n_requests`` requests with ``seed`` and ``router`` is this one."""
        return (int(n_requests), int(seed), str(router)) == (self.n_requests, self.seed, self.router)


_SKIPPED = Verification("skipped", None, "the fleet simulation was skipped (simulate=False)",
                        notes=("fleet simulation skipped: the serving count is Erlang C's cross-check, not verified "
                               "against the log",))


def replay_requests(log, rate: float, n_requests: int, *, model=None, tier=None) -> pd.DataFrame:
    """The log's busiest hours of one model and tier, stacked at ``rate`` requests per second.

    Returns the columns of :func:`capbook.sim.arrivals.stack_busy_periods` (``arrival_time`` in
    seconds from 0, ``input_tokens``, ``output_tokens``, ``period_start`` …), at most
    ``n_requests`` rows, their gaps scaled once more so that they arrive at exactly ``rate``.
    Requests that record no prompt or no output token (failed requests) are left out and the
    others arrive at their share of ``rate``; ``attrs["without_tokens"]`` is (left out, of).

    The hours are counted in SQL on the log's engine (DuckDB or Spark), and only the rows of the
    chosen hours are read into pandas, so the log's size does not bound the replay
    (:func:`busy_hours`).
    """
    if isinstance(log, LogAggregates):
        log = log.log
    if hasattr(log, "query") and hasattr(log, "first_us"):   # a capbook.logs.requestlog.RequestLog
        data, rate, empty = busy_hours(log, rate, n_requests, model=model, tier=tier)
    else:
        frame = log if isinstance(log, pd.DataFrame) else log.to_pandas()
        data, rate, empty = _busy_hours_pandas(frame, rate, n_requests, model=model, tier=tier)
    data = data.iloc[:min(len(data), int(n_requests))].reset_index(drop=True)
    # Each stacked hour arrives at the rate on average, but a prefix of the stack (the first
    # n_requests of a long busy hour) need not: one more factor on every gap makes the replayed
    # requests arrive at exactly the rate asked for.
    t = data["arrival_time"].to_numpy(dtype=float)
    if t.size > 1 and t[-1] > t[0]:
        k = ((t.size - 1) / (t[-1] - t[0])) / rate
        data["arrival_time"] = (t - t[0]) * k
        data["scale"] = data["scale"] * k
    data.attrs["without_tokens"] = empty
    return data


_HOUR_US = 3_600_000_000


def busy_hours(log, rate: float, n_requests: int, *, model=None, tier=None):
    """The busiest hours of one model and tier of a request log, stacked at ``rate``, from SQL.

    The requests per hour are counted on the log's engine (DuckDB, or Spark next to the data);
    only the rows of the busiest hours that hold ``n_requests`` requests are read, so memory
    does not grow with the log. The rows and their order are those of
    :func:`capbook.sim.arrivals.stack_busy_periods` on the whole log in pandas.

    Parameters
    ----------
    log : capbook.logs.requestlog.RequestLog
    rate : float
        Planned peak, requests per second.
    n_requests : int
        Requests the replay needs (the busiest hours are taken until they hold as many).
    model, tier : str, optional
        The traffic replayed (None: every model, every tier).

    Returns
    -------
    data : pandas.DataFrame
        :func:`capbook.sim.arrivals.stack_busy_periods` of the chosen hours (all their rows).
    rate : float
        ``rate`` times the share of requests that record a prompt and an output token.
    without_tokens : tuple of int
        (requests without a prompt or an output token, requests of the model and tier).
    """
    d = log.dialect
    n_scope, n_empty = log.query_one(
        f"SELECT count(*), count(*) FILTER (WHERE i < 1 OR o < 1) FROM req WHERE {traffic_where(model, tier)}")
    n_scope, n_empty = int(n_scope), int(n_empty or 0)
    if n_empty:
        if n_empty == n_scope:
            raise ValueError(f"no request of the log records both a prompt and an output token ({n_scope:,} "
                             "requests): there is no work to replay")
        rate = rate * (n_scope - n_empty) / n_scope
    where = traffic_where(model, tier, with_tokens=bool(n_empty))
    hours = log.query(busy_hours_sql(d, where, _HOUR_US))
    if hours.empty:
        raise ValueError("the request log (trace) has no rows" + (f" of model {model!r}" if model else "")
                         + (f" of tier {tier!r}" if tier else ""))
    p = hours["p"].to_numpy(np.int64)
    n = hours["n"].to_numpy(np.int64)
    counts = np.sort(n)[::-1]
    n_periods = int(min(np.searchsorted(np.cumsum(counts), n_requests) + 1, counts.size))
    order = np.lexsort((p, -n))            # busiest first, earlier first among ties
    chosen = np.sort(p[order[:n_periods]])
    rows = log.query(busy_rows_sql(d, where, chosen.tolist(), _HOUR_US))
    # seconds from the first hour of the traffic, as stack_busy_periods counts them
    ends = pd.Series(pd.to_datetime([int(hours["lo"].min()), int(hours["hi"].max())], unit="us", utc=True).as_unit("ns"))
    origin = ends.iloc[0]
    offset = (origin - origin.floor(pd.Timedelta(seconds=3600))).total_seconds()
    first, last = ((ends - origin).dt.total_seconds().to_numpy(dtype=float) + offset).tolist()
    t = pd.Series(pd.to_datetime(rows["t"].to_numpy("int64"), unit="us", utc=True).as_unit("ns"))
    secs = (t - origin).dt.total_seconds().to_numpy(dtype=float) + offset
    frame = pd.DataFrame({"input_tokens": rows["input_tokens"].to_numpy("int64"),
                          "output_tokens": rows["output_tokens"].to_numpy("int64"),
                          "tier": rows["tier"].astype(str).to_numpy()})
    h0 = int(p.min())
    data = _stack_chosen(frame, secs, np.floor(secs / 3600.0), (chosen - h0).astype(float), first, last,
                         rate, 3600.0)
    return data, rate, (n_empty, n_scope)


def _busy_hours_pandas(frame: pd.DataFrame, rate: float, n_requests: int, *, model=None, tier=None):
    """:func:`busy_hours` on a log already in pandas (every row read): the reference it must equal."""
    if model is not None and "model" in frame.columns:
        frame = frame[frame["model"] == model]
    # A request that records no prompt or no output token (BurstGPT's failed requests, 0 and 0)
    # did no work an engine could repeat: it is left out of the replay, and the rest arrive at
    # their own share of the rate.
    scope = frame if tier is None or "tier" not in frame.columns else frame[frame["tier"].astype(str) == tier]
    empty = ((scope["input_tokens"] < 1) | (scope["output_tokens"] < 1)).to_numpy()
    n_empty, n_scope = int(empty.sum()), len(scope)
    if n_empty:
        if n_empty == n_scope:
            raise ValueError(f"no request of the log records both a prompt and an output token ({n_scope:,} "
                             "requests): there is no work to replay")
        keep = (frame["input_tokens"] >= 1) & (frame["output_tokens"] >= 1)
        frame = frame[keep]
        rate = rate * (n_scope - n_empty) / n_scope
    per_hour = pd.to_datetime(frame["arrival_time"], utc=True).dt.floor("h")
    if tier is not None:
        per_hour = per_hour[frame["tier"].astype(str) == tier]
    # the busiest hours first, as many as it takes to hold n_requests requests
    counts = np.sort(per_hour.value_counts().to_numpy())[::-1]
    n_periods = int(min(np.searchsorted(np.cumsum(counts), n_requests) + 1, counts.size))
    data = stack_busy_periods(frame, rate, n_periods=n_periods, tier=tier)
    return data, rate, (n_empty, n_scope)


def _without_tokens_note(data: pd.DataFrame) -> list:
    n, of = data.attrs.get("without_tokens", (0, 0))
    if not n:
        return []
    return [f"{n:,} of {of:,} requests of the log ({100 * n / of:.1f} %) record no prompt or no output token "
            "(failed requests): they did no work to replay, so the simulation replays the others at "
            f"{100 * (of - n) / of:.1f} % of the rate"]


def _replay_arrivals(plan: CapacityPlan, log, n_requests: int) -> pd.DataFrame:
    tier = plan.source["tier"] if plan.source["tier"] != "all tiers" else None
    return replay_requests(log, plan.request_rate, n_requests, model=plan.source["model"], tier=tier)


def _replication(data: pd.DataFrame, seed: int, k: int) -> pd.DataFrame:
    """Replication ``k``: the stacked busy periods in another order (``k = 0``: as stacked)."""
    if k == 0 or "period_start" not in data.columns or len(data) < 2:  # one request has one order
        return data
    starts = data["period_start"].to_numpy()
    keys, first = np.unique(starts, return_index=True)
    if keys.size < 2:
        # one period: rotate it by a random share of its span (one seam instead of none)
        t = data["arrival_time"].to_numpy(dtype=float)
        span = float(t[-1] - t[0]) + (float(t[-1] - t[0]) / max(t.size - 1, 1))
        cut = int(np.random.default_rng([seed, k]).integers(1, max(t.size, 2)))
        order = np.r_[np.arange(cut, t.size), np.arange(cut)]
        out = data.iloc[order].reset_index(drop=True)
        tt = np.r_[t[cut:] - t[cut], t[:cut] + (span - t[cut])]
        out["arrival_time"] = tt
        return out
    order = keys[np.argsort(first)]
    perm = np.random.default_rng([seed, k]).permutation(order.size)
    parts, t0 = [], 0.0
    t = data["arrival_time"].to_numpy(dtype=float)
    groups = {key: np.flatnonzero(starts == key) for key in order}
    bounds = {}
    for j, key in enumerate(order):      # each period's span in the stack: to the next period's start
        idx = groups[key]
        nxt = groups[order[j + 1]][0] if j + 1 < order.size else None
        end = t[nxt] if nxt is not None else t[idx[-1]] + (t[idx[-1]] - t[idx[0]]) / max(idx.size - 1, 1)
        bounds[key] = (t[idx[0]], end)
    for key in order[perm]:
        idx = groups[key]
        lo, hi = bounds[key]
        part = data.iloc[idx].copy()
        part["arrival_time"] = t[idx] - lo + t0
        parts.append(part)
        t0 += hi - lo
    return pd.concat(parts, ignore_index=True)


def _batch_sd(x: np.ndarray, batches: int, stat) -> float:
    """Standard deviation of ``stat`` over ``batches`` consecutive batches of ``x`` (inf when
    there are fewer than 20 values a batch or a batch's value is not finite)."""
    x = np.asarray(x, dtype=float)
    if x.size < batches * 20:
        return math.inf
    vals = np.array([stat(p) for p in np.array_split(x, batches)])
    if not np.all(np.isfinite(vals)):
        return math.inf
    return float(np.std(vals, ddof=1))


def _t975(df: int) -> float:
    if df in _T975:
        return _T975[df]
    from scipy.stats import t

    return float(t.ppf(0.975, df))


def _half_width(sds: list, batches: int = 10) -> float:
    """95 % half-width of the mean over replications of a statistic estimated by batch means in
    each: the batch variances pooled (``batches - 1`` degrees of freedom per replication)."""
    if not sds or not all(math.isfinite(v) for v in sds):
        return math.inf
    n = len(sds)
    pooled = math.sqrt(sum(v * v for v in sds) / n)
    return _t975(n * (batches - 1)) * pooled / math.sqrt(batches * n)


def _saturation(engine, data: pd.DataFrame) -> float:
    """Completions per second of one replica kept full of requests of the replay's mean lengths."""
    e = dataclasses.replace(engine, prompt_tokens=float(data["input_tokens"].mean()),
                            output_tokens=float(data["output_tokens"].mean()), output_quantiles=None,
                            prompt_p99=None, notes=[])
    e.__dict__.pop("_cache", None)
    return e.saturation_rps(seed=0)


def _engine_for(sweep):
    return fitted_engine(sweep)


def simulate_serving(engine, data: pd.DataFrame, replicas: int, *, slo, router: str = "pooled", seeds: int = 2,
                     seed: int = 2026) -> dict:
    """Run ``replicas`` engine replicas on ``data`` over ``seeds`` replications and summarise.

    Parameters
    ----------
    engine : capbook.engine.stepmodel.EngineModel
    data : pandas.DataFrame
        :func:`replay_requests` (``arrival_time``, ``input_tokens``, ``output_tokens``).
    replicas : int
    slo : capbook.slo.SLO
        Objectives (TTFT target and quantile, TPOT target, goodput share).
    router : str
        A router of :data:`capbook.sim.fleetsim.ROUTERS`.
    seeds : int
        Replications (each another order of the busy periods and other client overheads).
    seed : int

    Returns
    -------
    dict
        The first replication's :meth:`capbook.sim.fleetsim.FleetRun.summary`, with ``ttft_q_s``
        and ``goodput_share`` over every replication, ``ttft_q_margin_s`` (95 %),
        ``replicas``, ``seeds``, ``router``, ``replayed_requests``, ``measured_rate`` and
        ``per_replica`` (the first replication's :attr:`capbook.sim.fleetsim.FleetRun.replicas`).
    """
    replicas = integer(replicas, "replicas", minimum=1)
    seeds = integer(seeds, "seeds", minimum=1)
    runs = _replicate_all(engine, data, replicas, slo, router, seed, range(seeds))
    return _combine(runs, data, replicas, slo, router)


def _replicate(engine, data, replicas, slo, router, seed, k) -> dict:
    """Replication ``k``: its measured TTFTs, good count and batch-means margins."""
    run = simulate_fleet(engine, _replication(data, seed, k), replicas=replicas, router=router, seed=seed + 7919 * k)
    s = run.summary(slo.ttft_target_s, slo.tpot_target_s, slo.ttft_quantile)
    m = run.measured()
    t = run.ttft[m]
    return {"ttft": t, "good": s["goodput_share"] * s["requests"],
            "sd": _batch_sd(t, 10, lambda p: np.quantile(p, slo.ttft_quantile)),
            "gsd": _batch_sd(run.good(slo.ttft_target_s, slo.tpot_target_s)[m], 10, np.mean),
            "summary": s if k == 0 else None, "per": run.replicas if k == 0 else None}


#: Requests per replication from which the replications run on several cores (below it, starting
#: the processes costs more than it saves).
PARALLEL_MIN_REQUESTS = 5_000


def _replicate_all(engine, data, replicas, slo, router, seed, ks) -> list:
    """Replications ``ks``, in order: independent simulations, on both cores for a long replay."""
    ks = list(ks)
    if len(data) < PARALLEL_MIN_REQUESTS or len(ks) < 2:
        return [_replicate(engine, data, replicas, slo, router, seed, k) for k in ks]
    return run_all(lambda k: _replicate(engine, data, replicas, slo, router, seed, k), ks)


def _combine(runs: list, data: pd.DataFrame, replicas: int, slo, router: str) -> dict:
    allt = np.concatenate([r["ttft"] for r in runs])
    out = dict(runs[0]["summary"])
    out["ttft_q_s"] = float(np.quantile(allt, slo.ttft_quantile)) if allt.size else math.inf
    out["goodput_share"] = float(sum(r["good"] for r in runs) / max(allt.size, 1))
    # 95 % half-widths: each replication's batch-means variance, pooled over the replications
    out["ttft_q_margin_s"] = float(_half_width([r["sd"] for r in runs]))
    out["goodput_margin"] = float(_half_width([r["gsd"] for r in runs]))
    out["replicas"] = replicas
    out["seeds"] = len(runs)
    out["router"] = router
    out["replayed_requests"] = int(len(data))
    t = data["arrival_time"].to_numpy(dtype=float)
    out["measured_rate"] = (len(t) - 1) / (t[-1] - t[0]) if t.size > 1 and t[-1] > t[0] else math.inf
    out["p99_input_tokens"] = float(np.percentile(data["input_tokens"], 99)) if len(data) else math.nan
    out["per_replica"] = runs[0]["per"]
    return out


#: The most replications :func:`judge_fleet` runs on one fleet size whose margin straddles an objective.
MAX_SEEDS = 16


def judge_fleet(engine, data: pd.DataFrame, replicas: int, *, slo, router: str = "pooled", seeds: int = 2,
                seed: int = 2026, max_seeds: int = MAX_SEEDS, first: dict | None = None) -> dict:
    """:func:`simulate_serving` with the plan's verdict: ``meets`` is True when the TTFT
    quantile and goodput meet ``slo`` with 95 % confidence (the quantile plus its margin within
    the objective, goodput less its margin at or above the target).

    While a margin straddles its objective, the replications are doubled (from ``seeds`` to 4,
    8, 16 … up to ``max_seeds``) and the verdict is taken on all of them: a size that meets the
    objectives by a little is confirmed rather than rejected for a short replay (a log of a few
    thousand requests has margins of half a percent of goodput, two or three replicas wide). A
    size still straddling at ``max_seeds`` is judged not to meet them. The plan's search and
    ``capbook simulate`` both decide this way, so one reproduces the other.

    ``first``, a dict, receives ``first[replicas]``: the replication ``k = 0`` (for
    :class:`Replayed`).
    """
    replicas = integer(replicas, "replicas", minimum=1)
    seeds = integer(seeds, "seeds", minimum=1)
    max_seeds = max(integer(max_seeds, "max_seeds", minimum=1), seeds)
    runs = _replicate_all(engine, data, replicas, slo, router, seed, range(seeds))
    if first is not None:
        first[replicas] = runs[0]
    s = _combine(runs, data, replicas, slo, router)
    while _borderline(slo, s) and len(runs) < max_seeds:
        more = min(2 * len(runs), max_seeds)
        runs += _replicate_all(engine, data, replicas, slo, router, seed, range(len(runs), more))
        s = _combine(runs, data, replicas, slo, router)
    s["meets"] = _meets(slo, s)
    return s


def _meets(slo, s: dict) -> bool:
    """Met with 95 % confidence: the TTFT quantile plus its margin within the objective and goodput
    less its margin at or above the target (a margin too wide to estimate — a replay of a few
    hundred requests — falls back to the estimate itself)."""
    mt, mg = s.get("ttft_q_margin_s", 0.0), s.get("goodput_margin", 0.0)
    mt = mt if math.isfinite(mt) else 0.0
    mg = mg if math.isfinite(mg) else 0.0
    return bool(s["ttft_q_s"] + mt <= slo.ttft_target_s and s["goodput_share"] - mg >= slo.goodput_share)


def _borderline(slo, s: dict) -> bool:
    m = s["ttft_q_margin_s"]
    return (abs(s["ttft_q_s"] - slo.ttft_target_s) <= m
            or abs(s["goodput_share"] - slo.goodput_share) <= s["goodput_margin"])


def _impossible(slo, data: pd.DataFrame, engine) -> list:
    """Why no fleet size can meet the objectives (empty when one may): lower bounds on an idle
    replica — TTFT at least the prompt's own prefill steps, TPOT at least one decode step."""
    st, lim = engine.step, engine.limits
    qn = f"p{100 * slo.ttft_quantile:g}"
    inp = data["input_tokens"].to_numpy(dtype=float)
    out = data["output_tokens"].to_numpy(dtype=float)
    if not inp.size:
        return []
    b = float(lim.max_num_batched_tokens)
    full = np.floor(inp / b) if lim.chunked_prefill else np.zeros_like(inp)
    rest = inp - full * b if lim.chunked_prefill else inp
    prefill = full * float(st.step(0, b)) + np.asarray(st.step(0, rest), dtype=float)
    fastest = float(st.step(1, 0))
    best_good = float(np.mean((prefill <= slo.ttft_target_s) & ((out <= 1) | (fastest <= slo.tpot_target_s))))
    pf_q = float(np.quantile(prefill, slo.ttft_quantile))
    why = []
    if pf_q > slo.ttft_target_s:
        why.append(f"prefill alone of the {qn} prompt ({np.quantile(inp, slo.ttft_quantile):,.0f} tokens) takes "
                   f"{pf_q:.2f} s on an idle replica, more than the TTFT objective of {slo.ttft_target_s:g} s; "
                   f"relax the objective (e.g. --slo ttft={math.ceil(1.5 * pf_q):g}), plan the long prompts as a "
                   "tier of their own, or change the hardware")
    if best_good < slo.goodput_share and not why:
        w = (f"only {100 * best_good:.2f} % of the replayed requests could meet both objectives even on an idle "
             "fleet")
        if fastest > slo.tpot_target_s:
            w += (f" (one decode step takes {1000 * fastest:.1f} ms, more than the "
                  f"{1000 * slo.tpot_target_s:g} ms TPOT objective)")
        else:
            w += f" (their prompts alone take longer than {slo.ttft_target_s:g} s to prefill)"
        why.append(w + f", below the goodput target of {100 * slo.goodput_share:g} %")
    return why


def verify_plan(plan: CapacityPlan, log, sweep, *, n_requests: int = 30_000, seeds: int = 2, seed: int = 2026,
                router: str = "pooled", start: int | None = None, guess: int | None = None) -> Verification:
    """Find the smallest serving fleet that meets the objectives in the fleet simulation.

    The search first simulates ``guess`` (default: the median of the counts the plan's models ask
    for — rating with headroom, Erlang C, the load-dependent queue, the engine model — which
    usually bracket the answer). From there it steps down while sizes meet the objectives, or up
    while they miss, doubling the step each time, then bisects between the last miss and the
    first meet; it never goes below the fleet that can just carry the peak (the planned rate over
    one replica's simulated saturation rate, or ``start``) unless a size there meets the
    objectives. The headline is a size that met and whose next size down was simulated and
    missed. Where the models agree with the simulation this takes two sizes; the guess changes
    how many sizes are simulated, never which size is found (on a verdict that grows with the
    fleet).

    Parameters
    ----------
    plan : capbook.plan.steps.CapacityPlan
        The plan (its objectives, peak rate, model and tier; its verification is not read).
    log : capbook.logs.requestlog.RequestLog or capbook.logs.aggregates.LogAggregates
    sweep : capbook.sweeps.sweep.Sweep
    n_requests : int
        Requests per replication (the busiest hours of the log, time-scaled to the peak).
    seeds : int
        Replications per fleet size (doubled up to :data:`MAX_SEEDS` on a borderline size).
    seed : int
    router : str
        A router of :data:`capbook.sim.fleetsim.ROUTERS`.
    start : int, optional
        Smallest fleet size the search steps down to before it has found one that misses
        (default: the fleet that can just carry the peak).
    guess : int, optional
        The first fleet size simulated (default: the median of the models' counts, within
        ``start`` and the search cap).

    Returns
    -------
    Verification
    """
    t_start = time.perf_counter()
    router = router_name(router)
    slo = plan.slo
    qn = f"p{100 * slo.ttft_quantile:g}"
    n_requests = integer(n_requests, "n_requests", minimum=1)
    guess = _median_count(plan) if guess is None else integer(guess, "guess", minimum=1)
    data = _replay_arrivals(plan, log, n_requests)
    replayed = Replayed(data, n_requests, int(seed), router)
    engine = _engine_for(sweep)
    notes = _without_tokens_note(data)
    why = _impossible(slo, data, engine)
    lam = plan.request_rate
    floor_n = 1
    try:
        sat = _saturation(engine, data)
    except ExtrapolationError as exc:
        # no hardware facts bound the engine past the sweep: each replica is kept within what it supports
        sat = float(exc.limit_rps)
        floor_n = max(1, int(math.ceil(lam / sat - 1e-9)))
        notes.append(f"each replica is kept below {sat:.3g} requests/s, the most this sweep supports predicting "
                     f"({exc}); so at least {floor_n} serving replicas are simulated, and the count may overbuy — "
                     "pass --gpu and --model (or measure closer to saturation) for the smallest fleet")
    if start is None:
        start = max(1, int(math.floor(lam / sat)) if sat and math.isfinite(sat) else 1)
    start = max(start, floor_n)
    cap = int(min(max(8 * start, start + 64), SIM_CAP_MAX))
    tried: dict[int, dict] = {}

    def ok(n):
        if n not in tried:
            tried[n] = judge_fleet(engine, data, n, slo=slo, router=router, seeds=seeds, seed=seed,
                                   first=replayed.first)
        return tried[n]["meets"]

    def table():
        rows = [{"replicas": n, "ttft_q_s": r["ttft_q_s"], "ttft_q_margin_s": r["ttft_q_margin_s"],
                 "goodput_share": r["goodput_share"], "goodput_margin": r["goodput_margin"], "seeds": r["seeds"], "meets": _meets(slo, r)}
                for n, r in sorted(tried.items())]
        return pd.DataFrame(rows).set_index("replicas") if rows else None

    if why:
        ok(start)
        s = tried[start]
        return Verification("impossible", False, "no fleet size can meet the objectives (adding replicas cannot "
                            "help): " + "; ".join(why), None, cap, table(), time.perf_counter() - t_start,
                            _public(s), router, tuple(notes), replayed)
    base = max(start, floor_n)
    n = min(max(base, guess or base), cap)
    lo = base - 1
    found = None
    if ok(n):
        # the guess meets: step down (1, 2, 4 … replicas) until a size misses or ``base`` meets
        found, step = n, 1
        while found > base:
            n = max(found - step, base)
            if not ok(n):
                lo = n
                break
            found = n
            step *= 2
    else:
        # the guess misses: step up (1, 2, 4 … replicas) until a size meets, the cap or the time budget
        lo, step = n, 1
        while n < cap and time.perf_counter() - t_start <= SIM_BUDGET_S:
            n = min(n + step, cap)
            step *= 2
            if ok(n):
                found = n
                break
            lo = n
    if found is None:
        last = tried[max(tried)]
        over = time.perf_counter() - t_start > SIM_BUDGET_S
        reason = (f"{'the search stopped after ' + format(SIM_BUDGET_S, 'g') + ' s at ' if over else 'even '}"
                  f"{max(tried)} serving replicas{'' if over else ' (the search cap)'} miss: {qn} TTFT "
                  f"{last['ttft_q_s']:.2f} s against {slo.ttft_target_s:g} s, goodput "
                  f"{100 * last['goodput_share']:.2f} % against {100 * slo.goodput_share:g} %")
        notes.append(f"FLEET SIMULATION FAILED, the plan is not verified: {reason}. Relax the objectives, cap "
                     "prompt length or give long prompts their own objective, or change the hardware")
        return Verification("not met", False, reason, None, cap, table(), time.perf_counter() - t_start,
                            _public(last), router, tuple(notes), replayed)
    hi = found
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    while hi > floor_n and hi - 1 not in tried:      # the search started at ``start``: check below it too
        if not ok(hi - 1):
            break
        hi -= 1
    s = tried[hi]
    below = tried.get(hi - 1)
    who = "one serving replica meets" if hi == 1 else f"{hi} serving replicas meet"
    reason = (f"{who} the objectives in the fleet simulation ({qn} TTFT {s['ttft_q_s']:.3f} "
              f"± {s['ttft_q_margin_s']:.3f} s, goodput {100 * s['goodput_share']:.2f} %)")
    if below is not None:
        reason += (f"; {hi - 1} miss ({qn} TTFT {below['ttft_q_s']:.3f} s, goodput "
                   f"{100 * below['goodput_share']:.2f} %)")
    elif hi == 1:
        reason += f" (the peak, {lam:.3g} requests/s, is below one replica's {sat:.3g})"
    else:
        reason += f"; fewer cannot carry the peak ({lam:.3g} requests/s over {sat:.3g} a replica)"
    return Verification("verified", True, reason, hi, cap, table(), time.perf_counter() - t_start, _public(s),
                        router, tuple(notes), replayed)


def _median_count(plan: CapacityPlan) -> int | None:
    """The median of the fleet sizes the plan's models ask for, the upper one of an even count (None
    when none asks for one)."""
    ns = sorted(n for n in plan._check_counts().values() if n is not None and n >= 1)
    return ns[len(ns) // 2] if ns else None


def _public(s: dict) -> dict:
    return {k: v for k, v in s.items() if k != "per_replica"} | {"per_replica": s.get("per_replica")}


def check_fleet(plan: CapacityPlan, log, sweep, replicas: int, *, rate: float | None = None,
                n_requests: int = 30_000, seeds: int = 2, seed: int = 2026, router: str | None = None) -> dict:
    """Simulate ``replicas`` serving replicas on the plan's replay and judge them as the plan does
    (:func:`judge_fleet`): what ``capbook simulate`` runs.

    Parameters
    ----------
    plan : capbook.plan.steps.CapacityPlan
        Its objectives, model, tier and (unless ``rate``) planned peak.
    log : capbook.logs.requestlog.RequestLog or capbook.logs.aggregates.LogAggregates
    sweep : capbook.sweeps.sweep.Sweep
    replicas : int
    rate : float, optional
        Requests per second to replay the busiest hours at (default: the plan's peak).
    n_requests, seeds, seed
        As :func:`verify_plan` (the defaults reproduce the plan's own runs).
    router : str, optional
        Default: the router the plan simulated.

    Returns
    -------
    dict
        :func:`simulate_serving`'s summary with ``meets``, plus ``rate`` (the requests per
        second asked for), ``impossible`` (why no fleet size can meet the objectives: a list of
        sentences, empty when one may), ``max_num_seqs`` and ``kv_cache_tokens`` (one replica's
        sequence limit and KV cache in tokens, None when unbounded) of the engine fitted to the
        sweep.
    """
    n_rep = integer(replicas, "replicas", minimum=1)
    tier = plan.source["tier"] if plan.source["tier"] != "all tiers" else None
    lam = plan.request_rate if rate is None else rate
    data = replay_requests(log, lam, integer(n_requests, "n_requests", minimum=1), model=plan.source["model"],
                           tier=tier)
    engine = _engine_for(sweep)
    router = router_name(router or plan.verification.router)
    if router == "prefix-affinity" and not {"hash_ids", "session"} & set(data.columns):
        raise ValueError("router='prefix-affinity' routes on shared prompt prefixes, and this log records none "
                         "(no hash_ids or session column); choose another router")
    out = judge_fleet(engine, data, n_rep, slo=plan.slo, router=router, seeds=seeds, seed=seed)
    out["rate"] = float(lam)
    out["notes"] = _without_tokens_note(data)
    out["impossible"] = _impossible(plan.slo, data, engine)
    out["max_num_seqs"] = int(engine.limits.max_num_seqs)
    kv = engine.limits.kv_cache_tokens
    out["kv_cache_tokens"] = None if kv is None else int(kv)
    return out


def replay_plan(plan: CapacityPlan, log, sweep, *, replicas: int | None = None, n_requests: int = 30_000,
                seeds: int = 2, seed: int = 2026, router: str | None = None) -> dict:
    """:func:`check_fleet` at ``replicas`` (default: the plan's serving count)."""
    n_rep = plan.serving if replicas is None else replicas
    return check_fleet(plan, log, sweep, n_rep, n_requests=n_requests, seeds=seeds, seed=seed, router=router)


def explain_checks(plan: CapacityPlan, log, sweep, checks: dict, *, n_requests: int = 30_000, seed: int = 2026
                   ) -> pd.DataFrame:
    """How each cross-check compares with the simulated count, and which mechanism explains it.

    For a model that asks for fewer replicas than the simulation, its count is simulated again
    with one thing the model assumes made true — Poisson arrivals at the same rate (bursts),
    every prompt at the mean length (prompt tail) — and the run's preemptions and prefill share
    are read (KV cache, prefill stalls). For one that asks for more, the reason is the model's
    own simplification.

    Parameters
    ----------
    checks : dict
        Model name -> replicas it asks for (None: not available).

    Returns
    -------
    pandas.DataFrame
        Index ``model``; columns ``replicas``, ``difference`` (model − simulated), ``why``.
    """
    v = plan.verification
    n_sim = v.serving
    rows = []
    if n_sim is None:
        for name, n in checks.items():
            rows.append({"model": name, "replicas": n, "difference": None,
                         "why": "no simulated count to compare with (" + v.status + ")"})
        return pd.DataFrame(rows).set_index("model")
    slo = plan.slo
    engine = _engine_for(sweep)
    # the search's replay and first replications, when they are this one (same requests, seed, router)
    kept = v.replay if v.replay is not None and v.replay.matches(n_requests, seed, v.router) else None
    data = kept.data if kept is not None else _replay_arrivals(plan, log, n_requests)
    cache: dict = {}

    def variant(kind):
        d = data
        if kind == "poisson":
            rng = np.random.default_rng(seed)
            gaps = rng.exponential(1.0 / plan.request_rate, len(d))
            d = d.assign(arrival_time=np.cumsum(gaps) - gaps[0])
        elif kind == "mean prompts":
            d = d.assign(input_tokens=max(1, int(round(float(d["input_tokens"].mean())))))
        return d

    # every count below the simulated one is run with the log's arrivals, Poisson arrivals and mean
    # prompts: the runs the search already made are read back, the others (independent, each with
    # its own seed) run together on the machine's cores
    below = sorted({int(n) for n in checks.values() if n is not None and int(n) < int(n_sim)})
    todo = []
    for n in below:
        for kind in ("log", "poisson", "mean prompts"):
            if kind == "log" and kept is not None and n in kept.first:
                cache[(kind, n)] = _combine([kept.first[n]], data, n, slo, v.router)
            else:
                todo.append((kind, n))
    if todo:
        frames = {kind: variant(kind) for kind in {k for k, _ in todo}}
        runs = run_all(lambda job: _replicate(engine, frames[job[0]], job[1], slo, v.router, seed, 0), todo)
        for (kind, n), run in zip(todo, runs):
            cache[(kind, n)] = _combine([run], frames[kind], n, slo, v.router)

    def sim(kind, n):
        if (kind, n) not in cache:  # pragma: no cover - every count below n_sim was run above
            cache[(kind, n)] = simulate_serving(engine, variant(kind), n, slo=slo, router=v.router, seeds=1,
                                                seed=seed)
        return cache[(kind, n)]

    reasons_over = {
        "rating with headroom": "the rating keeps every replica below a fixed share of its measured throughput; "
                                "the simulation shows how close to it the log's peak can run and still meet the tail",
        "Erlang C": "Erlang C holds a slot for a whole mean service time and counts any wait past the threshold as "
                    "late; an engine admits a new prompt at its next step, so requests rarely wait for a slot",
        "load-dependent queue": "the load-dependent queue reads TPOT off the sweep's curve for mean-length requests "
                                "and assumes Poisson arrivals; the simulated engines batch the log's own requests",
        "engine model, one replica": "the engine model sizes one replica with its own queue: a pooled fleet shares "
                                     "its queue and runs each replica hotter at the same tail",
    }
    for name, n in checks.items():
        if n is None:
            rows.append({"model": name, "replicas": None, "difference": None, "why": "not available"})
            continue
        d = int(n) - int(n_sim)
        if d == 0:
            why = "agrees with the simulation"
        elif d > 0:
            why = reasons_over.get(name, "the model is conservative here")
        else:
            base = sim("log", n)
            parts = []
            if _meets(slo, sim("poisson", n)):
                parts.append("bursts: with Poisson arrivals at the same rate its count meets the objectives, "
                             "the log's own arrivals do not")
            if _meets(slo, sim("mean prompts", n)):
                parts.append(f"prompt tail: with every prompt at the mean ({data['input_tokens'].mean():,.0f} tokens) "
                             f"its count meets them; the log's p99 prompt is {data['input_tokens'].quantile(0.99):,.0f}")
            if base.get("preemptions", 0) > 0:
                parts.append(f"KV cache: {base['preemptions']:,} preemptions at {n} replica{'s' if n != 1 else ''} (the cache fills and "
                             "sequences are recomputed)")
            if not parts:
                tp_miss, tt_miss = base.get("tpot_miss_share", 0.0), base.get("ttft_miss_share", 0.0)
                qn = "p" + format(100 * slo.ttft_quantile, "g")
                if tp_miss >= tt_miss:
                    parts.append(f"prefill stalls: at {n} replica{'s' if n != 1 else ''} prompts share steps with decodes and "
                                 f"{100 * tp_miss:.2f} % of requests decode slower than the TPOT objective "
                                 f"(goodput {100 * base['goodput_share']:.2f} %); the model sees mean step times")
                else:
                    parts.append(f"prefill queueing: at {n} replica{'s' if n != 1 else ''} prompts wait for each other's prefill steps "
                                 f"({qn} TTFT {base['ttft_q_s']:.2f} s, {100 * tt_miss:.2f} % over the objective); "
                                 "the model holds a slot per request and does not see a replica prefill one prompt "
                                 "at a time")
            why = "; ".join(parts)
        rows.append({"model": name, "replicas": int(n), "difference": d, "why": why})
    return pd.DataFrame(rows).set_index("model")

