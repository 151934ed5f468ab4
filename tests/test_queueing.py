"""Tests of capbook.queueing: published figures, an mpmath oracle, properties and bad input."""
from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capbook import queueing as q

# ---------------------------------------------------------------------------
# Independent oracle: exact M/M/c formulas evaluated with 50 significant digits.
# ---------------------------------------------------------------------------

DPS = 50  # digits of the oracle; set locally so other test modules cannot change it


@mp.workdps(DPS)
def oracle_erlang_b(c: int, a: float) -> mp.mpf:
    """Erlang B from its definition, sum_{k<=c} a^k/k!, through mpmath's incomplete gamma."""
    c_, a_ = mp.mpf(int(c)), mp.mpf(a)
    log_pmf = c_ * mp.log(a_) - a_ - mp.loggamma(c_ + 1)
    tail = mp.gammainc(c_ + 1, a_, mp.inf, regularized=True)  # P(Poisson(a) <= c)
    return mp.exp(log_pmf) / tail


@mp.workdps(DPS)
def oracle_erlang_b_sum(c: int, a: float) -> mp.mpf:
    """Erlang B by the textbook finite sum (small c only): a second, different oracle."""
    a_ = mp.mpf(a)
    terms = [a_**k / mp.factorial(k) for k in range(c + 1)]
    return terms[-1] / mp.fsum(terms)


@mp.workdps(DPS)
def oracle_erlang_c(c: int, a: float) -> mp.mpf:
    b = oracle_erlang_b(c, a)
    rho = mp.mpf(a) / c
    return b / (1 - rho * (1 - b))


# ---------------------------------------------------------------------------
# Published figures (issue 2, section 3)
# ---------------------------------------------------------------------------


def test_replica_capacity_and_floor():
    T = 0.25 + 300 * 0.040
    assert T == pytest.approx(12.25, abs=1e-12)
    assert round(q.replica_capacity(32, T), 2) == 2.61
    assert q.concurrency_from_rate(40, T) == pytest.approx(490.0)
    floor = q.in_flight_floor(40, T, 32)
    assert floor["in_flight"] == pytest.approx(490.0)
    assert round(floor["replicas"], 1) == 15.3


def test_littles_law_three_ways_consistent():
    L = q.concurrency_from_rate(2.5, 8.0)
    assert q.rate_from_concurrency(L, 8.0) == pytest.approx(2.5)
    assert q.time_from_concurrency(L, 2.5) == pytest.approx(8.0)


def test_token_cross_check_illustrative_case():
    r = q.token_cross_check(q.replica_capacity(32, 12.25), 300, 32, 25)
    assert round(r.from_requests) == 784
    assert round(r.from_slots) == 800
    assert r.ratio < 1


def test_isolated_replica_usable_rate_and_late_share_growth():
    lam = q.max_arrival_rate(32, 12.25, 0.5, 0.01)
    assert round(lam, 2) == 1.70
    assert q.prob_wait_exceeds(0.5, 32, lam, 12.25) <= 0.01
    late_77 = q.prob_wait_exceeds(0.5, 32, 0.77 * 32 / 12.25, 12.25)
    late_88 = q.prob_wait_exceeds(0.5, 32, 0.88 * 32 / 12.25, 12.25)
    assert 3.5 < late_88 / late_77 < 4.5  # "multiplies by about four"


def test_forty_qps_three_ways():
    assert q.replicas_by_mean(40, 32, 12.25) == 16
    mean_c = 16 * 32
    assert round(40 * 12.25 / mean_c, 2) == 0.96
    assert round(q.prob_wait_exceeds(0.5, mean_c, 40, 12.25), 3) == 0.095
    assert q.replicas_isolated(40, 32, 12.25, 0.5, 0.01) == 24
    n = q.replicas_pooled(40, 32, 12.25, 0.5, 0.01)
    assert n == 17
    assert round(40 * 12.25 / (n * 32), 2) == 0.90
    assert round(q.prob_wait_exceeds(0.5, n * 32, 40, 12.25), 3) == 0.001


def test_mm1_multiples():
    got = q.mm1_response_multiple([0.5, 0.7, 0.8, 0.9, 0.95, 0.99])
    assert np.allclose(got, [2.0, 1 / 0.3, 5.0, 10.0, 20.0, 100.0])
    assert [round(float(x), 1) for x in got] == [2.0, 3.3, 5.0, 10.0, 20.0, 100.0]
    assert q.mm1_response_multiple(1.0) == math.inf


@pytest.mark.parametrize(
    "rho, p_wait, w",
    [(0.50, 0.06, 0.12), (0.70, 0.27, 0.9), (0.80, 0.46, 2.3), (0.90, 0.70, 7.0), (0.95, 0.84, 16.9)],
)
def test_eight_servers_table(rho, p_wait, w):
    lam = rho * 8 / 8.0
    assert round(q.prob_wait(8, lam, 8.0), 2) == p_wait
    digits = 2 if w < 1 else 1
    assert round(q.mean_wait(8, lam, 8.0), digits) == pytest.approx(w)


@pytest.mark.parametrize("rho, p_wait", [(0.70, 0.002), (0.80, 0.035), (0.90, 0.26), (0.95, 0.55)])
def test_eighty_servers_prob_wait(rho, p_wait):
    got = q.prob_wait(80, rho * 80 / 8.0, 8.0)
    assert round(got, 3 if p_wait < 0.1 else 2) == p_wait


@pytest.mark.parametrize("rho, w", [(0.80, 0.02), (0.90, 0.26), (0.95, 1.1)])
def test_eighty_servers_mean_wait(rho, w):
    got = q.mean_wait(80, rho * 80 / 8.0, 8.0)
    assert round(got, 2 if w < 1 else 1) == w


@pytest.mark.parametrize("c, util, rate", [(8, 0.58, 0.58), (40, 0.85, 4.2), (80, 0.91, 9.1), (160, 0.95, 19)])
def test_safe_utilisation_table(c, util, rate):
    u = q.max_utilisation(c, 8.0, 2.0, 0.05)
    lam = q.max_arrival_rate(c, 8.0, 2.0, 0.05)
    assert round(u, 2) == util
    assert round(lam, 2 if rate < 1 else (1 if rate < 10 else 0)) == rate
    assert q.prob_wait_exceeds(2.0, c, lam, 8.0) <= 0.05


def test_lognormal_cs2():
    assert round(q.lognormal_cs2(0.8), 1) == 0.9
    assert round(q.lognormal_cs2(1.2), 1) == 3.2


def test_exercise_eight_slots():
    assert q.concurrency_from_rate(1.0, 6.0) / 8 == pytest.approx(0.75)
    assert q.concurrency_from_rate(1.0, 6.0) == pytest.approx(6.0)
    assert q.concurrency_from_rate(1.2, 6.0) / 8 == pytest.approx(0.90)
    assert q.mm1_response_multiple(0.75) == pytest.approx(4.0)
    assert q.mm1_response_multiple(0.90) == pytest.approx(10.0)
    assert q.concurrency_from_rate(1.2, 6.0) / 16 == pytest.approx(0.45)


# ---------------------------------------------------------------------------
# Oracle agreement
# ---------------------------------------------------------------------------

ORACLE_C = [1, 2, 3, 5, 8, 15, 16, 17, 32, 100, 544, 1000, 4096, 10_000, 50_000, 100_000]
ORACLE_RHO = [0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.99, 0.999]


@pytest.mark.parametrize("c", ORACLE_C)
def test_erlang_b_and_c_match_mpmath(c):
    worst = 0.0
    checked = 0
    for rho in ORACLE_RHO:
        a = rho * c
        b_true, c_true = oracle_erlang_b(c, a), oracle_erlang_c(c, a)
        for got, true in ((q.erlang_b(c, a), b_true), (q.erlang_c(c, a), c_true)):
            if true > mp.mpf("1e-300"):
                rel = float(abs(mp.mpf(got) - true) / true)
                worst = max(worst, rel)
                checked += 1
    assert checked > 0
    assert worst <= 1e-12, f"c={c}: worst relative error {worst:.3g}"


def test_oracles_agree_with_each_other():
    # the incomplete-gamma oracle and the finite-sum oracle are independent computations
    for c in (1, 4, 20, 60):
        for a in (0.3 * c, 0.9 * c, 1.3 * c):
            with mp.workdps(DPS):
                assert abs(oracle_erlang_b(c, a) - oracle_erlang_b_sum(c, a)) < mp.mpf("1e-40")


def test_overloaded_erlang_b_matches_oracle():
    for c, a in [(10, 15.0), (1000, 1200.0), (100_000, 100_500.0)]:
        rel = float(abs(mp.mpf(q.erlang_b(c, a)) - oracle_erlang_b(c, a)) / oracle_erlang_b(c, a))
        assert rel < 1e-12


def test_million_servers_finite_and_accurate():
    c, a = 1_000_000, 999_000.0
    got = q.erlang_c(c, a)
    true = oracle_erlang_c(c, a)
    assert float(abs(mp.mpf(got) - true) / true) < 1e-11
    assert np.isfinite(q.mean_wait(c, a / 10, 10.0))


def test_vectorised_broadcasting_matches_scalar():
    c = np.array([[8], [80], [800]])
    a = np.array([2.0, 6.0, 7.5])
    grid = q.erlang_c(c, a)
    assert grid.shape == (3, 3)
    for i in range(3):
        for j in range(3):
            assert grid[i, j] == q.erlang_c(int(c[i, 0]), float(a[j]))


def test_wait_tail_and_quantile_are_inverse():
    c, lam, T = 544, 40.0, 12.25
    for qq in (0.9, 0.99, 0.999, 0.9999):
        t = q.wait_quantile(qq, c, lam, T)
        if t > 0:
            assert q.prob_wait_exceeds(t, c, lam, T) == pytest.approx(1 - qq, rel=1e-10)
        else:
            assert q.prob_wait(c, lam, T) <= 1 - qq


def test_mean_wait_matches_integral_of_tail():
    # E[W] = integral of P(W > t) dt: an independent check of the tail and the mean
    c, lam, T = 32, 2.4, 12.25
    ts = np.linspace(0, 400, 200_001)
    tail = q.prob_wait_exceeds(ts, c, lam, T)
    integral = float(np.sum((tail[1:] + tail[:-1]) / 2 * np.diff(ts)))
    assert integral == pytest.approx(q.mean_wait(c, lam, T), rel=1e-6)


def test_square_root_staffing_close_to_exact_for_big_pools():
    a = 490.0
    res = q.square_root_staffing(a, 0.2)
    # Halfin-Whitt is an approximation: the exact Erlang C at its staffing is near the target
    assert 0.1 < q.erlang_c(res["servers"], a) < 0.3
    assert q.halfin_whitt_prob_wait(res["beta"]) == pytest.approx(0.2, rel=1e-9)
    small, big = q.square_root_staffing(10.0, 0.2), q.square_root_staffing(10_000.0, 0.2)
    assert big["utilisation"] > small["utilisation"]  # big pools run hot


def test_allen_cunneen_reduces_to_mmc_and_scales():
    w = q.mean_wait(32, 2.4, 12.25)
    assert q.allen_cunneen_wait(32, 2.4, 12.25, 1.0, 1.0) == pytest.approx(w)
    assert q.allen_cunneen_wait(32, 2.4, 12.25, 1.0, q.lognormal_cs2(1.2)) == pytest.approx(w * (1 + 3.2207) / 2, rel=1e-4)


# ---------------------------------------------------------------------------
# Saturation semantics
# ---------------------------------------------------------------------------


def test_saturation_is_explicit():
    assert q.erlang_c(10, 10.0) == 1.0
    assert q.erlang_c(10, 12.0) == 1.0
    assert q.mean_wait(10, 1.0, 10.0) == math.inf
    assert q.prob_wait_exceeds(1e6, 10, 2.0, 10.0) == 1.0
    assert q.wait_quantile(0.5, 10, 2.0, 10.0) == math.inf
    assert 0 < q.erlang_b(10, 12.0) < 1


def test_solvers_never_return_saturated_points():
    lam = q.max_arrival_rate(4, 1.0, 0.0, 0.999)
    assert lam * 1.0 < 4
    n = q.replicas_pooled(100, 8, 1.0, 0.0, 0.999)
    assert n * 8 > 100


# ---------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------

servers = st.integers(min_value=1, max_value=20_000)
rhos = st.floats(min_value=0.01, max_value=0.995)


@settings(max_examples=200, deadline=None)
@given(c=servers, rho=rhos)
def test_prop_b_le_c_in_unit_interval(c, rho):
    a = rho * c
    b, cc = q.erlang_b(c, a), q.erlang_c(c, a)
    assert 0.0 <= b <= cc <= 1.0


@settings(max_examples=200, deadline=None)
@given(c=st.integers(min_value=1, max_value=5000), rho=rhos)
def test_prop_c_decreasing_in_servers(c, rho):
    a = rho * c
    assert q.erlang_c(c + 1, a) <= q.erlang_c(c, a)


@settings(max_examples=200, deadline=None)
@given(c=servers, r1=rhos, r2=rhos)
def test_prop_c_increasing_in_load(c, r1, r2):
    lo, hi = sorted((r1, r2))
    assert q.erlang_c(c, lo * c) <= q.erlang_c(c, hi * c)


@settings(max_examples=200, deadline=None)
@given(c=servers, rho=rhos, t1=st.floats(0, 100), t2=st.floats(0, 100))
def test_prop_tail_non_increasing_in_t(c, rho, t1, t2):
    lo, hi = sorted((t1, t2))
    lam = rho * c / 10.0
    assert q.prob_wait_exceeds(hi, c, lam, 10.0) <= q.prob_wait_exceeds(lo, c, lam, 10.0)


@settings(max_examples=60, deadline=None)
@given(
    lam=st.floats(0.5, 200.0),
    slots=st.integers(1, 64),
    T=st.floats(0.5, 30.0),
    t=st.floats(0.0, 5.0),
    target=st.floats(0.001, 0.5),
)
def test_prop_solvers_meet_slo_and_one_step_less_does_not(lam, slots, T, t, target):
    n = q.replicas_pooled(lam, slots, T, t, target)
    assert q.prob_wait_exceeds(t, n * slots, lam, T) <= target
    if n > 1:
        assert q.prob_wait_exceeds(t, (n - 1) * slots, lam, T) > target
    m = q.replicas_isolated(lam, slots, T, t, target)
    assert m >= n
    assert q.prob_wait_exceeds(t, slots, lam / m, T) <= target
    if m > 1:
        assert q.prob_wait_exceeds(t, slots, lam / (m - 1), T) > target


@settings(max_examples=60, deadline=None)
@given(c=st.integers(1, 2000), T=st.floats(0.5, 30.0), t=st.floats(0.0, 5.0), target=st.floats(0.001, 0.5))
def test_prop_max_rate_meets_slo_and_a_bit_more_does_not(c, T, t, target):
    lam = q.max_arrival_rate(c, T, t, target)
    assert 0 <= lam * T < c
    assert q.prob_wait_exceeds(t, c, lam, T) <= target
    assert q.prob_wait_exceeds(t, c, lam * (1 + 1e-6), T) > target


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------

BAD_CALLS = [
    (q.erlang_b, (0, 1.0), "c"),
    (q.erlang_b, (2.5, 1.0), "c"),
    (q.erlang_b, (3, -1.0), "a"),
    (q.erlang_b, (3, float("nan")), "a"),
    (q.erlang_c, (-1, 1.0), "c"),
    (q.erlang_c, (True, 1.0), "c"),
    (q.erlang_c, ("x", 1.0), "c"),
    (q.log_erlang_b, (0, 1.0), "c"),
    (q.log_erlang_c, (1, -2.0), "a"),
    (q.prob_wait, (4, -1.0, 1.0), "arrival_rate"),
    (q.prob_wait, (4, 1.0, 0.0), "service_time_s"),
    (q.mean_wait, (4, 1.0, float("nan")), "service_time_s"),
    (q.prob_wait_exceeds, (-0.1, 4, 1.0, 1.0), "t"),
    (q.wait_quantile, (1.0, 4, 1.0, 1.0), "q"),
    (q.wait_quantile, (0.0, 4, 1.0, 1.0), "q"),
    (q.max_arrival_rate, (4, 1.0, 0.5, 1.5), "late_share"),
    (q.max_arrival_rate, (4.5, 1.0, 0.5, 0.1), "c"),
    (q.max_arrival_rate, (4, -1.0, 0.5, 0.1), "service_time_s"),
    (q.max_utilisation, (4, 1.0, -0.5, 0.1), "wait_target_s"),
    (q.replicas_pooled, (-40, 32, 12.25, 0.5, 0.01), "arrival_rate"),
    (q.replicas_pooled, (40, 0, 12.25, 0.5, 0.01), "slots"),
    (q.replicas_pooled, (40, 32, 12.25, 0.5, 0.0), "late_share"),
    (q.replicas_isolated, (40, 32, float("nan"), 0.5, 0.01), "service_time_s"),
    (q.replicas_by_mean, (40, 32.5, 12.25), "slots"),
    (q.replica_capacity, (0, 12.25), "slots"),
    (q.replica_capacity, (32, -1), "service_time_s"),
    (q.concurrency_from_rate, (-1, 1), "arrival_rate"),
    (q.rate_from_concurrency, (1, 0), "time_in_system"),
    (q.time_from_concurrency, (1, 0), "arrival_rate"),
    (q.in_flight_floor, (40, 0, 32), "service_time_s"),
    (q.in_flight_floor, (40, 12.25, 0), "slots_per_replica"),
    (q.token_cross_check, (1, 300, 32, 0), "tokens_per_stream"),
    (q.mm1_response_multiple, (-0.1,), "utilisation"),
    (q.allen_cunneen_wait, (4, 1.0, 1.0, -1.0, 1.0), "ca2"),
    (q.lognormal_cs2, (-0.5,), "sigma"),
    (q.square_root_staffing, (0.0, 0.2), "offered_load"),
    (q.square_root_staffing, (10.0, 1.2), "target_prob_wait"),
    (q.halfin_whitt_prob_wait, (0.0,), "beta"),
]


@pytest.mark.parametrize("func, args, name", BAD_CALLS, ids=[f"{f.__name__}-{n}-{i}" for i, (f, a, n) in enumerate(BAD_CALLS)])
def test_bad_input_names_argument(func, args, name):
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        func(*args)


def test_no_silent_nan_for_arrays():
    with pytest.raises(ValueError, match="a must not be NaN"):
        q.erlang_c([4, 8], [1.0, np.nan])


@pytest.mark.parametrize("c, a", [(1_000_000, 1_100_000.0), (1, 1e6), (10, 40.0), (500, 800.0), (3, 9.0001)])
def test_far_overload_erlang_b_both_paths_match_mpmath(c, a):
    # a - c >= 3 sqrt(c): the continued fraction of the incomplete gamma function. Before it,
    # P(N <= c) underflowed and erlang_b(1e6, 1.1e6) came out as 1.0 (the true value is 0.0909)
    true_b = oracle_erlang_b(c, a)
    scalar = q.erlang_b(c, a)                                   # the math-module fast path
    array = q.erlang_b(np.array([c]), np.array([a]))[0]         # the vectorised kernel
    for got in (scalar, array):
        assert float(abs(mp.mpf(got) - true_b) / true_b) < 1e-12


def test_scalar_fast_path_and_array_kernel_agree_on_a_grid():
    cs = np.array([1, 2, 7, 31, 100, 999, 4096, 65_536])
    rhos = np.array([0.05, 0.5, 0.9, 0.99, 0.9999])
    a = cs[:, None] * rhos[None, :]
    for fn in (q.erlang_b, q.erlang_c):
        grid = fn(cs[:, None], a)
        for i, c in enumerate(cs):
            for j in range(rhos.size):
                s = fn(int(c), float(a[i, j]))
                assert isinstance(s, float)
                assert s == pytest.approx(grid[i, j], rel=1e-13, abs=0)
