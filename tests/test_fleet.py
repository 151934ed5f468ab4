"""Tests for capbook.plan.fleet: routing, burst headroom, spares, the plan, token limits, alerts.

Oracles: the published figures of the source material (issue 4), an mpmath Erlang C computed
from its defining sums, brute-force searches written independently of the module's closed
forms, and properties that must hold for every input (pooled ≤ per-replica, every plan
survives its own scenarios, limits never exceed the budget, ...).
"""
from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capbook.plan import fleet as f
from capbook import queueing as q

PEAK, SLOTS, T, WAIT, TARGET = 40.0, 32, 12.25, 0.5, 0.01


def mp_tail(t, c, lam, ts):
    """P(W > t) for M/M/c from the defining sums, in 60-digit arithmetic."""
    mp.mp.dps = 60
    a = mp.mpf(lam) * mp.mpf(ts)
    c = int(c)
    if a >= c:
        return 1.0
    top = a**c / mp.factorial(c) * c / (c - a)
    bottom = mp.fsum(a**k / mp.factorial(k) for k in range(c)) + top
    C = top / bottom
    return float(C * mp.exp(-(c - a) * mp.mpf(t) / mp.mpf(ts)))


# ---------------------------------------------------------------------------
# Published figures
# ---------------------------------------------------------------------------

def test_routing_comparison_figures():
    r = f.compare_routing(PEAK, SLOTS, T, WAIT, TARGET)
    assert (r.by_mean, r.per_replica, r.pooled) == (16, 24, 17)
    assert r.saving == 7
    assert round(r.saving_share, 2) == 0.29  # "about 30 %"
    tab = r.table()
    assert round(tab.loc["by the mean", "late_share"], 3) == 0.095
    assert not tab.loc["by the mean", "meets_slo"]
    assert round(tab.loc["load-aware (pooled)", "utilisation"], 2) == 0.90
    assert round(tab.loc["load-aware (pooled)", "late_share"], 3) == 0.001
    assert tab["meets_slo"].tolist() == [False, True, True]


def test_late_share_matches_mpmath_for_both_routings():
    # pooled: one M/M/c with c = n S; per-replica: n copies of M/M/S fed lam / n
    for n in (16, 17, 20, 24):
        assert f.late_share(n, SLOTS, PEAK, T, WAIT, "pooled") == pytest.approx(
            mp_tail(WAIT, n * SLOTS, PEAK, T), rel=1e-9
        )
        assert f.late_share(n, SLOTS, PEAK, T, WAIT, "round-robin") == pytest.approx(
            mp_tail(WAIT, SLOTS, PEAK / n, T), rel=1e-9
        )


def test_replicas_per_routing_are_the_smallest_meeting_the_slo():
    # brute force over n with the mpmath tail
    for routing, c_of, lam_of in (
        ("pooled", lambda n: n * SLOTS, lambda n: PEAK),
        ("random", lambda n: SLOTS, lambda n: PEAK / n),
    ):
        n = 1
        while mp_tail(WAIT, c_of(n), lam_of(n), T) > TARGET:
            n += 1
        assert f.replicas_for_routing(PEAK, SLOTS, T, WAIT, TARGET, routing) == n


def test_worked_plan_figures():
    p = f.plan_fleet(PEAK, SLOTS, T, WAIT, TARGET, ramp_per_min=0.5, lag_min=8, spares=1, tokens_per_request=1800)
    assert round(p.floor_exact, 1) == 15.3
    assert (p.floor, p.serving, p.burst.replicas, p.spare, p.total) == (16, 17, 2, 1, 20)
    assert p.burst.rate == pytest.approx(4.0)
    assert round(p.per_replica_rate, 2) == 2.35
    assert round(p.burst.replicas_exact, 1) == 1.7
    tab = p.table()
    assert tab["added"].tolist() == [16, 1, 2, 1, 20]
    assert tab["replicas"].tolist() == [16, 17, 19, 20, 20]
    assert tab.loc["queueing", "utilisation"] == pytest.approx(490 / 544)
    assert tab.loc["Little's-law floor", "late_share"] == pytest.approx(mp_tail(WAIT, 512, PEAK, T), rel=1e-9)
    assert p.tokens.per_second == pytest.approx(72_000)
    assert p.tokens.per_minute == pytest.approx(4_320_000)
    assert p.checks()["meets_slo"].all()


def test_second_worked_plan_and_its_erlang_tail():
    u = f.plan_by_utilisation(10, 8, 8.0, 0.72, spares=1)
    assert u.busy_slots == pytest.approx(80)
    assert (u.at_full, u.at_planning, u.total) == (10, 14, 15)
    # what Erlang C says about that plan: pooled it is far past the SLO (95 % under 2 s) ...
    pooled_tail = u.late_share(2.0)
    assert pooled_tail == pytest.approx(mp_tail(2.0, 120, 10, 8.0), rel=1e-9)
    assert pooled_tail < 1e-8
    assert f.replicas_for_routing(10, 8, 8.0, 2.0, 0.05, "pooled") < u.at_planning
    # ... and with a queue per replica the same 15 replicas miss it
    rr_tail = u.late_share(2.0, routing="round-robin")
    assert rr_tail == pytest.approx(mp_tail(2.0, 8, 10 / 15, 8.0), rel=1e-9)
    assert rr_tail > 0.05


def test_token_rates():
    r = f.token_rates(40, 1800)
    assert (r.per_second, r.per_minute) == (72_000.0, 4_320_000.0)


# ---------------------------------------------------------------------------
# Burst headroom
# ---------------------------------------------------------------------------

def test_scale_up_lag_components():
    lag = f.ScaleUpLag()
    assert lag.total == 8.0
    assert lag.with_prewarmed_standby().total == lag.total - lag.node - lag.image_pull
    assert lag.with_cached_weights().total == lag.total - lag.weights_download
    both = lag.with_prewarmed_standby().with_cached_weights()
    per = PEAK / 17
    sizes = [f.burst_headroom(0.5, x, per).replicas for x in (lag, lag.with_cached_weights(), both)]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] > sizes[-1]
    assert lag.table()["total"] == 8.0
    with pytest.raises(ValueError, match="node"):
        f.ScaleUpLag(node=-1)


def test_burst_headroom_rounding_at_exact_multiples():
    # 2 req/s of ramp x 3 min at 3 req/s per replica is exactly 2 replicas, not 3
    assert f.burst_headroom(2.0, 3.0, 3.0).replicas == 2
    assert f.burst_headroom(0.0, 8.0, 1.0).replicas == 0
    assert f.burst_headroom(0.1, 0.0, 1.0).replicas == 0


@settings(max_examples=60, deadline=None)
@given(
    lam=st.floats(1.0, 200.0),
    slots=st.integers(1, 64),
    ts=st.floats(0.5, 30.0),
    target=st.sampled_from([0.001, 0.01, 0.05]),
    extra=st.floats(0.0, 1.0),
)
def test_operating_point_conversion_is_never_short_of_a_resolve(lam, slots, ts, target, extra):
    n1 = q.replicas_pooled(lam, slots, ts, 0.5, target)
    h = extra * lam
    b = f.burst_headroom(1.0, h, lam / n1)
    n2 = q.replicas_pooled(lam + h, slots, ts, 0.5, target) if h > 0 else n1
    assert n2 <= n1 + b.replicas


# ---------------------------------------------------------------------------
# Spares and zones
# ---------------------------------------------------------------------------

def _largest_zone(n, z):
    return max(len(x) for x in np.array_split(np.arange(n), z))


@pytest.mark.parametrize("zones", [2, 3, 4, 5, 8])
def test_zone_survival_matches_brute_force(zones):
    for required in range(1, 60):
        n = required
        while n - _largest_zone(n, zones) < required:
            n += 1
        assert f.replicas_surviving_zone_loss(required, zones) == n


def test_failure_spares_policies():
    assert f.failure_spares(19, 1) == 1
    assert f.failure_spares(19, 0) == 0
    assert f.failure_spares(19, 3) == 3
    assert f.failure_spares(19, 1, zones=3) == 29 - 19
    # with many zones N+k can dominate
    assert f.failure_spares(10, 3, zones=20) == 3


@settings(max_examples=40, deadline=None)
@given(
    lam=st.floats(1.0, 150.0),
    slots=st.integers(1, 64),
    ts=st.floats(0.5, 30.0),
    target=st.sampled_from([0.001, 0.01, 0.05]),
    routing=st.sampled_from(["pooled", "round-robin", "strict-round-robin"]),
    ramp=st.floats(0.0, 2.0),
    lag=st.floats(0.0, 15.0),
    spares=st.integers(0, 3),
    zones=st.one_of(st.none(), st.integers(2, 5)),
)
def test_every_plan_survives_its_own_scenarios(lam, slots, ts, target, routing, ramp, lag, spares, zones):
    p = f.plan_fleet(lam, slots, ts, 0.5, target, routing=routing, ramp_per_min=ramp, lag_min=lag, spares=spares, zones=zones)
    assert p.floor <= p.serving <= p.in_service <= p.total
    assert p.checks()["meets_slo"].all()
    tab = p.table()
    assert tab["added"].iloc[:-1].sum() == p.total == tab["replicas"].iloc[-1]
    # utilisation falls and the tail never rises as replicas are added
    assert np.all(np.diff(tab["utilisation"].to_numpy()) <= 1e-15)
    assert np.all(np.diff(tab["late_share"].to_numpy()) <= 1e-15)
    # the spare is no larger than the policy needs: one fewer replica fails it
    if p.spare > 0:
        lost_if_smaller = max(spares, -(-(p.total - 1) // zones)) if zones else spares
        assert (p.total - 1) - lost_if_smaller < p.in_service


def test_pooled_never_needs_more_than_per_replica_and_mean_never_more_than_pooled():
    rng = np.random.default_rng(4)
    for _ in range(40):
        lam, s, ts = rng.uniform(1, 100), int(rng.integers(1, 64)), rng.uniform(1, 20)
        r = f.compare_routing(lam, s, ts, 0.5, 0.01)
        assert r.by_mean <= r.pooled <= r.per_replica


# ---------------------------------------------------------------------------
# Strict round-robin (E_n/M/S per replica)
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("slots, lam, ts, t", [(1, 0.05, 12.25, 1.0), (4, 0.25, 12.25, 0.0), (32, 2.0, 12.25, 0.5), (8, 0.9, 8.0, 2.0)])
def test_round_robin_over_one_replica_is_mmc(slots, lam, ts, t):
    # one replica receives every arrival: Poisson in, so the E_1/M/S queue is M/M/S
    assert f.late_share_round_robin(1, slots, lam, ts, t) == pytest.approx(mp_tail(t, slots, lam, ts), rel=1e-9)


def _simulate_strict_round_robin(n, slots, lam, ts, t, arrivals, rng):
    """One replica under strict round-robin: every n-th arrival of a Poisson(lam) stream."""
    import heapq

    gaps = rng.gamma(n, 1.0 / lam, arrivals)
    arr = np.cumsum(gaps)
    svc = rng.exponential(ts, arrivals)
    free = [0.0] * slots
    late = np.empty(arrivals, dtype=bool)
    for i in range(arrivals):
        start = max(heapq.heappop(free), arr[i])
        late[i] = start - arr[i] > t
        heapq.heappush(free, start + svc[i])
    return late


def test_round_robin_matches_simulation():
    n, slots, lam, ts, t = 3, 4, 9.0, 1.0, 0.1  # each replica at 75 %
    exact = f.late_share_round_robin(n, slots, lam, ts, t)
    late = _simulate_strict_round_robin(n, slots, lam, ts, t, 240_000, np.random.default_rng(20261130))
    batches = late[24_000:].reshape(36, -1).mean(axis=1)  # batch means absorb the autocorrelation
    est, se = batches.mean(), batches.std(ddof=1) / math.sqrt(batches.size)
    assert abs(est - exact) < 4 * se, (est, exact, se)
    # and it is a different number from the random split's, by far more than the noise
    random_split = f.late_share(n, slots, lam, ts, t, "random")
    assert random_split - exact > 10 * se


def test_round_robin_sits_between_pooled_and_random():
    assert f.replicas_round_robin(PEAK, SLOTS, T, WAIT, TARGET) == 21
    for lam, s, ts, target in ((40, 32, 12.25, 0.01), (10, 8, 8.0, 0.05), (100, 16, 5.0, 0.001), (3, 4, 2.0, 0.05)):
        n = f.replicas_round_robin(lam, s, ts, 0.5, target)
        assert q.replicas_pooled(lam, s, ts, 0.5, target) <= n <= q.replicas_isolated(lam, s, ts, 0.5, target)
        assert f.late_share_round_robin(n, s, lam, ts, 0.5) <= target
        if n > 1:
            assert f.late_share_round_robin(n - 1, s, lam, ts, 0.5) > target
        for k in (n, n + 3):
            assert (
                f.late_share(k, s, lam, ts, 0.5, "pooled")
                <= f.late_share_round_robin(k, s, lam, ts, 0.5)
                <= f.late_share(k, s, lam, ts, 0.5, "random")
            )
    assert f.replicas_for_routing(PEAK, SLOTS, T, WAIT, TARGET, "strict-round-robin") == 21
    with pytest.raises(ValueError, match="strict-round-robin"):
        f.alert_levels(21, SLOTS, T, WAIT, TARGET, routing="strict-round-robin")


def test_partitioning_loses_pooling():
    whole = q.replicas_pooled(PEAK, SLOTS, T, WAIT, TARGET)
    parts = f.replicas_partitioned(PEAK, SLOTS, T, WAIT, TARGET, [0.25] * 4)
    assert parts == [q.replicas_pooled(10, SLOTS, T, WAIT, TARGET)] * 4
    assert sum(parts) > whole
    assert f.replicas_partitioned(PEAK, SLOTS, T, WAIT, TARGET, [1.0]) == [whole]
    # a shorter T in one group helps that group only
    parts_t = f.replicas_partitioned(PEAK, SLOTS, [T, 9.0], WAIT, TARGET, [0.5, 0.5])
    assert parts_t[1] <= parts_t[0]


# ---------------------------------------------------------------------------
# Token limits
# ---------------------------------------------------------------------------

def _water_fill_oracle(budget, demands):
    """Classic max-min fair share by sorting (no minimums)."""
    items = sorted(demands.items(), key=lambda kv: kv[1])
    out, left = {}, budget
    for i, (k, d) in enumerate(items):
        share = left / (len(items) - i)
        out[k] = min(d, share)
        left -= out[k]
    return out


@settings(max_examples=80, deadline=None)
@given(
    demands=st.dictionaries(st.text("abcdefgh", min_size=1, max_size=3), st.floats(0, 5e6), min_size=1, max_size=8),
    capacity=st.floats(1e4, 1e7),
    reserve=st.floats(0.0, 0.5),
)
def test_allocate_tpm_is_max_min_fair_and_within_budget(demands, capacity, reserve):
    df = f.allocate_tpm(capacity, demands, reserve=reserve)
    budget = capacity * (1 - reserve)
    assert df["limit"].sum() <= budget + 1e-6
    assert (df["limit"] <= df["demand"] + 1e-9).all()
    oracle = _water_fill_oracle(budget, demands)
    for k, v in oracle.items():
        assert df.loc[k, "limit"] == pytest.approx(math.floor(v), abs=1.0)
    f.check_tpm_limits(df["limit"], capacity)  # never raises on its own allocation


def test_allocate_tpm_minimums_and_errors():
    df = f.allocate_tpm(4_320_000, {"chat": 3e6, "search": 2e6, "batch": 1e6}, reserve=0.1, minimums={"batch": 1e6})
    assert df.loc["batch", "limit"] == 1_000_000
    assert df["limit"].sum() <= 0.9 * 4_320_000
    assert df.loc["chat", "limit"] == df.loc["search", "limit"]  # capped at the same level
    with pytest.raises(ValueError, match="minimums sum to"):
        f.allocate_tpm(1000, {"a": 900, "b": 900}, reserve=0.2, minimums={"a": 500, "b": 400})
    with pytest.raises(ValueError, match="not in demands"):
        f.allocate_tpm(1000, {"a": 1}, minimums={"z": 1})
    with pytest.raises(ValueError, match=r"demands\['a'\]"):
        f.allocate_tpm(1000, {"a": -1})
    with pytest.raises(ValueError, match="reserve"):
        f.allocate_tpm(1000, {"a": 1}, reserve=1.0)
    with pytest.raises(ValueError, match="capacity_tpm"):
        f.allocate_tpm(0, {"a": 1})


def test_check_tpm_limits():
    ok = f.check_tpm_limits({"a": 1_000_000, "b": 2_000_000}, 4_320_000)
    assert ok["headroom"] == 1_320_000 and ok["utilisation"] == pytest.approx(3 / 4.32)
    with pytest.raises(ValueError, match="above capacity_tpm"):
        f.check_tpm_limits({"a": 3_000_000, "b": 2_000_000}, 4_320_000)
    with pytest.raises(ValueError, match=r"limits\['b'\]"):
        f.check_tpm_limits({"a": 1, "b": float("nan")}, 10)


# ---------------------------------------------------------------------------
# Alert levels
# ---------------------------------------------------------------------------

def test_alert_levels_hit_their_tail_targets_and_queue_depth_is_littles_law():
    a = f.alert_levels(17, SLOTS, T, WAIT, TARGET, warn_fraction=0.1)
    tab = a.table()
    assert tab.loc["breach", "late_share"] == pytest.approx(TARGET, rel=1e-6)
    assert tab.loc["warn", "late_share"] == pytest.approx(0.1 * TARGET, rel=1e-6)
    assert tab.loc["warn", "arrival_rate"] < tab.loc["breach", "arrival_rate"]
    assert tab.loc["breach", "late_share"] == pytest.approx(
        mp_tail(WAIT, 17 * SLOTS, tab.loc["breach", "arrival_rate"], T), rel=1e-6
    )
    for lvl in ("warn", "breach"):
        lam = tab.loc[lvl, "arrival_rate"]
        a_ = lam * T
        c = 17 * SLOTS
        lq = q.erlang_c(c, a_) * a_ / (c - a_)  # Lq of M/M/c, independent of W_q
        assert tab.loc[lvl, "queue_depth"] == pytest.approx(lq, rel=1e-9)
        assert tab.loc[lvl, "slot_utilisation"] == pytest.approx(a_ / c)
    # the pooled breach sits above 40 req/s: 17 replicas meet the SLO at the peak
    assert tab.loc["breach", "arrival_rate"] > PEAK


def test_alert_levels_with_lead_time_and_per_replica_routing():
    a = f.alert_levels(17, SLOTS, T, WAIT, TARGET, ramp_per_min=0.5, lead_min=8)
    assert a.minutes_of_warning == pytest.approx(8.0)
    assert a.breach_rate - a.warn_rate == pytest.approx(4.0)
    b = f.alert_levels(24, SLOTS, T, WAIT, TARGET, routing="round-robin")
    tb = b.table()
    assert tb.loc["breach", "late_share"] == pytest.approx(TARGET, rel=1e-6)
    # per-replica queues breach at a lower utilisation than the pooled 17 do
    assert tb.loc["breach", "slot_utilisation"] < a.table().loc["breach", "slot_utilisation"]
    with pytest.raises(ValueError, match="cannot give that much notice"):
        f.alert_levels(17, SLOTS, T, WAIT, TARGET, ramp_per_min=10, lead_min=60)
    with pytest.raises(ValueError, match="ramp_per_min"):
        f.alert_levels(17, SLOTS, T, WAIT, TARGET, lead_min=8)
    with pytest.raises(ValueError, match="warn_fraction"):
        f.alert_levels(17, SLOTS, T, WAIT, TARGET, warn_fraction=1.5)


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"ramp_per_min": -0.5}, "ramp_per_min must be non-negative"),
        ({"lag_min": -1}, "lag_min must be non-negative"),
        ({"zones": 0}, "zones must be at least 1"),
        ({"zones": 1}, "zones=1"),
        ({"zones": 2.5}, "zones must be an integer"),
        ({"spares": -1}, "spares must be at least 0"),
        ({"routing": "sticky"}, "unknown routing"),
        ({"max_replicas": 18}, r"max_replicas=18 .*SLO plus burst headroom needs 19"),
        ({"max_replicas": 19}, r"max_replicas=19 .*spare policy \(N\+1\) needs 20"),
        ({"max_replicas": 16}, r"max_replicas=16 .*SLO alone needs 17"),
        ({"tokens_per_request": float("nan")}, "tokens_per_request must not be NaN"),
    ],
)
def test_plan_errors_name_the_argument(kwargs, match):
    base = {"ramp_per_min": 0.5, "lag_min": 8, "spares": 1}
    base.update(kwargs)
    with pytest.raises(ValueError, match=match):
        f.plan_fleet(PEAK, SLOTS, T, WAIT, TARGET, **base)


def test_plan_quota_that_fits_and_core_argument_errors():
    assert f.plan_fleet(PEAK, SLOTS, T, WAIT, TARGET, ramp_per_min=0.5, lag_min=8, max_replicas=20).total == 20
    with pytest.raises(ValueError, match="late_share"):
        f.plan_fleet(PEAK, SLOTS, T, WAIT, 1.0)
    with pytest.raises(ValueError, match="slots"):
        f.plan_fleet(PEAK, 0, T, WAIT, TARGET)
    with pytest.raises(ValueError, match="arrival_rate"):
        f.plan_fleet(-1, SLOTS, T, WAIT, TARGET)
    with pytest.raises(ValueError, match="ramp_per_min"):
        f.burst_headroom(-0.1, 8, 2.0)
    with pytest.raises(ValueError, match="per_replica_rate"):
        f.burst_headroom(0.5, 8, 0)
    with pytest.raises(ValueError, match="zones must be at least 1"):
        f.replicas_surviving_zone_loss(10, 0)
    with pytest.raises(ValueError, match="shares must sum to 1"):
        f.replicas_partitioned(PEAK, SLOTS, T, WAIT, TARGET, [0.5, 0.4])
    with pytest.raises(ValueError, match="replicas"):
        f.late_share(0, SLOTS, PEAK, T, WAIT)
    with pytest.raises(ValueError, match="planning_utilisation"):
        f.plan_by_utilisation(10, 8, 8.0, 1.2)


# ---------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------

def test_plan_renders_table_chart_and_html():
    p = f.plan_fleet(PEAK, SLOTS, T, WAIT, TARGET, ramp_per_min=0.5, lag_min=8, zones=3, tokens_per_request=1800)
    spec = p.chart().to_dict()
    data = spec["datasets"][next(iter(spec["datasets"]))]
    df = pd.DataFrame(data)
    # floating bars chain: each bar starts where the previous ended; the total starts at zero
    steps = df[df.kind != "total"]
    assert steps["start"].iloc[0] == 0
    assert np.allclose(steps["start"].iloc[1:].to_numpy(), steps["end"].iloc[:-1].to_numpy())
    total = df[df.kind == "total"].iloc[0]
    assert (total.start, total.end) == (0, p.total) == (0, steps["end"].iloc[-1])
    html = p._repr_html_()
    assert "29 replicas" in html and "4.32 M tokens/min" in html
    r = f.compare_routing(PEAK, SLOTS, T, WAIT, TARGET)
    assert "saves 7 replicas" in r._repr_html_()
    r.chart().to_dict()
    with pytest.raises(ValueError, match="columns"):
        f.waterfall_chart(pd.DataFrame({"stage": ["a"], "added": [1]}))


def test_docstring_examples_run():
    import doctest

    result = doctest.testmod(f, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 15 and result.failed == 0


# --------------------------------------------------------------------------------------------
# One validation and one routing vocabulary (issue 15)
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["3", True, float("nan")])
def test_text_bools_and_nan_are_refused_naming_the_argument(bad):
    with pytest.raises(ValueError, match="^slots "):
        f.plan_fleet(PEAK, bad, T, WAIT, TARGET)
    with pytest.raises(ValueError, match="^ramp_per_min "):
        f.burst_headroom(bad, 8, 2.0)
    with pytest.raises(ValueError, match="^spares "):
        f.failure_spares(19, bad)
    with pytest.raises(ValueError, match="^replicas "):
        f.late_share(bad, SLOTS, PEAK, T, WAIT)
    with pytest.raises(ValueError, match=r"^demands\['a'\] "):
        f.allocate_tpm(1000, {"a": bad})


def test_routing_names_come_from_capbook_routing():
    from capbook.routing import ROUTINGS

    for name, r in ROUTINGS.items():
        if r.queue_model is None:
            with pytest.raises(ValueError, match="no closed-form queue model"):
                f.plan_fleet(PEAK, SLOTS, T, WAIT, TARGET, routing=name)
        else:
            assert f.plan_fleet(PEAK, SLOTS, T, WAIT, TARGET, routing=name).routing == r.queue_model
    # the simulator's old spellings get a rename hint
    with pytest.raises(ValueError, match="now spelled 'strict-round-robin'"):
        f.replicas_for_routing(PEAK, SLOTS, T, WAIT, TARGET, "round_robin")
    assert "strict round-robin" in f.plan_fleet(PEAK, SLOTS, T, WAIT, TARGET,
                                                routing="strict-round-robin")._repr_html_()


def test_at_least_raises_the_serving_count_and_the_burst_and_spare_stack_on_it():
    base = f.plan_fleet(PEAK, SLOTS, T, WAIT, TARGET, ramp_per_min=0.5, lag_min=8, spares=1)
    assert base.serving == base.queueing_replicas == 17
    same = f.plan_fleet(PEAK, SLOTS, T, WAIT, TARGET, ramp_per_min=0.5, lag_min=8, spares=1, at_least=10)
    assert same == base
    more = f.plan_fleet(PEAK, SLOTS, T, WAIT, TARGET, ramp_per_min=0.5, lag_min=8, spares=1, zones=3, at_least=25)
    assert more.queueing_replicas == 17 and more.serving == 25
    assert more.burst == f.burst_headroom(0.5, 8, PEAK / 25)
    assert more.in_service == 25 + more.burst.replicas
    assert more.spare == f.failure_spares(more.in_service, 1, 3) and more.total == more.in_service + more.spare
    with pytest.raises(ValueError, match="serving checks need 25"):
        f.plan_fleet(PEAK, SLOTS, T, WAIT, TARGET, at_least=25, max_replicas=24)
    with pytest.raises(ValueError, match="^at_least "):
        f.plan_fleet(PEAK, SLOTS, T, WAIT, TARGET, at_least=2.5)
