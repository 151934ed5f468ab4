r"""Queueing core: Little's law, the knee, Erlang B and C, waits, SLO solvers and variability.

Units used throughout
---------------------
* rates (``arrival_rate``) in requests per second;
* times (``service_time``, ``t``) in seconds;
* ``c`` is the number of servers. In an LLM fleet a server is a *slot*: one sequence in flight
  on one replica, so a pool of ``n`` replicas with ``S`` slots each behind one queue has
  ``c = n * S``;
* ``a`` (offered load) is in Erlangs: ``a = arrival_rate * service_time``, the average number
  of busy servers; utilisation is ``rho = a / c``.

Conventions at and beyond saturation
------------------------------------
When the offered load reaches the number of servers (``a >= c``) an M/M/c queue has no steady
state: the queue grows without bound. The functions here say so explicitly rather than return
a number that looks usable: the probability of waiting is 1, the mean wait and every wait
quantile are ``inf`` and ``P(wait > t)`` is 1 for every ``t``. Erlang B (a loss system, no
queue) is finite for every load. The solvers never return an operating point at or past
saturation.

Numerical method
----------------
Erlang B is computed in log space as the ratio of the Poisson probability of ``c`` to the
Poisson probability of at most ``c``,

.. math::  B(c, a) = \frac{e^{-a} a^c / c!}{\sum_{k=0}^{c} e^{-a} a^k/k!}
                   = \frac{\mathrm{pois}(c; a)}{Q(c+1, a)},

with ``Q`` the regularised upper incomplete gamma function. The Poisson log-probability uses
Loader's saddle-point form (Stirling-series remainder plus a deviance term computed without
cancellation), so it stays accurate to a few ulps for millions of servers where the textbook
``c log a - a - log c!`` loses ten digits. Erlang C follows from B without any sum over ``k``:

.. math::  C(c, a) = \frac{B}{1 - \rho\,(1 - B)}, \qquad \rho = a / c .

Everything is vectorised: ``c`` and ``a`` broadcast against each other as numpy arrays.

References
----------
.. [1] C. Loader, "Fast and accurate computation of binomial probabilities", 2000.
.. [2] S. Halfin and W. Whitt, "Heavy-traffic limits for queues with many exponential
   servers", Operations Research 29(3), 1981.
.. [3] A. O. Allen, *Probability, Statistics, and Queueing Theory*, 2nd ed., 1990
   (the Allen–Cunneen approximation).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
import numpy as np
from scipy import optimize, special, stats

from .validation import array, fewest, integer, nonnegative, positive, probability

__all__ = [
    "concurrency_from_rate",
    "rate_from_concurrency",
    "time_from_concurrency",
    "replica_capacity",
    "in_flight_floor",
    "token_cross_check",
    "TokenCrossCheck",
    "mm1_response_multiple",
    "erlang_b",
    "erlang_c",
    "log_erlang_b",
    "log_erlang_c",
    "prob_wait",
    "mean_wait",
    "prob_wait_exceeds",
    "wait_quantile",
    "max_arrival_rate",
    "max_utilisation",
    "replicas_pooled",
    "replicas_isolated",
    "replicas_by_mean",
    "allen_cunneen_wait",
    "lognormal_cs2",
    "halfin_whitt_prob_wait",
    "halfin_whitt_beta",
    "square_root_staffing",
]

_LOG_2PI_HALF = 0.5 * math.log(2.0 * math.pi)


# ---------------------------------------------------------------------------
# Argument checks are capbook.validation's, at the public boundary only
# ---------------------------------------------------------------------------

def _scalar_or_array(x: np.ndarray):
    x = np.asarray(x)
    return x.item() if x.ndim == 0 else x


# ---------------------------------------------------------------------------
# Little's law and capacity
# ---------------------------------------------------------------------------

def concurrency_from_rate(arrival_rate, time_in_system):
    """Little's law, L = λ W: the average number of requests in flight.

    Parameters
    ----------
    arrival_rate : float or array_like
        Throughput of the stable system, requests per second (λ).
    time_in_system : float or array_like
        Average time a request spends in the system, seconds (W). Include the queue wait
        when it matters: W grows as the system approaches capacity.

    Returns
    -------
    float or ndarray
        Average number of requests in the system (L), dimensionless.

    Examples
    --------
    >>> concurrency_from_rate(40, 12.25)
    490.0
    """
    lam = array(arrival_rate, "arrival_rate", lo=0)
    w = array(time_in_system, "time_in_system", lo=0)
    return _scalar_or_array(lam * w)


def rate_from_concurrency(concurrency, time_in_system):
    """Little's law solved for throughput, λ = L / W (requests per second).

    Parameters
    ----------
    concurrency : float or array_like
        Average number of requests in flight (L).
    time_in_system : float or array_like
        Average time each spends in the system, seconds (W), positive.
    """
    L = array(concurrency, "concurrency", lo=0)
    w = array(time_in_system, "time_in_system", lo=0, lo_open=True)
    return _scalar_or_array(L / w)


def time_from_concurrency(concurrency, arrival_rate):
    """Little's law solved for time in system, W = L / λ (seconds)."""
    L = array(concurrency, "concurrency", lo=0)
    lam = array(arrival_rate, "arrival_rate", lo=0, lo_open=True)
    return _scalar_or_array(L / lam)


def replica_capacity(slots, service_time):
    """Requests per second one replica sustains with every slot busy: ``slots / service_time``.

    This is the Little's-law ceiling, the rate at which the replica is 100 % busy on average;
    a queue builds at every burst when it runs there. Plan below it (see the solvers).

    Parameters
    ----------
    slots : float or array_like
        Sequences the replica holds at once while meeting the TPOT target (S).
    service_time : float or array_like
        Seconds each request holds a slot (T = prefill + output tokens × TPOT).

    Returns
    -------
    float or ndarray
        Requests per second.

    Examples
    --------
    >>> round(replica_capacity(32, 12.25), 2)
    2.61
    """
    s = array(slots, "slots", lo=0, lo_open=True)
    t = array(service_time, "service_time", lo=0, lo_open=True)
    return _scalar_or_array(s / t)


def in_flight_floor(peak_rate, service_time, slots_per_replica=None):
    """The fleet's floor: requests in flight at the peak, and the replicas' worth of slots.

    Parameters
    ----------
    peak_rate : float
        Peak arrival rate, requests per second.
    service_time : float
        Seconds each request holds a slot.
    slots_per_replica : float, optional
        Slots per replica (S). When given, the floor is also expressed in replicas.

    Returns
    -------
    dict
        ``in_flight`` (requests) and, with ``slots_per_replica``, ``replicas`` (fractional:
        the size at which the fleet is 100 % busy on average, not a size to run at).

    Examples
    --------
    >>> f = in_flight_floor(40, 12.25, 32)
    >>> f["in_flight"], round(f["replicas"], 1)
    (490.0, 15.3)
    """
    lam = nonnegative(peak_rate, "peak_rate")
    t = positive(service_time, "service_time")
    out = {"in_flight": lam * t}
    if slots_per_replica is not None:
        s = positive(slots_per_replica, "slots_per_replica")
        out["replicas"] = lam * t / s
    return out


@dataclass(frozen=True)
class TokenCrossCheck:
    """Result of :func:`token_cross_check` (all rates in output tokens per second)."""

    from_requests: float
    from_slots: float
    ratio: float

    def __str__(self) -> str:  # pragma: no cover - presentation
        return (
            f"{self.from_requests:,.0f} output tok/s from requests vs {self.from_slots:,.0f} from slots "
            f"(ratio {self.ratio:.3f})"
        )


def token_cross_check(request_rate, output_tokens, slots, tokens_per_stream):
    """Cross-check a request rate against the slots' decode rate, in output tokens per second.

    ``request_rate × output_tokens`` (what the callers receive) must not exceed
    ``slots × tokens_per_stream`` (what the running sequences can produce). At the Little's-law
    capacity the first is a little below the second: the gap is the prefill time inside T,
    during which a slot is held but produces no output token.

    Parameters
    ----------
    request_rate : float
        Requests per second.
    output_tokens : float
        Mean output tokens per request.
    slots : float
        Sequences in flight (S).
    tokens_per_stream : float
        Output tokens per second of one stream (1 / TPOT).

    Returns
    -------
    TokenCrossCheck

    Examples
    --------
    >>> r = token_cross_check(32 / 12.25, 300, 32, 25)
    >>> round(r.from_requests), round(r.from_slots)
    (784, 800)
    """
    lam = nonnegative(request_rate, "request_rate")
    out = nonnegative(output_tokens, "output_tokens")
    s = positive(slots, "slots")
    tps = positive(tokens_per_stream, "tokens_per_stream")
    a, b = lam * out, s * tps
    return TokenCrossCheck(from_requests=a, from_slots=b, ratio=a / b)


def mm1_response_multiple(utilisation):
    """Mean response time of an M/M/1 queue as a multiple of the service time, ``1 / (1 - ρ)``.

    Parameters
    ----------
    utilisation : float or array_like
        ρ, in [0, 1). At ρ ≥ 1 the queue is unstable and the multiple is ``inf``.

    Returns
    -------
    float or ndarray
        Dimensionless multiple of the service time.

    Examples
    --------
    >>> [round(mm1_response_multiple(r), 1) for r in (0.5, 0.7, 0.8, 0.9, 0.95, 0.99)]
    [2.0, 3.3, 5.0, 10.0, 20.0, 100.0]
    """
    rho = array(utilisation, "utilisation", lo=0)
    with np.errstate(divide="ignore"):
        out = np.where(rho < 1, 1.0 / np.where(rho < 1, 1 - rho, 1.0), np.inf)
    return _scalar_or_array(out)


# ---------------------------------------------------------------------------
# Erlang B and C kernels (vectorised, no validation)
# ---------------------------------------------------------------------------

# Exact values of stirlerr(n) = log(n!) - (n + 1/2) log n + n - log sqrt(2 pi) for n = 0..15
# are computed once from lgamma (well conditioned for small n); the series is used above.
_STIRLERR_SMALL = np.array(
    [0.0]
    + [math.lgamma(n + 1.0) - (n + 0.5) * math.log(n) + n - _LOG_2PI_HALF for n in range(1, 16)]
)


def _stirlerr(n: np.ndarray) -> np.ndarray:
    """log(n!) - log(sqrt(2 pi n) (n/e)^n) for integer n >= 1 (Loader 2000)."""
    n = np.asarray(n, dtype=float)
    out = np.empty_like(n)
    small = n <= 15
    if np.any(small):
        out[small] = _STIRLERR_SMALL[n[small].astype(np.int64)]
    big = ~small
    if np.any(big):
        nb = n[big]
        nn = nb * nb
        s0, s1, s2, s3, s4 = 1 / 12, 1 / 360, 1 / 1260, 1 / 1680, 1 / 1188
        out[big] = (s0 - (s1 - (s2 - (s3 - s4 / nn) / nn) / nn) / nn) / nb
    return out


def _bd0(x: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Deviance term x log(x/m) + m - x, computed without cancellation (x > 0, m > 0)."""
    u = (x - m) / m
    out = np.empty(np.broadcast(x, m).shape)
    x, m, u = np.broadcast_arrays(x, m, u)
    # The series converges like |u|^k / k^2; 64 terms reach 1e-20 at |u| = 0.5. Outside
    # |u| < 0.5 the closed form loses at most a few ulps of a result that is itself O(m).
    near = np.abs(u) < 0.5
    if np.any(near):
        # m * f(u), f(u) = (1+u) log(1+u) - u = sum_{k>=2} (-1)^k u^k / (k (k-1))
        un = u[near]
        term = un * un / 2.0
        acc = term.copy()
        power = un * un
        for k in range(3, 64):
            power = power * (-un)
            acc = acc + power / (k * (k - 1))
        out[near] = m[near] * acc
    far = ~near
    if np.any(far):
        xf, mf = x[far], m[far]
        out[far] = xf * np.log1p((xf - mf) / mf) + mf - xf
    return out


def _log_poisson_pmf_at_c(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    """log P(N = c) for N ~ Poisson(a), c >= 1 integer, a > 0."""
    return -_LOG_2PI_HALF - 0.5 * np.log(c) - _stirlerr(c) - _bd0(c, a)


def _log_erlang_b_kernel(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    c, a = np.broadcast_arrays(np.asarray(c, float), np.asarray(a, float))
    out = np.zeros(c.shape)  # a == 0 -> B = 0 -> log B = -inf, set below
    pos = a > 0
    if np.any(pos):
        cp, ap = c[pos], a[pos]
        log_q = np.log(special.gammaincc(cp + 1.0, ap))
        out[pos] = _log_poisson_pmf_at_c(cp, ap) - log_q
    out[~pos] = -np.inf
    return np.minimum(out, 0.0)


def _log_erlang_c_kernel(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    c, a = np.broadcast_arrays(np.asarray(c, float), np.asarray(a, float))
    out = np.zeros(c.shape)  # saturated: log C = 0 (C = 1)
    ok = a < c
    if np.any(ok):
        co, ao = c[ok], a[ok]
        lb = _log_erlang_b_kernel(co, ao)
        b = np.exp(lb)
        one_minus_rho = (co - ao) / co
        rho = ao / co
        out[ok] = lb - np.log(one_minus_rho + rho * b)
    return np.minimum(out, 0.0)


# ---------------------------------------------------------------------------
# Erlang B and C, public
# ---------------------------------------------------------------------------

def log_erlang_b(c, a):
    """Natural log of the Erlang B blocking probability (see :func:`erlang_b`)."""
    cc = array(c, "c", lo=1, integer=True)
    aa = array(a, "a", lo=0)
    return _scalar_or_array(_log_erlang_b_kernel(cc, aa))


def erlang_b(c, a):
    r"""Erlang B: probability that an arrival finds all ``c`` servers busy in a loss system.

    .. math:: B(c, a) = \frac{a^c / c!}{\sum_{k=0}^{c} a^k / k!}

    Parameters
    ----------
    c : int or array_like of int
        Number of servers, ≥ 1 (any size up to millions).
    a : float or array_like
        Offered load in Erlangs (arrival rate × service time), ≥ 0. Any load is allowed: a loss
        system is stable at every load.

    Returns
    -------
    float or ndarray
        Blocking probability in [0, 1]; broadcasts ``c`` against ``a``.

    Notes
    -----
    Computed in log space through the regularised incomplete gamma function; no loop over k.
    Values below about 1e-308 underflow to 0 (use :func:`log_erlang_b` to keep them).

    Examples
    --------
    >>> round(erlang_b(1, 1.0), 12)
    0.5
    """
    return _scalar_or_array(np.exp(np.asarray(log_erlang_b(c, a))))


def log_erlang_c(c, a):
    """Natural log of the Erlang C probability of waiting (see :func:`erlang_c`)."""
    cc = array(c, "c", lo=1, integer=True)
    aa = array(a, "a", lo=0, allow_inf=True)
    return _scalar_or_array(_log_erlang_c_kernel(cc, aa))


def erlang_c(c, a):
    r"""Erlang C: probability that an arrival waits in an M/M/c queue.

    .. math:: C(c, a) = \frac{B(c, a)}{1 - \rho\,(1 - B(c, a))},\qquad \rho = a / c.

    Parameters
    ----------
    c : int or array_like of int
        Number of servers (slots in the pool), ≥ 1.
    a : float or array_like
        Offered load in Erlangs (arrival rate × mean service time), ≥ 0.

    Returns
    -------
    float or ndarray
        Probability of waiting in [0, 1]. At or beyond saturation (``a >= c``) it is 1 by
        convention: there is no steady state and every arrival eventually queues.

    Examples
    --------
    >>> round(erlang_c(8, 4.0), 4)   # 8 servers at 50 %
    0.059
    """
    return _scalar_or_array(np.exp(np.asarray(log_erlang_c(c, a))))


def _loads(c, arrival_rate, service_time):
    cc = array(c, "c", lo=1, integer=True)
    lam = array(arrival_rate, "arrival_rate", lo=0)
    t = array(service_time, "service_time", lo=0, lo_open=True)
    return cc, lam, t, lam * t


def prob_wait(c, arrival_rate, service_time):
    """Probability that a request waits for a slot, for ``c`` slots behind one FCFS queue.

    Parameters
    ----------
    c : int or array_like
        Slots in the pool (servers).
    arrival_rate : float or array_like
        Requests per second (Poisson arrivals).
    service_time : float or array_like
        Mean seconds each request holds a slot (exponentially distributed).

    Returns
    -------
    float or ndarray
        Erlang C; 1 at or beyond saturation.
    """
    cc, _, _, a = _loads(c, arrival_rate, service_time)
    return _scalar_or_array(np.exp(_log_erlang_c_kernel(cc, a)))


def mean_wait(c, arrival_rate, service_time):
    """Mean time a request waits in the queue before it gets a slot (W_q), seconds.

    ``W_q = C(c, a) × T / (c − a)``; ``inf`` at or beyond saturation.

    Parameters
    ----------
    c : int or array_like
        Slots in the pool.
    arrival_rate : float or array_like
        Requests per second.
    service_time : float or array_like
        Mean seconds in service.
    """
    cc, lam, t, a = _loads(c, arrival_rate, service_time)
    cc, a, t = np.broadcast_arrays(cc, a, t)
    out = np.full(cc.shape, np.inf)
    ok = a < cc
    out[ok] = np.exp(_log_erlang_c_kernel(cc[ok], a[ok])) * t[ok] / (cc[ok] - a[ok])
    return _scalar_or_array(out)


def prob_wait_exceeds(t, c, arrival_rate, service_time):
    """Probability that a request waits longer than ``t`` seconds for a slot (M/M/c, FCFS).

    ``P(W > t) = C(c, a) × exp(−(c − a) t / T)``. Non-increasing in ``t``; equal to 1 for all
    ``t`` at or beyond saturation.

    Parameters
    ----------
    t : float or array_like
        Wait threshold, seconds, ≥ 0.
    c : int or array_like
        Slots in the pool.
    arrival_rate : float or array_like
        Requests per second.
    service_time : float or array_like
        Mean seconds in service.

    Examples
    --------
    >>> round(prob_wait_exceeds(0.5, 512, 40, 12.25), 3)   # 16 replicas x 32 slots
    0.095
    """
    tt = array(t, "t", lo=0)
    cc, lam, ts, a = _loads(c, arrival_rate, service_time)
    tt, cc, a, ts = np.broadcast_arrays(tt, cc, a, ts)
    out = np.ones(cc.shape)
    ok = a < cc
    if np.any(ok):
        out[ok] = np.exp(_log_erlang_c_kernel(cc[ok], a[ok]) - (cc[ok] - a[ok]) * tt[ok] / ts[ok])
    return _scalar_or_array(out)


def wait_quantile(q, c, arrival_rate, service_time):
    """The wait ``t`` (seconds) that a share ``q`` of requests do not exceed: P(W > t) = 1 − q.

    Zero when at least a share ``q`` of requests do not wait at all; ``inf`` at or beyond
    saturation.

    Parameters
    ----------
    q : float or array_like
        Quantile in (0, 1), e.g. 0.99.
    c, arrival_rate, service_time
        As in :func:`prob_wait_exceeds`.
    """
    qq = array(q, "q", lo=0, hi=1, lo_open=True, hi_open=True)
    cc, lam, ts, a = _loads(c, arrival_rate, service_time)
    qq, cc, a, ts = np.broadcast_arrays(qq, cc, a, ts)
    out = np.full(cc.shape, np.inf)
    ok = a < cc
    if np.any(ok):
        lc = _log_erlang_c_kernel(cc[ok], a[ok])
        tail = np.log1p(-qq[ok])
        out[ok] = np.maximum(0.0, (lc - tail) * ts[ok] / (cc[ok] - a[ok]))
    return _scalar_or_array(out)


# ---------------------------------------------------------------------------
# Solvers
# ---------------------------------------------------------------------------

def _tail(t: float, c: float, arrival_rate: float, service_time: float) -> float:
    """P(wait > t) for scalars, with exactly the arithmetic of :func:`prob_wait_exceeds`."""
    a = arrival_rate * service_time
    if a >= c:
        return 1.0
    return float(np.exp(_log_erlang_c_kernel(np.array(float(c)), np.array(a)) - (c - a) * t / service_time))


def max_arrival_rate(c, service_time, t, target):
    """Highest arrival rate (requests per second) with ``P(wait > t) ≤ target`` on ``c`` slots.

    Parameters
    ----------
    c : int
        Slots behind one queue.
    service_time : float
        Mean seconds in service.
    t : float
        Wait threshold of the SLO, seconds (e.g. 0.5 s of a 1 s TTFT budget).
    target : float
        Largest acceptable share of requests waiting longer than ``t``, in (0, 1).

    Returns
    -------
    float
        The rate, strictly below saturation ``c / service_time``. ``P(wait > t)`` increases
        with the rate, so the root is unique; it is found with Brent's method on the log tail.

    Examples
    --------
    >>> round(max_arrival_rate(32, 12.25, 0.5, 0.01), 2)
    1.7
    """
    cc = integer(c, "c", minimum=1)
    ts = positive(service_time, "service_time")
    tt = nonnegative(t, "t")
    p = probability(target, "target")
    log_p = math.log(p)

    def f(a: float) -> float:
        # log P(wait > t) - log target, as a function of the offered load a
        if a >= cc:
            return -log_p
        return float(_log_erlang_c_kernel(np.array(float(cc)), np.array(a))) - (cc - a) * tt / ts - log_p

    hi = cc * (1 - 1e-15)  # strictly below saturation
    if f(hi) <= 0:  # pragma: no cover - only if t is so large the tail vanishes as a -> c
        lam = hi / ts
    else:
        a_star = optimize.brentq(f, 0.0, hi, xtol=1e-14 * max(1.0, cc), rtol=4 * np.finfo(float).eps, maxiter=500)
        lam = a_star / ts
    # the root is exact only to floating tolerance: step down until the SLO holds as
    # prob_wait_exceeds computes it
    while lam > 0 and _tail(tt, cc, lam, ts) > p:
        lam = float(np.nextafter(lam, 0.0))
    return float(lam)


def max_utilisation(c, service_time, t, target):
    """Highest utilisation ρ = λT/c meeting ``P(wait > t) ≤ target`` on ``c`` slots.

    The "safe utilisation" of a pool: it depends on the pool size and on the SLO (grows with
    ``c``; a lone small replica must idle much of its capacity). See :func:`max_arrival_rate`.

    Examples
    --------
    >>> [round(max_utilisation(c, 8.0, 2.0, 0.05), 2) for c in (8, 40, 80, 160)]
    [0.58, 0.85, 0.91, 0.95]
    """
    lam = max_arrival_rate(c, service_time, t, target)
    return float(lam * float(service_time) / int(c))


def _slo_args(arrival_rate, slots, service_time, t, target):
    lam = positive(arrival_rate, "arrival_rate")
    s = integer(slots, "slots", minimum=1)
    ts = positive(service_time, "service_time")
    tt = nonnegative(t, "t")
    p = probability(target, "target")
    return lam, s, ts, tt, p


def replicas_pooled(arrival_rate, slots, service_time, t, target):
    """Fewest replicas meeting ``P(wait > t) ≤ target`` when all share one queue.

    Load-aware routing (a shared queue, or join-shortest-queue on free slots) makes the fleet
    one M/M/c with ``c = replicas × slots``.

    Parameters
    ----------
    arrival_rate : float
        Peak requests per second.
    slots : int
        Slots per replica (S).
    service_time : float
        Mean seconds in service (T).
    t : float
        Wait threshold, seconds.
    target : float
        Largest acceptable share of requests waiting longer than ``t``.

    Returns
    -------
    int
        Replicas. Found by a bracketed (doubling then bisection) search from the Little's-law
        floor, using that the tail decreases with the number of replicas.

    Examples
    --------
    >>> replicas_pooled(40, 32, 12.25, 0.5, 0.01)
    17
    """
    lam, s, ts, tt, p = _slo_args(arrival_rate, slots, service_time, t, target)
    n0 = max(1, math.floor(lam * ts / s) + 1)  # smallest n strictly above saturation
    return fewest(lambda n: _tail(tt, n * s, lam, ts) <= p, n0, what="replicas in the pool")


def replicas_isolated(arrival_rate, slots, service_time, t, target):
    """Fewest replicas meeting the SLO when each replica keeps its own queue.

    Random or round-robin routing splits the traffic evenly but blindly: each replica is an
    isolated M/M/S fed ``arrival_rate / n`` (exact for random splitting of Poisson arrivals;
    round-robin is a little better than this but loses most of the pooling).

    Parameters
    ----------
    arrival_rate, slots, service_time, t, target
        As in :func:`replicas_pooled`.

    Returns
    -------
    int

    Examples
    --------
    >>> replicas_isolated(40, 32, 12.25, 0.5, 0.01)
    24
    """
    lam, s, ts, tt, p = _slo_args(arrival_rate, slots, service_time, t, target)
    n0 = max(1, math.floor(lam * ts / s) + 1)
    return fewest(lambda n: _tail(tt, s, lam / n, ts) <= p, n0, what="isolated replicas")


def replicas_by_mean(arrival_rate, slots, service_time):
    """Replicas a spreadsheet buys from the mean alone: ``ceil(arrival_rate × T / slots)``.

    This is the Little's-law floor rounded up: no queueing headroom at all.

    Examples
    --------
    >>> replicas_by_mean(40, 32, 12.25)
    16
    """
    lam = positive(arrival_rate, "arrival_rate")
    s = integer(slots, "slots", minimum=1)
    ts = positive(service_time, "service_time")
    # guard against 15.999999 from floating error
    return int(math.ceil(lam * ts / s - 1e-12))


# ---------------------------------------------------------------------------
# Variability and heavy traffic
# ---------------------------------------------------------------------------

def allen_cunneen_wait(c, arrival_rate, service_time, ca2, cs2):
    r"""Allen–Cunneen approximation of the mean queue wait in a G/G/c queue, seconds.

    .. math:: W_q(G/G/c) \approx W_q(M/M/c)\,\frac{C_a^2 + C_s^2}{2}

    Parameters
    ----------
    c, arrival_rate, service_time
        As in :func:`mean_wait`.
    ca2 : float or array_like
        Squared coefficient of variation of inter-arrival times (1 for Poisson).
    cs2 : float or array_like
        Squared coefficient of variation of service times (1 for exponential).

    Notes
    -----
    Exact for M/M/c; an approximation otherwise, better at high utilisation.
    """
    ca = array(ca2, "ca2", lo=0)
    cs = array(cs2, "cs2", lo=0)
    w = np.asarray(mean_wait(c, arrival_rate, service_time))
    return _scalar_or_array(w * (ca + cs) / 2.0)


def lognormal_cs2(sigma):
    """Squared coefficient of variation of a lognormal distribution of shape σ: ``e^{σ²} − 1``.

    Examples
    --------
    >>> round(lognormal_cs2(0.8), 2), round(lognormal_cs2(1.2), 2)
    (0.9, 3.22)
    """
    s = array(sigma, "sigma", lo=0)
    return _scalar_or_array(np.expm1(s * s))


def halfin_whitt_prob_wait(beta):
    r"""Halfin–Whitt heavy-traffic probability of waiting for staffing ``c = a + β√a``.

    .. math:: P(\text{wait}) \approx \left[1 + \frac{\beta\,\Phi(\beta)}{\varphi(\beta)}\right]^{-1}
    """
    b = array(beta, "beta", lo=0, lo_open=True)
    ratio = b * np.exp(stats.norm.logcdf(b) - stats.norm.logpdf(b))
    return _scalar_or_array(1.0 / (1.0 + ratio))


def halfin_whitt_beta(target_prob_wait):
    """The β with Halfin–Whitt probability of waiting equal to ``target_prob_wait``."""
    p = probability(target_prob_wait, "target_prob_wait")
    f = lambda b: math.log(halfin_whitt_prob_wait(b)) - math.log(p)  # noqa: E731
    hi = 1.0
    while f(hi) > 0:
        hi *= 2
    return optimize.brentq(f, 1e-12, hi, xtol=1e-14)


def square_root_staffing(offered_load, target_prob_wait):
    """Square-root staffing: ``c ≈ a + β√a`` servers for a target probability of waiting.

    The safety margin grows with √a, so the *share* of idle servers shrinks as the pool grows:
    why big pools can run hot.

    Parameters
    ----------
    offered_load : float or array_like
        a, Erlangs (arrival rate × service time), > 0.
    target_prob_wait : float
        Target probability that an arrival waits, in (0, 1).

    Returns
    -------
    dict
        ``beta``, ``servers`` (integer, rounded up), ``utilisation`` (a / servers).
    """
    a = array(offered_load, "offered_load", lo=0, lo_open=True)
    beta = halfin_whitt_beta(target_prob_wait)
    servers = np.ceil(a + beta * np.sqrt(a))
    return {
        "beta": beta,
        "servers": _scalar_or_array(servers.astype(np.int64)),
        "utilisation": _scalar_or_array(a / servers),
    }
