"""Tests of capbook.plan.steps: the capstone pipeline from a request log and a sweep to a plan.

Oracles: a noise-free synthetic token series whose future peak is known from the generator;
pandas computations on small logs built here (busiest hour, tokens per request, per-tenant
minute totals); brute-force searches over the closed forms of capbook.queueing; arithmetic of
the stages (ceil of the linear mix, burst = ceil(ramp × lag × serving), N+1 and zone spares).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from capbook import queueing
from capbook.app import datasets
from capbook.logs import requestlog as traces
from capbook.plan import replay as replaymod
from capbook.forecast.tokens import synthetic_token_series
from capbook.plan.steps import HORIZONS, SLO, capacity_plan, horizon_for_lead_time, peak_forecast
from capbook.sweeps.sweep import load_sample_sweep
from capbook.logs.requestlog import read_requests

T0 = pd.Timestamp("2026-03-02 00:00:00", tz="UTC")


def _series(df: pd.DataFrame, column: str = "output_tokens") -> pd.Series:
    s = df.set_index(pd.DatetimeIndex(pd.to_datetime(df["period_start"], utc=True)))[column].astype(float)
    return s


def _log_frame(hours=3.0, rate=4.0, seed=1, tenants=("web", "agents"), batch_rate=0.5):
    """Poisson interactive traffic with a mid-log surge, plus batch rows of another tier."""
    rng = np.random.default_rng(seed)
    span = hours * 3600
    t = np.cumsum(rng.exponential(1 / rate, int(rate * span * 1.2)))
    t = t[t < span]
    surge = np.cumsum(rng.exponential(1 / rate, int(rate * 1200)))  # +100 % for 20 minutes
    surge = 3600 + surge[surge < 1200]
    t = np.sort(np.concatenate([t, surge]))
    n = t.size
    tb = np.sort(rng.uniform(0, span, int(batch_rate * span)))
    frame = pd.DataFrame({
        "arrival_time": np.concatenate([t, tb]),
        "input_tokens": np.concatenate([rng.integers(500, 2500, n), rng.integers(3000, 5000, tb.size)]),
        "output_tokens": np.concatenate([rng.integers(100, 500, n), rng.integers(50, 150, tb.size)]),
        "model": "m-chat",
        "tier": ["interactive"] * n + ["batch"] * tb.size,
        "status": "served",
        "tenant": list(rng.choice(list(tenants), n)) + ["etl"] * tb.size,
    }).sort_values("arrival_time", kind="stable").reset_index(drop=True)
    frame["arrival_time"] = T0 + pd.to_timedelta(np.round(frame["arrival_time"] * 1e6).astype(np.int64), unit="us")
    return frame


@pytest.fixture(scope="module")
def small_log(tmp_path_factory):
    frame = _log_frame()
    path = tmp_path_factory.mktemp("plan") / "log.parquet"
    frame.to_parquet(path, index=False)
    return frame, read_requests(path)


@pytest.fixture(scope="module")
def sweep():
    return load_sample_sweep("illustrative_chat")


@pytest.fixture(scope="module")
def small_plan(small_log, sweep):
    return capacity_plan(small_log[1], sweep, sim_requests=3000)


# --------------------------------------------------------------------------------------------
# SLO, horizons
# --------------------------------------------------------------------------------------------
def test_slo_parse_units_and_errors():
    s = SLO.parse("ttft=1.5s, tpot=40ms, wait=0.25, late=2%, ttft_q=0.95, tpot_p=99")
    assert (s.ttft_target_s, s.tpot_target_s, s.wait_target_s, s.ttft_quantile, s.tpot_percentile) == (1.5, 0.04, 0.25, 0.95, 99)
    assert s.late_share == pytest.approx(0.02)
    assert SLO.parse("ttft=3").tpot_target_s == SLO().tpot_target_s
    for bad, word in [("ttft", "key=value"), ("speed=3", "unknown"), ("ttft=fast", "not a number"),
                      ("late=150%", "late_share"), ("tpot=0", "tpot_target_s"), ("tpot_p=90", "tpot_percentile"), ("", "non-empty")]:
        with pytest.raises(ValueError, match=word):
            SLO.parse(bad)


def test_horizon_matches_lead_time():
    assert [horizon_for_lead_time(x) for x in (0.5, 1, 1.5, 4, 4.1, 12, 13.2)] == [1, 1, 4, 4, 12, 12, 14]
    assert set(HORIZONS) == {1, 4, 12}
    with pytest.raises(ValueError, match="lead_time_weeks"):
        horizon_for_lead_time(0)


# --------------------------------------------------------------------------------------------
# The forecast peak
# --------------------------------------------------------------------------------------------
def test_noise_free_forecast_peak_matches_the_generator():
    full = synthetic_token_series(weeks=24, noise=0.0, growth=0.035, seed=0)
    s = _series(full)
    train = s.iloc[: 20 * 168]
    pf = peak_forecast(train, [1, 4], quantile=0.9)
    for h in (1, 4):
        week = s.iloc[(19 + h) * 168:(20 + h) * 168]
        assert pf[h].method == "calibrated"
        # trend × shape reproduces a noise-free compounding series to well under 1 %
        assert pf[h].output_tps * 3600 == pytest.approx(week.max(), rel=0.01)
        assert pf[h].peak_hour == week.idxmax()


def test_forecast_ladder_uses_what_the_history_supports():
    s = _series(synthetic_token_series(weeks=5, seed=3))
    pf = peak_forecast(s, [1, 4, 12])
    assert pf[1].method == "calibrated" and "rough" in pf[1].note   # 3 fit weeks + 1 origin
    assert pf[4].method == "sqrt_h" and pf[12].method == "sqrt_h"
    long = _series(synthetic_token_series(weeks=20, seed=3))
    pf = peak_forecast(long, [1, 4, 12])
    assert all(p.method == "calibrated" and "rough" not in p.note for p in pf.values())
    # a wider horizon of a growing series plans for a higher peak
    assert pf[1].output_tps < pf[4].output_tps < pf[12].output_tps


def test_forecast_falls_back_to_the_observed_peak_with_a_reason():
    s = _series(synthetic_token_series(weeks=1, seed=4)).iloc[:72]          # three days
    pf = peak_forecast(s, [4], growth_per_week=0.02)
    assert pf[4].method == "observed" and "less than one week" in pf[4].note
    assert pf[4].output_tps == pytest.approx(s.max() / 3600 * 1.02 ** 4, rel=1e-12)
    six = _series(synthetic_token_series(weeks=6, seed=5))
    base = peak_forecast(six, [1])[1]
    six.iloc[100] = 0.0          # an idle hour is a zero, not a gap: still forecast (issue 28)
    pf = peak_forecast(six, [1], observed_peak_tps=123.0)
    assert pf[1].method == base.method != "observed"
    assert pf[1].output_tps == pytest.approx(base.output_tps, rel=0.05)
    six.iloc[168:336] = 0.0      # a whole week without tokens: no weekly trend to fit
    pf = peak_forecast(six, [1], observed_peak_tps=123.0)
    assert pf[1].method == "observed" and "week with no tokens" in pf[1].note and pf[1].output_tps == 123.0


# --------------------------------------------------------------------------------------------
# The plan on a small log
# --------------------------------------------------------------------------------------------
def test_plan_peak_and_mix_from_the_log(small_log, small_plan):
    frame, _ = small_log
    p = small_plan
    inter = frame[frame["tier"] == "interactive"]
    per_min = inter.set_index("arrival_time")["output_tokens"].resample("1min").sum()
    busiest = per_min.rolling(60).sum().max() / 3600
    assert p.observed_peak_output_tps == pytest.approx(busiest, rel=1e-12)
    assert p.peaks[4].method == "observed" and any("forecast not possible" in n for n in p.notes)
    assert p.output_tps == pytest.approx(busiest, rel=1e-12)      # no growth assumed
    ratio = inter["input_tokens"].sum() / inter["output_tokens"].sum()
    assert p.input_tps == pytest.approx(p.output_tps * ratio, rel=1e-12)
    assert p.request_rate == pytest.approx(p.output_tps / inter["output_tokens"].mean(), rel=1e-12)
    assert p.source["tier"] == "interactive" and p.source["model"] == "m-chat"


def test_plan_replicas_follow_the_rating_and_the_closed_forms(small_plan, sweep):
    p = small_plan
    assert p.slots.S == 32                            # p95 TPOT within 45 ms on the sample sweep
    f = p.output_tps / p.rating.output_tps + p.input_tps / p.rating.input_tps
    assert p.need.replicas == math.ceil(f / 0.8)
    # Erlang C: the smallest pooled fleet meeting P(wait > 0.5 s) <= 1 %, by brute force
    n = 1
    while queueing.prob_wait_exceeds(0.5, n * 32, p.request_rate, p.service_time_s) > 0.01:
        n += 1
    assert p.erlang_replicas == n
    assert p.loadq_ttft_s is not None and p.loadq_ttft_s <= p.slo.ttft_target_s
    # the serving count is the simulation's, not a maximum of these models
    assert p.verified and p.serving == p.verification.serving
    assert p.burst.replicas == math.ceil(0.0125 * 8 * p.serving - 1e-9)
    assert p.spare == 1 and p.total == p.serving + p.burst.replicas + 1
    st = p.stages()
    assert st.loc["total", "replicas"] == p.total == st["added"].iloc[:-1].sum()
    assert (st["added"] >= 0).all()


def test_plan_checks_one_replica_with_the_engine_model(small_plan, sweep, tmp_path):
    """The plan relies on capbook.engine.predict's engine simulation: the rate it says one replica
    carries within p99 TTFT meets the objective when simulated directly, and the serving count
    covers the planned rate at that per-replica rate."""
    from capbook.engine.stepmodel import fit_engine

    p = small_plan
    e = p.engine_check
    assert e.model == "simulation"
    assert 0 < e.max_rate_rps <= e.saturation_rps
    assert e.replicas == math.ceil(p.request_rate / e.max_rate_rps - 1e-9)
    # a cross-check beside the simulation, with its difference from the simulated count
    cc = p.cross_checks()
    assert cc.loc["engine model, one replica", "replicas"] == e.replicas
    assert cc.loc["engine model, one replica", "difference"] == e.replicas - p.serving
    import dataclasses

    # the engine fitted to the sweep, asked about requests of the log's mean lengths
    assert e.input_tokens == pytest.approx(p.mean_input_tokens) and e.output_tokens == pytest.approx(
        p.mean_output_tokens)
    eng = dataclasses.replace(fit_engine(sweep), prompt_tokens=p.mean_input_tokens,
                              output_tokens=p.mean_output_tokens, output_quantiles=None, prompt_p99=None)
    run = eng.simulate(e.max_rate_rps, requests=2000, seed=2026)
    assert np.quantile(run.ttft_s, 0.99) <= p.slo.ttft_target_s * 1.05
    back = pd.read_csv(p.to_csv(tmp_path / "plan.csv"))
    rows = back[back["step"] == "engine model"]
    assert set(rows["quantity"]) >= {"saturation per replica", "highest rate per replica meeting p99 TTFT",
                                     "replicas the engine model needs"}
    assert "engine model, one replica" in p.render()


def test_plan_tenant_limits_fit_the_fleet(small_log, small_plan):
    frame, _ = small_log
    p = small_plan
    inter = frame[frame["tier"] == "interactive"].copy()
    inter["tok"] = inter["input_tokens"] + inter["output_tokens"]
    growth = p.output_tps / p.observed_peak_output_tps
    for tenant, g in inter.groupby("tenant"):
        per_min = g.set_index("arrival_time")["tok"].resample("1min").sum()
        # the trace layer's minutes run over the whole log, so empty minutes count as zeros
        full = per_min.reindex(pd.date_range(inter["arrival_time"].min().floor("min"),
                                             inter["arrival_time"].max().floor("min"), freq="1min"), fill_value=0)
        assert p.tpm.loc[tenant, "demand"] == pytest.approx(full.quantile(0.99) * growth, rel=1e-9)
    assert "etl" not in p.tpm.index                          # batch tier is not planned
    assert p.tpm["limit"].sum() <= p.capacity_tpm * 0.9
    # capacity: the in-service replicas at the headroom, through the linear mix
    ratio = p.input_tps / p.output_tps
    per_rep = 0.8 / (1 / p.rating.output_tps + ratio / p.rating.input_tps) * (1 + ratio) * 60
    assert p.capacity_tpm == pytest.approx(p.in_service * per_rep, rel=1e-12)


def test_plan_simulation_runs_on_the_serving_fleet(small_plan):
    s = small_plan.sim
    assert s["replicas"] == small_plan.serving
    assert 0 < s["replayed_requests"] <= 3000
    assert 0 < s["ttft_p99_s"] < 60 and 0 <= s["goodput_share"] <= 1
    # the replay was scaled to the planned peak rate
    assert 0.9 * s["replayed_requests"] <= s["requests"] <= s["replayed_requests"]   # 5 % warm-up


def test_plan_exports(small_plan, tmp_path):
    p = small_plan
    csv = p.to_csv(tmp_path / "out" / "plan.csv")
    back = pd.read_csv(csv)
    assert list(back.columns) == ["step", "quantity", "value", "unit"]
    row = back[back["quantity"] == "total replicas"]
    assert int(float(row["value"].iloc[0])) == p.total
    md = p.to_markdown(tmp_path / "plan.md")
    assert (tmp_path / "plan.md").read_text() == md
    assert md.startswith(f"# Capacity plan: {p.total} replicas") and "| stage |" in md
    assert str(p).startswith(f"Capacity plan: {p.total} replicas")
    spec = p.chart().to_dict()
    assert len(spec["vconcat"]) == 2  # stacked so the chart fits the content column


def test_demand_scale_and_zones(small_log, sweep, small_plan):
    p3 = capacity_plan(small_log[1], sweep, demand_scale=3, zones=3, simulate=False)
    assert p3.output_tps == pytest.approx(3 * small_plan.output_tps, rel=1e-12)
    assert p3.request_rate == pytest.approx(3 * small_plan.request_rate, rel=1e-12)
    assert p3.serving >= small_plan.serving and not p3.sim
    # zone policy: losing the largest of 3 zones leaves the in-service fleet
    assert p3.total - math.ceil(p3.total / 3) >= p3.in_service
    assert p3.total - 1 - math.ceil((p3.total - 1) / 3) < p3.in_service or p3.spare == 1


@pytest.mark.parametrize("kwargs, word", [
    ({"headroom": 1.5}, "headroom"), ({"headroom": 0}, "headroom"), ({"demand_scale": 0}, "demand_scale"),
    ({"model": "m-other"}, "m-other"), ({"tier": "gold"}, "gold"), ({"spares": -1}, "spares"),
    ({"slo": SLO(tpot_target_s=0.001)}, "cannot meet"), ({"quantile": 1.0}, "quantile"), ({"tpm_reserve": 1}, "tpm_reserve"),
])
def test_plan_rejects_bad_input(small_log, sweep, kwargs, word):
    with pytest.raises(ValueError, match=word):
        capacity_plan(small_log[1], sweep, simulate=False, **kwargs)


def test_plan_rejects_a_non_sweep(small_log):
    with pytest.raises(ValueError, match="Sweep"):
        capacity_plan(small_log[1], {"concurrency": [1]}, simulate=False)


# --------------------------------------------------------------------------------------------
# The sample data and a real trace
# --------------------------------------------------------------------------------------------
def test_sample_plan_is_forecast_and_checked(monkeypatch):
    monkeypatch.delenv("CAPBOOK_REQUESTS", raising=False)
    monkeypatch.delenv("CAPBOOK_SWEEP", raising=False)
    four_weeks = traces.load_sample_requests()   # the small four-week log of "Know your traffic"
    p = capacity_plan(**datasets.plan_inputs(four_weeks, model="chat-70b").arguments, sim_requests=2000)
    assert p.source["requests"] == datasets.SAMPLE_REQUESTS_LABEL
    assert p.source["sweep"].startswith("sample sweep llama70b_h100_tp4_chat")
    assert p.peaks[1].method == "calibrated" and p.peaks[4].method == "sqrt_h"   # four weeks of history
    assert p.output_tps > p.observed_peak_output_tps    # growth and the P90 band lift the peak
    assert p.sim["ttft_p99_s"] > p.loadq_ttft_s         # real prompt lengths: the replay's tail is longer


def test_azure_trace_plans_from_the_observed_peak(shared_dir, sweep):
    log = read_requests(shared_dir / "traces" / "AzureLLMInferenceTrace_code.csv")
    p = capacity_plan(log, sweep, sim_requests=2000)
    assert all(pk.method == "observed" for pk in p.peaks.values())
    frame = log.to_pandas()
    per_min = frame.set_index("arrival_time")["output_tokens"].resample("1min").sum()
    span = (frame["arrival_time"].max() - frame["arrival_time"].min()).total_seconds()
    expected = per_min.rolling(60).sum().max() / 3600 if span >= 3600 else per_min.sum() / span
    assert p.output_tps == pytest.approx(expected, rel=1e-9)
    assert p.total >= 2 and "all callers" in p.tpm.index


def test_replay_stacks_enough_busy_hours_at_any_scale(small_log, sweep):
    frame = small_log[0]
    inter = frame[frame["tier"] == "interactive"]
    busiest = int(inter["arrival_time"].dt.floor("h").value_counts().max())
    want = busiest + 2000                     # more than the busiest hour holds
    p = capacity_plan(small_log[1], sweep, demand_scale=200, sim_requests=want)
    assert p.sim["replayed_requests"] == want


# --------------------------------------------------------------------------------------------
# The steps, each on its own (issue 15: one pipeline of small steps with typed results)
# --------------------------------------------------------------------------------------------
import dataclasses  # noqa: E402

from capbook.plan import fleet as fleetmod  # noqa: E402
from capbook.plan import steps as planmod  # noqa: E402
from capbook.sweeps.replicas import replicas_for_tokens  # noqa: E402
from capbook.sweeps.sweep import choose_slots  # noqa: E402


@pytest.fixture(scope="module")
def sums(small_log):
    return planmod.LogAggregates.of(small_log[1])


@pytest.fixture(scope="module")
def steps(sums, sweep):
    """The first steps on the small log, as capacity_plan chains them."""
    traffic = planmod.select_traffic(sums)
    demand = planmod.forecast_demand(sums, traffic)
    replica = planmod.rate_replica(sweep, demand, SLO())
    queue = planmod.check_queueing(sweep, demand, replica)
    return traffic, demand, replica, queue


def test_log_aggregates_are_the_logs_sums_held_by_the_caller(small_log, sums):
    log = small_log[1]
    pd.testing.assert_frame_equal(sums.hourly, log.hourly())
    pd.testing.assert_frame_equal(sums.per_minute, log.per_minute(by=("model", "tier", "tenant")))
    assert sums.has_tenants and sums.label == str(log.path)
    assert planmod.LogAggregates.of(sums) is sums
    assert planmod.LogAggregates.of(sums, label="mine").label == "mine"
    assert len(sums.frame) == len(small_log[0])
    assert not hasattr(planmod, "_CACHE") and not hasattr(planmod, "SAMPLE_SWEEP_FOR_MODEL")
    with pytest.raises(ValueError, match="RequestLog"):
        planmod.LogAggregates.of(small_log[0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        sums.label = "x"


def test_select_traffic(sums, steps):
    traffic = steps[0]
    assert (traffic.model, traffic.tier, traffic.notes) == ("m-chat", "interactive", ())
    assert set(traffic.hourly["tier"]) == {"interactive"}
    every = planmod.select_traffic(sums, tier=None)
    assert every.tier is None and set(every.hourly["tier"]) == {"interactive", "batch"}
    with pytest.raises(ValueError, match="m-other"):
        planmod.select_traffic(sums, "m-other")
    with pytest.raises(ValueError, match="gold"):
        planmod.select_traffic(sums, tier="gold")


def test_forecast_demand(small_log, sums, steps):
    traffic, demand = steps[:2]
    inter = small_log[0][small_log[0]["tier"] == "interactive"]
    assert demand.horizon_weeks == planmod.horizon_for_lead_time(demand.lead_time_weeks) == 4
    assert demand.peaks[4].method == "observed" and demand.output_tps == demand.observed_peak_output_tps
    assert demand.mean_output_tokens == pytest.approx(inter["output_tokens"].mean(), rel=1e-12)
    assert demand.request_rate == pytest.approx(demand.output_tps / demand.mean_output_tokens, rel=1e-15)
    assert demand.input_tps == pytest.approx(demand.output_tps * demand.input_per_output, rel=1e-15)
    assert any("forecast not possible" in n for n in demand.notes)
    twice = planmod.forecast_demand(sums, traffic, demand_scale=2, lead_time_weeks=12)
    assert twice.output_tps == pytest.approx(2 * demand.output_tps) and twice.horizon_weeks == 12
    assert any("demand scaled by 2" in n for n in twice.notes)
    for bad in ("3", True, float("nan")):
        for kw in ("lead_time_weeks", "quantile", "demand_scale"):
            with pytest.raises(ValueError, match=f"^{kw} "):
                planmod.forecast_demand(sums, traffic, **{kw: bad})


def test_rate_replica(sweep, steps):
    demand, replica = steps[1], steps[2]
    assert replica.slots.S == choose_slots(sweep, 0.05, q=95).S == 32
    assert replica.service_time_s == sweep.service_time_s(replica.slots.S, demand.mean_input_tokens,
                                                        demand.mean_output_tokens)
    assert replica.need == replicas_for_tokens(demand.output_tps, demand.input_tps, replica.rating, 0.8)
    assert replica.floor == max(1, math.ceil(replica.need.equivalents - 1e-9))
    assert planmod.rate_replica(sweep, demand, SLO(), headroom=0.5).need.replicas >= replica.need.replicas
    for bad in ("0.8", True, 0, 1.5):
        with pytest.raises(ValueError, match="^headroom "):
            planmod.rate_replica(sweep, demand, SLO(), headroom=bad)
    with pytest.raises(ValueError, match="cannot meet"):
        planmod.rate_replica(sweep, demand, SLO(tpot_target_s=0.001))


def test_check_queueing(sweep, steps):
    demand, replica, queue = steps[1:]
    assert queue.erlang_replicas == queueing.replicas_pooled(demand.request_rate, replica.slots.S,
                                                             replica.service_time_s, 0.5, 0.01)
    assert queue.loadq_replicas is not None and queue.notes == ()
    # a TTFT objective below the mean prompt's prefill: the load-dependent model does not apply
    short = dataclasses.replace(replica, slo=SLO(ttft_target_s=1e-4))
    skipped = planmod.check_queueing(sweep, demand, short)
    assert skipped.loadq_replicas is None and "load-dependent model not used" in skipped.notes[0]


def test_check_engine(sweep, steps):
    demand, replica, queue = steps[1:]
    e = planmod.check_engine(sweep, demand, replica, queue.erlang_replicas)
    assert isinstance(e, planmod.EngineCheck) and e.model == "simulation"
    assert e.replicas == math.ceil(demand.request_rate / e.max_rate_rps - 1e-9)
    assert (e.input_tokens, e.output_tokens) == (demand.mean_input_tokens, demand.mean_output_tokens)


def test_stack_fleet_stacks_burst_and_spare_on_the_serving_count(steps):
    demand, replica, queue = steps[1:]
    none = planmod.EngineCheck()
    # without a simulated count: Erlang C's, no maximum with the other checks
    fp = planmod.stack_fleet(demand, replica, queue, none, ramp_per_min=0.0125, lag_min=8, spares=1, zones=3)
    assert fp == fleetmod.plan_fleet(demand.request_rate, replica.slots.S, replica.service_time_s, 0.5, 0.01,
                                     ramp_per_min=0.0125 * demand.request_rate, lag_min=8, spares=1, zones=3)
    assert fp.serving == fp.queueing_replicas == queue.erlang_replicas
    # a model that asks for more does not raise it: the checks are cross-checks, not stacked
    big = planmod.stack_fleet(demand, replica, queue, planmod.EngineCheck(replicas=fp.serving + 5))
    assert big.serving == fp.serving
    # the simulated count sets it, below Erlang C's too; burst and spare stack on it
    sim = planmod.stack_fleet(demand, replica, queue, none, serving=max(fp.serving - 1, 1))
    assert sim.serving == max(fp.serving - 1, 1) and sim.queueing_replicas == queue.erlang_replicas
    assert sim.burst == fleetmod.burst_headroom(0.0125 * demand.request_rate, 8, demand.request_rate / sim.serving)
    assert sim.spare == fleetmod.failure_spares(sim.in_service, 1)
    with pytest.raises(ValueError, match="^ramp_per_min "):
        planmod.stack_fleet(demand, replica, queue, none, ramp_per_min="0.01")
    with pytest.raises(ValueError, match="^spares "):
        planmod.stack_fleet(demand, replica, queue, none, spares=True)
    with pytest.raises(ValueError, match="^serving "):
        planmod.stack_fleet(demand, replica, queue, none, serving=0)


def test_check_serving_and_tenant_limits(sums, sweep, steps):
    traffic, demand, replica, queue = steps
    fp = planmod.stack_fleet(demand, replica, queue, planmod.EngineCheck())
    at = planmod.check_serving(sweep, demand, replica, queue, fp)
    assert at.erlang_late_share == fleetmod.late_share(fp.serving, replica.slots.S, demand.request_rate,
                                                       replica.service_time_s, 0.5)
    assert at.loadq_ttft_s is not None and at.loadq_ttft_s <= 2.0
    lim = planmod.tenant_limits(sums, traffic, demand, replica, fp)
    per_rep = 0.8 / (1 / replica.rating.output_tps + demand.input_per_output / replica.rating.input_tps)
    assert lim.capacity_tpm == pytest.approx(60 * fp.in_service * per_rep * (1 + demand.input_per_output))
    assert set(lim.tpm.index) == {"web", "agents"} and lim.tpm["limit"].sum() <= 0.9 * lim.capacity_tpm
    for bad in ("0.1", True, 1.0, float("nan")):
        with pytest.raises(ValueError, match="^tpm_reserve "):
            planmod.tenant_limits(sums, traffic, demand, replica, fp, reserve=bad)


def test_the_plan_is_its_steps(small_plan):
    p = small_plan
    assert isinstance(p.fleet, fleetmod.FleetPlan) and isinstance(p.verification, replaymod.Verification)
    # one serving count, one stacking: the plan's stages are the fleet plan's
    assert (p.serving, p.burst, p.in_service) == (p.fleet.serving, p.fleet.burst, p.fleet.in_service)
    assert p.total == p.fleet.total and p.output_tps == p.demand.output_tps
    assert p.serving == p.verification.serving
    assert p.notes == (p.traffic.notes + p.demand.notes + p.replica.notes + p.queue.notes + p.engine_check.notes
                       + p.verification.notes + p.at_serving.notes + p.limits.notes)
    tab = p.table().set_index(["step", "quantity"])["value"]
    assert tab[("fleet", "serving replicas")] == p.fleet.serving
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.verification.status = "verified"


def test_verify_plan_on_its_own(small_plan, small_log, sweep):
    models = dataclasses.replace(small_plan, verification=planmod._SKIPPED)
    v = replaymod.verify_plan(models, small_log[1], sweep, n_requests=3000)
    assert (v.status, v.met, v.serving) == (small_plan.verification.status, small_plan.verified,
                                             small_plan.serving)
    assert {k: x for k, x in v.sim.items() if k != "per_replica"} == {
        k: x for k, x in small_plan.sim.items() if k != "per_replica"}
    assert list(v.tried.columns) == ["ttft_q_s", "ttft_q_margin_s", "goodput_share", "goodput_margin", "seeds",
                                     "meets"]
    skipped = capacity_plan(small_log[1], sweep, simulate=False).verification
    assert skipped is planmod._SKIPPED and skipped.status == "skipped" and skipped.met is None


def test_slo_refuses_text_bools_and_nan_naming_the_field():
    for field_ in ("ttft_target_s", "tpot_target_s", "wait_target_s", "ttft_quantile", "late_share"):
        for bad in ("1", True, float("nan")):
            with pytest.raises(ValueError, match=f"^{field_} "):
                SLO(**{field_: bad})
    with pytest.raises(TypeError):
        SLO(ttft_s=2.0)                                 # one name per thing: the old spelling is gone


def test_peak_forecast_refuses_bad_horizons():
    s = _series(synthetic_token_series(weeks=5, seed=3))
    for bad in ([], [0], [1.5], ["4"], [True]):
        with pytest.raises(ValueError, match="^horizons "):
            peak_forecast(s, bad)
    assert set(peak_forecast(s, [4.0, 1])) == {1, 4}


def test_the_engine_fit_is_kept_with_the_sweep_and_redone_when_it_changes():
    """Re-planning on the same sweep object reuses its engine fit; a changed sweep (a measured prefill
    rate, a new configuration value) is fitted again, and the plan equals a plan on a fresh copy."""
    import dataclasses

    from capbook.engine.stepmodel import fitted_engine
    from capbook.sweeps.sweep import load_sample_sweep

    s = load_sample_sweep()
    first = fitted_engine(s)
    assert not [k for k in vars(s) if "engine" in k]   # the fit is kept by the engine layer, not on the sweep
    assert fitted_engine(s) is first
    s.set_prefill_rate(5_000.0, "test")
    second = fitted_engine(s)
    assert second is not first
    fresh = load_sample_sweep().set_prefill_rate(5_000.0, "test")
    from capbook.engine.stepmodel import fit_engine

    assert dataclasses.replace(second, fitted_sweep=None) == dataclasses.replace(fit_engine(fresh), fitted_sweep=None)
    s.config["gpu"] = "elsewhere"
    assert fitted_engine(s) is not second


def test_select_scope_filters_model_and_tier_as_text():
    """The one model/tier filter: None and 'all tiers' keep every tier, values compare as text,
    a frame without the column is not filtered on it."""
    import pandas as pd

    from capbook.logs.scope import select_scope

    df = pd.DataFrame({"model": ["a", "a", "b", "a"], "tier": pd.Categorical(["x", "y", "x", "x"]), "v": [1, 2, 3, 4]})
    assert list(select_scope(df, "a", "x")["v"]) == [1, 4]
    assert list(select_scope(df, "a", None)["v"]) == [1, 2, 4]
    assert list(select_scope(df, "a", "all tiers")["v"]) == [1, 2, 4]
    assert list(select_scope(df, None, "x")["v"]) == [1, 3, 4]
    assert select_scope(df, "c", None).empty
    assert list(select_scope(df.drop(columns="tier"), "b", "x")["v"]) == [3]


def test_every_plan_shortcut_is_a_documented_property_of_its_step(small_plan):
    """CapacityPlan's numbers under their usual names: each listed name is a property with a
    docstring naming its step, and reads the step's attribute."""
    from capbook.plan.steps import CapacityPlan

    plan = small_plan
    assert len(CapacityPlan.SHORTCUTS) == 32
    for name, step in CapacityPlan.SHORTCUTS.items():
        prop = CapacityPlan.__dict__[name]
        assert isinstance(prop, property), name
        assert f"``{step}.{name}``" in prop.__doc__, name
        got, want = getattr(plan, name), getattr(getattr(plan, step), name)
        assert got is want or got == want, name
    assert plan.serving == plan.fleet.serving and plan.output_tps == plan.demand.output_tps
