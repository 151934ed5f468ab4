"""Step 9 of the capacity plan: replay the log's busiest hours through the planned fleet.

:func:`verify_plan` takes a :class:`capbook.plan.CapacityPlan` built from the models (steps 1–8
of :func:`capbook.plan.capacity_plan`), replays the log's busiest hours, time-scaled to the
forecast peak (:func:`capbook.arrivals.stack_busy_periods`), through the planned in-service
fleet in the continuous-batching simulator (:mod:`capbook.sim`), and adds in-service replicas
(the search of :func:`capbook.validation.fewest`, up to :data:`REPLAY_CAP_FACTOR` times the
models' count) until TTFT at the objective's quantile and goodput meet the objectives. It
returns a :class:`Verification`; :func:`replay_plan` replays one fleet size.

Examples
--------
>>> from capbook import datasets, plan
>>> p = plan.capacity_plan(**datasets.plan_inputs(datasets.plan_log(), None).arguments, simulate=False)
>>> p.verification.status
'skipped'
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .validation import fewest, integer

if TYPE_CHECKING:  # the plan imports this module; its types are only annotations here
    from .plan import CapacityPlan

__all__ = ["Verification", "verify_plan", "replay_plan", "REPLAY_CAP_FACTOR", "REPLAY_CAP_MAX", "REPLAY_BUDGET_S"]


@dataclass(frozen=True, eq=False)
class Verification:
    """Step 9, :func:`verify_plan`: the replay check of the models' fleet.

    Attributes
    ----------
    status : str
        ``"met"`` (the models' count meets it), ``"added"`` (more in-service replicas were
        needed and found), ``"not met"`` (none up to ``cap`` met it), ``"impossible"`` (no
        fleet size can; see ``reason``) or ``"skipped"``.
    met : bool or None
        None when skipped.
    reason : str
        A sentence.
    cap : int or None
        Most in-service replicas the search would try.
    tried : pandas.DataFrame or None
        One row per fleet size replayed: ``ttft_q_s``, ``goodput_share``, ``meets``.
    seconds : float
        Wall-clock time of the check.
    sim : dict
        Replay summary (:meth:`capbook.sim.SimResult.summary`) of the headline fleet (the
        in-service replicas) plus ``replicas``, ``replayed_requests``, ``p99_input_tokens``,
        ``ttft_q_s`` (TTFT at the objective's quantile) and ``measured_rate`` (requests per
        second the replay arrived at); empty when skipped.
    replay_added : int
        In-service replicas added to the models' count.
    spare : int or None
        Failure spare for the headline in-service count when replicas were added (None: the
        models' spare stands).
    notes : tuple of str
    """

    status: str
    met: bool | None
    reason: str
    cap: int | None = None
    tried: pd.DataFrame | None = field(default=None, repr=False)
    seconds: float = 0.0
    sim: dict = field(default_factory=dict, repr=False)
    replay_added: int = 0
    spare: int | None = None
    notes: tuple = ()


_SKIPPED = Verification("skipped", None, "the replay was skipped (simulate=False)",
                        notes=("replay skipped: the replica count is the models' and is not verified against "
                               "the log",))

# --------------------------------------------------------------------------------------------
# Step 9: the replay check
# --------------------------------------------------------------------------------------------
class _ReplayService:
    """The sweep as the replay's service model, held at the measured end levels.

    Below the lowest measured concurrency the TPOT of the lowest level is used (an upper bound:
    fewer sequences do not decode slower), not a linear extrapolation towards 0; above the
    highest, the highest level's (the replay never runs more than S sequences a replica, and S
    is a measured level, so this only matters for a sweep whose S lies above its range).
    """

    def __init__(self, sweep):
        self.sweep = sweep
        n = sweep.table["concurrency"].to_numpy(float)
        self.lo, self.hi = float(n.min()), float(n.max())
        self.prefill_rate_tps = float(sweep.prefill_rate_tps)

    def tpot(self, concurrency):
        x = np.clip(np.asarray(concurrency, dtype=float), self.lo, self.hi)
        return self.sweep.tpot(x)

    def prefill_time(self, input_tokens):
        return self.sweep.prefill_time(input_tokens)


def _replay_arrivals(plan: CapacityPlan, log, n_requests: int) -> pd.DataFrame:
    """The log's busiest hours of the plan's model and tier, stacked at the plan's request rate."""
    from .arrivals import stack_busy_periods

    frame = log.frame if isinstance(log, _log_aggregates()) else log.to_pandas()
    if plan.source["model"] is not None and "model" in frame.columns:
        frame = frame[frame["model"] == plan.source["model"]]
    tier = plan.source["tier"] if plan.source["tier"] != "all tiers" else None
    per_hour = pd.to_datetime(frame["arrival_time"], utc=True).dt.floor("h")
    if tier is not None:
        per_hour = per_hour[frame["tier"].astype(str) == tier]
    # the busiest hours first, as many as it takes to hold n_requests requests
    counts = np.sort(per_hour.value_counts().to_numpy())[::-1]
    n_periods = int(min(np.searchsorted(np.cumsum(counts), n_requests) + 1, counts.size))
    data = stack_busy_periods(frame, plan.request_rate, n_periods=n_periods, tier=tier)
    data = data.iloc[:min(len(data), int(n_requests))].reset_index(drop=True)
    # Each stacked hour arrives at the plan's rate on average, but a prefix of the stack (the
    # first n_requests of a long busy hour) need not: its local rate is the hour's shape. One more
    # factor on every gap makes the replayed requests arrive at exactly the rate the plan states.
    t = data["arrival_time"].to_numpy(dtype=float)
    if t.size > 1 and t[-1] > t[0]:
        k = ((t.size - 1) / (t[-1] - t[0])) / plan.request_rate
        data["arrival_time"] = (t - t[0]) * k
        data["scale"] = data["scale"] * k
    return data


def _run_replay(plan: CapacityPlan, data: pd.DataFrame, sweep, n_rep: int, seed: int) -> dict:
    from .arrivals import TraceArrivals
    from .sim import ContinuousBatching, FleetSpec, Simulation

    t = data["arrival_time"].to_numpy(dtype=float)
    warm = float(t[-1]) * 0.05
    fleet = FleetSpec(int(n_rep), int(plan.slots.S), ContinuousBatching(_ReplayService(sweep)))
    res = Simulation(fleet, TraceArrivals(data), warmup_s=warm, seed=seed).run()
    s = res.summary(ttft_target_s=plan.slo.ttft_target_s, tpot_target_s=plan.slo.tpot_target_s)
    keep = res.served & (res.request_arrival >= warm) & (res.attempt == 0)
    ttft = res.ttft[keep]
    s["ttft_q_s"] = float(np.quantile(ttft, plan.slo.ttft_quantile)) if ttft.size else math.inf
    s["replicas"] = int(n_rep)
    s["replayed_requests"] = int(len(data))
    s["p99_input_tokens"] = float(np.percentile(data["input_tokens"], 99))
    s["measured_rate"] = (len(t) - 1) / (t[-1] - t[0]) if t[-1] > t[0] else math.inf
    return s


def replay_plan(plan: CapacityPlan, log, sweep, *, replicas: int | None = None, n_requests: int = 6_000,
                seed: int = 2026) -> dict:
    """Replay the log's busiest hours, time-scaled to the plan's peak, through the fleet.

    The busiest clock hours of the plan's model and tier (as many as it takes to hold
    ``n_requests``) are stacked by :func:`capbook.arrivals.stack_busy_periods`, each scaled so
    that its requests over the part of the hour the log covers arrive at
    ``plan.request_rate``, and run through ``replicas`` replicas of ``plan.slots.S`` slots in
    the continuous-batching simulator. The sweep's TPOT is held at its lowest measured level
    below that level (and at its highest above it), so a sweep that starts above concurrency 1
    replays instead of failing.

    Parameters
    ----------
    plan : capbook.plan.CapacityPlan
    log : capbook.traces.RequestLog or capbook.plan.LogAggregates
    sweep : capbook.sweep.Sweep
    replicas : int, optional
        Fleet size (default: the plan's in-service count, serving + burst + what the replay
        check added, with the spare held back as it would be during a failure).
    n_requests : int
        Most requests replayed.
    seed : int

    Returns
    -------
    dict
        :meth:`capbook.sim.SimResult.summary` against the plan's TTFT and TPOT objectives, plus
        ``replicas``, ``replayed_requests``, ``p99_input_tokens``, ``ttft_q_s`` (TTFT at the
        objective's quantile, seconds) and ``measured_rate`` (arrivals replayed per second,
        ``(n - 1) / (last - first)``).
    """
    n_rep = plan.in_service if replicas is None else integer(replicas, "replicas", minimum=1)
    n = integer(n_requests, "n_requests", minimum=1)
    return _run_replay(plan, _replay_arrivals(plan, log, n), sweep, n_rep, seed)


#: Most in-service replicas the replay check tries, as a multiple of the models' count
#: (and never more than :data:`REPLAY_CAP_MAX`).
REPLAY_CAP_FACTOR = 4
REPLAY_CAP_MAX = 1000
#: Wall-clock seconds the replay check may spend searching (it stops and says so beyond).
REPLAY_BUDGET_S = 45.0


def _meets(plan: CapacityPlan, s: dict) -> bool:
    return bool(s["ttft_q_s"] <= plan.slo.ttft_target_s and s["goodput_share"] >= plan.slo.goodput_share)


class _StopSearch(Exception):
    """The replay search reached its cap or its time budget."""


def _impossible(plan: CapacityPlan, data: pd.DataFrame, svc: _ReplayService, S: int) -> tuple[list, np.ndarray]:
    """Why no fleet size can meet the objectives (empty when one may), and the prefill times.

    Lower bounds at any fleet size: TTFT >= prefill, TPOT >= the fastest TPOT of the sweep.
    """
    slo = plan.slo
    qn = f"p{100 * slo.ttft_quantile:g}"
    warm = float(data["arrival_time"].iloc[-1]) * 0.05
    sel = data[data["arrival_time"] >= warm]
    inp = sel["input_tokens"].to_numpy(dtype=float)
    out = sel["output_tokens"].to_numpy(dtype=float)
    prefill = np.asarray(svc.prefill_time(inp), dtype=float)
    fastest = float(np.min(svc.tpot(np.arange(1, S + 1))))
    best_good = float(np.mean((prefill <= slo.ttft_target_s) & ((out <= 1) | (fastest <= slo.tpot_target_s)))) \
        if inp.size else 1.0
    pf_q = float(np.quantile(prefill, slo.ttft_quantile)) if inp.size else 0.0
    impossible = []
    if pf_q > slo.ttft_target_s:
        impossible.append(
            f"prefill alone of the {qn} prompt ({np.quantile(inp, slo.ttft_quantile):,.0f} tokens at "
            f"{svc.prefill_rate_tps:,.0f} tokens/s) takes {pf_q:.2f} s, more than the TTFT objective of "
            f"{slo.ttft_target_s:g} s, with no queueing at all; relax the objective (e.g. "
            f"slo='ttft={math.ceil(1.5 * pf_q):g}'), plan the long prompts as a tier of their own, or, if "
            "the sweep's prefill rate is too low, pass a measured prefill_rate_tps=")
    if best_good < slo.goodput_share and not impossible:
        why = (f"only {100 * best_good:.2f} % of the replayed requests could meet both objectives even on an "
               "idle fleet")
        if fastest > slo.tpot_target_s:
            why += (f" (the sweep's fastest TPOT, {1000 * fastest:.1f} ms, misses the "
                    f"{1000 * slo.tpot_target_s:g} ms objective)")
        else:
            why += f" (their prompts alone take longer than {slo.ttft_target_s:g} s to prefill)"
        impossible.append(why + f", below the goodput target of {100 * slo.goodput_share:g} %")
    return impossible, prefill


def verify_plan(plan: CapacityPlan, log, sweep, *, n_requests: int = 6_000, seed: int = 2026) -> Verification:
    """Replay the models' fleet; add in-service replicas until the replay meets the objectives, or say why not.

    The fleet sizes tried come from :func:`capbook.validation.fewest` above the models'
    in-service count, up to :data:`REPLAY_CAP_FACTOR` times it (at least 8 more, at most
    :data:`REPLAY_CAP_MAX`) and within :data:`REPLAY_BUDGET_S` seconds (twice that once a
    size meets, to pin the count). When replicas are added, the failure spare is re-stacked
    on the new in-service count (:func:`capbook.fleet.failure_spares`).

    Parameters
    ----------
    plan : capbook.plan.CapacityPlan
        The models' plan (its verification is not read).
    log : capbook.traces.RequestLog or capbook.plan.LogAggregates
    sweep : capbook.sweep.Sweep
    n_requests : int
        Most requests replayed.
    seed : int

    Returns
    -------
    Verification
    """
    import time

    from .fleet import failure_spares

    t_start = time.perf_counter()
    slo = plan.slo
    qn = f"p{100 * slo.ttft_quantile:g}"
    data = _replay_arrivals(plan, log, n_requests)
    svc = _ReplayService(sweep)
    S = int(plan.slots.S)
    notes = []
    if svc.lo > 1:
        notes.append(
            f"replay below the sweep's lowest level: the sweep starts at concurrency {svc.lo:g}, so the replay "
            f"holds that level's TPOT ({1000 * float(sweep.tpot(svc.lo)):.1f} ms) when fewer sequences run "
            "(an upper bound, not an extrapolation)")
    if S > svc.hi:
        notes.append(
            f"replay above the sweep's highest level ({svc.hi:g}): the replay holds that level's TPOT up to "
            f"S = {S} sequences, which understates the decode time there")
    impossible, prefill = _impossible(plan, data, svc, S)

    base = plan.model_in_service
    cap = int(min(max(REPLAY_CAP_FACTOR * base, base + 8), REPLAY_CAP_MAX))
    cap = max(cap, base)
    tried: dict[int, dict] = {}

    def run(n):
        if n not in tried:
            tried[n] = _run_replay(plan, data, sweep, n, seed)
        return tried[n]

    def table():
        rows = [{"replicas": n, "ttft_q_s": r["ttft_q_s"], "goodput_share": r["goodput_share"], "meets": _meets(plan, r)}
                for n, r in sorted(tried.items())]
        return pd.DataFrame(rows).set_index("replicas")

    first = run(base)
    headline_n = base
    status, reason = "met", f"the replay of the models' {base} in-service replicas meets the objectives"
    if impossible:
        status = "impossible"
        reason = "no fleet size can meet the objectives (adding replicas cannot help): " + "; ".join(impossible)
    elif not _meets(plan, first):
        over_budget = False

        def ok(n: int) -> bool:
            nonlocal over_budget
            n = min(n, cap)
            if n not in tried:
                found = any(_meets(plan, r) for r in tried.values())
                if time.perf_counter() - t_start > (2 if found else 1) * REPLAY_BUDGET_S:
                    over_budget = not found
                    raise _StopSearch
            meets = _meets(plan, run(n))
            if not meets and n == cap:
                raise _StopSearch
            return meets

        try:
            fewest(ok, base, what="in-service replicas")
        except _StopSearch:
            pass
        passing = [n for n, r in sorted(tried.items()) if _meets(plan, r)]
        if not passing:
            last = tried[max(tried)]
            status = "not met"
            if over_budget:
                reason = (f"the search stopped after {REPLAY_BUDGET_S:g} s at {max(tried)} in-service replicas, "
                          f"which still miss ({qn} TTFT {last['ttft_q_s']:.2f} s, goodput "
                          f"{100 * last['goodput_share']:.2f} %)")
            else:
                reason = (f"even {max(tried)} in-service replicas (the search's cap: {REPLAY_CAP_FACTOR}x the "
                          f"models' {base}, at least 8 more, at most {REPLAY_CAP_MAX}) miss: {qn} TTFT "
                          f"{last['ttft_q_s']:.2f} s against {slo.ttft_target_s:g} s, goodput "
                          f"{100 * last['goodput_share']:.2f} % against {100 * slo.goodput_share:g} %, at "
                          f"slot utilisation {100 * last['utilisation']:.1f} %")
                if last["utilisation"] < 0.5:
                    reason += ("; the fleet is mostly idle, so the misses come from the requests themselves (long "
                               f"prompts: p99 prefill {float(np.percentile(prefill, 99)):.2f} s), not from queueing")
                else:
                    reason += "; the replicas saturate: throughput, not the tail, is short"
        else:
            hi = passing[0]                     # it may be a few replicas more than needed if the budget ran out
            lo = max(n for n in tried if n < hi)
            headline_n = hi
            status = "added"
            r = tried[hi]
            reason = (f"the models' {base} in-service replicas miss in the replay ({qn} TTFT "
                      f"{first['ttft_q_s']:.2f} s, goodput {100 * first['goodput_share']:.2f} %); {hi} meet it "
                      f"({qn} TTFT {r['ttft_q_s']:.2f} s, goodput {100 * r['goodput_share']:.2f} %)"
                      + ("" if hi - lo == 1 else f"; the search stopped before pinning the count ({lo} miss)"))
    met = status in ("met", "added")
    added = headline_n - base
    spare = int(failure_spares(headline_n, plan.spares, plan.zones)) if added else None
    total = headline_n + (plan.fleet.spare if spare is None else spare)
    if status == "added":
        notes.append(
            f"replay check: {reason}. The plan adds {added} in-service replica(s): the models assume "
            "Poisson arrivals and mean prompt lengths, the replay uses the log's own bursts and prompts")
    elif not met:
        notes.append(f"REPLAY CHECK FAILED, the plan is not verified: the {total} replicas are the models' "
                     "number and do NOT meet "
                     f"the objectives in the replay ({qn} TTFT {first['ttft_q_s']:.2f} s against "
                     f"{slo.ttft_target_s:g} s, goodput {100 * first['goodput_share']:.2f} % against "
                     f"{100 * slo.goodput_share:g} %): {reason}. Relax the objectives, cap prompt length or "
                     "give long prompts their own objective, or change the hardware")
    s = tried[headline_n]
    if (not met or status == "added") and first["ttft_q_s"] > slo.ttft_target_s:
        p99_in = s["p99_input_tokens"]
        pf = p99_in / svc.prefill_rate_tps
        if pf >= 0.5 * slo.ttft_target_s:
            notes.append(
                f"the models use the mean prompt ({plan.mean_input_tokens:,.0f} tokens), the replay real ones "
                f"(p99 {p99_in:,.0f} tokens, {pf:.2f} s of prefill alone)")
        else:
            notes.append(
                f"prefill is short (p99 prompt {p99_in:,.0f} tokens, {pf:.2f} s), so the replay's tail comes "
                "from queueing: the log's arrivals are burstier than the Poisson arrivals the models assume")
    return Verification(status, met, reason, cap=cap, tried=table(), seconds=time.perf_counter() - t_start,
                        sim=s, replay_added=added, spare=spare, notes=tuple(notes))


def _log_aggregates():
    from .plan import LogAggregates  # at call time: capbook.plan imports this module

    return LogAggregates
