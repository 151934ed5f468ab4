r"""A load-dependent queue model of continuous-batching replicas, built from a measured sweep.

M/M/c assumes every server works at a fixed speed. A continuous-batching engine does not: each
decode step advances every running sequence, and the step gets longer as the batch grows, so
every sequence slows down when another one is admitted. This module keeps that fact and stays
exactly solvable.

The model
---------
A replica (or a pool of ``replicas`` replicas behind one queue) is a birth–death process on
``k``, the number of requests in the system. With ``m = min(k, c)`` sequences running on
``c = replicas × slots`` slots, spread evenly over the replicas, requests complete at rate

.. math:: \mu_k = \frac{m}{T(m / \text{replicas})},\qquad
          T(n) = \text{prefill} + \text{output tokens} \times \mathrm{TPOT}(n),

where ``TPOT(n)`` is the measured time per output token at concurrency ``n`` (interpolated in
the sweep). Arrivals are Poisson at rate λ. At most ``waiting_room`` requests wait (``K``;
``None`` for an unbounded queue); an arrival that finds the waiting room full is rejected, so
blocking is part of the answer.

What is solved exactly
----------------------
* the stationary distribution ``π_k`` (product form, in log space);
* throughput, blocking probability, probability of waiting, mean wait (Little's law on the
  queue);
* the FCFS waiting-time tail: an arrival that finds ``k ≥ c`` requests waits for ``k − c + 1``
  completions, each at the full-batch rate ``μ_c`` (all slots stay busy while anyone waits), so
  its wait is Erlang(k − c + 1, μ_c) and

  .. math:: P(W > t) = \sum_{k \ge c} \pi^a_k\, Q(k - c + 1, \mu_c t)

  with ``Q`` the regularised upper incomplete gamma function and ``π^a`` the distribution seen
  by admitted arrivals (PASTA). For an unbounded queue the sum has the closed form
  ``P(wait) e^{−(μ_c − λ) t}``;
* TTFT = wait + prefill at the load where the request starts (the sweep's TTFT at that
  concurrency, which includes the interference of other prompts' prefills);
* the TPOT a running sequence sees: the distribution of the running count weighted by the
  number of sequences that see it.

With a flat TPOT curve and an unbounded queue the model is exactly M/M/c (Erlang C).

What it leaves out (see the chapter *Where the textbook breaks*): service times are
exponential around their load-dependent mean (real output lengths have long tails), prefill
interference enters only through the measured TTFT and TPOT curves, and join-shortest-queue
balance across replicas is assumed perfect in the pooled version.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from scipy import special

from capbook.validation import array, fewest, integer, nonnegative, positive, probability

__all__ = [
    "LoadDependentQueue",
    "QueueSolution",
    "from_sweep",
    "max_rate",
    "replicas_needed",
    "kv_bytes_per_token",
    "kv_slots",
    "slots_binding",
    "SlotsBinding",
]


@dataclass
class QueueSolution:
    """The steady state of a :class:`LoadDependentQueue` at one arrival rate.

    Attributes are in requests, requests per second and seconds.
    """

    arrival_rate: float
    servers: int
    pi: np.ndarray = field(repr=False)          # P(k in system), k = 0..len-1 (truncated when K is None)
    tail_ratio: float = field(repr=False)       # geometric ratio beyond the truncation (K is None)
    mu_full: float = field(repr=False)          # completion rate with every slot busy, 1/s
    stable: bool
    prob_block: float
    prob_wait: float
    mean_wait: float
    throughput: float
    mean_in_system: float
    mean_running: float
    _model: "LoadDependentQueue" = field(repr=False)

    # -- waiting-time and TTFT tails ---------------------------------------------------------
    def prob_wait_exceeds(self, t) -> np.ndarray | float:
        """P(wait > t) for an admitted request (FCFS), ``t`` in seconds (array allowed)."""
        t = array(t, "t", lo=0)
        if not self.stable:
            out = np.ones_like(t)
            return out[()] if out.ndim == 0 else out
        c = self.servers
        model = self._model
        if model.waiting_room is None:
            out = self.prob_wait * np.exp(-(self.mu_full - self.arrival_rate) * t)
        else:
            pa = self._arrival_probs()
            k = np.arange(c, len(pa))
            w = pa[c:]
            shape = (k - c + 1).astype(float)
            out = np.sum(w[:, None] * special.gammaincc(shape[:, None], self.mu_full * t.ravel()[None, :]), axis=0)
            out = out.reshape(t.shape)
        out = np.clip(out, 0.0, 1.0)
        return out[()] if out.ndim == 0 else out

    def wait_quantile(self, q: float) -> float:
        """The wait (s) that a share ``q`` of admitted requests do not exceed."""
        q = probability(q, "q")
        if not self.stable:
            return math.inf
        if self.prob_wait <= 1 - q:
            return 0.0
        if self._model.waiting_room is None:
            return math.log(self.prob_wait / (1 - q)) / (self.mu_full - self.arrival_rate)
        return _invert_tail(self.prob_wait_exceeds, 1 - q, 1.0 / self.mu_full)

    def prob_ttft_exceeds(self, x) -> np.ndarray | float:
        """P(TTFT > x) for an admitted request: wait plus the prefill at the load it starts at.

        A request that finds ``k < c`` in the system starts at once with ``k + 1`` running
        (TTFT = prefill(k + 1)); one that waits starts when a slot frees, with every slot busy
        (TTFT = wait + prefill(c)).
        """
        x = array(x, "x", lo=0)
        if not self.stable:
            out = np.ones_like(x)
            return out[()] if out.ndim == 0 else out
        model = self._model
        c = self.servers
        pa = self._arrival_probs()
        k = np.arange(min(c, len(pa)))
        pf_now = model.prefill_at(np.minimum(k + 1, c) / model.replicas)
        no_wait = np.sum(pa[: len(k)][:, None] * (pf_now[:, None] > x.ravel()[None, :]), axis=0)
        pf_full = float(model.prefill_at(c / model.replicas))
        resid = np.maximum(x.ravel() - pf_full, 0.0)
        waited = np.asarray(self.prob_wait_exceeds(resid), dtype=float)
        # requests that wait: TTFT > x iff wait > x - pf_full (always, when x < pf_full)
        waited = np.where(x.ravel() < pf_full, self.prob_wait, waited)
        out = (no_wait + waited).reshape(x.shape)
        out = np.clip(out, 0.0, 1.0)
        return out[()] if out.ndim == 0 else out

    def ttft_quantile(self, q: float) -> float:
        """The TTFT (s) that a share ``q`` of admitted requests do not exceed."""
        q = probability(q, "q")
        if not self.stable:
            return math.inf
        start = float(self._model.prefill_at(self.servers / self._model.replicas)) + 1.0 / self.mu_full
        return _invert_tail(self.prob_ttft_exceeds, 1 - q, start)

    def running_seen_by_sequence(self) -> tuple[np.ndarray, np.ndarray]:
        """Distribution of per-replica running sequences seen by a sequence in service.

        Returns ``(n, p)``: per-replica concurrency values and their probabilities, weighted by
        how many sequences run at each state (a sequence's view, not the clock's).
        """
        pi = self._full_pi().copy()
        if self._model.waiting_room is None and len(pi) == self.servers + 1:
            pi[-1] = self.prob_wait  # the geometric tail: every state k >= c runs c sequences
        k = np.arange(len(pi))
        m = np.minimum(k, self.servers)
        w = pi * m
        if w.sum() == 0:
            return np.array([1.0 / self._model.replicas]), np.array([1.0])
        w = w / w.sum()
        keep = m > 0
        return m[keep] / self._model.replicas, w[keep]

    def tpot_quantile(self, q: float = 0.5, tpot: Callable | None = None) -> float:
        """TPOT (s) at the ``q``-quantile of the running count a sequence sees.

        Parameters
        ----------
        q : float
            Quantile of the running count, in (0, 1).
        tpot : callable, optional
            TPOT curve to read at that count (default: the model's own, usually the sweep's
            p50; pass ``lambda n: sweep.tpot(n, 95)`` for a p95 target).
        """
        q = probability(q, "q")
        n, p = self.running_seen_by_sequence()
        cdf = np.cumsum(p)
        idx = int(np.searchsorted(cdf, q - 1e-12))
        n_q = n[min(idx, len(n) - 1)]
        f = tpot or self._model.tpot_at
        return float(f(max(n_q, 1e-9)))

    # -- helpers --------------------------------------------------------------------------------
    def _full_pi(self) -> np.ndarray:
        return self.pi

    def _arrival_probs(self) -> np.ndarray:
        """Distribution of the number in system seen by an admitted arrival."""
        pi = self.pi
        if self._model.waiting_room is None:
            return pi
        cap = len(pi) - 1  # state c + K: arrivals rejected
        pa = pi[:cap] / (1.0 - pi[cap])
        return pa


def _invert_tail(tail, share: float, start: float) -> float:
    """Smallest t with ``tail(t) <= share`` for a non-increasing tail (bisection, relative 1e-9)."""
    hi = start
    while tail(hi) > share:
        hi *= 2
    lo = 0.0
    while hi - lo > 1e-9 * hi:
        mid = 0.5 * (lo + hi)
        if tail(mid) > share:
            lo = mid
        else:
            hi = mid
    return hi


class LoadDependentQueue:
    """Birth–death model of continuous-batching replicas (see the module docstring).

    Parameters
    ----------
    slots : int
        Sequences each replica runs at most (S).
    service_time_s : callable
        ``T(n)``: seconds a request holds a slot when ``n`` sequences run on its replica
        (vectorised over ``n``, defined on ``0 < n <= slots``).
    prefill : callable or float, optional
        Time to first token without queueing at per-replica concurrency ``n``, seconds
        (default 0). The sweep's p50 TTFT curve is the natural choice.
    tpot : callable, optional
        TPOT(n) in seconds, used for the TPOT a running sequence sees.
    replicas : int
        Replicas behind one shared queue (1 for a single replica, or for each replica of a
        round-robin fleet fed its share of the traffic).
    waiting_room : int or None
        Most requests that may wait (K ≥ 0); None for an unbounded queue.
    """

    def __init__(self, slots, service_time_s: Callable, prefill=0.0, tpot: Callable | None = None,
                 replicas: int = 1, waiting_room: int | None = None):
        self.slots = integer(slots, "slots", minimum=1)
        self.replicas = integer(replicas, "replicas", minimum=1)
        if waiting_room is not None:
            waiting_room = integer(waiting_room, "waiting_room", minimum=0)
        self.waiting_room = waiting_room
        if not callable(service_time_s):
            raise ValueError("service_time_s must be a callable T(n) giving seconds at concurrency n")
        self._T = service_time_s
        self._prefill = prefill if callable(prefill) else (lambda n, v=float(prefill): np.full_like(np.asarray(n, float), v))
        self._tpot = tpot
        n = np.arange(1, self.slots + 1, dtype=float)
        T = np.asarray(self._T(n), dtype=float)
        if T.shape != n.shape or np.any(~np.isfinite(T)) or np.any(T <= 0):
            raise ValueError("service_time_s(n) must return positive finite seconds for n = 1..slots")
        self._T_grid = T

    @property
    def servers(self) -> int:
        """Slots in the pool, ``replicas × slots``."""
        return self.replicas * self.slots

    def service_time_at(self, n):
        """T at per-replica concurrency ``n`` (s); below one sequence, T(1)."""
        n = np.maximum(np.asarray(n, dtype=float), 1.0)
        return np.asarray(self._T(n), dtype=float)

    def prefill_at(self, n):
        """Prefill (TTFT without queueing) at per-replica concurrency ``n`` (s)."""
        n = np.maximum(np.asarray(n, dtype=float), 1.0)
        return np.asarray(self._prefill(n), dtype=float)

    def tpot_at(self, n):
        """TPOT at per-replica concurrency ``n`` (s)."""
        if self._tpot is None:
            raise ValueError("this model was built without a TPOT curve")
        n = np.maximum(np.asarray(n, dtype=float), 1.0)
        return float(np.asarray(self._tpot(n), dtype=float))

    def completion_rates(self) -> np.ndarray:
        """μ_k for k = 1..c (requests per second); constant at μ_c beyond ``c``."""
        c = self.servers
        m = np.arange(1, c + 1, dtype=float)
        return m / self.service_time_at(m / self.replicas)

    @property
    def max_throughput(self) -> float:
        """Completion rate with every slot busy, requests per second (the saturation rate)."""
        return float(self.completion_rates()[-1])

    def solve(self, arrival_rate) -> QueueSolution:
        """Steady state at ``arrival_rate`` requests per second (Poisson)."""
        lam = nonnegative(arrival_rate, "arrival_rate")
        c = self.servers
        mu = self.completion_rates()
        mu_c = float(mu[-1])
        K = self.waiting_room
        if lam == 0:
            pi = np.zeros(c + 1 if K is None else c + K + 1)
            pi[0] = 1.0
            return QueueSolution(0.0, c, pi, 0.0, mu_c, True, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, self)
        # log of unnormalised pi_k for k = 0..c
        log_r = np.log(lam) - np.log(mu)
        log_head = np.concatenate([[0.0], np.cumsum(log_r)])  # k = 0..c
        r = lam / mu_c
        if K is None:
            if r >= 1:
                pi = np.zeros(c + 1)
                return QueueSolution(lam, c, pi, r, mu_c, False, 0.0, 1.0, math.inf, mu_c, math.inf, float(c), self)
            # geometric tail beyond c: sum_{j>=1} r^j = r / (1 - r)
            m = log_head.max()
            head = np.exp(log_head - m)
            tail_mass = head[-1] * r / (1 - r)
            Z = head.sum() + tail_mass
            pi = head / Z
            p_c = pi[-1]
            prob_wait = p_c / (1 - r)  # P(k >= c)
            Lq = p_c * r / (1 - r) ** 2
            mean_in_queue = Lq
            k = np.arange(c + 1)
            mean_running = float(np.sum(k * pi) + c * (prob_wait - p_c))
            throughput = lam
            mean_wait = Lq / lam
            mean_in_system = mean_running + Lq
            return QueueSolution(lam, c, pi, r, mu_c, True, 0.0, float(prob_wait), float(mean_wait),
                                 throughput, float(mean_in_system), mean_running, self)
        # finite waiting room: states c+1..c+K
        log_tail = log_head[-1] + np.arange(1, K + 1) * math.log(r)
        log_all = np.concatenate([log_head, log_tail])
        m = log_all.max()
        w = np.exp(log_all - m)
        pi = w / w.sum()
        k = np.arange(len(pi))
        p_block = float(pi[-1])
        pa = pi[:-1] / (1 - p_block)
        prob_wait = float(pa[c:].sum())
        Lq = float(np.sum(np.maximum(k - c, 0) * pi))
        throughput = lam * (1 - p_block)
        mean_running = float(np.sum(np.minimum(k, c) * pi))
        mean_wait = Lq / throughput
        return QueueSolution(lam, c, pi, r, mu_c, True, p_block, prob_wait, mean_wait, throughput,
                             float(np.sum(k * pi)), mean_running, self)


def from_sweep(sweep, slots: int, replicas: int = 1, waiting_room: int | None = None,
               input_tokens: float | None = None, output_tokens: float | None = None,
               q: int | str | None = None, check: bool = True) -> LoadDependentQueue:
    """Build the load-dependent model of one replica (or a pooled fleet) from a sweep.

    Parameters
    ----------
    sweep : capbook.sweeps.sweep.Sweep
        Measured (or modelled) concurrency sweep.
    slots : int
        Slots per replica (S), at most the sweep's highest measured concurrency.
    replicas : int
        Replicas sharing one queue.
    waiting_room : int or None
        Queue limit K (None: unbounded).
    input_tokens, output_tokens : float, optional
        Request lengths (tokens); default: the sweep's mean lengths.
    q : {50, 95, 99}, "mean" or None
        TPOT statistic of the service time (as in :meth:`capbook.sweeps.sweep.Sweep.service_time_s`;
        None: the mean where the sweep reports it, else the median).
    check : bool
        Refuse sweeps that cannot support the model (fewer than three levels, or throughput
        n / T(n) falling as n grows within 1..slots).
    """
    slots = integer(slots, "slots", minimum=1)
    levels = np.asarray(sweep.concurrency, dtype=float)
    if check and len(levels) < 3:
        raise ValueError(
            f"sweep {getattr(sweep, 'name', '')!r} has {len(levels)} concurrency levels; the "
            "load-dependent model needs at least 3 to interpolate TPOT(n)"
        )
    if slots > levels.max():
        raise ValueError(
            f"slots={slots} exceeds the sweep's highest measured concurrency {levels.max():g}: "
            "the model would extrapolate TPOT beyond the data"
        )
    tab = sweep.table
    inp = float(tab["mean_input_tokens"].mean()) if input_tokens is None else positive(input_tokens, "input_tokens")
    out = float(tab["mean_output_tokens"].mean()) if output_tokens is None else positive(output_tokens, "output_tokens")
    pf = inp / sweep.prefill_rate_tps
    lo = levels.min()
    q = sweep.holding_statistic if q is None else q

    def tpot(n):
        return sweep.tpot(np.clip(n, lo, None), q)

    def T(n):
        return pf + out * tpot(n)

    def prefill(n):
        # the sweep's TTFT at that concurrency, scaled to this prompt length
        base = sweep.ttft(np.clip(n, lo, None), 50)
        scale = inp / float(tab["mean_input_tokens"].mean())
        return base * scale

    if check:
        n = np.arange(1, slots + 1, dtype=float)
        thr = n / T(n)
        drops = np.where(np.diff(thr) < -1e-9 * thr[1:])[0]
        if drops.size:
            i = int(drops[0]) + 1
            raise ValueError(
                f"sweep {getattr(sweep, 'name', '')!r}: throughput n/T(n) falls from n={i} to n={i + 1} "
                f"({thr[i - 1]:.4g} -> {thr[i]:.4g} req/s) within slots={slots}; the engine is past its "
                "throughput peak there, so choose fewer slots"
            )
    return LoadDependentQueue(slots, T, prefill=prefill, tpot=tpot, replicas=replicas, waiting_room=waiting_room)


def max_rate(model: LoadDependentQueue, ttft_target_s: float, ttft_quantile: float = 0.99,
             tpot_target_s: float | None = None, tpot_quantile: float = 0.95,
             tpot_curve: Callable | None = None, tol: float = 1e-6) -> float:
    """Highest arrival rate (req/s) meeting a TTFT tail and a TPOT target at once.

    Parameters
    ----------
    model : LoadDependentQueue
    ttft_target_s : float
        TTFT objective, seconds: the ``ttft_quantile`` of TTFT must not exceed it.
    ttft_quantile : float
        e.g. 0.99 for a p99 objective.
    tpot_target_s : float, optional
        TPOT objective, seconds, read at the ``tpot_quantile`` of the running count a sequence
        sees (on ``tpot_curve``, default the model's TPOT curve).
    tol : float
        Relative tolerance of the bisection on the rate.

    Returns
    -------
    float
        Requests per second (0 when even a trickle misses the objective). The TTFT tail and the
        running count both grow with the rate, so bisection finds the boundary.
    """
    ttft_target_s = positive(ttft_target_s, "ttft_target_s")
    ttft_quantile = probability(ttft_quantile, "ttft_quantile")
    if tpot_target_s is not None:
        tpot_target_s = positive(tpot_target_s, "tpot_target_s")
        tpot_quantile = probability(tpot_quantile, "tpot_quantile")

    def ok(lam):
        sol = model.solve(lam)
        if not sol.stable:
            return False
        if sol.prob_ttft_exceeds(ttft_target_s) > 1 - ttft_quantile:
            return False
        if tpot_target_s is not None and sol.tpot_quantile(tpot_quantile, tpot_curve) > tpot_target_s:
            return False
        return True

    hi = model.max_throughput * (1 - 1e-9) if model.waiting_room is None else model.max_throughput * 4
    rate = highest_passing(ok, hi * 1e-9, hi, tol)
    return 0.0 if rate is None else rate


def highest_passing(ok: Callable, lo: float, hi: float, rtol: float) -> float | None:
    """Highest ``x`` in ``[lo, hi]`` with ``ok(x)`` for a test that holds below a boundary and
    fails above it (bisection to a relative width ``rtol``): ``hi`` when it passes, None when
    ``lo`` already fails."""
    if not ok(lo):
        return None
    if ok(hi):
        return hi
    while hi - lo > rtol * hi:
        mid = 0.5 * (lo + hi)
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


def replicas_needed(sweep, arrival_rate: float, slots: int, ttft_target_s: float, ttft_quantile: float = 0.99,
                    tpot_target_s: float | None = None, pooled: bool = True, waiting_room: int | None = None,
                    **kwargs) -> int:
    """Fewest replicas meeting the TTFT tail (and TPOT target) at ``arrival_rate`` req/s.

    ``pooled=True``: all replicas behind one queue; ``False``: each replica its own queue fed
    ``arrival_rate / n`` (random or round-robin routing).
    """
    lam = positive(arrival_rate, "arrival_rate")

    def ok(n):
        if pooled:
            model = from_sweep(sweep, slots, replicas=n, waiting_room=waiting_room, **kwargs)
            return max_rate(model, ttft_target_s, ttft_quantile, tpot_target_s) >= lam
        model = from_sweep(sweep, slots, replicas=1, waiting_room=waiting_room, **kwargs)
        return max_rate(model, ttft_target_s, ttft_quantile, tpot_target_s) * n >= lam

    if waiting_room is None:
        # at or below the stability floor an unbounded queue grows: no n <= lam / mu_1 passes
        one = from_sweep(sweep, slots, **kwargs)
        start = max(1, math.floor(lam / one.max_throughput))
    else:  # with a waiting room, blocking lets a fleet below saturation pass
        start = 1
    try:
        return fewest(ok, start, what="replicas", limit=1 << 20)
    except ValueError:
        raise ValueError("no fleet size meets these objectives (is the TTFT target below the prefill "
                         "time?)") from None


# ---------------------------------------------------------------------------
# KV-cache-limited slots
# ---------------------------------------------------------------------------

def kv_bytes_per_token(layers: int, kv_heads: int, head_dim: int, bytes_per_value: float = 2.0) -> float:
    """KV-cache bytes per token: ``2 (K and V) × layers × kv_heads × head_dim × bytes``.

    Examples
    --------
    >>> kv_bytes_per_token(32, 8, 128, 2)   # Llama-3.1-8B in bf16: 128 KiB per token
    131072.0
    """
    layers = integer(layers, "layers", minimum=1)
    kv_heads = integer(kv_heads, "kv_heads", minimum=1)
    head_dim = integer(head_dim, "head_dim", minimum=1)
    b = positive(bytes_per_value, "bytes_per_value")
    return 2.0 * layers * kv_heads * head_dim * b


def kv_slots(free_memory_bytes: float, bytes_per_token: float, context_tokens: float) -> int:
    """Sequences whose KV cache fits in ``free_memory_bytes`` at ``context_tokens`` each.

    Parameters
    ----------
    free_memory_bytes : float
        GPU memory left for the KV cache after weights and activations, bytes (summed over
        the tensor-parallel group).
    bytes_per_token : float
        KV bytes per token (:func:`kv_bytes_per_token`).
    context_tokens : float
        Tokens each sequence holds at its longest (input + output), tokens.
    """
    mem = positive(free_memory_bytes, "free_memory_bytes")
    bpt = positive(bytes_per_token, "bytes_per_token")
    ctx = positive(context_tokens, "context_tokens")
    return int(mem // (bpt * ctx))


@dataclass(frozen=True)
class SlotsBinding:
    """Slots from the TPOT target beside slots from KV-cache memory: the smaller binds."""

    slots_tpot: int
    slots_memory: int

    @property
    def slots(self) -> int:
        return min(self.slots_tpot, self.slots_memory)

    @property
    def binding(self) -> str:
        return "KV-cache memory" if self.slots_memory < self.slots_tpot else "TPOT target"


def slots_binding(slots_tpot: int, free_memory_bytes: float, bytes_per_token: float,
                  context_tokens: float) -> SlotsBinding:
    """Compare S from the TPOT target with S from KV-cache memory; report which binds."""
    s = integer(slots_tpot, "slots_tpot", minimum=1)
    return SlotsBinding(s, kv_slots(free_memory_bytes, bytes_per_token, context_tokens))
