"""The models layer checks its arguments one way (capbook.validation), issue 15.

Every public function of queueing, loadqueue, engine, predict, fidelity, servingmodel,
replicas, forecast and backtest refuses the text ``"3"``, ``True``, ``None`` and NaN with a
ValueError whose message starts with the argument's name; the cases on which the old private
helpers disagreed now agree; and the "fewest replicas such that" solvers return what a plain
scan returns.
"""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

from capbook.forecast import scoring as bt
from capbook.engine import stepmodel as engine
from capbook.engine import fidelity as fid
from capbook.forecast import tokens as fc
from capbook.engine import loadqueue as lq
from capbook import queueing as q
from capbook.sweeps import replicas as rp
from capbook.engine import servingmodel as sm
from capbook.engine.predict import predict
from capbook.sweeps.sweep import load_sample_sweep

BAD = {"text": "3", "bool": True, "none": None, "nan": math.nan}


def flat(T):
    return lambda n: np.full_like(np.asarray(n, dtype=float), T)


_SWEEP = load_sample_sweep()
_FITTED = []


def _engine():
    if not _FITTED:
        _FITTED.append(engine.fit_engine(_SWEEP))
    return _FITTED[0]


_MODEL = lq.LoadDependentQueue(4, flat(1.0))
_SOLUTION = _MODEL.solve(2.0)
_RATING = rp.ReplicaRating(9_000, 60_000)
_SERIES = fc.hourly_series(fc.synthetic_token_series(6, seed=0))
_DEPLOYMENT = sm.Deployment(sm.LLMS["Llama-3.1-8B"], sm.GPUS["H100-SXM-80GB"])

# (what, argument name, call with the value put in that argument, None is a valid value)
CASES = [
    # queueing
    ("concurrency_from_rate", "arrival_rate", lambda v: q.concurrency_from_rate(v, 1.0), False),
    ("concurrency_from_rate", "time_in_system", lambda v: q.concurrency_from_rate(40, v), False),
    ("rate_from_concurrency", "concurrency", lambda v: q.rate_from_concurrency(v, 1.0), False),
    ("time_from_concurrency", "arrival_rate", lambda v: q.time_from_concurrency(10, v), False),
    ("replica_capacity", "slots", lambda v: q.replica_capacity(v, 12.25), False),
    ("replica_capacity", "service_time_s", lambda v: q.replica_capacity(32, v), False),
    ("in_flight_floor", "peak_rate", lambda v: q.in_flight_floor(v, 12.25), False),
    ("in_flight_floor", "slots_per_replica", lambda v: q.in_flight_floor(40, 12.25, v), True),
    ("token_cross_check", "request_rate", lambda v: q.token_cross_check(v, 300, 32, 25), False),
    ("token_cross_check", "tokens_per_stream", lambda v: q.token_cross_check(1, 300, 32, v), False),
    ("mm1_response_multiple", "utilisation", lambda v: q.mm1_response_multiple(v), False),
    ("erlang_b", "c", lambda v: q.erlang_b(v, 1.0), False),
    ("erlang_c", "a", lambda v: q.erlang_c(8, v), False),
    ("log_erlang_c", "c", lambda v: q.log_erlang_c(v, 4.0), False),
    ("prob_wait", "arrival_rate", lambda v: q.prob_wait(8, v, 1.0), False),
    ("mean_wait", "service_time_s", lambda v: q.mean_wait(8, 1.0, v), False),
    ("prob_wait_exceeds", "t", lambda v: q.prob_wait_exceeds(v, 8, 1.0, 1.0), False),
    ("wait_quantile", "q", lambda v: q.wait_quantile(v, 8, 1.0, 1.0), False),
    ("max_arrival_rate", "c", lambda v: q.max_arrival_rate(v, 12.25, 0.5, 0.01), False),
    ("max_arrival_rate", "late_share", lambda v: q.max_arrival_rate(32, 12.25, 0.5, v), False),
    ("max_utilisation", "service_time_s", lambda v: q.max_utilisation(32, v, 0.5, 0.01), False),
    ("replicas_pooled", "arrival_rate", lambda v: q.replicas_pooled(v, 32, 12.25, 0.5, 0.01), False),
    ("replicas_pooled", "slots", lambda v: q.replicas_pooled(40, v, 12.25, 0.5, 0.01), False),
    ("replicas_pooled", "wait_target_s", lambda v: q.replicas_pooled(40, 32, 12.25, v, 0.01), False),
    ("replicas_isolated", "late_share", lambda v: q.replicas_isolated(40, 32, 12.25, 0.5, v), False),
    ("replicas_by_mean", "service_time_s", lambda v: q.replicas_by_mean(40, 32, v), False),
    ("allen_cunneen_wait", "ca2", lambda v: q.allen_cunneen_wait(8, 1.0, 1.0, v, 1.0), False),
    ("lognormal_cs2", "sigma", lambda v: q.lognormal_cs2(v), False),
    ("halfin_whitt_prob_wait", "beta", lambda v: q.halfin_whitt_prob_wait(v), False),
    ("halfin_whitt_beta", "target_prob_wait", lambda v: q.halfin_whitt_beta(v), False),
    ("square_root_staffing", "offered_load", lambda v: q.square_root_staffing(v, 0.1), False),
    # loadqueue
    ("LoadDependentQueue", "slots", lambda v: lq.LoadDependentQueue(v, flat(1.0)), False),
    ("LoadDependentQueue", "replicas", lambda v: lq.LoadDependentQueue(4, flat(1.0), replicas=v), False),
    ("LoadDependentQueue", "waiting_room", lambda v: lq.LoadDependentQueue(4, flat(1.0), waiting_room=v), True),
    ("LoadDependentQueue.solve", "arrival_rate", lambda v: _MODEL.solve(v), False),
    ("QueueSolution.prob_wait_exceeds", "t", lambda v: _SOLUTION.prob_wait_exceeds(v), False),
    ("QueueSolution.prob_ttft_exceeds", "x", lambda v: _SOLUTION.prob_ttft_exceeds(v), False),
    ("QueueSolution.wait_quantile", "q", lambda v: _SOLUTION.wait_quantile(v), False),
    ("QueueSolution.ttft_quantile", "q", lambda v: _SOLUTION.ttft_quantile(v), False),
    ("max_rate", "ttft_target_s", lambda v: lq.max_rate(_MODEL, v), False),
    ("max_rate", "ttft_quantile", lambda v: lq.max_rate(_MODEL, 1.0, v), False),
    ("max_rate", "tpot_target_s", lambda v: lq.max_rate(_MODEL, 1.0, tpot_target_s=v), True),
    ("from_sweep", "slots", lambda v: lq.from_sweep(_SWEEP, v), False),
    ("replicas_needed", "arrival_rate", lambda v: lq.replicas_needed(_SWEEP, v, 32, 1.0), False),
    ("kv_bytes_per_token", "layers", lambda v: lq.kv_bytes_per_token(v, 8, 128), False),
    ("kv_slots", "free_memory_bytes", lambda v: lq.kv_slots(v, 1.0, 1.0), False),
    ("slots_binding", "slots_tpot", lambda v: lq.slots_binding(v, 1e9, 1.0, 1.0), False),
    # engine and predict
    ("engine_limits", "max_num_seqs", lambda v: engine.engine_limits(_SWEEP, max_num_seqs=v), True),
    ("engine_limits", "kv_cache_tokens", lambda v: engine.engine_limits(_SWEEP, kv_cache_tokens=v), True),
    ("engine_limits", "policy", lambda v: engine.engine_limits(_SWEEP, policy=v), True),
    ("kv_cache_tokens", "tensor_parallel",
     lambda v: engine.kv_cache_tokens("Llama-3.1-8B", "H100 80GB", tensor_parallel=v), False),
    ("kv_cache_tokens", "gpu_memory_utilization",
     lambda v: engine.kv_cache_tokens("Llama-3.1-8B", "H100 80GB", gpu_memory_utilization=v), False),
    ("predict", "rate_rps", lambda v: predict(_SWEEP, v), False),
    ("predict", "ttft_p99_target_s", lambda v: predict(_SWEEP, 1.0, ttft_p99_target_s=v), True),
    ("predict", "requests", lambda v: predict(_SWEEP, 1.0, requests=v), False),
    ("predict", "duration_s", lambda v: predict(_SWEEP, 1.0, duration_s=v), True),
    ("EngineModel.simulate", "arrival_rps", lambda v: _engine().simulate(v), False),
    ("EngineModel.simulate", "requests", lambda v: _engine().simulate(1.0, requests=v), True),
    ("EngineModel.simulate", "warmup_s", lambda v: _engine().simulate(1.0, warmup_s=v), True),
    ("predict", "arrivals", lambda v: predict(_SWEEP, 1.0, arrivals=v), False),
    # fidelity and servingmodel
    ("fidelity", "fit_stages", lambda v: fid.fidelity([], fit_stages=v), False),
    ("fidelity", "ttft_p99_target_s", lambda v: fid.fidelity([], ttft_p99_target_s=v), False),
    ("Deployment", "tensor_parallel",
     lambda v: sm.Deployment(sm.LLMS["Llama-3.1-8B"], sm.GPUS["H100-SXM-80GB"], tensor_parallel=v), False),
    ("Deployment", "bw_efficiency",
     lambda v: sm.Deployment(sm.LLMS["Llama-3.1-8B"], sm.GPUS["H100-SXM-80GB"], bw_efficiency=v), False),
    ("simulate_level", "concurrency",
     lambda v: sm.simulate_level(_DEPLOYMENT, sm.WORKLOADS["chat"], v, 10, np.random.default_rng(0)), False),
    ("stalled_tpot", "step_s", lambda v: sm.stalled_tpot(v, 0.1, 1.0), False),
    ("stalled_tpot", "arrival_rps", lambda v: sm.stalled_tpot(0.02, 0.1, v), False),
    # replicas
    ("ReplicaRating", "output_tps", lambda v: rp.ReplicaRating(v, 60_000), False),
    ("ReplicaRating", "input_tps", lambda v: rp.ReplicaRating(9_000, v), False),
    ("ReplicaRating.fraction", "output_tps", lambda v: _RATING.fraction(v, 0), False),
    ("rating_from_sweep", "slots", lambda v: rp.rating_from_sweep(_SWEEP, v), False),
    ("rating_from_sweeps", "points", lambda v: rp.rating_from_sweeps(v), False),
    ("replicas_for_tokens", "output_tps", lambda v: rp.replicas_for_tokens(v, 0, _RATING), False),
    ("replicas_for_tokens", "headroom", lambda v: rp.replicas_for_tokens(1, 1, _RATING, headroom=v), False),
    ("replicas_disaggregated", "decode_rating_tps", lambda v: rp.replicas_disaggregated(1, 1, v, 1), False),
    # forecast and backtest
    ("forecast_tokens", "horizon_weeks", lambda v: fc.forecast_tokens(_SERIES, v), False),
    ("forecast_tokens", "min_origins", lambda v: fc.forecast_tokens(_SERIES, 1, min_origins=v), False),
    ("rolling_log_errors", "min_fit_weeks", lambda v: fc.rolling_log_errors(_SERIES, 1, min_fit_weeks=v), False),
    ("TrendShapeFit.predict", "horizon_weeks", lambda v: fc.fit_trend_shape(_SERIES).predict(v), False),
    ("peak_to_mean", "x", lambda v: fc.peak_to_mean(v), False),
    ("weekly_profile", "base", lambda v: fc.weekly_profile(base=v), False),
    ("weekly_profile", "width_hours", lambda v: fc.weekly_profile(width_hours=v), False),
    ("synthetic_token_series", "weeks", lambda v: fc.synthetic_token_series(v), False),
    ("synthetic_token_series", "noise", lambda v: fc.synthetic_token_series(2, noise=v), False),
    ("pinball_loss", "actual", lambda v: bt.pinball_loss(v, [1.0], 0.9), False),
    ("pinball_loss", "q", lambda v: bt.pinball_loss([1.0, 2.0], [1.5, 1.5], v), False),
    ("coverage", "upper", lambda v: bt.coverage([1.0], v), False),
    ("backtest", "horizon_weeks", lambda v: bt.backtest(_SERIES, v), False),
    ("backtest", "step_weeks", lambda v: bt.backtest(_SERIES, 1, step_weeks=v), False),
]


@pytest.mark.parametrize("kind", list(BAD))
@pytest.mark.parametrize("what, name, call, none_ok", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_refused_with_a_message_naming_the_argument(what, name, call, none_ok, kind):
    if kind == "none" and none_ok:
        pytest.skip(f"None is {name}'s default")
    if kind == "nan" and name in ("policy", "arrivals"):
        pytest.skip(f"{name} is a name, not a number")
    with pytest.raises(ValueError, match=rf"^{re.escape(name)} "):
        call(BAD[kind])


def test_text_three_is_refused_alike_where_the_old_helpers_disagreed():
    # replicas._pos took "3" as 3.0, queueing's array helpers parsed it with numpy,
    # loadqueue._check_pos refused it: now one message, the same everywhere
    for call, name in [(lambda v: rp.ReplicaRating(v, 60_000), "output_tps"),
                       (lambda v: lq.kv_slots(v, 1.0, 1.0), "free_memory_bytes"),
                       (lambda v: q.in_flight_floor(40, v), "service_time_s"),
                       (lambda v: predict(_SWEEP, v), "rate_rps")]:
        with pytest.raises(ValueError) as err:
            call("3")
        assert str(err.value) == f"{name} must be a number, got '3' (str)"
    for call in (lambda v: q.erlang_c(v, 4.0), lambda v: q.replica_capacity(v, 12.25)):
        with pytest.raises(ValueError, match="must be a number or an array of numbers, got '3'"):
            call("3")


def test_replica_capacity_and_friends_agree_on_zero_and_on_arrays():
    # zero slots is no replica: every S / T formula refuses it by the same rule
    for call in (lambda: q.replica_capacity(0, 12.25),
                 lambda: q.in_flight_floor(40, 12.25, 0),
                 lambda: q.token_cross_check(1.0, 300, 0, 25)):
        with pytest.raises(ValueError, match=r"^slots\w* must be positive, got 0"):
            call()
    assert q.replica_capacity(32, 12.25) == pytest.approx(q.rate_from_concurrency(32, 12.25))
    both = q.replica_capacity(np.array([32, 64]), 12.25)
    assert isinstance(both, np.ndarray) and both[1] == pytest.approx(2 * both[0])
    assert isinstance(q.replica_capacity(np.float64(32), 12.25), float)


def test_whole_floats_count_as_integers_and_fractions_do_not():
    assert q.replicas_pooled(40, 32.0, 12.25, 0.5, 0.01) == q.replicas_pooled(40, 32, 12.25, 0.5, 0.01)
    assert lq.LoadDependentQueue(4.0, flat(1.0)).slots == 4
    for call in (lambda: q.replicas_pooled(40, 32.5, 12.25, 0.5, 0.01),
                 lambda: q.erlang_c(8.5, 4.0),
                 lambda: lq.kv_bytes_per_token(32.5, 8, 128),
                 lambda: engine.engine_limits(_SWEEP, max_num_seqs=2.5)):
        with pytest.raises(ValueError, match="must be (an integer|whole numbers)"):
            call()


def test_headroom_and_quantile_bounds_agree_across_modules():
    # a share to plan on using is in (0, 1] in replicas and servingmodel alike
    assert rp.replicas_for_tokens(1, 1, _RATING, headroom=1.0).headroom == 1.0
    for call in (lambda: rp.replicas_for_tokens(1, 1, _RATING, headroom=1.5),
                 lambda: rp.replicas_disaggregated(1, 1, 1, 1, headroom=1.5),
                 lambda: sm.Deployment(sm.LLMS["Llama-3.1-8B"], sm.GPUS["H100-SXM-80GB"], bw_efficiency=1.5)):
        with pytest.raises(ValueError, match=r"must lie in \(0, 1\], got 1.5"):
            call()
    # a quantile is strictly inside (0, 1) everywhere
    for call in (lambda: q.wait_quantile(1.0, 8, 1.0, 1.0), lambda: _SOLUTION.wait_quantile(1.0),
                 lambda: bt.pinball_loss([1.0], [1.0], 1.0), lambda: lq.max_rate(_MODEL, 1.0, 1.0)):
        with pytest.raises(ValueError, match="must lie strictly between 0 and 1"):
            call()


@pytest.mark.parametrize("lam, slots, T, t, target", [
    (40, 32, 12.25, 0.5, 0.01), (3, 8, 2.0, 0.1, 0.05), (0.5, 1, 1.0, 0.0, 0.2), (200, 16, 4.0, 1.0, 0.001)])
def test_fewest_replicas_equal_a_plain_scan(lam, slots, T, t, target):
    def scan(tail):
        n = 1
        while tail(n) > target:
            n += 1
        return n

    pooled = scan(lambda n: q.prob_wait_exceeds(t, n * slots, lam, T))
    isolated = scan(lambda n: q.prob_wait_exceeds(t, slots, lam / n, T))
    assert q.replicas_pooled(lam, slots, T, t, target) == pooled
    assert q.replicas_isolated(lam, slots, T, t, target) == isolated
    assert pooled <= isolated


@pytest.mark.parametrize("kw", [{}, {"pooled": False}, {"waiting_room": 8}])
def test_load_dependent_fleet_is_the_fewest_passing(kw):
    n = lq.replicas_needed(_SWEEP, 6.0, 16, 1.0, 0.99, **kw)

    def passes(m):
        pooled = kw.get("pooled", True)
        model = lq.from_sweep(_SWEEP, 16, replicas=m if pooled else 1, waiting_room=kw.get("waiting_room"))
        return lq.max_rate(model, 1.0, 0.99) * (1 if pooled else m) >= 6.0

    assert passes(n) and (n == 1 or not passes(n - 1))


def test_one_kv_bytes_formula():
    # the engine's KV estimate and the modelled deployments use loadqueue's formula
    m = sm.LLMS["Llama-3.1-8B"]
    assert m.kv_bytes_per_token(2.0) == lq.kv_bytes_per_token(m.layers, m.kv_heads, m.head_dim, 2.0)
    tokens = engine.kv_cache_tokens("Llama-3.1-8B", "H100 80GB")
    params_b, layers, kv_heads, head_dim = engine.model_config("Llama-3.1-8B")
    # vLLM gave the KV cache of Llama-3.1-8B on one H100 at 0.9 51.38 GiB (llm-d-benchmark,
    # config_explorer/empirical-vllm-memory-results.md), at 128 KiB a token
    published = 51.38 * 2 ** 30 / lq.kv_bytes_per_token(layers, kv_heads, head_dim, 2.0)
    assert abs(tokens / published - 1) < 0.05
