"""Tests of the fleet simulator (capbook.sim.fleetsim): engine replicas behind a router.

The oracle is the plain step loop the engine ran before (tests/engine_reference.py): one step
at a time, no stretches of identical steps, no router. A fleet under a state-independent router
(random, strict round-robin) is that many independent engines, each fed its own share.
"""
import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from capbook.app import datasets
from capbook.engine.stepmodel import EngineLimits, StepCost, fit_engine
from capbook.sim.fleetsim import ROUTERS, run_fleet, simulate_fleet

from engine_reference import run_engine


@pytest.fixture(scope="module")
def engine():
    return fit_engine(datasets.load_sweep())


def _workload(engine, n, rate, seed, lengths="varied"):
    rng = np.random.default_rng(seed)
    a = np.cumsum(rng.exponential(1.0 / rate, n))
    if lengths == "varied":
        inp = np.maximum(1, rng.lognormal(math.log(1200), 0.8, n).astype(np.int64))
        out = np.maximum(1, rng.geometric(1 / 250, n)).astype(np.int64)
    else:
        inp, out = engine._lengths(rng, n)
    return a, inp, out


def _limits(engine, **kw):
    return dataclasses.replace(engine, limits=dataclasses.replace(engine.limits, **kw))


def _close(x, y):
    both = np.isfinite(x) & np.isfinite(y)
    assert np.array_equal(np.isfinite(x), np.isfinite(y))
    assert np.allclose(x[both], y[both], rtol=0, atol=1e-8)


@pytest.mark.parametrize("rate", [0.5, 2.0, 2.9, 4.0])
@pytest.mark.parametrize("limits", [
    {},
    {"chunked_prefill": False},
    {"policy": "separate", "chunked_prefill": False},
    {"kv_cache_tokens": 60_000},            # the cache binds: preemption and recompute
    {"max_num_batched_tokens": 2048, "max_num_seqs": 64},
])
def test_one_replica_is_the_reference_engine(engine, rate, limits):
    eng = _limits(engine, **limits)
    a, inp, out = _workload(eng, 3000, rate, seed=int(rate * 10))
    first, done, npre = run_engine(a, inp, out, eng.step, eng.limits, eng.slots)
    run = run_fleet(eng, a, inp, out, replicas=1, router="jsq", overhead=False)
    _close(run.first_token, first)
    _close(run.end, done)
    assert int(run.replicas["preemptions"].sum()) == npre
    if "kv_cache_tokens" in limits and rate >= 2.9:
        assert npre > 0          # the case is exercised


@pytest.mark.parametrize("router", ["random", "strict-round-robin"])
def test_a_fleet_under_a_blind_router_is_independent_engines(engine, router):
    a, inp, out = _workload(engine, 6000, 9.0, seed=3)
    run = run_fleet(engine, a, inp, out, replicas=4, router=router, overhead=False, seed=5)
    assert set(np.unique(run.replica)) == {0, 1, 2, 3}
    if router == "strict-round-robin":
        assert np.array_equal(run.replica, np.arange(a.size) % 4)
    for r in range(4):
        idx = np.flatnonzero(run.replica == r)
        first, done, _ = run_engine(a[idx], inp[idx], out[idx], engine.step, engine.limits, engine.slots)
        _close(run.first_token[idx], first)
        _close(run.end[idx], done)


def test_pooling_beats_a_random_split_and_jsq_sits_between(engine):
    a, inp, out = _workload(engine, 20_000, 30.0, seed=11)
    p99 = {}
    for router in ("pooled", "jsq", "random"):
        s = run_fleet(engine, a, inp, out, replicas=14, router=router, seed=1, warmup_s=30).summary()
        p99[router] = s["ttft_p99_s"]
        assert s["served"] == s["requests"]
    assert p99["pooled"] < p99["jsq"] < p99["random"]


def test_pooled_router_never_leaves_a_prompt_waiting_beside_a_free_replica(engine):
    # at a light load every prompt starts at once: TTFT is the prompt's own step on an idle
    # replica, or that step shared with decodes (never a wait for another prompt)
    a, inp, out = _workload(engine, 400, 0.5, seed=2)
    run = run_fleet(engine, a, inp, out, replicas=8, router="pooled", overhead=False)
    st = engine.step
    alone = np.asarray(st(inp), dtype=float)
    ttft = run.ttft
    # within one step of extra decode work and one step of waiting for the replica's current step
    slack = float(st(engine.limits.max_num_batched_tokens)) * 0 + 2 * float(st(64))
    assert np.all(ttft <= alone + slack + 1e-9)


def test_every_router_serves_every_request(engine):
    a, inp, out = _workload(engine, 3000, 8.0, seed=4)
    sess = (np.arange(a.size) % 50).tolist()
    for router in ROUTERS:
        run = run_fleet(engine, a, inp, out, replicas=5, router=router, seed=2, session=sess)
        s = run.summary(1.0, 0.05)
        assert s["served"] == s["requests"] == a.size, router
        assert np.all(run.end >= run.first_token)
        assert np.all(run.first_token > run.arrival)
        assert run.replicas["requests"].sum() == a.size


def _conversations(n_sessions, turns, rng, block=512):
    """Mooncake-like requests: each turn's prompt is the whole conversation so far, its hash_ids
    the blocks of that prefix (shared with the previous turn's)."""
    rows = []
    t = 0.0
    for s in range(n_sessions):
        ctx = int(rng.integers(600, 2500))
        blocks = []
        start = rng.exponential(4.0) + s * 0.7
        for k in range(turns):
            ctx += int(rng.integers(50, 300))
            nb = ctx // block
            while len(blocks) < nb:
                blocks.append(s * 10_000 + len(blocks))
            rows.append((start + 6.0 * k + rng.exponential(1.0), ctx, int(rng.integers(50, 300)), list(blocks), s))
    df = pd.DataFrame(rows, columns=["arrival_time", "input_tokens", "output_tokens", "hash_ids", "session"])
    return df.sort_values("arrival_time", kind="stable").reset_index(drop=True)


def test_prefix_affinity_finds_more_cache_than_pooling(engine):
    df = _conversations(120, 6, np.random.default_rng(7))
    aff = simulate_fleet(engine, df, replicas=6, router="prefix-affinity", seed=1).summary(1.0, 0.05)
    rr = simulate_fleet(engine, df, replicas=6, router="strict-round-robin", seed=1).summary(1.0, 0.05)
    pooled = simulate_fleet(engine, df, replicas=6, router="pooled", seed=1).summary(1.0, 0.05)
    assert aff["cache_hit_share"] > 0.6
    assert aff["cache_hit_share"] > pooled["cache_hit_share"] + 0.2
    assert aff["cache_hit_share"] > rr["cache_hit_share"] + 0.2
    # a hit shortens the prefill: the same fleet with the cache off is slower to first token
    cold = simulate_fleet(engine, df, replicas=6, router="prefix-affinity", seed=1,
                          prefix_cache=False).summary(1.0, 0.05)
    assert cold["cache_hit_share"] == 0
    assert aff["ttft_p50_s"] < cold["ttft_p50_s"]


def test_a_cache_hit_shortens_exactly_the_prefill(engine):
    # two requests of one session on one idle replica, far apart: the second prefills only its new tokens
    a = np.array([0.0, 100.0])
    inp = np.array([2000, 2600])
    out = np.array([10, 10])
    run = run_fleet(engine, a, inp, out, replicas=1, session=["s", "s"], overhead=False)
    assert run.cached_tokens.tolist() == [0, 2010]
    st = engine.step
    assert run.ttft[0] == pytest.approx(float(st(2000)))
    assert run.ttft[1] == pytest.approx(float(st(2600 - 2010)))


def test_a_block_that_outlived_its_prefix_is_counted_once(engine):
    # a cache of five 100-token blocks on one replica, requests far apart. Block 1 is evicted
    # before 2 and 3; the fourth request misses on 1 and brings it back beside 2 and 3, which
    # must not be counted a second time: then [7, 8] evicts 5 and 6, and the last request finds
    # all of 1, 2, 3 (299 tokens: a request keeps one token to prefill)
    eng = _limits(engine, kv_cache_tokens=500)
    hs = [[1, 2, 3], [4, 5], [6], [1, 2, 3], [7, 8], [1, 2, 3]]
    inp = np.array([100 * len(h) for h in hs])
    run = run_fleet(eng, 100.0 * np.arange(len(hs)), inp, np.full(len(hs), 2), replicas=1, hash_ids=hs,
                    block_tokens=100, overhead=False)
    assert run.cached_tokens.tolist() == [0, 0, 0, 0, 0, 299]


def test_refusal_of_a_request_the_cache_cannot_hold(engine):
    eng = _limits(engine, kv_cache_tokens=5000)
    a = np.array([0.0, 1.0, 2.0])
    run = run_fleet(eng, a, np.array([1000, 4990, 1000]), np.array([10, 20, 10]), replicas=2)
    assert run.refused.tolist() == [False, True, False]
    assert np.isinf(run.end[1]) and run.replica[1] == -1
    assert run.summary()["refused"] == 1


def test_replicas_added_and_drained_during_a_run(engine):
    a, inp, out = _workload(engine, 4000, 6.0, seed=8)
    seen = []

    def control(c):
        seen.append((c.time_s, c.serving))
        if c.time_s == 60.0:
            c.add(lag_s=30.0)
            c.add(lag_s=30.0)
        if c.time_s == 300.0:
            assert c.drain(0) == 0

    run = run_fleet(engine, a, inp, out, replicas=1, control=control, control_interval_s=30.0, seed=1)
    ev = run.events
    kinds = [(k, r) for _, k, r in ev]
    assert ("ready", 1) in kinds and ("ready", 2) in kinds and ("drain", 0) in kinds
    ready_t = {r: t for t, k, r in ev if k == "ready"}
    assert ready_t[1] == ready_t[2] == 90.0
    drain_t = next(t for t, k, r in ev if k == "drain")
    # nothing starts on a replica before it is ready (requests queued at the router before then
    # may go to it), and nothing that arrives after a drain goes to the drained replica
    assert np.all(run.first_token[run.replica == 1] >= 90.0)
    assert np.any(run.arrival[run.replica == 1] < 90.0)
    assert not np.any((run.replica == 0) & (run.arrival > drain_t))
    assert run.summary()["served"] == a.size
    assert dict(seen)[120.0] == 3 and dict(seen)[330.0] == 2


def test_bad_input_names_the_argument(engine):
    with pytest.raises(ValueError, match="router"):
        run_fleet(engine, [0.0], [10], [10], replicas=1, router="fastest")
    with pytest.raises(ValueError, match="non-decreasing"):
        run_fleet(engine, [1.0, 0.0], [10, 10], [10, 10], replicas=1)
    with pytest.raises(ValueError, match="at least 1"):
        run_fleet(engine, [0.0], [0], [10], replicas=1)
    with pytest.raises(ValueError, match="replicas"):
        run_fleet(engine, [0.0], [10], [10], replicas=0)
    with pytest.raises(ValueError, match="hash_ids= or session="):
        run_fleet(engine, [0.0], [10], [10], replicas=1, router="prefix-affinity")
    with pytest.raises(ValueError, match="one length"):
        run_fleet(engine, [0.0, 1.0], [10], [10], replicas=1)


def test_flat_step_cost_fleet_meets_little(engine):
    # Little's law on the simulated fleet: mean in flight = arrival rate x mean time in system
    eng = dataclasses.replace(engine, step=StepCost(0.02, 0.0), limits=EngineLimits(
        max_num_seqs=16, kv_cache_tokens=None, max_num_batched_tokens=8192, chunked_prefill=True,
        policy="mixed", sources={}))
    a, inp, out = _workload(eng, 20_000, 20.0, seed=9)
    run = run_fleet(eng, a, inp, out, replicas=4, router="jsq", overhead=False)
    span = run.end.max()
    in_flight = float(np.sum(run.end - run.arrival)) / span
    reps = run.replicas
    util = float((reps["slot_utilisation"] * reps["alive_s"]).sum() * 16 / span)
    waiting_share = np.sum(run.first_token - run.arrival - 0.02) / span   # prompts wait before their step
    assert util == pytest.approx(in_flight - waiting_share, rel=0.05)
