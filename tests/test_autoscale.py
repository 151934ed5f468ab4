"""Tests of the autoscaling simulator (capbook.autoscale.policies) and of time-varying demand (RateArrivals).

Oracles: the birth-death chain of M/M/c solved by matrix exponentials (a rate step), Erlang C
(a slowly varying rate, hour by hour), the fixed-fleet simulator capbook.sim.slotsim on the same draws,
and hand-made scaling cases whose answers follow from the lags and windows. Statistical
tolerances are a stated number of standard errors computed from the data, not tuned.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.linalg import expm

from capbook import queueing
from capbook.slo import SLO
from capbook.sim.arrivals import ArrivalStream, RateArrivals, TokenLengths, rate_cv_from_log
from capbook.autoscale.policies import (
    Policy,
    ReactiveLatency,
    ReactiveUtilisation,
    ReactiveWaiting,
    ReplicaModel,
    Schedule,
    Scaling,
    Static,
    simulate_autoscaling,
)
from capbook.sim.distributions import Deterministic, Distribution, Exponential, Lognormal
from capbook.sim.slotsim import FixedService, FleetSpec, Simulation

SEED = 20261202


class _Replay(Distribution):
    """Holding times given in advance, handed out in request order (the same draws in two simulators)."""

    def __init__(self, values):
        self.values = np.asarray(values, dtype=float)
        self.mean = float(self.values.mean())
        self.variance = float(self.values.var())
        self.i = 0

    def sample(self, rng, size):
        out = self.values[self.i:self.i + size]
        assert out.size == size, "more draws asked for than given"
        self.i += size
        return out.copy()


def _in_system(rec, t):
    """Requests in system (arrived, not ended) just after each time in ``t``."""
    a = np.sort(rec["arrival"].to_numpy())
    e = np.sort(rec["end"].to_numpy())
    return np.searchsorted(a, t, side="right") - np.searchsorted(e, t, side="right")


# --------------------------------------------------------------------------- 1. a rate step: M/M/c transient


def _mmc_generator(lam, mu, c, n_max):
    n = np.arange(n_max + 1)
    Q = np.zeros((n_max + 1, n_max + 1))
    Q[n[:-1], n[:-1] + 1] = lam
    Q[n[1:], n[1:] - 1] = mu * np.minimum(n[1:], c)
    Q[n, n] = -Q.sum(axis=1)
    return Q


def _mmc_stationary(lam, mu, c, n_max):
    Q = _mmc_generator(lam, mu, c, n_max)
    A = np.vstack([Q.T, np.ones(n_max + 1)])
    b = np.zeros(n_max + 2)
    b[-1] = 1.0
    return np.linalg.lstsq(A, b, rcond=None)[0]


def test_rate_step_follows_the_mmc_transient():
    # one replica of c = 4 slots, exponential service of mean 1 s; the rate alternates, 40 s at
    # λ1 = 1.6 (ρ = 0.4) then 40 s at λ2 = 3.6 (ρ = 0.9): each cycle is one replication of the step.
    c, mu, lam1, lam2, half = 4, 1.0, 1.6, 3.6, 40.0
    cycles = 1500
    arr = RateArrivals(np.tile([lam1, lam2], cycles), bin_s=half)
    res = simulate_autoscaling(arr, ReplicaModel(c, service=Exponential(1.0 / mu)), Static(1),
                               Scaling(lag_s=1.0), record=True, seed=SEED)
    rec = res.records
    assert not rec["refused"].any()
    taus = np.array([0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 39.0])
    k = np.arange(10, cycles)                          # the first cycles as warm-up
    t = (2 * k[:, None] + 1) * half + taus[None, :]    # times after each step up
    n_sim = _in_system(rec, t.ravel()).reshape(t.shape)

    # oracle: the chain truncated at 120 (P(N > 60) < 1e-20 here), started from the stationary
    # distribution at λ1 (the 40 s at ρ = 0.4 relax the queue left by the λ2 phase: checked below)
    n_max = 120
    Q1, Q2 = _mmc_generator(lam1, mu, c, n_max), _mmc_generator(lam2, mu, c, n_max)
    p1 = _mmc_stationary(lam1, mu, c, n_max)
    p_cycle = p1 @ expm(Q2 * half) @ expm(Q1 * half)   # after one λ2 then λ1 phase
    assert np.abs(p_cycle - p1).sum() < 1e-3
    states = np.arange(n_max + 1)
    for j, tau in enumerate(taus):
        p = p1 @ expm(Q2 * tau)
        mean_n, p_wait = float(p @ states), float(p[c:].sum())
        x = n_sim[:, j]
        se = x.std(ddof=1) / math.sqrt(x.size)
        assert abs(x.mean() - mean_n) < 4 * se, (tau, x.mean(), mean_n, se)
        w = (x >= c).astype(float)
        se_w = max(w.std(ddof=1), 1e-3) / math.sqrt(w.size)
        assert abs(w.mean() - p_wait) < 4 * se_w, (tau, w.mean(), p_wait, se_w)
    # the transient is visible: the mean number grows from λ1/μ towards the λ2 regime
    assert n_sim[:, -1].mean() > n_sim[:, 0].mean() + 2


# --------------------------------------------------------------------------- 2. slowly varying: Erlang C hour by hour


def test_slowly_varying_rate_gives_erlang_c_hour_by_hour():
    # 2 replicas × 10 slots, exponential service 1 s; hourly rates from ρ = 0.6 to 0.9. The queue
    # relaxes in seconds (1/(cμ(1-√ρ)²) ≈ 9 s at ρ = 0.9), so each hour is near its stationary state.
    rates = np.array([12.0, 14.0, 16.0, 18.0])
    c, es = 20, 1.0
    res = simulate_autoscaling(RateArrivals(rates, bin_s=3600.0), ReplicaModel(10, service=Exponential(es)),
                               Static(2), Scaling(lag_s=1.0), record=True, seed=SEED + 1)
    rec = res.records
    for h, lam in enumerate(rates):
        seg = rec[(rec["arrival"] >= h * 3600 + 120) & (rec["arrival"] < (h + 1) * 3600)]
        wait = (seg["start"] - seg["arrival"]).to_numpy()
        # batch means over 20 consecutive batches (each ≫ the relaxation time)
        bw = np.array([b.mean() for b in np.array_split(wait, 20)])
        bp = np.array([(b > 0).mean() for b in np.array_split(wait, 20)])
        ew, pw = queueing.mean_wait(c, lam, es), queueing.prob_wait(c, lam, es)
        assert abs(bw.mean() - ew) < 4 * bw.std(ddof=1) / math.sqrt(20), (lam, bw.mean(), ew)
        assert abs(bp.mean() - pw) < 4 * bp.std(ddof=1) / math.sqrt(20), (lam, bp.mean(), pw)
    # the hours differ, as Erlang C says they should
    assert queueing.prob_wait(c, rates[-1], es) > 3 * queueing.prob_wait(c, rates[0], es)


# --------------------------------------------------------------------------- 3. the same run through capbook.sim.slotsim


@pytest.mark.parametrize("interval_s", [15.0, 0.7])
def test_static_fleet_matches_capbook_sim_start_by_start(interval_s):
    rng = np.random.default_rng(SEED + 2)
    n = 20_000
    times = np.cumsum(rng.exponential(1 / 5.0, n))           # ρ = 5 × 1.1 / 6 ≈ 0.92
    hold = Lognormal(1.1, scv=3.0).sample(rng, n)            # heavy-tailed: FCFS order matters
    res = simulate_autoscaling(times, ReplicaModel(2, service=_Replay(hold)), Static(3),
                               Scaling(lag_s=1.0, interval_s=interval_s), record=True, seed=1)
    ref = Simulation(FleetSpec(3, 2, FixedService(hold), routing="pooled"), times, seed=1).run()
    rec = res.records
    np.testing.assert_allclose(rec["arrival"], times)
    np.testing.assert_allclose(rec["start"], ref.start, rtol=0, atol=1e-9)
    np.testing.assert_allclose(rec["end"], ref.end, rtol=0, atol=1e-9)
    assert (rec["start"] > rec["arrival"]).mean() > 0.2     # a real queue, not an empty test


# --------------------------------------------------------------------------- 4. hand-made scaling cases

LIGHT = RateArrivals([0.5], bin_s=2400.0)                    # a trickle: the scaler is what is tested
REPLICA = ReplicaModel(4, service=Exponential(1.0))


@pytest.mark.parametrize("lag", [15.0, 60.0, 240.0, 480.0])
def test_schedule_step_up_leaves_exactly_the_lag_under_provisioned(lag):
    sched = Schedule([2, 5, 5, 5, 5], step_s=600.0)      # longer than the run: no wrap-around ahead
    sc = Scaling(lag_s=lag, min_replicas=0, scale_down_window_s=0.0)
    res = simulate_autoscaling(LIGHT, REPLICA, sched, sc, seed=3)
    assert res.under_provisioned_s() == pytest.approx(lag, abs=1e-6)
    assert res.under_provisioned_s(required=sched) == pytest.approx(lag, abs=1e-6)
    req = res.events[res.events["event"] == "request"]
    assert len(req) == 3 and np.allclose(req["time_s"], 600.0)
    # asked for lag_s ahead, the replicas serve from the step's first second
    early = Schedule(sched.replicas, step_s=600.0, lead_s=lag)
    res2 = simulate_autoscaling(LIGHT, REPLICA, early, sc, seed=3)
    assert res2.under_provisioned_s(required=sched) == pytest.approx(0.0, abs=1e-6)
    assert res2.under_provisioned_s() == pytest.approx(lag, abs=1e-6)   # behind its own target, early
    ready = res2.events[res2.events["event"] == "ready"]["time_s"].to_numpy()
    assert np.allclose(ready[-3:], 600.0)


def test_random_lag_under_provisioned_time_is_the_drawn_lags():
    sched = Schedule([2, 5, 5, 5], step_s=600.0)
    for seed in range(4):
        res = simulate_autoscaling(LIGHT, REPLICA, sched, Scaling(lag_s=Exponential(120.0), scale_down_window_s=0.0),
                                   seed=seed)
        R = res.replicas
        new = R[(R["kind"] == "serving") & (R["requested_s"] == 600.0)]
        assert len(new) == 3
        lags = (new["ready_s"] - new["requested_s"]).to_numpy()
        assert np.unique(lags).size == 3                       # really drawn per replica
        # fewer than 5 serve until the last of the three is up
        assert res.under_provisioned_s(required=sched) == pytest.approx(lags.max(), abs=1e-6)
        # replica-seconds short: the sum of the lags
        t = np.arange(600.0, 600.0 + lags.max() + 1, 0.25)
        r = res.replicas[res.replicas["kind"] == "serving"]
        serving = ((r["ready_s"].to_numpy()[None, :] <= t[:, None])
                   & ~(r["drain_s"].to_numpy()[None, :] <= t[:, None])).sum(axis=1)
        assert np.sum(5 - serving) * 0.25 == pytest.approx(lags.sum(), abs=3 * 0.25)


def test_warm_pool_takes_the_short_lag_and_refills():
    sched = Schedule([2, 4, 4, 4], step_s=600.0)
    sc = Scaling(lag_s=300.0, warm_pool=2, warm_lag_s=30.0, scale_down_window_s=0.0)
    res = simulate_autoscaling(LIGHT, REPLICA, sched, sc, seed=4)
    assert res.under_provisioned_s(required=sched) == pytest.approx(30.0, abs=1e-6)
    ev = res.events
    req = ev[ev["event"] == "request"]
    assert len(req) == 2 and req["warm"].all()
    refill = ev[ev["event"] == "standby"]
    assert len(refill) == 2 and np.allclose(refill["time_s"], 600.0)
    R = res.replicas
    sb = R[R["kind"] == "standby"]
    assert len(sb) == 4                                       # 2 at the start, 2 refills
    assert np.allclose(sorted(sb["ready_s"]), [0.0, 0.0, 900.0, 900.0])
    # a step beyond the pool: the third replica takes the full lag
    sched3 = Schedule([2, 5, 5, 5], step_s=600.0)
    res3 = simulate_autoscaling(LIGHT, REPLICA, sched3, sc, seed=4)
    assert res3.under_provisioned_s(required=sched3) == pytest.approx(300.0, abs=1e-6)
    # standby replicas are paid for: 2 more replicas over the whole run than without the pool
    plain = simulate_autoscaling(LIGHT, REPLICA, sched, Scaling(lag_s=30.0, scale_down_window_s=0.0), seed=4)
    assert res.gpu_hours - plain.gpu_hours == pytest.approx(2 * 2400 / 3600, rel=0.01)


def _busy_arrivals(seed, rate=20.0, duration=2400.0):
    rng = np.random.default_rng(seed)
    return np.sort(rng.uniform(0, duration, rng.poisson(rate * duration)))


def test_scale_down_drains_without_losing_a_request():
    times = _busy_arrivals(5)
    sched = Schedule([6, 2, 2, 6], step_s=600.0)
    rep = ReplicaModel(4, service=Lognormal(8.0, scv=2.0))    # long requests: draining takes a while
    res = simulate_autoscaling(times, rep, sched, Scaling(lag_s=60.0, scale_down_window_s=0.0),
                               duration_s=2400.0, record=True, seed=5)
    rec = res.records
    assert len(rec) == times.size and np.allclose(rec["arrival"], times)
    assert res.requests == times.size
    served = ~rec["refused"]
    assert served.all()
    assert np.isfinite(rec.loc[served, "end"]).all()
    assert (rec["start"] >= rec["arrival"]).all() and (rec["end"] >= rec["start"]).all()
    R = res.replicas
    drained = R[R["drain_s"].notna()]
    assert len(drained) == 4
    last_end = rec.groupby("replica")["end"].max()
    for rid, row in drained.iterrows():
        mine = rec[rec["replica"] == rid]
        assert (mine["start"] <= row["drain_s"] + 1e-9).all()          # nothing new after the drain
        assert row["released_s"] == pytest.approx(max(row["drain_s"], last_end.get(rid, -np.inf)))
        assert row["released_s"] > row["drain_s"]                       # it held requests when drained
    # paid until released: the GPU-hours are the replicas' paid intervals
    paid = (R["released_s"].fillna(2400.0).clip(upper=2400.0) - R["requested_s"]).clip(lower=0).sum() / 3600
    assert res.gpu_hours == pytest.approx(paid, rel=1e-9)
    assert paid > (6 * 1200 + 2 * 1200) / 3600                        # more than the serving time alone


def test_min_and_max_replicas_bound_the_fleet():
    times = _busy_arrivals(6, rate=40.0, duration=1200.0)
    res = simulate_autoscaling(times, REPLICA, ReactiveWaiting(0.5),
                               Scaling(lag_s=30.0, max_replicas=3, min_replicas=2), duration_s=1200.0, seed=6)
    tk = res.ticks
    assert (tk["target"] <= 3).all() and ((tk["serving"] + tk["starting"]) <= 3).all()
    assert tk["recommended"].max() > 3                         # the bound did bind
    quiet = simulate_autoscaling(LIGHT, REPLICA, Static(0), Scaling(lag_s=30.0, min_replicas=2), seed=6)
    assert (quiet.ticks["serving"] == 2).all() and (quiet.ticks["target"] == 2).all()


@pytest.mark.parametrize("up_window", [0.0, 900.0])
@pytest.mark.parametrize("window", [0.0, 120.0, 300.0])
def test_stabilisation_window_delays_a_scale_down_by_the_window(window, up_window):
    """With a longer scale-up window the scale-down window is the newest part of the kept
    recommendations, not all of them: the drains come at the same time."""
    sched = Schedule([4, 1, 1, 1], step_s=600.0)
    sc = Scaling(lag_s=30.0, scale_down_window_s=window, scale_up_window_s=up_window)
    res = simulate_autoscaling(LIGHT, REPLICA, sched, sc, seed=7)
    drains = res.events[res.events["event"] == "drain"]
    assert len(drains) == 3
    assert np.allclose(drains["time_s"], 600.0 + window)


@pytest.mark.parametrize("window", [0.0, 60.0, 180.0])
def test_scale_up_window_delays_a_step_up_by_the_window(window):
    sched = Schedule([1, 4, 4, 4, 4], step_s=600.0)
    res = simulate_autoscaling(LIGHT, REPLICA, sched, Scaling(lag_s=30.0, scale_up_window_s=window), seed=7)
    req = res.events[res.events["event"] == "request"]
    assert len(req) == 3 and np.allclose(req["time_s"], 600.0 + window)
    assert res.under_provisioned_s(required=sched) == pytest.approx(window + 30.0, abs=1e-6)


def test_quick_down_step_cancels_starting_replicas_newest_first():
    sched = Schedule([1] * 10 + [4] + [3] + [1] * 40, step_s=60.0)    # 4 for one minute at 600 s, then 3
    res = simulate_autoscaling(LIGHT, REPLICA, sched, Scaling(lag_s=300.0, scale_down_window_s=0.0), seed=8)
    ev, R = res.events, res.replicas
    new = R[R["requested_s"] == 600.0].index.to_numpy()
    assert new.size == 3
    c1 = ev[ev["event"] == "cancel"]
    # at 660 one is no longer wanted (the newest), at 720 the other two
    assert list(c1["time_s"]) == [660.0, 720.0, 720.0]
    assert c1["replica"].iloc[0] == new.max()
    assert R.loc[new, "ready_s"].isna().all() and np.allclose(R.loc[new, "released_s"], [720, 720, 660])
    assert not (ev["event"] == "drain").any()                  # nothing was serving on them: no drain
    assert (res.ticks["serving"] == 1).all()


def test_max_queue_refuses_and_counts():
    # one slot, 10 s per request, at most 2 waiting: hand-worked
    times = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 12.0, 12.5])
    rep = ReplicaModel(1, service=Deterministic(10.0))
    res = simulate_autoscaling(times, rep, Static(1), Scaling(lag_s=1.0), max_queue=2, record=True,
                               duration_s=200.0, seed=9)
    rec = res.records
    # 0 runs, 1 and 2 queue (starts 10, 20); 3, 4, 5 find two queued; at 12 the one started at
    # 10 has left the queue (starts 30); at 12.5 two are queued again
    assert rec["refused"].tolist() == [False, False, False, True, True, True, False, True]
    np.testing.assert_allclose(rec.loc[~rec["refused"], "start"], [0.0, 10.0, 20.0, 30.0])
    assert res.summary()["refused"] == 4 and int(res.hours["refused"].sum()) == 4
    # a refused request has no first token: half the hour refused puts its p99 at infinity, not NaN
    assert res.hours["ttft_p99_s"].tolist() == [math.inf] and not res.hours["met"].any()
    assert res.summary()["worst_hour_ttft_p99_s"] == math.inf
    assert res.summary()["ttft_p99_s"] == pytest.approx(np.quantile([0.0, 9.0, 18.0, 18.0], 0.99))


def test_max_queue_does_not_depend_on_where_the_run_ends():
    # the same arrivals, the run ending at the last arrival (the queue is served after the end)
    times = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 12.0, 12.5])
    rep = ReplicaModel(1, service=Deterministic(10.0))
    res = simulate_autoscaling(times, rep, Static(1), Scaling(lag_s=1.0), max_queue=2, record=True, seed=9)
    assert res.records["refused"].tolist() == [False, False, False, True, True, True, False, True]


def test_token_replica_holds_prefill_plus_decode_and_ttft_is_wait_plus_prefill():
    rng = np.random.default_rng(SEED + 20)
    n = 3000
    times = np.sort(rng.uniform(0, 600, n))
    inp = rng.integers(0, 4000, n)
    out = rng.integers(1, 500, n)
    rep = ReplicaModel(8, prefill_time=lambda x: 0.05 + 2e-4 * x, tpot_s=0.02, gpus=2)
    res = simulate_autoscaling(ArrivalStream(times, inp, out), rep, Static(2), Scaling(lag_s=1.0),
                               duration_s=600.0, record=True, seed=1)
    rec = res.records
    pre = 0.05 + 2e-4 * inp
    np.testing.assert_allclose(rec["end"] - rec["start"], pre + (out - 1) * 0.02, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(rec["ttft"], rec["start"] - rec["arrival"] + pre, rtol=1e-5, atol=1e-5)
    assert (rec["start"] > rec["arrival"]).any()                 # some waited: TTFT includes the wait
    assert res.gpu_hours == pytest.approx(2 * 2 * 600 / 3600)     # 2 replicas × 2 GPUs × 10 minutes


def test_required_replicas_is_the_fewest_meeting_the_erlang_c_tail():
    from capbook.autoscale.policies import required_replicas

    rep, es, wait_target_s, late = ReplicaModel(8, service=Exponential(2.0)), 2.0, 0.5, 0.01

    def tail(c, lam):                 # P(W > t) = C(c, a) exp(-(c/E[S] - λ) t) for M/M/c
        a = lam * es
        if a >= c:
            return 1.0
        b = 1.0
        for k in range(1, c + 1):     # Erlang B by its recursion, then Erlang C (not capbook's code)
            b = a * b / (k + a * b)
        return b / (1 - a / c * (1 - b)) * math.exp(-(c / es - lam) * wait_target_s)

    rates = np.array([0.0, 0.3, 3.0, 17.0, 60.0])
    need = required_replicas(rates, rep, es, wait_target_s=wait_target_s, late_share=late)
    assert need[0] == 0
    for lam, r in zip(rates[1:], need[1:]):
        assert tail(8 * r, lam) <= late < tail(8 * (r - 1), lam) if r > 1 else tail(8, lam) <= late
    sched = Schedule.from_rates(rates, rep, es, step_s=600.0, extra=1)
    np.testing.assert_array_equal(sched.replicas, need + 1)


class _Recorder(Policy):
    """A fixed fleet that keeps every observation it is shown."""

    def __init__(self, n):
        self.n, self.seen, self.name = n, [], "recorder"

    def desired(self, obs):
        self.seen.append(obs)
        return self.n


def test_observations_are_what_the_records_say():
    # what a policy is shown, rebuilt from the per-request records: requests in system (busy +
    # waiting), arrivals over the metric window, busy slots and busy replicas
    times = _busy_arrivals(12, rate=7.0, duration=1800.0)
    pol = _Recorder(2)
    res = simulate_autoscaling(times, ReplicaModel(4, service=Exponential(1.0)), pol,
                               Scaling(lag_s=1.0, metric_window_s=60.0), duration_s=1800.0, record=True, seed=12)
    rec = res.records
    obs = pol.seen[1:]                                 # the first is the call at time 0, before any tick
    t = np.array([o.time_s for o in obs])
    np.testing.assert_allclose(t, np.arange(1, t.size + 1) * 15.0)
    n_sys = _in_system(rec, t)
    np.testing.assert_array_equal([o.busy + o.waiting for o in obs], n_sys)
    np.testing.assert_array_equal([o.busy for o in obs], np.minimum(n_sys, 8))
    assert max(o.waiting for o in obs) > 0
    a = np.sort(rec["arrival"].to_numpy())
    for o in obs[4:]:                                  # a full 60-s window behind
        n_win = np.searchsorted(a, o.time_s) - np.searchsorted(a, o.time_s - 60.0)
        assert o.arrival_rate == pytest.approx(n_win / 60.0)
    # slot utilisation is the window's mean of busy / slots, sampled at the ticks
    busy = np.array([o.busy for o in obs])
    for k in range(4, len(obs)):
        assert obs[k].slot_utilisation == pytest.approx(busy[k - 3:k + 1].mean() / 8)
    np.testing.assert_array_equal(res.ticks["busy"], busy)
    np.testing.assert_array_equal(res.ticks["waiting"], [o.waiting for o in obs])


def test_schedule_plus_reactive_takes_the_larger():
    from capbook.autoscale.policies import Observation, ScheduleReactive

    pol = ScheduleReactive(Schedule([3, 1], step_s=600.0), ReactiveWaiting(0.5))
    mk = lambda t, busy, waiting: Observation(t, 2, 0, 0, 0, 4, 1.0, 0.5, 1.0, busy, waiting, 0.0, 1.0)
    assert pol.desired(mk(0.0, 0, 0)) == 3             # the schedule's floor
    assert pol.desired(mk(700.0, 0, 0)) == 1
    assert pol.desired(mk(700.0, 8, 12)) == 10         # (8 + 12) / (4 × 0.5)
    assert pol.desired(mk(0.0, 8, 12)) == 10


# --------------------------------------------------------------------------- 5. the book's advice


def test_gpu_utilisation_scaling_runs_far_more_replicas():
    # a day compressed into 2 hours of 150-s bins (smooth enough for a 60-s lag); 16 slots, 2 s per request
    rates = 2.0 + 18.0 * np.sin(np.linspace(0, np.pi, 48)) ** 2
    arr = RateArrivals(rates, bin_s=150.0)
    rep = ReplicaModel(16, service=Exponential(2.0))
    sc = Scaling(lag_s=60.0, min_replicas=1)
    obj = SLO(ttft_target_s=1.0)
    runs = {name: simulate_autoscaling(arr, rep, pol, sc, slo=obj, report_s=600.0, seed=10)
            for name, pol in [("gpu", ReactiveUtilisation(0.65, metric="gpu")),
                              ("slots", ReactiveUtilisation(0.65, metric="slots")),
                              ("waiting", ReactiveWaiting(0.65))]}
    s = {k: r.summary() for k, r in runs.items()}
    assert s["gpu"]["gpu_hours"] > 2.5 * s["waiting"]["gpu_hours"]
    assert s["gpu"]["gpu_hours"] > 2.5 * s["slots"]["gpu_hours"]
    assert s["waiting"]["hours_met"] == 1.0                      # the cheaper fleet still meets the objectives
    # at the lowest load GPU utilisation reads near 100 % on far more replicas than needed
    low = runs["gpu"].ticks[(runs["gpu"].ticks["time_s"] > 300) & (runs["gpu"].ticks["time_s"] < 600)]
    assert low["serving"].mean() > 3 * (2.0 * 2.0 / 16 / 0.65)


def test_waiting_scaling_meets_p99_where_latency_scaling_is_late_on_a_ramp():
    # a ramp from 4 to 40 requests/s over 30 minutes (1.2/s per minute), then flat; lag 2 minutes
    rates = np.r_[np.full(5, 4.0), np.linspace(4.0, 40.0, 30), np.full(15, 40.0)]
    arr = RateArrivals(rates, bin_s=60.0)
    rep = ReplicaModel(16, service=Exponential(2.0))
    sc = Scaling(lag_s=120.0)
    obj = SLO(ttft_target_s=1.0)
    wait = simulate_autoscaling(arr, rep, ReactiveWaiting(0.65), sc, slo=obj, report_s=300.0, seed=11)
    late = simulate_autoscaling(arr, rep, ReactiveLatency(ttft_target_s=1.0, goodput_share=0.99), sc, slo=obj,
                                report_s=300.0, seed=11)
    sw, sl = wait.summary(), late.summary()
    assert sw["hours_met"] == 1.0
    assert (~late.hours["met"]).sum() >= 2
    assert sl["worst_hour_ttft_p99_s"] > 5 * max(sw["worst_hour_ttft_p99_s"], 0.1)


# --------------------------------------------------------------------------- 6. bad input


@pytest.mark.parametrize("make, exc, match", [
    (lambda: ReplicaModel(0, service=1.0), ValueError, "slots"),
    (lambda: ReplicaModel(4), ValueError, "service"),
    (lambda: ReplicaModel(4, service=1.0, tpot_s=0.02), ValueError, "not both"),
    (lambda: ReplicaModel(4, prefill_time=3.0, tpot_s=0.02), TypeError, "prefill_time"),
    (lambda: ReplicaModel(4, service="fast"), ValueError, "service"),
    (lambda: Scaling(lag_s=-1.0), ValueError, "lag_s"),
    (lambda: Scaling(min_replicas=5, max_replicas=2), ValueError, "max_replicas"),
    (lambda: Scaling(interval_s=0.0), ValueError, "interval_s"),
    (lambda: Scaling(warm_pool=-1), ValueError, "warm_pool"),
    (lambda: Static(-1), ValueError, "replicas"),
    (lambda: Schedule([1, 2.5]), ValueError, "replicas"),
    (lambda: Schedule([1, 2], lead_s=-5.0), ValueError, "lead_s"),
    (lambda: ReactiveUtilisation(0.0), ValueError, "target"),
    (lambda: ReactiveUtilisation(0.6, metric="power"), ValueError, "metric"),
    (lambda: ReactiveWaiting(1.5), ValueError, "target"),
    (lambda: ReactiveLatency(ttft_target_s=0.0), ValueError, "ttft_target_s"),
    (lambda: ReactiveLatency(goodput_share=1.2), ValueError, "goodput_share"),
    (lambda: SLO(goodput_share=1.2), ValueError, "goodput_share"),
    (lambda: simulate_autoscaling([1.0], REPLICA, Static(1), slo={"ttft_target_s": 1.0}), TypeError, "slo"),
    (lambda: simulate_autoscaling([1.0], "replica", Static(1)), TypeError, "replica"),
    (lambda: simulate_autoscaling([1.0], REPLICA, 3), TypeError, "policy"),
    (lambda: simulate_autoscaling([1.0], REPLICA, Static(1), {"lag_s": 1}), TypeError, "scaling"),
    (lambda: simulate_autoscaling([1.0], REPLICA, Static(1), max_queue=-1), ValueError, "max_queue"),
    (lambda: simulate_autoscaling([1.0], REPLICA, Static(1), report_s=0), ValueError, "report_s"),
    (lambda: simulate_autoscaling([2.0, 1.0], REPLICA, Static(1)), ValueError, "arrival times"),
    (lambda: simulate_autoscaling([], REPLICA, Static(1)), ValueError, "no requests"),
    (lambda: simulate_autoscaling([1.0], REPLICA, Static(1), seed=1, rng=np.random.default_rng()),
     ValueError, "seed or rng"),
    (lambda: RateArrivals([1.0, -2.0], bin_s=60.0), ValueError, "rates"),
    (lambda: RateArrivals([0.0, 0.0], bin_s=60.0), ValueError, "rates"),
    (lambda: RateArrivals([1.0], bin_s=0.0), ValueError, "bin_s"),
    (lambda: RateArrivals([1.0], bin_s=60.0, rate_cv=-0.1), ValueError, "rate_cv"),
    (lambda: RateArrivals([1.0], bin_s=60.0, lengths={"a": 1}), TypeError, "lengths"),
    (lambda: rate_cv_from_log(np.arange(10_000.0), window_s=60.0, trend_s=90.0), ValueError, "trend_s"),
    (lambda: rate_cv_from_log([1.0]), ValueError, "arrival_s"),
    (lambda: TokenLengths({"a": ([1, 2], [3])}), ValueError, "tier 'a'"),
    (lambda: TokenLengths({"a": ([1], [3])}, shares={"b": 1.0}), ValueError, "shares"),
])
def test_bad_input_names_the_argument(make, exc, match):
    with pytest.raises(exc, match=match):
        make()


def test_token_replica_without_tokens_says_what_to_give():
    rep = ReplicaModel(4, prefill_time=lambda n: 1e-4 * n, tpot_s=0.02)
    with pytest.raises(ValueError, match="lengths="):
        simulate_autoscaling(RateArrivals([1.0], bin_s=60.0), rep, Static(1), Scaling(lag_s=1.0))


# --------------------------------------------------------------------------- 7. RateArrivals, rate_cv_from_log, TokenLengths


@pytest.mark.parametrize("n", [0, 5, 8_000, 200_000])
def test_bucketed_sort_of_arrivals_is_numpys_sort(n):
    """capbook.sim.arrivals._sorted_within (the sort of an hour's arrivals) against np.sort: on
    uniform times, on clustered times with ties, and with values on both ends of the range."""
    from capbook.sim.arrivals import _sorted_within

    rng = np.random.default_rng(SEED + n)
    lo, hi = 7200.0, 10800.0
    uniform = lo + rng.random(n) * (hi - lo)
    clustered = np.round(lo + (hi - lo) * rng.beta(0.3, 3.0, n), 1)       # most in the first minutes, with ties
    ends = np.r_[clustered[: n // 2], np.full(min(n, 3), lo), np.full(min(n, 3), hi)]
    for x in (uniform, clustered, ends):
        got = _sorted_within(x.copy(), lo, hi)
        np.testing.assert_array_equal(got, np.sort(x))


def test_rate_arrivals_counts_are_poisson_at_each_bins_rate():
    rates = np.array([2.0, 8.0, 0.5])
    s = RateArrivals(rates, bin_s=3600.0).generate(np.random.default_rng(SEED + 12))
    t = s.times
    assert np.all(np.diff(t) >= 0) and t.min() >= 0 and t.max() < 3 * 3600
    for k, lam in enumerate(rates):
        n = int(((t >= k * 3600) & (t < (k + 1) * 3600)).sum())
        assert abs(n - lam * 3600) < 4 * math.sqrt(lam * 3600)
        counts = np.bincount(((t[(t >= k * 3600) & (t < (k + 1) * 3600)] - k * 3600) // 10).astype(int),
                             minlength=360)
        d = counts.var(ddof=1) / counts.mean()
        assert abs(d - 1.0) < 4 * math.sqrt(2 / 359)           # index of dispersion of Poisson


@pytest.mark.parametrize("lam, cv, w", [(1.0, 0.5, 60.0), (3.0, 0.2, 30.0)])
def test_rate_cv_gives_the_stated_index_of_dispersion(lam, cv, w):
    K = 4000
    arr = RateArrivals([lam], bin_s=K * w, rate_cv=cv, window_s=w)
    t = arr.generate(np.random.default_rng(SEED + 13)).times
    counts = np.bincount((t // w).astype(int), minlength=K)[:K]
    want = 1 + lam * w * cv**2
    # the count is Poisson(λ w G), G gamma of mean 1 and cv: the sampling error of var/mean from K
    # windows is about D sqrt((2 + 6 cv² ... )/K); the kurtosis term is bounded by 6 cv² + 3/(λw)
    d = counts.var(ddof=1) / counts.mean()
    rel_se = math.sqrt((2 + 6 * cv**2 + 3 / (lam * w)) / K)
    assert abs(d / want - 1) < 4 * rel_se, (d, want)
    assert abs(counts.mean() - lam * w) < 4 * math.sqrt(want * lam * w / K)


def test_rate_arrivals_run_in_the_fixed_fleet_simulator():
    arr = RateArrivals([2.0, 10.0], bin_s=1800.0)
    res = Simulation(FleetSpec(2, 8, FixedService(Exponential(1.0))), arr, seed=SEED + 16).run()
    a = res.arrival
    for k, lam in enumerate([2.0, 10.0]):
        n = int(((a >= k * 1800) & (a < (k + 1) * 1800)).sum())
        assert abs(n - lam * 1800) < 4 * math.sqrt(lam * 1800)
    # the busier half waits more, as Erlang C says (c = 16, ρ = 0.125 then 0.625)
    w = res.start - res.arrival
    assert (w[a >= 1800] > 0).mean() > (w[a < 1800] > 0).mean()


def test_rate_cv_from_log_recovers_a_known_cv_and_zero_for_poisson_with_a_trend():
    day = 3.0 + 6.0 * np.sin(np.linspace(0, np.pi, 24)) ** 2            # a trend, hour by hour
    rng = np.random.default_rng(SEED + 14)
    bursty = RateArrivals(day, bin_s=3600.0, rate_cv=0.3, window_s=60.0).generate(rng).times
    est = rate_cv_from_log(bursty, window_s=60.0, trend_s=3600.0)
    assert abs(est - 0.3) < 0.03                    # SE of the estimate ≈ 0.007 over 1440 windows
    poisson = RateArrivals(day, bin_s=3600.0).generate(rng).times
    assert rate_cv_from_log(poisson, window_s=60.0, trend_s=3600.0) < 0.05
    # the trend itself is not counted as burstiness: the raw dispersion of the Poisson log is large
    counts = np.bincount((poisson // 60).astype(int))
    assert counts.var() / counts.mean() > 5


def test_token_lengths_from_log_keeps_pairs_and_tier_shares():
    log = pd.DataFrame({
        "input_tokens": [10, 20, 1000, 1000, 3000],
        "output_tokens": [100, 200, 5, 0, 7],
        "tier": ["a", "a", "b", "b", "b"],
    })
    tl = TokenLengths.from_log(log)
    assert tl.tiers == ["a", "b"]
    np.testing.assert_allclose(tl.shares, [0.4, 0.6])
    n = 40_000
    inp, out, tier = tl.sample(np.random.default_rng(SEED + 15), n)
    names = np.asarray(tl.tiers)[tier]
    pairs = set(zip(inp.tolist(), out.tolist(), names.tolist()))
    assert pairs == {(10, 100, "a"), (20, 200, "a"), (1000, 5, "b"), (1000, 1, "b"), (3000, 7, "b")}
    share_a = (names == "a").mean()
    assert abs(share_a - 0.4) < 4 * math.sqrt(0.24 / n)
    only_b = TokenLengths.from_log(log, tier="b")
    assert only_b.tiers == ["b"] and only_b.mean_output_tokens == pytest.approx((5 + 1 + 7) / 3)
    i1, o1, t1 = only_b.sample(np.random.default_rng(SEED + 16), 3_000)        # one tier: drawn without a tier draw
    assert set(zip(i1.tolist(), o1.tolist())) == {(1000, 5), (1000, 1), (3000, 7)}
    assert (t1 == 0).all() and i1.dtype == o1.dtype == np.int64
    counts = np.unique(o1, return_counts=True)[1]
    assert (abs(counts - 1_000) < 4 * math.sqrt(3_000 * 2 / 9)).all()          # each pair a third of the draws
    assert tl.mean_input_tokens == pytest.approx(0.4 * 15 + 0.6 * 5000 / 3)
    # the arrivals carry them: tiers and pairs per request
    s = RateArrivals([5.0], bin_s=600.0, lengths=tl).generate(np.random.default_rng(1))
    assert set(zip(s.input_tokens.tolist(), s.output_tokens.tolist())) <= {(p[0], p[1]) for p in pairs}
    assert set(np.unique(s.tier)) == {"a", "b"}


@pytest.mark.parametrize("mean_s, scale, slots", [(6.0, 1.0, 8), (0.2, 3.0, 2)],
                         ids=["seconds-long requests", "a slot serves dozens of requests per tick"])
def test_batched_commit_of_unqueued_requests_is_the_heap_loop(monkeypatch, mean_s, scale, slots):
    """The vectorised commit of the requests that start on arrival (autoscale._Run._commit_unqueued)
    against the heap loop alone, on a run that scales up and down and makes requests wait: every
    start, hour, tick, event and replica is the same, bit for bit. With 0.2-s requests on a 15-s
    tick a slot freed by one request of the batch is taken by a later one many times over (the
    batch follows those chains back to a slot of the heap)."""
    from capbook.autoscale import policies as autoscale

    rates = scale * np.r_[np.full(3, 10.0), np.full(3, 40.0), np.full(3, 6.0), np.full(3, 30.0)]   # 10-minute bins
    arr = RateArrivals(rates, bin_s=600.0)
    rep = ReplicaModel(slots, service=Lognormal(mean_s, scv=1.5))
    pol = ReactiveWaiting(0.6)
    sc = Scaling(lag_s=120.0, scale_down_window_s=120.0, interval_s=15.0, initial_replicas=4)

    calls = {"batched": 0, "requests": 0}
    real = autoscale._Run._commit_unqueued

    def counted(self, A, H, i, k_end):
        j, st = real(self, A, H, i, k_end)
        calls["batched"] += j > i
        calls["requests"] += j - i
        return j, st

    monkeypatch.setattr(autoscale._Run, "_commit_unqueued", counted)
    fast = simulate_autoscaling(arr, rep, pol, sc, seed=SEED)
    monkeypatch.setattr(autoscale._Run, "_commit_unqueued", lambda self, A, H, i, k_end: (i, None))
    slow = simulate_autoscaling(arr, rep, pol, sc, seed=SEED)
    # both paths ran: many ticks committed in one step, and some requests waited (the heap loop's part)
    assert calls["batched"] > 50 and 0 < calls["requests"] < fast.requests
    assert (slow.ticks["waiting"] > 0).any()
    assert fast.events["event"].isin(["request", "drain"]).sum() >= 4          # it scaled both ways
    for part in ("hours", "ticks", "events", "replicas"):
        pd.testing.assert_frame_equal(getattr(fast, part), getattr(slow, part), check_exact=True)
    assert fast.gpu_hours == slow.gpu_hours and fast.requests == slow.requests
