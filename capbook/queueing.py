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
Scalar arguments take a separate math-module implementation of the same operations (about a
microsecond per Erlang C instead of tens of microseconds through numpy), which the solvers
also use in their inner loops; the two agree to 1e-15 relative. Far beyond saturation
(``a - c ≥ 3√c``), where the Poisson ratio's denominator underflows, Erlang B comes from the
continued fraction of the incomplete gamma function instead.

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
from scipy import special  # scipy.optimize and scipy.stats load only when a solver needs them

from capbook.validation import array, fewest, integer, nonnegative, positive, probability

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


def replica_capacity(slots, service_time_s):
    """Requests per second one replica sustains with every slot busy: ``slots / service_time_s``.

    This is the Little's-law ceiling, the rate at which the replica is 100 % busy on average;
    a queue builds at every burst when it runs there. Plan below it (see the solvers).

    Parameters
    ----------
    slots : float or array_like
        Sequences the replica holds at once while meeting the TPOT target (S).
    service_time_s : float or array_like
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
    t = array(service_time_s, "service_time_s", lo=0, lo_open=True)
    return _scalar_or_array(s / t)


def in_flight_floor(peak_rate, service_time_s, slots_per_replica=None):
    """The fleet's floor: requests in flight at the peak, and the replicas' worth of slots.

    Parameters
    ----------
    peak_rate : float
        Peak arrival rate, requests per second.
    service_time_s : float
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
    t = positive(service_time_s, "service_time_s")
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
# Erlang B and C kernels, no validation: one for scalars, one for arrays
# ---------------------------------------------------------------------------
#
# The scalar kernel (names ending in ``_s``) works on Python floats with the math module and
# scipy's C-level incomplete gamma, so one evaluation costs about a microsecond: it serves
# every call with scalar arguments and the solvers' inner loops. The array kernel performs the
# same operations in the same order on numpy arrays. Where numpy's own transcendental
# functions (SIMD implementations on some CPUs) would give a result a few ulps away from the
# math module's and a large factor would amplify the difference, the array kernel calls the
# math module element by element (the far branch of bd0), so the two kernels agree to within
# a few ulps: at most 1e-15 relative for Erlang B and C.
#
# Erlang B is the Poisson ratio pois(c; a) / P(N <= c) (see the module notes), except far
# beyond saturation, a - c >= 3 sqrt(c), where P(N <= c) underflows or loses its relative
# accuracy: there B comes from the continued fraction of the upper incomplete gamma
# function, whose partial numerators n (c - n + 1) and denominators a - c + 2n are all
# positive (so every step is stable) and which converges within a few dozen steps.

# Exact values of stirlerr(n) = log(n!) - (n + 1/2) log n + n - log sqrt(2 pi) for n = 0..15
# are computed once from lgamma (well conditioned for small n); the series is used above.
_STIRLERR_SMALL = np.array(
    [0.0]
    + [math.lgamma(n + 1.0) - (n + 0.5) * math.log(n) + n - _LOG_2PI_HALF for n in range(1, 16)]
)
_STIRLERR_TUPLE = tuple(float(v) for v in _STIRLERR_SMALL)

#: bd0(x, m) uses its series where |v| = |x - m| / (x + m) < this (the series then needs
#: 12 terms for full precision) and the closed form, which loses at most a few ulps, beyond.
_BD0_NEAR = 0.2
#: Coefficients 1/3, 1/5, ..., 1/25 of the bd0 series in w = v^2.
_BD0_COEF = tuple(1.0 / (2 * j + 1) for j in range(1, 13))
#: Erlang B comes from the continued fraction when a - c >= this times sqrt(c).
_CF_FROM = 3.0
#: The continued fraction stops when a step changes it by less than this (relative).
_CF_TOL = 1e-15
_CF_MAX_STEPS = 10_000
_INF = math.inf

try:  # the C function behind the ufunc, callable without the ufunc's ~0.4 µs overhead
    from scipy.special.cython_special import gammaincc as _gammaincc_s
except ImportError:  # pragma: no cover - every supported scipy has it
    def _gammaincc_s(s: float, x: float) -> float:
        return float(special.gammaincc(s, x))


# -- scalar kernel ------------------------------------------------------------

def _stirlerr_s(n: float) -> float:
    if n <= 15.0:
        return _STIRLERR_TUPLE[int(n)]
    nn = n * n
    return (1 / 12 - (1 / 360 - (1 / 1260 - (1 / 1680 - (1 / 1188) / nn) / nn) / nn) / nn) / n


def _bd0_s(x: float, m: float) -> float:
    d = x - m
    v = d / (x + m)
    if -_BD0_NEAR < v < _BD0_NEAR:
        w = v * v
        # Horner on _BD0_COEF, unrolled: exactly the array kernel's operations
        s = ((((((((((((1 / 25) * w + 1 / 23) * w + 1 / 21) * w + 1 / 19) * w + 1 / 17) * w + 1 / 15) * w
                  + 1 / 13) * w + 1 / 11) * w + 1 / 9) * w + 1 / 7) * w + 1 / 5) * w + 1 / 3)
        return d * v + 2.0 * x * v * w * s
    return x * math.log1p(d / m) + m - x


def _b_cf_s(c: float, a: float) -> float:
    """Erlang B from the continued fraction (modified Lentz), for a - c >= 3 sqrt(c)."""
    f = a - c
    big_c, d, n = f, 0.0, 0.0
    while True:
        n += 1.0
        an = n * (c - n + 1.0)
        bn = a - c + 2.0 * n
        d = 1.0 / (bn + an * d)
        big_c = bn + an / big_c
        delta = big_c * d
        f *= delta
        if abs(delta - 1.0) < _CF_TOL or an == 0.0 or n >= _CF_MAX_STEPS:
            return f / a


def _log_b_below_s(c: float, a: float) -> float:
    """log B(c, a) by the Poisson ratio (0 < a < c + 3 sqrt(c))."""
    lb = (-_LOG_2PI_HALF - 0.5 * math.log(c) - _stirlerr_s(c) - _bd0_s(c, a)
          - math.log(_gammaincc_s(c + 1.0, a)))
    return lb if lb < 0.0 else 0.0


def _log_erlang_b_s(c: float, a: float) -> float:
    if a <= 0.0:
        return -_INF
    if a - c >= _CF_FROM * math.sqrt(c):
        return math.log(_b_cf_s(c, a))
    return _log_b_below_s(c, a)


def _erlang_b_s(c: float, a: float) -> float:
    if a <= 0.0:
        return 0.0
    if a - c >= _CF_FROM * math.sqrt(c):
        return _b_cf_s(c, a)
    return math.exp(_log_b_below_s(c, a))


def _erlang_c_s(c: float, a: float) -> float:
    if a >= c:
        return 1.0
    if a <= 0.0:
        return 0.0
    b = math.exp(_log_b_below_s(c, a))
    out = b / ((c - a) / c + a / c * b)
    return out if out < 1.0 else 1.0


def _log_erlang_c_s(c: float, a: float) -> float:
    if a >= c:
        return 0.0
    if a <= 0.0:
        return -_INF
    lb = _log_b_below_s(c, a)
    lc = lb - math.log((c - a) / c + a / c * math.exp(lb))
    return lc if lc < 0.0 else 0.0


def _tail_s(t: float, c: float, a: float, service_time_s: float) -> float:
    """P(wait > t) with offered load ``a``."""
    if a >= c:
        return 1.0
    return _erlang_c_s(c, a) * math.exp(-((c - a) * t / service_time_s))


# -- array kernel: the same operations on numpy arrays ------------------------

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
        out[big] = (1 / 12 - (1 / 360 - (1 / 1260 - (1 / 1680 - (1 / 1188) / nn) / nn) / nn) / nn) / nb
    return out


def _bd0(x: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Deviance term x log(x/m) + m - x, computed without cancellation (x > 0, m > 0).

    Near x = m it is the series (x - m) v + 2 x v sum_{j>=1} v^{2j} / (2j + 1) in
    v = (x - m)/(x + m) (Loader 2000), which has no cancellation; elsewhere the closed form.
    """
    x, m = np.broadcast_arrays(np.asarray(x, float), np.asarray(m, float))
    d = x - m
    v = d / (x + m)
    out = np.empty(x.shape)
    near = np.abs(v) < _BD0_NEAR
    if np.any(near):
        dn, vn = d[near], v[near]
        w = vn * vn
        s = _BD0_COEF[-1] * w + _BD0_COEF[-2]
        for k in _BD0_COEF[-3::-1]:
            s = s * w + k
        out[near] = dn * vn + 2.0 * x[near] * vn * w * s
    far = ~near
    if np.any(far):
        xf, mf = x[far], m[far]
        # math.log1p, element by element: x times numpy's log1p would differ from the scalar
        # kernel by x ulps
        lp = np.fromiter(map(math.log1p, (d[far] / mf).tolist()), float, count=xf.size)
        out[far] = xf * lp + mf - xf
    return out


def _b_cf(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    """:func:`_b_cf_s` on arrays, each element stopping where the scalar one stops."""
    out = np.empty(c.shape)
    idx = np.arange(c.size)
    f = a - c
    big_c, d, n = f.copy(), np.zeros(c.shape), 0.0
    while idx.size:
        n += 1.0
        cc, aa = c[idx], a[idx]
        an = n * (cc - n + 1.0)
        bn = aa - cc + 2.0 * n
        d = 1.0 / (bn + an * d)
        big_c = bn + an / big_c
        delta = big_c * d
        f = f * delta
        done = (np.abs(delta - 1.0) < _CF_TOL) | (an == 0.0) | (n >= _CF_MAX_STEPS)
        out[idx[done]] = f[done] / aa[done]
        keep = ~done
        idx, f, big_c, d = idx[keep], f[keep], big_c[keep], d[keep]
    return out


def _log_poisson_pmf_at_c(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    """log P(N = c) for N ~ Poisson(a), c >= 1 integer, a > 0."""
    return -_LOG_2PI_HALF - 0.5 * np.log(c) - _stirlerr(c) - _bd0(c, a)


def _b_branches(c: np.ndarray, a: np.ndarray):
    c, a = np.broadcast_arrays(np.asarray(c, float), np.asarray(a, float))
    pos = a > 0
    cf = pos & (a - c >= _CF_FROM * np.sqrt(c))
    return c, a, pos & ~cf, cf


def _log_b_below(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    log_q = np.log(special.gammaincc(c + 1.0, a))
    return np.minimum(_log_poisson_pmf_at_c(c, a) - log_q, 0.0)


def _log_erlang_b_kernel(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    c, a, below, cf = _b_branches(c, a)
    out = np.full(c.shape, -np.inf)  # a == 0: B = 0
    if np.any(below):
        out[below] = _log_b_below(c[below], a[below])
    if np.any(cf):
        out[cf] = np.log(_b_cf(c[cf], a[cf]))
    return out


def _erlang_b_kernel(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    c, a, below, cf = _b_branches(c, a)
    out = np.zeros(c.shape)
    if np.any(below):
        out[below] = np.exp(_log_b_below(c[below], a[below]))
    if np.any(cf):
        out[cf] = _b_cf(c[cf], a[cf])
    return out


def _erlang_c_kernel(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    c, a = np.broadcast_arrays(np.asarray(c, float), np.asarray(a, float))
    out = np.ones(c.shape)  # saturated: C = 1
    out[a <= 0] = 0.0
    ok = (a > 0) & (a < c)
    if np.any(ok):
        co, ao = c[ok], a[ok]
        b = np.exp(_log_b_below(co, ao))
        out[ok] = np.minimum(b / ((co - ao) / co + ao / co * b), 1.0)
    return out


def _log_erlang_c_kernel(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    c, a = np.broadcast_arrays(np.asarray(c, float), np.asarray(a, float))
    out = np.zeros(c.shape)  # saturated: log C = 0 (C = 1)
    out[a <= 0] = -np.inf
    ok = (a > 0) & (a < c)
    if np.any(ok):
        co, ao = c[ok], a[ok]
        lb = _log_b_below(co, ao)
        out[ok] = np.minimum(lb - np.log((co - ao) / co + ao / co * np.exp(lb)), 0.0)
    return out


def _tail_kernel(t: np.ndarray, c: np.ndarray, a: np.ndarray, service_time_s: np.ndarray) -> np.ndarray:
    t, c, a, ts = np.broadcast_arrays(t, c, a, service_time_s)
    out = np.ones(c.shape)
    ok = a < c
    if np.any(ok):
        co, ao = c[ok], a[ok]
        out[ok] = _erlang_c_kernel(co, ao) * np.exp(-((co - ao) * t[ok] / ts[ok]))
    return out


# ---------------------------------------------------------------------------
# Erlang B and C, public
# ---------------------------------------------------------------------------
#
# Each public function first tries the scalar kernel: when every argument is a Python or
# numpy number (not bool) and passes the cheap checks, the answer comes from the math module
# without building an array. Anything else, including every bad value, takes the array path,
# whose capbook.validation checks raise the usual messages naming the argument.

_SCALAR_TYPES = frozenset({int, float, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                           np.uint32, np.uint64, np.float16, np.float32, np.float64})


def _scalar_ca(c, a, finite_load: bool):
    """``(c, a)`` as floats when both are plain numbers in the scalar path's domain (``c`` a whole
    number ≥ 1, ``a`` ≥ 0, and finite when ``finite_load``); None sends the call to the array
    path, whose checks name the bad argument."""
    if type(c) in _SCALAR_TYPES and type(a) in _SCALAR_TYPES:
        cf, af = float(c), float(a)
        if cf >= 1.0 and cf.is_integer() and af >= 0.0 and (af < _INF or not finite_load):
            return cf, af
    return None


def log_erlang_b(c, a):
    """Natural log of the Erlang B blocking probability (see :func:`erlang_b`)."""
    ca = _scalar_ca(c, a, True)
    if ca is not None:
        return _log_erlang_b_s(*ca)
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
    Computed in log space through the regularised incomplete gamma function, and far beyond
    saturation (``a - c ≥ 3√c``) through its continued fraction; no loop over k. Scalar
    arguments take a math-module path (about a microsecond) that agrees with the array path
    to 1e-15. Values below about 1e-308 underflow to 0 (use :func:`log_erlang_b` to keep them).

    Examples
    --------
    >>> round(erlang_b(1, 1.0), 12)
    0.5
    """
    ca = _scalar_ca(c, a, True)
    if ca is not None:
        return _erlang_b_s(*ca)
    cc = array(c, "c", lo=1, integer=True)
    aa = array(a, "a", lo=0)
    return _scalar_or_array(_erlang_b_kernel(cc, aa))


def log_erlang_c(c, a):
    """Natural log of the Erlang C probability of waiting (see :func:`erlang_c`)."""
    ca = _scalar_ca(c, a, False)
    if ca is not None:
        return _log_erlang_c_s(*ca)
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

    Notes
    -----
    Scalar arguments take a math-module path (about a microsecond per call) that agrees with
    the array path to 1e-15 relative; both are within 1e-12 of the exact value.

    Examples
    --------
    >>> round(erlang_c(8, 4.0), 4)   # 8 servers at 50 %
    0.059
    """
    ca = _scalar_ca(c, a, False)
    if ca is not None:
        return _erlang_c_s(*ca)
    cc = array(c, "c", lo=1, integer=True)
    aa = array(a, "a", lo=0, allow_inf=True)
    return _scalar_or_array(_erlang_c_kernel(cc, aa))


def _scalar_loads(c, arrival_rate, service_time_s):
    """(c, a, service_time_s) as floats when all three are valid plain numbers, else None."""
    if type(c) in _SCALAR_TYPES and type(arrival_rate) in _SCALAR_TYPES and type(service_time_s) in _SCALAR_TYPES:
        cf, lam, ts = float(c), float(arrival_rate), float(service_time_s)
        if cf >= 1.0 and cf.is_integer() and 0.0 <= lam < _INF and 0.0 < ts < _INF:
            return cf, lam * ts, ts
    return None


def _loads(c, arrival_rate, service_time_s):
    cc = array(c, "c", lo=1, integer=True)
    lam = array(arrival_rate, "arrival_rate", lo=0)
    t = array(service_time_s, "service_time_s", lo=0, lo_open=True)
    return cc, lam, t, lam * t


def prob_wait(c, arrival_rate, service_time_s):
    """Probability that a request waits for a slot, for ``c`` slots behind one FCFS queue.

    Parameters
    ----------
    c : int or array_like
        Slots in the pool (servers).
    arrival_rate : float or array_like
        Requests per second (Poisson arrivals).
    service_time_s : float or array_like
        Mean seconds each request holds a slot (exponentially distributed).

    Returns
    -------
    float or ndarray
        Erlang C; 1 at or beyond saturation.
    """
    s = _scalar_loads(c, arrival_rate, service_time_s)
    if s is not None:
        return _erlang_c_s(s[0], s[1])
    cc, _, _, a = _loads(c, arrival_rate, service_time_s)
    return _scalar_or_array(_erlang_c_kernel(cc, a))


def mean_wait(c, arrival_rate, service_time_s):
    """Mean time a request waits in the queue before it gets a slot (W_q), seconds.

    ``W_q = C(c, a) × T / (c − a)``; ``inf`` at or beyond saturation.

    Parameters
    ----------
    c : int or array_like
        Slots in the pool.
    arrival_rate : float or array_like
        Requests per second.
    service_time_s : float or array_like
        Mean seconds in service.
    """
    s = _scalar_loads(c, arrival_rate, service_time_s)
    if s is not None:
        cf, a, ts = s
        return _erlang_c_s(cf, a) * ts / (cf - a) if a < cf else _INF
    cc, lam, t, a = _loads(c, arrival_rate, service_time_s)
    cc, a, t = np.broadcast_arrays(cc, a, t)
    out = np.full(cc.shape, np.inf)
    ok = a < cc
    out[ok] = _erlang_c_kernel(cc[ok], a[ok]) * t[ok] / (cc[ok] - a[ok])
    return _scalar_or_array(out)


def prob_wait_exceeds(t, c, arrival_rate, service_time_s):
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
    service_time_s : float or array_like
        Mean seconds in service.

    Examples
    --------
    >>> round(prob_wait_exceeds(0.5, 512, 40, 12.25), 3)   # 16 replicas x 32 slots
    0.095
    """
    if type(t) in _SCALAR_TYPES:
        s = _scalar_loads(c, arrival_rate, service_time_s)
        tf = float(t)
        if s is not None and 0.0 <= tf < _INF:
            return _tail_s(tf, *s)
    tt = array(t, "t", lo=0)
    cc, lam, ts, a = _loads(c, arrival_rate, service_time_s)
    return _scalar_or_array(_tail_kernel(tt, cc, a, ts))


def wait_quantile(q, c, arrival_rate, service_time_s):
    """The wait ``t`` (seconds) that a share ``q`` of requests do not exceed: P(W > t) = 1 − q.

    Zero when at least a share ``q`` of requests do not wait at all; ``inf`` at or beyond
    saturation.

    Parameters
    ----------
    q : float or array_like
        Quantile in (0, 1), e.g. 0.99.
    c, arrival_rate, service_time_s
        As in :func:`prob_wait_exceeds`.
    """
    if type(q) in _SCALAR_TYPES:
        s = _scalar_loads(c, arrival_rate, service_time_s)
        qf = float(q)
        if s is not None and 0.0 < qf < 1.0:
            cf, a, ts = s
            if a >= cf:
                return _INF
            return max(0.0, (_log_erlang_c_s(cf, a) - math.log1p(-qf)) * ts / (cf - a))
    qq = array(q, "q", lo=0, hi=1, lo_open=True, hi_open=True)
    cc, lam, ts, a = _loads(c, arrival_rate, service_time_s)
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

def _tail(t: float, c: float, arrival_rate: float, service_time_s: float) -> float:
    """P(wait > t) for checked scalars: what :func:`prob_wait_exceeds` returns for them."""
    return _tail_s(t, float(c), arrival_rate * service_time_s, service_time_s)


def max_arrival_rate(c, service_time_s, wait_target_s, late_share):
    """Highest arrival rate (requests per second) with ``P(wait > wait_target_s) ≤ late_share`` on ``c`` slots.

    Parameters
    ----------
    c : int
        Slots behind one queue.
    service_time_s : float
        Mean seconds in service.
    wait_target_s : float
        Wait threshold of the SLO, seconds (e.g. 0.5 s of a 1 s TTFT budget).
    late_share : float
        Largest acceptable share of requests waiting longer than ``wait_target_s``, in (0, 1).

    Returns
    -------
    float
        The rate, strictly below saturation ``c / service_time_s``. ``P(wait > wait_target_s)`` increases
        with the rate, so the root is unique; it is found with Brent's method on the log tail.

    Examples
    --------
    >>> round(max_arrival_rate(32, 12.25, 0.5, 0.01), 2)
    1.7
    """
    cc = integer(c, "c", minimum=1)
    ts = positive(service_time_s, "service_time_s")
    tt = nonnegative(wait_target_s, "wait_target_s")
    p = probability(late_share, "late_share")
    log_p = math.log(p)

    fc = float(cc)

    def f(a: float) -> float:
        # log P(wait > wait_target_s) - log late_share, as a function of the offered load a (scalar kernel)
        if a >= fc:
            return -log_p
        return _log_erlang_c_s(fc, a) - (fc - a) * tt / ts - log_p

    hi = cc * (1 - 1e-15)  # strictly below saturation
    if f(hi) <= 0:  # pragma: no cover - only if t is so large the tail vanishes as a -> c
        lam = hi / ts
    else:
        from scipy.optimize import brentq

        a_star = brentq(f, 0.0, hi, xtol=1e-14 * max(1.0, cc), rtol=4 * np.finfo(float).eps, maxiter=500)
        lam = a_star / ts
    # the root is exact only to floating tolerance: step down until the SLO holds as
    # prob_wait_exceeds computes it
    while lam > 0 and _tail(tt, cc, lam, ts) > p:
        lam = math.nextafter(lam, 0.0)
    return float(lam)


def max_utilisation(c, service_time_s, wait_target_s, late_share):
    """Highest utilisation ρ = λT/c meeting ``P(wait > wait_target_s) ≤ late_share`` on ``c`` slots.

    The "safe utilisation" of a pool: it depends on the pool size and on the SLO (grows with
    ``c``; a lone small replica must idle much of its capacity). See :func:`max_arrival_rate`.

    Examples
    --------
    >>> [round(max_utilisation(c, 8.0, 2.0, 0.05), 2) for c in (8, 40, 80, 160)]
    [0.58, 0.85, 0.91, 0.95]
    """
    lam = max_arrival_rate(c, service_time_s, wait_target_s, late_share)
    return float(lam * float(service_time_s) / int(c))


def _slo_args(arrival_rate, slots, service_time_s, wait_target_s, late_share):
    lam = positive(arrival_rate, "arrival_rate")
    s = integer(slots, "slots", minimum=1)
    ts = positive(service_time_s, "service_time_s")
    tt = nonnegative(wait_target_s, "wait_target_s")
    p = probability(late_share, "late_share")
    return lam, s, ts, tt, p


def replicas_pooled(arrival_rate, slots, service_time_s, wait_target_s, late_share):
    """Fewest replicas meeting ``P(wait > wait_target_s) ≤ late_share`` when all share one queue.

    Load-aware routing (a shared queue, or join-shortest-queue on free slots) makes the fleet
    one M/M/c with ``c = replicas × slots``.

    Parameters
    ----------
    arrival_rate : float
        Peak requests per second.
    slots : int
        Slots per replica (S).
    service_time_s : float
        Mean seconds in service (T).
    wait_target_s : float
        Wait threshold, seconds.
    late_share : float
        Largest acceptable share of requests waiting longer than ``wait_target_s``.

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
    lam, s, ts, tt, p = _slo_args(arrival_rate, slots, service_time_s, wait_target_s, late_share)
    n0 = max(1, math.floor(lam * ts / s) + 1)  # smallest n strictly above saturation
    return fewest(lambda n: _tail(tt, n * s, lam, ts) <= p, n0, what="replicas in the pool")


def replicas_isolated(arrival_rate, slots, service_time_s, wait_target_s, late_share):
    """Fewest replicas meeting the SLO when each replica keeps its own queue.

    Random or round-robin routing splits the traffic evenly but blindly: each replica is an
    isolated M/M/S fed ``arrival_rate / n`` (exact for random splitting of Poisson arrivals;
    round-robin is a little better than this but loses most of the pooling).

    Parameters
    ----------
    arrival_rate, slots, service_time_s, wait_target_s, late_share
        As in :func:`replicas_pooled`.

    Returns
    -------
    int

    Examples
    --------
    >>> replicas_isolated(40, 32, 12.25, 0.5, 0.01)
    24
    """
    lam, s, ts, tt, p = _slo_args(arrival_rate, slots, service_time_s, wait_target_s, late_share)
    n0 = max(1, math.floor(lam * ts / s) + 1)
    return fewest(lambda n: _tail(tt, s, lam / n, ts) <= p, n0, what="isolated replicas")


def replicas_by_mean(arrival_rate, slots, service_time_s):
    """Replicas a spreadsheet buys from the mean alone: ``ceil(arrival_rate × T / slots)``.

    This is the Little's-law floor rounded up: no queueing headroom at all.

    Examples
    --------
    >>> replicas_by_mean(40, 32, 12.25)
    16
    """
    lam = positive(arrival_rate, "arrival_rate")
    s = integer(slots, "slots", minimum=1)
    ts = positive(service_time_s, "service_time_s")
    # guard against 15.999999 from floating error
    return int(math.ceil(lam * ts / s - 1e-12))


# ---------------------------------------------------------------------------
# Variability and heavy traffic
# ---------------------------------------------------------------------------

def allen_cunneen_wait(c, arrival_rate, service_time_s, ca2, cs2):
    r"""Allen–Cunneen approximation of the mean queue wait in a G/G/c queue, seconds.

    .. math:: W_q(G/G/c) \approx W_q(M/M/c)\,\frac{C_a^2 + C_s^2}{2}

    Parameters
    ----------
    c, arrival_rate, service_time_s
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
    w = np.asarray(mean_wait(c, arrival_rate, service_time_s))
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
    # log Φ(β) − log φ(β), with log φ(β) = −β²/2 − ½ log 2π (scipy.stats.norm's logcdf and logpdf)
    ratio = b * np.exp(special.log_ndtr(b) + 0.5 * b * b + 0.5 * math.log(2 * math.pi))
    return _scalar_or_array(1.0 / (1.0 + ratio))


def halfin_whitt_beta(target_prob_wait):
    """The β with Halfin–Whitt probability of waiting equal to ``target_prob_wait``."""
    p = probability(target_prob_wait, "target_prob_wait")
    f = lambda b: math.log(halfin_whitt_prob_wait(b)) - math.log(p)  # noqa: E731
    hi = 1.0
    while f(hi) > 0:
        hi *= 2
    from scipy.optimize import brentq

    return brentq(f, 1e-12, hi, xtol=1e-14)


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
