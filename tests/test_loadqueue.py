"""Tests of the load-dependent (continuous-batching) queue model."""
from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pandas as pd
import pytest

from capbook.engine import loadqueue as lq
from capbook import queueing as q
from capbook.sweeps.sweep import Sweep, load_sample_sweep


def flat(T):
    return lambda n: np.full_like(np.asarray(n, dtype=float), T)


# ---------------------------------------------------------------------------
# Reduction to Erlang C
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("slots, replicas, lam, T", [(32, 1, 2.0, 12.25), (32, 17, 40.0, 12.25), (8, 10, 9.5, 8.0), (1, 1, 0.5, 1.0)])
def test_flat_tpot_unbounded_queue_is_erlang_c(slots, replicas, lam, T):
    model = lq.LoadDependentQueue(slots, flat(T), replicas=replicas)
    sol = model.solve(lam)
    c = slots * replicas
    assert sol.prob_wait == pytest.approx(q.prob_wait(c, lam, T), rel=1e-10, abs=1e-300)
    assert sol.mean_wait == pytest.approx(q.mean_wait(c, lam, T), rel=1e-10, abs=1e-300)
    for t in (0.0, 0.5, 2.0, 10.0):
        assert sol.prob_wait_exceeds(t) == pytest.approx(q.prob_wait_exceeds(t, c, lam, T), rel=1e-10, abs=1e-300)
    assert sol.throughput == pytest.approx(lam)
    assert sol.prob_block == 0.0
    # Little's law on the running sequences: E[running] = lam * T
    assert sol.mean_running == pytest.approx(lam * T, rel=1e-10)


def test_flat_tpot_large_waiting_room_converges_to_unbounded():
    m_inf = lq.LoadDependentQueue(32, flat(12.25), replicas=17).solve(40.0)
    m_k = lq.LoadDependentQueue(32, flat(12.25), replicas=17, waiting_room=5000).solve(40.0)
    assert m_k.prob_wait == pytest.approx(m_inf.prob_wait, rel=1e-10)
    assert m_k.mean_wait == pytest.approx(m_inf.mean_wait, rel=1e-9)
    assert m_k.prob_wait_exceeds(0.5) == pytest.approx(m_inf.prob_wait_exceeds(0.5), rel=1e-9)


def test_saturation_is_explicit():
    model = lq.LoadDependentQueue(4, flat(1.0))
    sol = model.solve(4.0)
    assert not sol.stable
    assert sol.prob_wait == 1.0 and sol.mean_wait == math.inf
    assert sol.prob_wait_exceeds(100.0) == 1.0
    assert sol.wait_quantile(0.5) == math.inf
    # with a finite waiting room the same load is stable and blocks instead
    solk = lq.LoadDependentQueue(4, flat(1.0), waiting_room=10).solve(8.0)
    assert solk.stable and 0 < solk.prob_block < 1
    assert solk.throughput == pytest.approx(8.0 * (1 - solk.prob_block))
    assert solk.throughput < 4.0


# ---------------------------------------------------------------------------
# Finite waiting room against an independent mpmath birth-death computation
# ---------------------------------------------------------------------------


@mp.workdps(40)
def oracle_birth_death(lam, mu, K):
    """pi_k for rates mu[1..c], waiting room K, by exact rational recursion in mpmath."""
    c = len(mu)
    w = [mp.mpf(1)]
    for k in range(1, c + K + 1):
        rate = mu[min(k, c) - 1]
        w.append(w[-1] * mp.mpf(lam) / mp.mpf(rate))
    Z = mp.fsum(w)
    return [x / Z for x in w]


def test_load_dependent_finite_room_matches_oracle():
    tpot = lambda n: 0.011 + 0.0009 * np.asarray(n, dtype=float)  # noqa: E731 - TPOT grows with the batch
    T = lambda n: 0.25 + 300 * tpot(n)  # noqa: E731
    model = lq.LoadDependentQueue(16, T, tpot=tpot, waiting_room=12)
    lam = 2.2
    sol = model.solve(lam)
    mu = [float(m / T(m)) for m in range(1, 17)]
    pi = oracle_birth_death(lam, mu, 12)
    assert np.allclose(sol.pi, [float(x) for x in pi], rtol=1e-12, atol=0)
    p_block = float(pi[-1])
    assert sol.prob_block == pytest.approx(p_block, rel=1e-12)
    Lq = float(mp.fsum(max(k - 16, 0) * pi[k] for k in range(len(pi))))
    assert sol.mean_wait == pytest.approx(Lq / (lam * (1 - p_block)), rel=1e-12)


def test_wait_tail_integrates_to_mean_wait():
    # E[W] = integral of P(W > t): ties the FCFS tail (gamma mixture) to Little's law
    tpot = lambda n: 0.011 + 0.0009 * np.asarray(n, dtype=float)  # noqa: E731
    T = lambda n: 0.25 + 300 * tpot(n)  # noqa: E731
    for K in (5, 40, None):
        sol = lq.LoadDependentQueue(16, T, tpot=tpot, waiting_room=K).solve(1.6)
        ts = np.linspace(0, 200, 40_001)
        tail = np.asarray(sol.prob_wait_exceeds(ts))
        integral = float(np.sum((tail[1:] + tail[:-1]) / 2 * np.diff(ts)))
        assert integral == pytest.approx(sol.mean_wait, rel=1e-5)
        assert np.all(np.diff(tail) <= 1e-15)
        assert tail[0] == pytest.approx(sol.prob_wait, rel=1e-12)


def test_wait_quantile_inverts_tail():
    sol = lq.from_sweep(load_sample_sweep(), 32, waiting_room=50).solve(2.3)
    for qq in (0.9, 0.99):
        t = sol.wait_quantile(qq)
        if t > 0:
            assert sol.prob_wait_exceeds(t) == pytest.approx(1 - qq, rel=1e-6)


# ---------------------------------------------------------------------------
# Built from the sample sweep
# ---------------------------------------------------------------------------


def test_sweep_model_runs_faster_at_light_load_than_mmc():
    sw = load_sample_sweep()
    model = lq.from_sweep(sw, 32)
    # at full slots the model's service time is the sweep's T at 32
    tab = sw.table
    inp, out = tab["mean_input_tokens"].mean(), tab["mean_output_tokens"].mean()
    assert model.service_time_at(32.0) == pytest.approx(float(sw.service_time_s(32, inp, out)), rel=1e-9)
    sol = model.solve(2.0)
    mmc = q.prob_wait(32, 2.0, float(model.service_time_at(32.0)))
    # sequences run faster when fewer share the GPU, so fewer requests wait than M/M/c says
    assert sol.prob_wait < mmc
    assert sol.ttft_quantile(0.5) == pytest.approx(float(sw.ttft(sol.mean_running, 50)), rel=0.05)


def test_tpot_seen_grows_with_load():
    model = lq.from_sweep(load_sample_sweep(), 32)
    t1 = model.solve(1.0).tpot_quantile(0.95)
    t2 = model.solve(2.3).tpot_quantile(0.95)
    assert t1 < t2 <= float(load_sample_sweep().tpot(32)) + 1e-12


def test_max_rate_meets_objectives_and_a_bit_more_does_not():
    sw = load_sample_sweep()
    model = lq.from_sweep(sw, 32)
    lam = lq.max_rate(model, ttft_target_s=1.0, ttft_quantile=0.99, tpot_target_s=0.05)
    assert 0 < lam < model.max_throughput
    sol = model.solve(lam)
    assert sol.prob_ttft_exceeds(1.0) <= 0.01 + 1e-9
    worse = model.solve(lam * 1.001)
    assert worse.prob_ttft_exceeds(1.0) > 0.01 or worse.tpot_quantile(0.95) > 0.05


def test_replicas_needed_pooled_beats_isolated():
    sw = load_sample_sweep()
    pooled = lq.replicas_needed(sw, 40.0, 32, ttft_target_s=1.0, ttft_quantile=0.99, tpot_target_s=0.05)
    isolated = lq.replicas_needed(sw, 40.0, 32, ttft_target_s=1.0, ttft_quantile=0.99, tpot_target_s=0.05, pooled=False)
    assert pooled < isolated
    # and the answer is minimal
    m = lq.from_sweep(sw, 32, replicas=pooled - 1)
    assert lq.max_rate(m, 1.0, 0.99, 0.05) < 40.0


# ---------------------------------------------------------------------------
# Against the simulator in continuous-batching mode
# ---------------------------------------------------------------------------

SIM_BIAS = 0.20  # stated model tolerance; see the chapter "Where the textbook breaks"
REPLICATIONS = 6


@pytest.mark.parametrize("rho", [0.85, 0.92])
def test_model_agrees_with_continuous_batching_simulation(rho):
    """Mean wait and p99 TTFT of the model against independent simulation replications.

    Waits near the knee are strongly autocorrelated, so the standard error comes from
    independent replications (different seeds), not from one long run. The model may differ
    from the simulation by SIM_BIAS (it treats holding times as exponential at the
    load-dependent rate and reads prefill from the sweep's TTFT curve) plus three standard
    errors of the simulation.
    """
    from capbook.sim.arrivals import PoissonArrivals
    from capbook.sim.distributions import Exponential
    from capbook.sim.slotsim import ContinuousBatching, FleetSpec, Simulation

    sw = load_sample_sweep()
    model = lq.from_sweep(sw, 32, replicas=2, input_tokens=1500, output_tokens=300)
    lam = rho * model.max_throughput
    sol = model.solve(lam)
    svc = ContinuousBatching(sw, input_tokens=1500, output_tokens=Exponential(300.0))
    fleet = FleetSpec(replicas=2, slots=32, service=svc, routing="pooled")
    waits, p99s = [], []
    for seed in range(REPLICATIONS):
        res = Simulation(fleet, PoissonArrivals(lam), n_requests=30_000, warmup_s=1_000, seed=100 + seed).run()
        rec = res.records
        rec = rec[rec["arrival"] >= 1_000]
        waits.append(rec["wait"].mean())
        p99s.append(np.percentile(rec["ttft"].to_numpy(), 99))
    for name, sims, model_value in (("mean wait", waits, sol.mean_wait), ("p99 TTFT", p99s, sol.ttft_quantile(0.99))):
        mean = float(np.mean(sims))
        se = float(np.std(sims, ddof=1) / math.sqrt(len(sims)))
        assert abs(mean - model_value) <= 3 * se + SIM_BIAS * model_value, (name, mean, se, model_value)


# ---------------------------------------------------------------------------
# KV-cache-limited slots
# ---------------------------------------------------------------------------


def test_kv_cache_slots():
    bpt = lq.kv_bytes_per_token(32, 8, 128, 2)  # Llama-3.1-8B, bf16
    assert bpt == 131072.0
    # 40 GiB free for KV, 1,800-token contexts
    s = lq.kv_slots(40 * 2**30, bpt, 1800)
    assert s == (40 * 2**30) // (131072 * 1800)
    b = lq.slots_binding(32, 40 * 2**30, bpt, 1800)
    assert b.slots == 32 and b.binding == "TPOT target"
    # long contexts: memory binds
    b2 = lq.slots_binding(32, 40 * 2**30, bpt, 32_000)
    assert b2.slots == b2.slots_memory < 32 and b2.binding == "KV-cache memory"


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


def _sweep_from(conc, tpot):
    n = len(conc)
    df = pd.DataFrame({
        "concurrency": conc, "ttft_p50_s": [0.25] * n, "ttft_p95_s": [0.3] * n, "ttft_p99_s": [0.35] * n,
        "tpot_p50_s": tpot, "tpot_p95_s": [t * 1.05 for t in tpot], "tpot_p99_s": [t * 1.1 for t in tpot],
        "request_throughput_rps": [1.0] * n, "output_throughput_tps": [300.0] * n,
        "mean_input_tokens": [1500.0] * n, "mean_output_tokens": [300.0] * n, "num_requests": [100] * n,
    })
    return Sweep.from_frame(df, name="test")


def test_too_few_points_rejected():
    with pytest.raises(ValueError, match="at least 3"):
        lq.from_sweep(_sweep_from([1, 32], [0.01, 0.04]), 32)


def test_non_monotone_throughput_rejected():
    # TPOT that grows faster than linearly: n / T(n) falls past 8
    sw = _sweep_from([1, 8, 16, 32], [0.01, 0.02, 0.2, 0.9])
    with pytest.raises(ValueError, match="throughput n/T\\(n\\) falls"):
        lq.from_sweep(sw, 32)


def test_slots_beyond_sweep_rejected():
    with pytest.raises(ValueError, match="exceeds the sweep's highest"):
        lq.from_sweep(load_sample_sweep(), 512)


@pytest.mark.parametrize("kwargs, name", [
    ({"waiting_room": -1}, "waiting_room"),
    ({"replicas": 0}, "replicas"),
    ({"slots": 0}, "slots"),
    ({"slots": 2.5}, "slots"),
])
def test_bad_model_arguments(kwargs, name):
    args = {"slots": 4, "service_time_s": flat(1.0)}
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        lq.LoadDependentQueue(**args)


def test_bad_rates_and_targets():
    model = lq.LoadDependentQueue(4, flat(1.0))
    with pytest.raises(ValueError, match="arrival_rate"):
        model.solve(-1.0)
    with pytest.raises(ValueError, match="arrival_rate"):
        model.solve(float("nan"))
    with pytest.raises(ValueError, match="ttft_target_s"):
        lq.max_rate(model, 0.0)
    with pytest.raises(ValueError, match="t must be"):
        model.solve(1.0).prob_wait_exceeds(-1.0)
    with pytest.raises(ValueError, match="free_memory_bytes"):
        lq.kv_slots(0, 1.0, 1.0)
    with pytest.raises(ValueError, match="layers"):
        lq.kv_bytes_per_token(0, 8, 128)
