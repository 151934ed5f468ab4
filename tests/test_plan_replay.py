"""Tests of the replay-verified plan (capbook.plan.steps.capacity_plan's replay check, replay_plan).

Oracles: arrival counts over replay durations computed here from the stacked data; a
simulation assembled here from the public pieces (stack_busy_periods, TraceArrivals, FleetSpec,
ContinuousBatching) for the fleet sizes the plan reports; the prefill time of the long prompts
worked out from the sweep's prefill rate; the plan.csv rows scripts read.
"""
from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pandas as pd
import pytest

from capbook.plan import replay as replaymod
from capbook.plan import steps as planmod
from capbook.sim.arrivals import stack_busy_periods
from capbook.plan.steps import SLO, capacity_plan
from capbook.plan.replay import replay_plan, verify_plan
from capbook.engine.stepmodel import fit_engine
from capbook.sim.fleetsim import simulate_fleet
from capbook.sweeps.sweep import Sweep, load_sample_sweep
from capbook.logs.requestlog import read_requests

T0 = pd.Timestamp("2026-03-02 00:00:00", tz="UTC")


def _frame(t, rng, input_tokens=(500, 2500), output_tokens=(100, 500)):
    t = np.sort(t)
    return pd.DataFrame({
        "arrival_time": T0 + pd.to_timedelta(np.round(t * 1e6).astype(np.int64), unit="us"),
        "input_tokens": rng.integers(*input_tokens, t.size),
        "output_tokens": rng.integers(*output_tokens, t.size),
        "model": "m",
    })


def _poisson(rate, span_s, seed):
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.exponential(1 / rate, int(rate * span_s * 1.3) + 50))
    return t[t < span_s], rng


def _write(frame, tmp_path, name):
    path = tmp_path / f"{name}.parquet"
    frame.to_parquet(path, index=False)
    return read_requests(path)


@pytest.fixture(scope="module")
def sweep():
    return load_sample_sweep("illustrative_chat")


@pytest.fixture(scope="module")
def bursty(tmp_path_factory):
    """Two hours of Poisson traffic at 1 request/s plus a burst of 200 requests every 5 minutes."""
    t, rng = _poisson(1.0, 7200, seed=3)
    starts = np.arange(150.0, 7200.0, 300.0)
    b = np.repeat(starts, 200) + rng.uniform(0, 2, 200 * starts.size)
    frame = _frame(np.concatenate([t, b]), rng)
    return _write(frame, tmp_path_factory.mktemp("bursty"), "bursty")


@pytest.fixture(scope="module")
def bursty_plan(bursty, sweep):
    return capacity_plan(bursty, sweep, sim_requests=3000)


def _replay_by_hand(plan, log, sweep, replicas, n_requests=3000, seed=2026, runs=1):
    """The fleet simulation assembled from the public pieces (stack_busy_periods, fit_engine,
    simulate_fleet), the longer the more ``n_requests``: the oracle for the plan's verdicts."""
    frame = log.to_pandas()
    data = stack_busy_periods(frame, plan.request_rate, n_periods=frame["arrival_time"].dt.floor("h").nunique())
    data = data.iloc[:n_requests]
    t = data["arrival_time"].to_numpy()
    data = data.assign(arrival_time=(t - t[0]) * ((t.size - 1) / (t[-1] - t[0]) / plan.request_rate))
    eng = fit_engine(sweep)
    ttft, good = [], []
    for k in range(runs):
        run = simulate_fleet(eng, data, replicas=replicas, seed=seed + k)
        m = run.measured()
        ttft.append(run.ttft[m])
        good.append(run.good(plan.slo.ttft_target_s, plan.slo.tpot_target_s)[m])
    ttft, good = np.concatenate(ttft), np.concatenate(good)
    return float(np.quantile(ttft, plan.slo.ttft_quantile)), float(good.mean())


def _meets(plan, ttft_q, good):
    return ttft_q <= plan.slo.ttft_target_s and good >= plan.slo.goodput_share


# --------------------------------------------------------------------------------------------
# The replay arrives at the rate it states
# --------------------------------------------------------------------------------------------
def _measured(plan, log, n=6000):
    data = replaymod._replay_arrivals(plan, log, n)
    t = data["arrival_time"].to_numpy()
    return (t.size - 1) / (t[-1] - t[0])


def test_a_17_minute_log_replays_at_the_plan_rate(tmp_path, sweep):
    t, rng = _poisson(2.0, 17 * 60, seed=11)
    frame = _frame(t, rng)
    log = _write(frame, tmp_path, "short")
    p = capacity_plan(log, sweep, sim_requests=3000)
    # the plan's rate is the log's own: n requests over its span (a log under an hour has no
    # "busiest 60 minutes" other than all of it)
    span = (frame["arrival_time"].iloc[-1] - frame["arrival_time"].iloc[0]).total_seconds()
    assert p.request_rate == pytest.approx(len(frame) / span, rel=1e-9)
    assert _measured(p, log) == pytest.approx(p.request_rate, rel=0.02)
    assert p.sim["measured_rate"] == pytest.approx(p.request_rate, rel=0.02)
    # and at a planned peak ten times higher, still at the stated rate
    p10 = capacity_plan(log, sweep, demand_scale=10, simulate=False)
    assert _measured(p10, log) == pytest.approx(p10.request_rate, rel=0.02)
    # nothing in the plan is NaN or infinite
    num = pd.to_numeric(p.table()["value"], errors="coerce").dropna()
    assert np.isfinite(num).all()
    assert not re.search(r"\b(nan|inf)\b", p.render(), flags=re.IGNORECASE)


def test_a_partial_hour_start_replays_at_the_plan_rate(tmp_path, sweep):
    # 58 minutes from 18:15:46, as the Azure logs: two clock hours, neither covered whole
    t, rng = _poisson(3.0, 58.4 * 60, seed=12)
    frame = _frame(t + (18 * 3600 + 15 * 60 + 46), rng)
    log = _write(frame, tmp_path, "azure_like")
    p = capacity_plan(log, sweep, simulate=False)
    span = (frame["arrival_time"].iloc[-1] - frame["arrival_time"].iloc[0]).total_seconds()
    assert p.request_rate == pytest.approx(len(frame) / span, rel=1e-9)   # not over 3600 s
    assert _measured(p, log, n=len(frame)) == pytest.approx(p.request_rate, rel=0.02)
    assert _measured(p, log, n=2000) == pytest.approx(p.request_rate, rel=0.02)


@pytest.mark.parametrize("name", ["AzureLLMInferenceTrace_code.csv", "AzureLLMInferenceTrace_conv.csv",
                                  "synthetic_trace.jsonl"])
def test_real_short_logs_replay_at_the_plan_rate(shared_dir, sweep, name):
    log = read_requests(shared_dir / "traces" / name)
    p = capacity_plan(log, sweep, simulate=False)
    assert _measured(p, log) == pytest.approx(p.request_rate, rel=0.02)
    # independently of the plan's helper: every hour of the log stacked at the plan's rate
    frame = log.to_pandas()
    data = stack_busy_periods(frame, p.request_rate, n_periods=frame["arrival_time"].dt.floor("h").nunique())
    t = data["arrival_time"].to_numpy()
    assert (t.size - 1) / (t[-1] - t[0]) == pytest.approx(p.request_rate, rel=0.02)


# --------------------------------------------------------------------------------------------
# Verification: replicas until the replay meets the objectives
# --------------------------------------------------------------------------------------------
def test_bursty_log_plan_is_the_smallest_fleet_the_simulation_verifies(bursty, bursty_plan, sweep):
    p = bursty_plan
    v = p.verification
    assert v.status == "verified" and p.verified and p.serving == v.serving
    assert p.verified_total == p.total == p.serving + p.burst.replicas + p.spare
    # the search's own runs: the headline meets, one fewer does not
    assert bool(v.tried.loc[p.serving, "meets"]) and not bool(v.tried.loc[p.serving - 1, "meets"])
    # the oracle, assembled here from the public pieces with ten times the requests: it meets at the
    # headline and misses two below. One below, the plan's 3,000-request replay could not confirm the
    # objectives with 95 % confidence (the estimate met them, its margin reached past the 1 s objective:
    # 0.95 ± 0.09 s), while the longer oracle's point estimate meets them (0.92 s): the plan buys at most
    # the one replica its confidence margin asks for, never two
    assert _meets(p, *_replay_by_hand(p, bursty, sweep, p.serving, n_requests=30_000, runs=2))
    below = v.tried.loc[p.serving - 1]
    if _meets(p, *_replay_by_hand(p, bursty, sweep, p.serving - 1, n_requests=30_000, runs=2)):
        assert (below["ttft_q_s"] + below["ttft_q_margin_s"] > p.slo.ttft_target_s
                or below["goodput_share"] - below["goodput_margin"] < p.slo.goodput_share)
        assert below["seeds"] > 2        # the borderline size got its two extra replications
    assert not _meets(p, *_replay_by_hand(p, bursty, sweep, p.serving - 2, n_requests=30_000, runs=2))
    # the summary the plan keeps is of the headline fleet, and check_fleet reproduces the verdicts
    assert p.sim["replicas"] == p.serving
    assert p.sim["ttft_q_s"] <= p.slo.ttft_target_s and p.sim["goodput_share"] >= p.slo.goodput_share
    again = replay_plan(p, bursty, sweep, replicas=p.serving - 1, n_requests=3000)
    assert not again["meets"] and again["ttft_q_s"] == pytest.approx(v.tried.loc[p.serving - 1, "ttft_q_s"])
    assert replay_plan(p, bursty, sweep, n_requests=3000)["meets"]
    # the models are cross-checks: the log's 200-request bursts are what they miss, and the plan says so
    cc = p.cross_checks()
    assert (cc["difference"] < 0).all()
    assert cc.loc["Erlang C", "difference"] == p.erlang_replicas - p.serving
    assert all(w.startswith("bursts:") for w in cc["why"])
    first = p.render().splitlines()[0]
    assert first.startswith(f"Capacity plan: {p.total} replicas")
    assert f"{p.serving} serving + {p.burst.replicas} burst + {p.spare} spare" in first
    assert "smallest fleet the simulation verifies" in first
    st = p.stages()
    assert st.loc["fleet simulation", "replicas"] == p.serving
    assert st.loc["total", "replicas"] == p.total == st["added"].iloc[:-1].sum()
    assert f"capbook simulate --replicas {p.serving}" in p.render()


def test_the_search_starts_at_the_models_median_and_any_start_finds_the_same_size(bursty, bursty_plan, sweep):
    """The guess (the median of the models' counts) sets how many sizes are simulated, never the
    answer: a search started far below or far above it finds the same smallest size."""
    p = bursty_plan
    counts = sorted(n for n in p._check_counts().values() if n is not None)
    median = counts[len(counts) // 2]
    models = dataclasses.replace(p, verification=planmod._SKIPPED)
    v = p.verification
    assert median in v.tried.index          # the default search simulated the median first
    for guess in (1, median + 7):
        other = verify_plan(models, bursty, sweep, n_requests=3000, guess=guess)
        assert other.serving == v.serving, guess
        assert guess in other.tried.index or (guess < other.tried.index.min())
        assert bool(other.tried.loc[v.serving, "meets"]) and not bool(other.tried.loc[v.serving - 1, "meets"])
    # a guess that is already the answer takes two sizes (it, and the one below that misses)
    exact = verify_plan(models, bursty, sweep, n_requests=3000, guess=v.serving)
    assert list(exact.tried.index) == [v.serving - 1, v.serving]
    with pytest.raises(ValueError, match="^guess "):
        verify_plan(models, bursty, sweep, n_requests=3000, guess=0)


def test_the_checks_are_not_stacked(bursty, sweep, monkeypatch):
    # an Erlang C that asked for a hundred times more would not change the plan: it is a cross-check
    from capbook.plan import steps as planmod

    real = planmod.check_queueing

    def inflated(*a, **k):
        q = real(*a, **k)
        return planmod.dataclasses.replace(q, erlang_replicas=100 * q.erlang_replicas)

    monkeypatch.setattr(planmod, "check_queueing", inflated)
    p = capacity_plan(bursty, sweep, sim_requests=3000)
    base = capacity_plan(bursty, sweep, sim_requests=3000, ramp_per_min=0.0125)
    assert p.cross_checks().loc["Erlang C", "replicas"] == 100 * base.erlang_replicas // 100
    assert p.serving < p.erlang_replicas


def test_plan_csv_rows(bursty_plan, tmp_path):
    p = bursty_plan
    back = pd.read_csv(p.to_csv(tmp_path / "plan.csv"))
    assert list(back.columns) == ["step", "quantity", "value", "unit"]

    def val(step, quantity):
        rows = back[(back["step"] == step) & (back["quantity"] == quantity)]
        assert len(rows) == 1, (step, quantity)
        return rows["value"].iloc[0]

    assert val("objectives", "SLO") == p.slo.describe()
    assert int(float(val("replica", "slots (S)"))) == p.slots.S
    assert int(float(val("fleet", "serving replicas"))) == p.serving
    assert val("fleet", "serving count set by") == "fleet simulation"
    assert int(float(val("fleet", "total replicas"))) == p.total
    assert int(float(val("simulation", "verified replicas"))) == p.total
    assert float(val("simulation", "p99 TTFT")) == pytest.approx(p.sim["ttft_q_s"])
    assert p.sim["ttft_q_s"] <= p.slo.ttft_target_s
    assert val("simulation", "verification") == "verified"
    assert val("simulation", "router") == "pooled"
    for name in ("rating with headroom", "Erlang C", "load-dependent queue", "engine model, one replica"):
        n = int(float(val("cross-check", f"{name}: replicas")))
        assert int(float(val("cross-check", f"{name}: difference from the simulation"))) == n - p.serving


def test_a_calm_log_is_verified_at_its_floor(tmp_path, sweep):
    t, rng = _poisson(1.0, 7200, seed=5)
    log = _write(_frame(t, rng), tmp_path, "calm")
    p = capacity_plan(log, sweep, sim_requests=3000)
    assert p.verification.status == "verified" and p.serving == 1
    assert p.sim["replicas"] == 1 and (p.cross_checks()["difference"] == 0).all()
    assert "smallest fleet the simulation verifies" in p.render().splitlines()[0]


def test_impossible_objective_is_said_loudly(tmp_path, sweep):
    # prompts of 20k-30k tokens: one replica prefills ~6,000 tokens/s, so alone they exceed the 1 s objective
    t, rng = _poisson(0.2, 7200, seed=6)
    log = _write(_frame(t, rng, input_tokens=(20_000, 30_000)), tmp_path, "long")
    eng = fit_engine(sweep)
    assert float(eng.step(20_000 % eng.limits.max_num_batched_tokens)) + 2 * float(
        eng.step(eng.limits.max_num_batched_tokens)) > 2.0
    p = capacity_plan(log, sweep, sim_requests=1000)
    assert p.verification.status == "impossible" and p.verified is False
    assert p.verified_total is None and p.serving == p.erlang_replicas
    reason = p.verification.reason
    assert "prefill alone" in reason and "1 s" in reason
    first = p.render().splitlines()[0]
    assert "NOT VERIFIED" in first and "prefill alone" in first and "Erlang C's count" in first
    tab = p.table().set_index(["step", "quantity"])["value"]
    assert tab[("simulation", "verified replicas")] == "not verified"
    assert "prefill alone" in tab[("simulation", "why not verified")]
    # only one fleet size was simulated: no search when no size can succeed
    assert len(p.verification.tried) == 1
    # the simulation agrees: the TTFT tail is at least the prefill of the long prompts
    assert p.sim["ttft_q_s"] > p.slo.ttft_target_s


def test_goodput_target_impossible_when_one_step_is_slower_than_the_tpot_objective(tmp_path, sweep):
    t, rng = _poisson(0.5, 3600, seed=8)
    log = _write(_frame(t, rng), tmp_path, "tpot")
    tab = sweep.table
    slow = Sweep(tab.assign(tpot_mean_s=0.06, tpot_p50_s=0.06, tpot_p95_s=0.045, tpot_p99_s=0.07,
                            e2e_mean_s=tab["ttft_mean_s"] + 0.06 * (tab["mean_output_tokens"] - 1)), name="slow")
    # the TPOT objective is checked at p95 (met: 45 ms), but the engine fitted to 60 ms means steps
    # that take longer than 50 ms however little they do
    p = capacity_plan(log, slow, slo=SLO(tpot_target_s=0.05, tpot_percentile=95), sim_requests=1000)
    assert p.verification.status == "impossible", p.verification.reason
    assert "one decode step takes" in p.verification.reason


def test_search_stops_at_the_cap_and_says_so(bursty, sweep, monkeypatch):
    monkeypatch.setattr(replaymod, "SIM_CAP_MAX", 4)
    p = capacity_plan(bursty, sweep, sim_requests=3000)
    assert p.verification.status == "not met" and not p.verified
    assert p.verification.cap == 4 and max(p.verification.tried.index) == 4
    assert p.serving == p.erlang_replicas and "NOT VERIFIED" in p.render().splitlines()[0]
    assert "cap" in p.verification.reason
    assert any(n.startswith("FLEET SIMULATION FAILED") for n in p.notes)


def test_no_sim_is_erlang_c_unverified(bursty, sweep):
    p = capacity_plan(bursty, sweep, simulate=False)
    assert p.verified is None and p.verified_total is None and not p.sim
    assert p.serving == p.erlang_replicas and p.verification.status == "skipped"
    assert "not verified by simulation" in p.render().splitlines()[0]
    assert any("not verified" in n for n in p.notes)
    tab = p.table().set_index(["step", "quantity"])["value"]
    assert tab[("simulation", "verified replicas")] == "not verified"
    assert p.stages().index[1] == "Erlang C (not verified)"


def test_a_sweep_that_starts_above_one_sequence_still_plans(tmp_path, sweep):
    t4 = sweep.table[sweep.table["concurrency"] >= 4].reset_index(drop=True)
    from4 = Sweep(t4, name="from4")
    t, rng = _poisson(0.5, 3600, seed=9)
    log = _write(_frame(t, rng), tmp_path, "lowlevel")
    p = capacity_plan(log, from4, sim_requests=1000)
    assert p.sim and p.verified


def test_slo_goodput_key():
    assert SLO().goodput_share == 0.99
    assert SLO(ttft_quantile=0.95).goodput_share == 0.95            # defaults to the TTFT quantile
    assert SLO.parse("goodput=98%").goodput_share == pytest.approx(0.98)
    assert SLO.parse("ttft_q=0.9,goodput=0.995").goodput_share == 0.995
    assert "goodput ≥ 99 %" in SLO().describe()
    for bad in ("goodput=0", "goodput=120%"):
        with pytest.raises(ValueError, match="goodput_share"):
            SLO.parse(bad)


def test_replay_plan_rejects_a_bad_fleet(bursty_plan, bursty, sweep):
    with pytest.raises(ValueError, match="replicas"):
        replay_plan(bursty_plan, bursty, sweep, replicas=0)


@pytest.mark.parametrize("log_name", ["AzureLLMInferenceTrace_code.csv", "synthetic_trace.jsonl"])
def test_real_logs_plan_is_verified_or_says_why(shared_dir, sweep, log_name):
    log = read_requests(shared_dir / "traces" / log_name)
    p = capacity_plan(log, sweep, sim_requests=3000)
    assert p.verification.status in ("verified", "impossible", "not met")
    first = p.render().splitlines()[0]
    if p.verified:
        assert p.sim["ttft_q_s"] <= p.slo.ttft_target_s and p.sim["goodput_share"] >= p.slo.goodput_share
        assert "smallest fleet the simulation verifies" in first
    else:
        assert "NOT VERIFIED" in first
    assert p.verification.seconds < 60 and not math.isnan(p.sim["ttft_q_s"])


def test_rating_when_the_sweep_serves_more_input_than_its_lowest_level_implies(tmp_path, sweep):
    # a lowest level whose TTFT (2 s) is far above one prefill, as with prefix caching or
    # client overhead: the concurrency-1 prefill rate is then below the input tokens/s served at S
    tab = sweep.table.copy()
    tab.loc[tab["concurrency"] == tab["concurrency"].min(), "ttft_p50_s"] = 2.0
    odd = Sweep(tab, name="odd")
    t, rng = _poisson(0.5, 3600, seed=10)
    log = _write(_frame(t, rng), tmp_path, "odd")
    p = capacity_plan(log, odd, slo=SLO(ttft_target_s=30.0), simulate=False)
    S = p.slots.S
    row = tab.set_index("concurrency").loc[S]
    served_in = row["request_throughput_rps"] * row["mean_input_tokens"]
    assert served_in > odd.prefill_rate_tps                   # the case rating_from_sweep refuses
    # the measured operating point uses exactly one replica: O / R_out + I / R_in = 1
    assert p.rating.fraction(row["output_throughput_tps"], served_in) == pytest.approx(1.0, rel=1e-9)
    # and the time goes to prefill in the same share as at the lowest level
    lo = tab.iloc[0]
    f = lo["ttft_p50_s"] / (lo["ttft_p50_s"] + lo["mean_output_tokens"] * lo["tpot_p50_s"])
    assert served_in / p.rating.input_tps == pytest.approx(f, rel=1e-9)
    assert any(n.startswith("rating:") and "lowest level" in n for n in p.notes)


def test_a_measured_prefill_rate_makes_the_impossible_possible(tmp_path, sweep):
    # the same long prompts as above: with a prefill rate 10x the derived one, 30k tokens take
    # well under the 2 s objective, so the plan can be verified
    t, rng = _poisson(0.2, 7200, seed=6)
    log = _write(_frame(t, rng, input_tokens=(20_000, 30_000)), tmp_path, "long")
    fast = Sweep.from_frame(sweep.table, name="fast prefill")
    fast.set_prefill_rate(10 * sweep.prefill_rate_tps, "a prefill benchmark")
    assert fast.prefill_rate_tps == pytest.approx(10 * sweep.prefill_rate_tps)
    assert 30_000 / fast.prefill_rate_tps < 2.0
    assert any("a prefill benchmark" in n for n in fast.notes)
    p = capacity_plan(log, fast, sim_requests=1000)
    assert p.verification.status == "verified", p.verification
    # the fleet simulation's engine prefills at the measured rate: a prompt alone on an idle replica
    # takes t0 plus its tokens at that rate
    from capbook.engine.stepmodel import fitted_engine as _fitted_engine

    st = _fitted_engine(fast).step
    assert st.cp_s == pytest.approx(1 / fast.prefill_rate_tps)
    assert float(st.step(0, 20_000)) == pytest.approx(st.t0_s + 20_000 / fast.prefill_rate_tps)
    assert any("measured prefill rate" in n for n in _fitted_engine(fast).notes)
    with pytest.raises(ValueError, match="prefill_rate_tps must be positive"):
        fast.set_prefill_rate(0)


def test_a_sweep_without_the_tpot_percentile_plans_at_another_one(tmp_path, sweep):
    t, rng = _poisson(1.0, 7200, seed=5)
    log = _write(_frame(t, rng), tmp_path, "calm")
    only_p50 = Sweep.from_frame(sweep.table.assign(tpot_p95_s=np.nan, tpot_p99_s=np.nan), name="p50 only")
    p = capacity_plan(log, only_p50, sim_requests=1000, simulate=False)
    assert p.slo.tpot_percentile == 50
    assert any("no p95 TPOT" in n and "less strict" in n for n in p.notes)
    assert p.slots.q == 50
    with_p99 = Sweep.from_frame(sweep.table.assign(tpot_p95_s=np.nan), name="p50 and p99")
    p = capacity_plan(log, with_p99, sim_requests=1000, simulate=False)
    assert p.slo.tpot_percentile == 99 and not any("less strict" in n for n in p.notes)


def test_failed_requests_without_tokens_are_left_out_of_the_replay_and_the_plan_says_so(tmp_path, sweep):
    # BurstGPT records a failed request as 0 prompt and 0 output tokens: no work an engine could repeat.
    t, rng = _poisson(2.0, 3600, seed=5)
    frame = _frame(t, rng)
    failed = rng.random(len(frame)) < 0.1
    frame.loc[failed, ["input_tokens", "output_tokens"]] = 0
    log = _write(frame, tmp_path, "failed")
    data = replaymod.replay_requests(log, 4.0, 3000)
    assert (data["input_tokens"] >= 1).all() and (data["output_tokens"] >= 1).all()
    assert data.attrs["without_tokens"] == (int(failed.sum()), len(frame))
    # the others arrive at their share of the rate
    t = data["arrival_time"].to_numpy()
    kept = 1 - failed.mean()
    assert (t.size - 1) / (t[-1] - t[0]) == pytest.approx(4.0 * kept, rel=1e-9)
    p = capacity_plan(log, sweep, sim_requests=2000)
    assert p.verification.status == "verified"
    note = [n for n in p.verification.notes if "no prompt or no output token" in n]
    assert len(note) == 1 and f"{int(failed.sum()):,} of {len(frame):,} requests" in note[0]
    assert note[0] in p.render()
    # a log of nothing but failed requests has no work to replay: a clear error, not a division by zero
    frame[["input_tokens", "output_tokens"]] = 0
    with pytest.raises(ValueError, match="no request of the log records both a prompt and an output token"):
        replaymod.replay_requests(_write(frame, tmp_path, "allfailed"), 4.0, 3000)


# --------------------------------------------------------------------------------------------
# The verdict's margins and the borderline rule
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("reps", [1, 2, 4, 16])
def test_pooled_batch_means_half_width_covers_the_mean_95_percent_of_the_time(reps):
    # the oracle: intervals around the mean of i.i.d. normal draws (the known true mean 0),
    # split as the replay splits a replication (10 consecutive batches), pooled over replications
    rng = np.random.default_rng(reps)
    trials, batches, per = 4000, 10, 20
    hit = 0
    for _ in range(trials):
        x = rng.normal(0.0, 1.0, (reps, batches * per))
        sds = [replaymod._batch_sd(row, batches, np.mean) for row in x]
        hit += abs(x.mean()) <= replaymod._half_width(sds, batches)
    se = math.sqrt(0.95 * 0.05 / trials)
    assert abs(hit / trials - 0.95) < 3.5 * se


def _fake_replications(monkeypatch, goodput):
    """judge_fleet's replications replaced by draws with goodput ``goodput(k)`` and a fixed spread."""
    calls = []

    def fake(engine, data, replicas, slo, router, seed, k):
        calls.append(k)
        n = 1000
        return {"ttft": np.full(n, 0.2), "good": goodput(k) * n, "sd": 0.0, "gsd": 0.01,
                "summary": {"requests": n} if k == 0 else None, "per": None}

    monkeypatch.setattr(replaymod, "_replicate", fake)
    return calls


def test_a_borderline_size_doubles_its_replications_until_the_margin_clears(monkeypatch):
    slo = SLO()
    data = pd.DataFrame({"arrival_time": [0.0, 1.0], "input_tokens": [1, 1]})
    # goodput 0.3 % above the target: with a batch spread of 1 % the margin clears it at 8 replications
    calls = _fake_replications(monkeypatch, lambda k: slo.goodput_share + 0.003)
    s = replaymod.judge_fleet(None, data, 3, slo=slo)
    half = [replaymod._half_width([0.01] * n) for n in (2, 4, 8)]
    assert half[0] > 0.003 and half[1] > 0.003 and half[2] < 0.003      # the oracle for the stopping point
    assert s["seeds"] == 8 and calls == list(range(8)) and s["meets"]
    assert s["goodput_margin"] == pytest.approx(half[2])
    # one that never clears stops at MAX_SEEDS and does not meet the objectives
    calls = _fake_replications(monkeypatch, lambda k: slo.goodput_share + 0.0005)
    s = replaymod.judge_fleet(None, data, 3, slo=slo)
    assert s["seeds"] == replaymod.MAX_SEEDS and len(calls) == replaymod.MAX_SEEDS and not s["meets"]
    # one clearly met is decided on the first two
    calls = _fake_replications(monkeypatch, lambda k: 1.0)
    assert replaymod.judge_fleet(None, data, 3, slo=slo)["seeds"] == 2 and calls == [0, 1]
