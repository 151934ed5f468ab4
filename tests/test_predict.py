"""capbook.engine.stepmodel and capbook.engine.predict against independent oracles.

Every expected number here comes from a formula (a flat step's S / (L t0), the mean-field
step identity solved by hand, M/M/1 and Erlang C from capbook.queueing, a fixed point found by
iteration) or from measured data (the KubeCon inference-perf runs), never from an earlier run
of the code under test. Engines built by hand have no client overhead, so what the client sees
is what the engine does.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import brentq

from capbook.engine.stepmodel import EngineLimits, EngineModel, StepCost, fit_engine
from capbook.sim.fleetsim import run_fleet
from capbook.engine.predict import MODELS, predict
from capbook.queueing import erlang_c, mean_wait, wait_quantile
from capbook.sweeps.sweep import Sweep, load_sample_sweep

FAST = 2000  # simulated requests where the exact count does not matter


def engine(t0, c, S, P, L, *, c2=0.0, kv=None, policy="mixed", chunked=True, output_quantiles=None):
    """An engine built by hand: zero client overhead, fixed prompt length."""
    limits = EngineLimits(max_num_seqs=S, kv_cache_tokens=kv, max_num_batched_tokens=8192,
                          chunked_prefill=chunked, policy=policy)
    return EngineModel(StepCost(t0, c, c2), limits, prompt_tokens=P, output_tokens=L,
                       output_quantiles=output_quantiles)


def max_overlap(first, done) -> int:
    """Most requests between their first token and their last at any instant (half-open)."""
    events = sorted([(t, 0) for t in done] + [(t, 1) for t in first])  # ends before starts at ties
    cur = best = 0
    for _, start in events:
        cur += 1 if start else -1
        best = max(best, cur)
    return best


def synthetic_sweep(t0=0.01, c=5e-5, P=200, L=100, levels=(1, 2, 4, 8, 16), extra_ttft=0.02):
    """A closed-loop sweep obeying the step identity, with TTFT p99 = p50 (no spread)."""
    rows = []
    for n in levels:
        tpot = t0 + c * n * (L - 1 + P) / L
        ttft = t0 + c * P + extra_ttft
        e2e = ttft + (L - 1) * tpot
        rows.append(dict(concurrency=n, ttft_p50_s=ttft, ttft_p95_s=ttft, ttft_p99_s=ttft,
                         tpot_p50_s=tpot, tpot_p95_s=tpot, tpot_p99_s=tpot,
                         request_throughput_rps=n / e2e, output_throughput_tps=n / e2e * L,
                         mean_input_tokens=P, mean_output_tokens=L, num_requests=500,
                         mean_e2e_s=e2e, mean_ttft_s=ttft))
    return Sweep.from_frame(pd.DataFrame(rows), name="synthetic")


@pytest.fixture(scope="module")
def chat():
    """The sample chat sweep and its fitted engine (fitted once for the module)."""
    sw = load_sample_sweep("llama8b_h100_chat")
    return sw, fit_engine(sw)


# -- the step-level engine -------------------------------------------------------------------
@pytest.mark.parametrize("S, P, L", [(32, 200, 100), (8, 50, 40), (64, 1000, 250)])
def test_flat_step_saturation_is_slots_over_service_time(S, P, L):
    # every step takes t0: a slot serves one request per L steps (its prefill step emits the
    # first token, then L - 1 decode steps), so S slots complete S / (L t0) per second
    t0 = 0.01
    e = engine(t0, 0.0, S, P, L)
    assert e.saturation_rps() == pytest.approx(S / (L * t0), rel=0.02)


def test_flat_step_at_low_rate_is_l_steps_plus_at_most_one():
    t0, L = 0.01, 100
    e = engine(t0, 0.0, 256, 200, L)
    run = e.simulate(0.5, requests=FAST, seed=1)
    assert len(run.e2e_s) > 0.8 * FAST and run.backlog == 0
    assert run.e2e_s.min() >= L * t0 * (1 - 1e-9)
    assert run.e2e_s.max() <= (L + 1) * t0 * (1 + 1e-9)  # at most one step of waiting for the engine
    assert L * t0 <= run.e2e_s.mean() <= (L + 1) * t0
    # the first token comes out of the prefill step: one to two steps after arrival
    assert t0 * (1 - 1e-9) <= run.ttft_s.min() and run.ttft_s.max() <= 2 * t0 * (1 + 1e-9)


@pytest.mark.parametrize("S, P, L", [(32, 200, 100), (64, 500, 200), (128, 1000, 300)])
def test_linear_cost_saturation_matches_the_mean_field(S, P, L):
    t0, c = 0.008, 5e-5
    e = engine(t0, c, S, P, L)
    # by hand: S slots busy, a step works S (L - 1 + P) / L tokens, rate S / (L t_step)
    by_hand = S / (L * t0 + c * S * (L - 1 + P))
    assert e.mean_field_saturation_rps() == pytest.approx(by_hand, rel=1e-12)
    assert e.saturation_rps() == pytest.approx(by_hand, rel=0.03)


def kv_bound(P, L, kv, slots, t0=0.01, S=64):
    """A flat-step engine of S slots whose KV cache of ``kv`` tokens binds first: checks its slots
    against the cache (prompt plus half the output per sequence) and that the same engine with an
    unbounded cache saturates at S / (L t0). Returns the engine and its saturation rate."""
    e = engine(t0, 0.0, S, P, L, kv=kv)
    assert e.slots == slots == math.floor(kv / (P + L / 2))
    assert engine(t0, 0.0, S, P, L).saturation_rps() == pytest.approx(S / (L * t0), rel=0.02)
    return e, e.saturation_rps()


def test_kv_cache_bounds_the_running_sequences():
    # prompts of 1000 tokens, 10 output tokens, a cache of 3100 tokens: three whole requests fit
    # (3 x 1010), a fourth prompt does not (4 x 1000), so no more than three ever run
    P, L = 1000, 10
    e, sat = kv_bound(P, L, kv=3100, slots=3)
    assert sat == pytest.approx(3 / (L * 0.01), rel=0.02)
    # near the KV-bound saturation the running count reaches what fits and no more
    rng = np.random.default_rng(1)
    m = 3000
    a = np.sort(rng.random(m)) * m / (0.9 * sat)
    run = run_fleet(e, a, np.full(m, P), np.full(m, L), replicas=1, router="jsq", overhead=False)
    first, done, npre = run.first_token, run.end, int(run.replicas["preemptions"].sum())
    assert np.isfinite(done).all() and npre == 0
    assert max_overlap(first, done) == 3
    assert e.simulate(0.8 * sat, requests=FAST).preemptions == 0


def test_outputs_growing_past_the_kv_cache_preempt():
    # 100-token prompts admit many sequences; at 400 output tokens each only ~6 fit
    P, L, kv = 100, 400, 2000
    e, sat = kv_bound(P, L, kv=kv, slots=6)
    assert sat < (64 / (L * 0.01)) / 5
    assert sat <= math.floor(kv / (P + 1)) / (L * 0.01)  # never more running than prompts that fit
    run = e.simulate(0.5 * sat, requests=FAST, seed=2)
    assert run.preemptions > 0 and run.backlog == 0  # preempted sequences are recomputed and finish


def test_separate_prefill_steps_are_slower_than_mixed():
    oq = (np.array([0.0, 0.5, 1.0]), np.array([20.0, 200.0, 600.0]))  # varied outputs: steps desynchronise
    kw = dict(output_quantiles=oq)
    mixed = engine(0.008, 5e-5, 64, 500, 200, policy="mixed", chunked=True, **kw)
    separate = engine(0.008, 5e-5, 64, 500, 200, policy="separate", chunked=False, **kw)
    s_mixed, s_sep = mixed.saturation_rps(), separate.saturation_rps()
    assert s_sep < 0.95 * s_mixed
    rate = 0.5 * s_sep
    rm, rs = mixed.simulate(rate, requests=FAST, seed=4), separate.simulate(rate, requests=FAST, seed=4)
    assert np.mean(rs.tpot_s) > 1.03 * np.mean(rm.tpot_s)  # every prefill step pauses the streams
    assert np.mean(rs.e2e_s) > np.mean(rm.e2e_s)


# -- M/M/c ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def synthetic():
    """The synthetic sweep, its lightest point's mean E2E and TTFT, and an engine of one slot."""
    sw = synthetic_sweep()
    one = fit_engine(sw, max_num_seqs=1, kv_cache_tokens=10**7)
    return sw, float(sw.table["mean_e2e_s"].iloc[0]), float(sw.table["ttft_p50_s"].iloc[0]), one


@pytest.mark.parametrize("lam", [0.1, 0.3, 0.6])
def test_mmc_at_one_server_is_mm1(synthetic, lam):
    sw, E, ttft1, e = synthetic
    m = predict(sw, lam, engine=e, models=("mmc",)).models["mmc"]
    mu = 1 / E
    rho = lam / mu
    assert m.saturation_rps == pytest.approx(mu, rel=1e-9)
    assert m.stable
    # M/M/1: mean wait rho / (mu - lambda); P(W > t) = rho exp(-(mu - lambda) t)
    assert m.e2e_mean_s == pytest.approx(E + rho / (mu - lam), rel=1e-6)
    q99 = math.log(rho / 0.01) / (mu - lam) if rho > 0.01 else 0.0
    q50 = math.log(rho / 0.5) / (mu - lam) if rho > 0.5 else 0.0
    assert m.ttft_p99_s == pytest.approx(ttft1 + q99, rel=1e-6)
    assert m.ttft_p50_s == pytest.approx(ttft1 + q50, rel=1e-6)


def test_mmc_servers_are_max_num_seqs(synthetic):
    sw, E, _, _ = synthetic
    e = fit_engine(sw, max_num_seqs=4, kv_cache_tokens=10**7)
    for lam in (1.0, 3.0):
        m = predict(sw, lam, engine=e, models=("mmc",)).models["mmc"]
        assert m.saturation_rps == pytest.approx(4 / E, rel=1e-9)
        assert m.e2e_mean_s == pytest.approx(E + float(mean_wait(4, lam, E)), rel=1e-6)
    over = predict(sw, 1.01 * 4 / E, engine=e, models=("mmc",)).models["mmc"]
    assert not over.stable and over.ttft_p99_s is None and over.e2e_mean_s is None


# -- the load-dependent queue -----------------------------------------------------------------
def test_load_dependent_saturation_is_the_fixed_point_linear():
    # t(R) = t0 + c (S + R P t)  =>  t = (t0 + c S) / (1 - c R P);  R = S / (L t)
    # =>  R* = S / (L t0 + c S (L + P))
    S, P, L, t0, c = 64, 500, 200, 0.008, 5e-5
    p = predict(None, 1.0, engine=engine(t0, c, S, P, L), models=("load_dependent",))
    assert p.models["load_dependent"].saturation_rps == pytest.approx(S / (L * t0 + c * S * (L + P)), rel=1e-6)


def test_load_dependent_saturation_is_the_fixed_point_curved():
    S, P, L, t0, c, c2 = 64, 500, 200, 0.008, 5e-5, 2e-8

    def step_at(R):  # smallest fixed point of t = cost(S + R P t), by monotone iteration from t0
        t = t0
        for _ in range(200000):
            k = S + R * P * t
            nt = t0 + c * k + c2 * k * k
            if nt > 1e3:
                return math.inf
            if abs(nt - t) < 1e-15:
                return nt
            t = nt
        return t

    fixed = brentq(lambda R: R - S / (L * step_at(R)), 1e-6, 100.0, xtol=1e-12)
    p = predict(None, 1.0, engine=engine(t0, c, S, P, L, c2=c2), models=("load_dependent",))
    assert p.models["load_dependent"].saturation_rps == pytest.approx(fixed, rel=1e-6)


@pytest.mark.parametrize("lam", [1.5, 2.0, 2.5])
def test_load_dependent_with_a_flat_step_is_erlang_c(lam):
    # a flat step makes every slot a server of mean service L t0 = 1 s: M/M/4
    S, t0, L = 4, 0.01, 100
    T = L * t0
    m = predict(None, lam, engine=engine(t0, 0.0, S, 200, L), models=("load_dependent",)).models["load_dependent"]
    assert m.stable and m.saturation_rps == pytest.approx(S / T, rel=1e-6)
    assert m.e2e_mean_s == pytest.approx(T + float(mean_wait(S, lam, T)), rel=1e-6)
    assert float(erlang_c(S, lam * T)) < 0.5  # so the median arrival does not wait
    assert m.ttft_p99_s - m.ttft_p50_s == pytest.approx(float(wait_quantile(0.99, S, lam, T)), rel=1e-4)


# -- predict ------------------------------------------------------------------------------------
def test_same_seed_same_numbers_and_uniform_arrivals_have_a_shorter_tail(chat):
    sw, e = chat
    rate = 0.8 * e.saturation_rps()
    a = predict(sw, rate, engine=e, requests=FAST, seed=3).as_dict()
    b = predict(sw, rate, engine=e, requests=FAST, seed=3).as_dict()
    assert a == b
    assert predict(sw, rate, engine=e, requests=FAST, seed=4).ttft_p99_s != a["ttft_p99_s"]
    kw = dict(engine=e, requests=FAST, models=("simulation",))
    uniform = predict(sw, rate, arrivals="uniform", **kw)
    poisson = predict(sw, rate, arrivals="poisson", **kw)
    assert uniform.ttft_p99_s < poisson.ttft_p99_s
    assert uniform.arrivals == "uniform" and uniform.as_dict()["arrivals"] == "uniform"


def test_past_saturation_is_unstable_without_latencies(chat):
    sw, e = chat
    sat = e.saturation_rps()
    p = predict(sw, 1.1 * sat, engine=e, requests=FAST)
    d = p.as_dict()
    assert d["model"] == "simulation" and d["stable"] is False
    assert d["saturation_rps"] == pytest.approx(sat)
    for k in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "e2e_mean_s"):
        assert d[k] is None and d["models"]["simulation"][k] is None
    assert any("past the predicted capacity" in n for n in d["notes"])
    json.dumps(d, allow_nan=False)


def test_max_rate_meets_the_target_and_just_above_does_not(chat):
    sw, e = chat
    sat = e.saturation_rps()
    kw = dict(engine=e, requests=FAST, models=("simulation",))
    target = predict(sw, 0.7 * sat, **kw).ttft_p99_s
    p = predict(sw, 1.0, ttft_p99_target_s=target, **kw)
    mr = p.models["simulation"].max_rate_rps
    assert p.ttft_p99_target_s == target and 0 < mr < sat
    assert predict(sw, mr, **kw).ttft_p99_s <= target
    above = predict(sw, 1.05 * mr, **kw)
    assert mr >= 0.99 * sat or not above.stable or above.ttft_p99_s > target


@pytest.mark.parametrize("args, kw, match", [
    ((-1.0,), {}, "rate"),
    ((float("nan"),), {}, "rate"),
    (("2",), {}, "rate"),
    ((True,), {}, "rate"),
    ((1.0,), {"arrivals": "bursty"}, "arrivals"),
    ((1.0,), {"max_num_seqs": 0}, "max_num_seqs"),
    ((1.0,), {"max_num_seqs": 2.5}, "max_num_seqs"),
    ((1.0,), {"ttft_p99_target_s": -0.5}, "ttft_p99_target_s"),
    ((1.0,), {"models": ("mmc", "erlang")}, "models"),
])
def test_errors_name_the_argument(chat, args, kw, match):
    sw, _ = chat
    with pytest.raises(ValueError, match=match):
        predict(sw, *args, **kw)


def test_sample_sweep_mmc_overstates_capacity(chat):
    sw, e = chat
    p = predict(sw, 2.0, engine=e, requests=FAST)
    assert tuple(p.models) == MODELS and p.model == "simulation" and p.stable
    sim, mmc = p.models["simulation"], p.models["mmc"]
    assert mmc.saturation_rps > 2 * sim.saturation_rps  # M/M/c ignores that the batch slows each stream
    assert sim.ttft_p50_s <= sim.ttft_p99_s and sim.tpot_p50_s > 0 and sim.e2e_mean_s > 0
    d = p.as_dict()
    assert d["saturation_rps"] == sim.saturation_rps and d["engine"]["slots"] == e.slots


def test_rate_zero_and_limits_with_a_fitted_engine_are_refused(chat):
    sw, e = chat
    with pytest.raises(ValueError, match="rate_rps must be positive"):
        predict(sw, 0.0, engine=e, requests=FAST)
    with pytest.raises(ValueError, match="with engine= the fitted model's limits apply"):
        predict(sw, 1.0, engine=e, max_num_seqs=4)


# -- real data: KubeCon NA 2025 inference-perf -------------------------------------------------
def test_kubecon_saturation_from_the_three_lowest_levels(shared_dir):
    from capbook.sweeps.importers import read_sweep

    root = shared_dir / "realdata" / "inference-perf-kubecon-na-2025"
    if not root.is_dir():
        pytest.skip(f"{root} is absent")
    sweep = read_sweep(root / "vllm+chunking_and_prefix_caching")
    assert len(sweep.saturated) >= 2
    low = Sweep.from_frame(sweep.table.iloc[:3], name="chunking_and_prefix_caching_low3")
    e = fit_engine(low)
    measured = float(np.median(sweep.saturated["request_throughput_rps"]))
    sat = e.saturation_rps()
    assert sat == pytest.approx(measured, rel=0.10)
    above = [float(r) for r in sweep.saturated["request_rate_target"] if r > sat]
    assert above
    for r in above:
        p = predict(low, r, engine=e, requests=FAST)
        assert p.stable is False and p.ttft_p99_s is None


def test_levels_past_the_throughput_peak_are_left_out_of_the_fit():
    """A closed-loop sweep whose completions collapse past some concurrency (KV thrashing) is
    fitted on the levels before the collapse, and says so; the fit equals the one on those
    levels alone."""
    sw = load_sample_sweep("llama8b_h100_chat")
    tab = sw.table
    top = tab.iloc[[-1]].copy()
    bad = pd.concat([top] * 2, ignore_index=True)
    bad["concurrency"] = [tab["concurrency"].max() * 2, tab["concurrency"].max() * 4]
    bad["request_throughput_rps"] = top["request_throughput_rps"].iloc[0] * np.array([0.3, 0.2])
    bad["tpot_p50_s"] = top["tpot_p50_s"].iloc[0] * 5
    collapsed = Sweep.from_frame(pd.concat([tab, bad], ignore_index=True), name="collapsed")
    e = fit_engine(collapsed)
    assert any("left out of the fit" in n and "throughput peak" in n for n in e.notes)
    assert len(e.fitted_sweep.table) == len(tab)
    clean = fit_engine(Sweep.from_frame(tab, name="clean"))
    assert e.step == clean.step
    # M/M/c reads the lightest level of the fitted points, not a collapsed one
    p = predict(collapsed, 1.0, engine=e, models=("mmc",), requests=FAST)
    q = predict(tab.pipe(Sweep.from_frame, name="clean"), 1.0, engine=clean, models=("mmc",), requests=FAST)
    assert p.models["mmc"].saturation_rps == pytest.approx(q.models["mmc"].saturation_rps)
