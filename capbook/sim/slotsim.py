r"""Discrete-event simulator of an LLM serving fleet.

Three steps, as in Ciw: describe the fleet, create a simulation, run it.

>>> from capbook.sim.slotsim import FleetSpec, FixedService, Simulation
>>> from capbook.sim.arrivals import PoissonArrivals
>>> from capbook.sim.distributions import Exponential
>>> fleet = FleetSpec(replicas=4, slots=8, service=FixedService(Exponential(1.0)))
>>> result = Simulation(fleet, PoissonArrivals(28.0), n_requests=20_000, seed=1).run()
>>> result.records.columns[:6].tolist()
['request_id', 'attempt', 'class', 'arrival', 'start', 'first_token']

**The fleet.** ``replicas`` replicas with ``slots`` slots each (a slot is one sequence in flight). A request
holds a slot from *start* to *end*. Two service models:

* :class:`FixedService` — the holding time is drawn independently of load (exponential,
  deterministic, lognormal, …). The first token is counted at the start of service, so TTFT
  equals the queue wait. This is the M/G/c model the closed forms of :mod:`capbook.queueing`
  describe, and the mode used to check the simulator against theory.
* :class:`ContinuousBatching` — service from tokens. A request first prefills its prompt
  (``input_tokens / prefill_rate_tps`` seconds; the first token appears at the end of prefill),
  then decodes its remaining ``output_tokens - 1`` tokens. Every decoding sequence on a replica
  advances at the same rate, one token per ``TPOT(n)`` seconds, where ``n`` is the number of
  sequences on that replica at that moment (prefilling and decoding). When ``n`` changes, every
  sequence on the replica speeds up or slows down. The engine keeps, per replica, a *virtual
  token clock* :math:`V(t)` with :math:`dV/dt = 1/\mathrm{TPOT}(n(t))`; a sequence that enters
  decode at clock value :math:`V_0` with :math:`k` tokens to go finishes when
  :math:`V = V_0 + k`. So there are no per-token events: a few events per request, whatever its
  length (a fluid model of token progress, exact for the piecewise-constant rate).

**Routing** (``FleetSpec.routing``, names from :mod:`capbook.routing`): ``"pooled"`` (one queue
for the whole fleet; a free slot takes the head of the queue; an arrival that finds free slots
goes to the replica with the most free slots), ``"jsq"`` (join the replica with the fewest
outstanding requests, i.e. the most free slots or the shortest queue), ``"p2c"`` (power of two
choices: the less loaded of two replicas picked at random), ``"strict-round-robin"`` (one
dispatcher cycling through the replicas) and ``"random"``; the synonyms ``"load-aware"``,
``"least-outstanding"``, ``"cyclic"`` and ``"per-replica"`` run as the rule they stand for. All
but ``"pooled"`` keep one queue per replica, fixed at arrival.

**Admission control** (:class:`Admission`) rejects an arrival with a 429 and a ``Retry-After``
hint when it would have to queue and the queue ahead of it, or the wait estimated from it,
exceeds a budget. Clients (:class:`RetryPolicy`) retry rejections with jittered exponential
backoff honouring the hint, or immediately (retry storms), and may time out and re-send while
the abandoned attempt still holds its place (the server does not know the client left).
Priority classes are served strictly in order (non-preemptive).

**Performance.** FCFS runs with fixed service, no admission control and no retries take a fast path: the
c-server FCFS recursion with a heap of slot-free times (pooled queue), per replica for the
state-independent routings (strict round-robin, random). Everything else runs on capbook's one
discrete-event core (:mod:`capbook.sim.eventcore`, shared with the engine-replica fleet of
:mod:`capbook.sim.fleetsim` and the autoscaling simulator), as its slot mode (:class:`_SlotFleet`,
one method per kind of event): a binary heap of timed events plus, per replica, the time of its
next decode completion. ``Simulation.run(engine="event")`` forces the event core (tests use it
to check that both agree exactly on the same draws).
"""
from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass
from heapq import heappop, heappush

import numpy as np
import pandas as pd

from capbook.sim.arrivals import ArrivalStream, PoissonArrivals, RenewalArrivals, TraceArrivals
from capbook.sim.distributions import Empirical, as_distribution
from capbook.sim.eventcore import EventCore
from capbook.routing import dispatch
from capbook.validation import array, choice, integer, nonnegative, positive

__all__ = [
    "FixedService",
    "ContinuousBatching",
    "Admission",
    "RetryPolicy",
    "FleetSpec",
    "Simulation",
    "SimResult",
    "simulate",
]

_NAN = math.nan
_INF = math.inf


# --------------------------------------------------------------------------- service models


class FixedService:
    """Holding times drawn independently of load (the M/G/c model of the closed forms).

    Parameters
    ----------
    distribution : Distribution, float or array_like
        Holding time per request, seconds: a distribution object from
        :mod:`capbook.sim.distributions`, a constant, or an explicit array of holding times used in
        request order (for replaying the same draws in another simulator).

    Notes
    -----
    With fixed service the first token is counted at the start of service: TTFT = wait, and
    TPOT is not defined (``NaN`` in the records).
    """

    def __init__(self, distribution):
        if isinstance(distribution, (list, tuple, np.ndarray)):
            times = array(distribution, "distribution", lo=0.0, nonempty=True).ravel()
            self.times = times
            self.distribution = None
            self.mean_s = float(times.mean())
        else:
            self.distribution = as_distribution(distribution, "distribution")
            self.times = None
            self.mean_s = float(self.distribution.mean)

    def _draw(self, rng, n):
        if self.times is not None:
            if self.times.size < n:
                raise ValueError(f"FixedService has {self.times.size} service times but the run has {n} requests")
            return self.times[:n].copy()
        return np.asarray(self.distribution.sample(rng, n), dtype=float)

    def __repr__(self):
        inner = self.distribution if self.distribution is not None else f"times[{self.times.size}]"
        return f"FixedService({inner!r})"


class ContinuousBatching:
    """Service from tokens with continuous batching (load-dependent decode speed).

    Parameters
    ----------
    tpot : Sweep, callable, float or array_like
        Seconds per output token as a function of the number of sequences running on the
        replica: an object with a vectorised ``tpot(concurrency)`` method (a
        :class:`capbook.sweeps.sweep.Sweep`), a callable ``f(n)`` (say a fitted
        :class:`capbook.engine.stepmodel.StepCost`'s decode step, ``lambda n: cost.step(n, 0)``), a
        constant, or a table whose entry ``i`` is the TPOT at concurrency ``i + 1``.
    prefill_rate_tps : float, optional
        Prefill speed, input tokens per second (``inf`` for instant prefill). Defaults to the
        ``prefill_rate_tps`` attribute of ``tpot`` (a sweep). A ``tpot`` object
        with a ``prefill_time(input_tokens)`` method is used for prefill instead.
    input_tokens, output_tokens : Distribution, float or array_like, optional
        Token counts for synthetic arrivals (a distribution, a constant, or observed values to
        resample). Ignored for a replayed trace, which brings its own. Draws are rounded to
        whole tokens; output tokens are at least 1.
    max_output_tokens : int, optional
        Cap on output tokens (a gateway ``max_tokens``): longer requests are cut to the cap.
    """

    def __init__(self, tpot, prefill_rate_tps: float | None = None, input_tokens=None,
                 output_tokens=None, max_output_tokens: int | None = None):
        self.tpot_source = tpot
        if prefill_rate_tps is None:
            prefill_rate_tps = getattr(tpot, "prefill_rate_tps", None)
        if prefill_rate_tps is None and not hasattr(tpot, "prefill_time"):
            raise ValueError("prefill_rate_tps (input tokens per second) is required when tpot does not carry it")
        if prefill_rate_tps is not None:
            prefill_rate_tps = positive(prefill_rate_tps, "prefill_rate_tps", allow_inf=True)
        self.prefill_rate_tps = prefill_rate_tps
        self.input_tokens = None if input_tokens is None else _token_dist(input_tokens, "input_tokens")
        self.output_tokens = None if output_tokens is None else _token_dist(output_tokens, "output_tokens")
        if max_output_tokens is not None:
            max_output_tokens = integer(max_output_tokens, "max_output_tokens", minimum=1)
        self.max_output_tokens = max_output_tokens

    def tpot_table(self, slots: int) -> np.ndarray:
        """TPOT (seconds) at concurrency ``0..slots`` (entry 0 repeats entry 1).

        From a sweep whose lowest level is above 1 (an open-loop sweep's levels are Little's
        law's, 5.1 say), fewer sequences than that lowest level run at its TPOT: no faster than
        measured, and no extrapolation below the data.
        """
        n = np.arange(1, slots + 1)
        src = self.tpot_source
        if hasattr(src, "tpot"):
            lowest = float(np.min(getattr(src, "concurrency", [1.0])))
            vals = np.asarray(src.tpot(np.maximum(n, lowest)), dtype=float)
        elif callable(src):
            vals = np.asarray(src(n), dtype=float)
        else:
            arr = np.asarray(src, dtype=float)
            if arr.ndim == 0:
                vals = np.full(slots, float(arr))
            else:
                arr = arr.ravel()
                if arr.size < slots:
                    raise ValueError(f"the tpot table covers concurrency 1..{arr.size} but replicas have {slots} slots")
                vals = arr[:slots]
        vals = np.broadcast_to(vals, (slots,)).astype(float)
        bad = ~np.isfinite(vals) | (vals <= 0)
        if bad.any():
            raise ValueError(f"tpot must be positive and finite; at concurrency {int(np.flatnonzero(bad)[0]) + 1} it is {vals[bad][0]!r}")
        return np.concatenate([vals[:1], vals])

    def prefill_times(self, input_tokens: np.ndarray) -> np.ndarray:
        """Prefill duration in seconds for each prompt."""
        if hasattr(self.tpot_source, "prefill_time"):
            out = np.asarray(self.tpot_source.prefill_time(input_tokens), dtype=float)
        else:
            out = np.asarray(input_tokens, dtype=float) / self.prefill_rate_tps
        return np.broadcast_to(out, np.shape(input_tokens)).astype(float)

    def __repr__(self):
        return f"ContinuousBatching(tpot={self.tpot_source!r}, prefill_rate_tps={self.prefill_rate_tps})"


def _token_dist(value, name):
    if isinstance(value, (list, tuple, np.ndarray)):
        return Empirical(value)
    return as_distribution(value, name)


# --------------------------------------------------------------------------- policies


@dataclass
class Admission:
    """Reject (429) arrivals that would wait too long.

    An arrival that finds a free slot is always admitted. Otherwise, with ``ahead`` requests of
    the same or higher priority already waiting in the queue it would join (the fleet's queue
    under pooled routing, the chosen replica's queue otherwise), it is rejected when
    ``ahead >= max_queue`` or when the estimated wait ``(ahead + 1) * service_time_s / c``
    exceeds ``max_wait_s`` (``c`` = slots behind that queue).

    Parameters
    ----------
    max_queue : int, optional
        Largest number of requests allowed to wait ahead.
    max_wait_s : float or dict, optional
        Wait budget, seconds; a dict maps class names to budgets (classes not in it have none),
        so batch can be shed before interactive.
    service_time_s : float, optional
        Mean slot holding time used for the estimate, seconds. Default: the workload's mean
        holding time (fixed service) or mean prefill + (mean output - 1) x TPOT(slots)
        (continuous batching).
    retry_after_s : float, optional
        Fixed ``Retry-After`` hint, seconds. Default: the estimated wait in excess of the
        budget (at least 0.1 s).
    """

    max_queue: int | None = None
    max_wait_s: float | dict | None = None
    service_time_s: float | None = None
    retry_after_s: float | None = None

    def __post_init__(self):
        if self.max_queue is None and self.max_wait_s is None:
            raise ValueError("Admission needs max_queue or max_wait_s")
        if self.max_queue is not None:
            self.max_queue = integer(self.max_queue, "max_queue", minimum=0)
        if isinstance(self.max_wait_s, dict):
            self.max_wait_s = {c: None if b is None else nonnegative(b, f"max_wait_s[{c!r}]")
                               for c, b in self.max_wait_s.items()}
        elif self.max_wait_s is not None:
            self.max_wait_s = nonnegative(self.max_wait_s, "max_wait_s")
        for name in ("service_time_s", "retry_after_s"):
            v = getattr(self, name)
            if v is not None:
                setattr(self, name, positive(v, name))


@dataclass
class RetryPolicy:
    """How clients react to a 429 or to a slow response.

    Parameters
    ----------
    max_retries : int
        Retries per request after the first attempt.
    backoff : {"jittered", "none"}
        ``"jittered"``: wait ``max(hint, U(0, min(cap_s, base_s * 2**attempt)))`` before
        retrying (full jitter; the ``Retry-After`` hint is honoured when
        ``honour_retry_after``). ``"none"``: retry after ``base_s`` (0 = at once), ignoring the
        hint — the retry storm.
    base_s, cap_s : float
        Backoff base and cap, seconds.
    honour_retry_after : bool
        Whether jittered clients wait at least the server's hint.
    timeout_s : float, optional
        Client timeout on the first token, seconds: an attempt without a first token by then is
        abandoned and re-sent (if retries remain). By default the server keeps the abandoned
        attempt: it still waits and is still served, as with a gateway that cannot cancel.
    cancel_on_timeout : bool
        The gateway notices the client left and drops the abandoned attempt if it is still
        queued (an attempt already running is served to the end).
    """

    max_retries: int = 3
    backoff: str = "jittered"
    base_s: float = 1.0
    cap_s: float = 60.0
    honour_retry_after: bool = True
    timeout_s: float | None = None
    cancel_on_timeout: bool = False

    def __post_init__(self):
        self.max_retries = integer(self.max_retries, "max_retries", minimum=0)
        choice(self.backoff, "backoff", ("jittered", "none"))
        self.base_s = nonnegative(self.base_s, "base_s")
        self.cap_s = nonnegative(self.cap_s, "cap_s")
        if self.timeout_s is not None:
            self.timeout_s = positive(self.timeout_s, "timeout_s")


@dataclass
class FleetSpec:
    """A fleet of identical replicas, as the simulator runs it.

    Parameters
    ----------
    replicas : int
        Number of replicas (>= 1).
    slots : int
        Slots per replica: sequences it runs at once (>= 1).
    service : FixedService or ContinuousBatching
        How long a request holds a slot.
    routing : str
        A routing policy of :mod:`capbook.routing` that the simulator can dispatch:
        ``"pooled"`` (or ``"load-aware"``), ``"jsq"`` (or ``"least-outstanding"``), ``"p2c"``,
        ``"random"`` (or ``"per-replica"``) and ``"strict-round-robin"`` (or ``"cyclic"``).
        Stored as the canonical dispatch rule (one of :data:`capbook.routing.DISPATCHES`).
        ``"round-robin"`` is refused as ambiguous: say ``"random"`` (many balancers) or
        ``"strict-round-robin"`` (one dispatcher cycling).
    admission : Admission, optional
        Reject arrivals over a queue or wait budget (default: everyone waits).
    priority : sequence of str, optional
        Class names, highest priority first; waiting requests are served in this order (FCFS
        within a class). Classes not listed come after, together. Default: FCFS for all.
    """

    replicas: int
    slots: int
    service: FixedService | ContinuousBatching
    routing: str = "pooled"
    admission: Admission | None = None
    priority: tuple | list | None = None

    def __post_init__(self):
        self.replicas = integer(self.replicas, "replicas", minimum=1)
        self.slots = integer(self.slots, "slots", minimum=1)
        self.routing = dispatch(self.routing)
        if not isinstance(self.service, (FixedService, ContinuousBatching)):
            raise TypeError("service must be a FixedService or a ContinuousBatching")
        if self.admission is not None and not isinstance(self.admission, Admission):
            raise TypeError("admission must be an Admission or None")
        if self.priority is not None:
            self.priority = tuple(str(p) for p in self.priority)
            if len(set(self.priority)) != len(self.priority):
                raise ValueError("priority lists a class twice")

    @property
    def total_slots(self) -> int:
        """Slots in the fleet, ``replicas * slots``."""
        return self.replicas * self.slots


# --------------------------------------------------------------------------- workload


@dataclass
class _Workload:
    times: np.ndarray
    cls_names: list
    cls: np.ndarray          # class index per request
    pri: np.ndarray          # priority level per request (0 = highest)
    n_levels: int
    svc: np.ndarray | None   # fixed holding times
    inp: np.ndarray | None
    out: np.ndarray | None
    prefill: np.ndarray | None
    truncated: np.ndarray | None


def _draw_tokens(dist, rng, n, minimum):
    v = np.rint(np.asarray(dist.sample(rng, n), dtype=float))
    return np.maximum(v, minimum).astype(np.int64)


# --------------------------------------------------------------------------- simulation


class Simulation:
    """A run of a :class:`FleetSpec` under an arrival process.

    Parameters
    ----------
    fleet : FleetSpec
    arrivals : PoissonArrivals, RenewalArrivals, TraceArrivals, ArrivalStream or array_like
        The open-loop arrival process, or explicit arrival times in seconds (sorted).
    n_requests : int, optional
        Number of (first-attempt) arrivals. With a trace, the first ``n_requests`` rows.
    duration_s : float, optional
        Stop arrivals at this time, seconds (the fleet then drains).
    warmup_s : float
        Requests arriving before this time are simulated but excluded from :meth:`SimResult.summary`.
    classes : dict, optional
        Class name → share of arrivals for synthetic arrivals (a trace uses its ``tier``).
    retry : RetryPolicy, optional
        Client behaviour on 429 and timeouts (default: no retries).
    seed : int, optional
    rng : numpy.random.Generator, optional
        Source of randomness (give one of ``seed``/``rng``; default ``seed=0``).
    """

    def __init__(self, fleet: FleetSpec, arrivals, n_requests: int | None = None,
                 duration_s: float | None = None, warmup_s: float = 0.0, classes: dict | None = None,
                 retry: RetryPolicy | None = None, seed: int | None = None,
                 rng: np.random.Generator | None = None):
        if not isinstance(fleet, FleetSpec):
            raise TypeError("fleet must be a capbook.sim.slotsim.FleetSpec")
        if rng is not None and seed is not None:
            raise ValueError("give seed or rng, not both")
        if rng is None:
            rng = np.random.default_rng(0 if seed is None else seed)
        self.rng = rng
        self.fleet = fleet
        self.arrivals = arrivals
        self.n_requests = None if n_requests is None else integer(n_requests, "n_requests", minimum=1)
        self.duration_s = None if duration_s is None else positive(duration_s, "duration_s")
        self.warmup_s = nonnegative(warmup_s, "warmup_s")
        if classes is not None:
            shares = [nonnegative(v, f"classes[{c!r}]") for c, v in classes.items()]
            if not shares or sum(shares) <= 0:
                raise ValueError("classes must map class names to non-negative shares that sum to a positive number")
        self.classes = classes
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise TypeError("retry must be a RetryPolicy or None")
        self.retry = retry

    # ---------------------------------------------------------------- workload
    def _stream(self) -> ArrivalStream:
        a = self.arrivals
        if isinstance(a, ArrivalStream):
            stream = a
        elif isinstance(a, (PoissonArrivals, RenewalArrivals, TraceArrivals)) or hasattr(a, "generate"):
            if isinstance(a, TraceArrivals) and self.n_requests is None and self.duration_s is None:
                stream = a.generate(self.rng)
            else:
                stream = a.generate(self.rng, self.n_requests, self.duration_s)
        elif isinstance(a, pd.DataFrame) or hasattr(a, "to_pandas"):
            stream = TraceArrivals(a).generate(self.rng, self.n_requests, self.duration_s)
        else:
            times = np.asarray(a, dtype=float).ravel()
            stream = ArrivalStream(times)
        t = np.asarray(stream.times, dtype=float)
        if isinstance(a, (np.ndarray, list, tuple, ArrivalStream)):
            if self.n_requests is not None:
                t = t[: self.n_requests]
            if self.duration_s is not None:
                t = t[t < self.duration_s]
            m = t.size
            stream = ArrivalStream(t, *(None if x is None else np.asarray(x)[:m]
                                         for x in (stream.input_tokens, stream.output_tokens, stream.tier)))
        if t.size == 0:
            raise ValueError("the arrivals hold no requests: nothing to simulate")
        if not np.all(np.isfinite(t)) or t[0] < 0 or np.any(np.diff(t) < 0):
            raise ValueError("arrival times must be finite, non-negative seconds in increasing order")
        return stream

    def _workload(self) -> _Workload:
        fleet, rng = self.fleet, self.rng
        stream = self._stream()
        n = len(stream)
        svc = inp = out = pre = trunc = None
        service = fleet.service
        if isinstance(service, FixedService):
            svc = service._draw(rng, n)
            inp = None if stream.input_tokens is None else np.asarray(stream.input_tokens, dtype=np.int64)
            out = None if stream.output_tokens is None else np.asarray(stream.output_tokens, dtype=np.int64)
        else:
            if stream.input_tokens is not None:
                inp = np.asarray(stream.input_tokens, dtype=np.int64)
            elif service.input_tokens is not None:
                inp = _draw_tokens(service.input_tokens, rng, n, 0)
            else:
                raise ValueError("continuous batching needs input token counts: give ContinuousBatching(input_tokens=...) or replay a trace")
            if stream.output_tokens is not None:
                out = np.asarray(stream.output_tokens, dtype=np.int64)
            elif service.output_tokens is not None:
                out = _draw_tokens(service.output_tokens, rng, n, 1)
            else:
                raise ValueError("continuous batching needs output token counts: give ContinuousBatching(output_tokens=...) or replay a trace")
            out = np.maximum(out, 1)
            if service.max_output_tokens is not None:
                trunc = out > service.max_output_tokens
                out = np.minimum(out, service.max_output_tokens)
            else:
                trunc = np.zeros(n, dtype=bool)
            pre = service.prefill_times(inp)
        # classes
        if stream.tier is not None:
            names, cls = np.unique(np.asarray(stream.tier, dtype=str), return_inverse=True)
            names = list(names)
        elif self.classes is not None:
            names = list(self.classes)
            p = np.array([self.classes[k] for k in names], dtype=float)
            cls = rng.choice(len(names), size=n, p=p / p.sum()) if len(names) > 1 else np.zeros(n, dtype=np.int64)
        else:
            names, cls = ["default"], np.zeros(n, dtype=np.int64)
        if fleet.priority is None:
            level_of = np.zeros(len(names), dtype=np.int64)
            n_levels = 1
        else:
            order = {c: i for i, c in enumerate(fleet.priority)}
            level_of = np.array([order.get(c, len(order)) for c in names], dtype=np.int64)
            n_levels = len(order) + 1
        return _Workload(np.asarray(stream.times, dtype=float), names, np.asarray(cls, dtype=np.int64),
                         level_of[cls], n_levels, svc, inp, out, pre, trunc)

    # ---------------------------------------------------------------- run
    def run(self, progress: bool = False, engine: str = "auto") -> "SimResult":
        """Simulate and return a :class:`SimResult`.

        Parameters
        ----------
        progress : bool
            Show a tqdm progress bar (off by default).
        engine : {"auto", "event"}
            ``"auto"`` takes the FCFS fast path when it applies; ``"event"`` forces the general
            event loop.
        """
        choice(engine, "engine", ("auto", "event"))
        wl = self._workload()
        fleet = self.fleet
        fast = (engine == "auto" and isinstance(fleet.service, FixedService) and fleet.admission is None
                and (self.retry is None or (self.retry.max_retries == 0))
                and wl.n_levels == 1 and fleet.routing in ("pooled", "strict-round-robin", "random"))
        if fast:
            cols = _fast_fcfs(wl, fleet, self.rng)
        else:
            cols = _SlotFleet(wl, fleet, self.retry, self.rng).run(progress)
        return SimResult(cols, wl, fleet, self.warmup_s)


def simulate(fleet: FleetSpec, arrivals, n_requests=None, duration_s=None, warmup_s=0.0, classes=None,
             retry=None, seed=None, rng=None, progress=False) -> "SimResult":
    """Create a :class:`Simulation` and run it (one call)."""
    return Simulation(fleet, arrivals, n_requests=n_requests, duration_s=duration_s, warmup_s=warmup_s,
                      classes=classes, retry=retry, seed=seed, rng=rng).run(progress=progress)


# --------------------------------------------------------------------------- kernels


def _fcfs_recursion(times, svc, c):
    """Start times of a c-server FCFS queue: a heap of the c slot-free times (floats only)."""
    heap = [0.0] * c
    replace = heapq.heapreplace
    start = []
    push = start.append
    for a, s in zip(times.tolist(), svc.tolist()):
        f = heap[0]
        if a >= f:
            replace(heap, a + s)
            push(a)
        else:
            replace(heap, f + s)
            push(f)
    return np.array(start)


def _assign_slots(start, end, c):
    """Slot index of each request of an FCFS run (starts non-decreasing): reuse the earliest-free
    slot, so no slot ever holds two requests at once."""
    heap = []
    slot = np.empty(start.size, dtype=np.int64)
    replace, push = heapq.heapreplace, heapq.heappush
    used = 0
    for i, (b, e) in enumerate(zip(start.tolist(), end.tolist())):
        if heap and heap[0][0] <= b:
            j = heap[0][1]
            replace(heap, (e, j))
        elif used < c:
            j = used
            used += 1
            push(heap, (e, j))
        else:  # pragma: no cover - impossible for a valid FCFS schedule
            raise RuntimeError("FCFS schedule uses more than c slots")
        slot[i] = j
    return slot


def _routing_draws(rng, routing, R, n):
    if routing == "random":
        return rng.integers(R, size=n)
    if routing == "p2c":
        first = rng.integers(R, size=n)
        if R == 1:
            return np.column_stack([first, first])
        second = (first + rng.integers(1, R, size=n)) % R
        return np.column_stack([first, second])
    return None


def _fast_fcfs(wl, fleet, rng):
    n, R, S = wl.times.size, fleet.replicas, fleet.slots
    if fleet.routing == "pooled":
        start = _fcfs_recursion(wl.times, wl.svc, R * S)
        replica = None          # assigned on first use (SimResult.replica): waits do not need it
    else:
        if fleet.routing == "random":
            replica = _routing_draws(rng, "random", R, n)
        else:
            replica = np.arange(n) % R
        start = np.empty(n)
        for r in range(R):
            idx = np.flatnonzero(replica == r)
            if idx.size:
                start[idx] = _fcfs_recursion(wl.times[idx], wl.svc[idx], S)
    end = start + wl.svc
    return dict(request_id=np.arange(n), attempt=np.zeros(n, dtype=np.int64), src=np.arange(n),
                arrival=wl.times.copy(), start=start, first_token=start.copy(), end=end,
                replica=None if replica is None else np.asarray(replica, dtype=np.int64),
                rejected=np.zeros(n, dtype=bool),
                retry_after=np.full(n, np.nan), abandoned=np.zeros(n, dtype=bool))


# The kinds of timed event of the slot model (handlers in this order, see _SlotFleet). Decode
# completions are not timed events: each continuous-batching replica keeps the time of its next
# one (its virtual token clock, see the module notes) and the earliest is the core's due time.
_SERVICE_END = 0    # fixed service: the attempt leaves its slot
_PREFILL_END = 1    # continuous batching: prefill done, the first token appears
_RETRY = 2          # a retried attempt arrives
_TIMEOUT = 3        # the client's first-token timeout expires


class _SlotFleet:
    """Slot replicas on the event core (:mod:`capbook.sim.eventcore`): any routing, admission control,
    retries, timeouts, priorities; fixed service (the M/G/c slot model) or continuous batching
    (the fluid model).

    State is kept in plain lists indexed by attempt (primary attempts are ``0..n-1``; retries
    are appended) and by replica; one method per kind of timed event and one per routing rule.
    At equal times a decode completion comes first, then timed events (in the order they were
    scheduled), then arrivals. :meth:`run` returns the per-attempt columns of :class:`SimResult`.
    """

    __slots__ = ("R", "S", "rng", "pooled", "fixed", "n", "levels", "t_arrival", "src", "attempt",
                 "pri", "t_start", "t_first", "t_end", "replica", "rejected", "hint", "abandoned",
                 "svc", "prefill", "out", "admission", "max_queue", "budget", "cls", "per_slot",
                 "fixed_hint", "max_retries", "timeout", "cancel", "queued_on", "jitter", "base",
                 "cap", "honour", "u_pool", "u_i", "draws", "rr", "route", "running", "outst",
                 "free_total", "queue", "rqueue", "qlen", "tp", "V", "tl", "nxt", "hv", "core",
                 "heap", "seq")

    def __init__(self, wl, fleet, retry, rng):
        R, S = fleet.replicas, fleet.slots
        self.R, self.S, self.rng = R, S, rng
        self.pooled = pooled = fleet.routing == "pooled"
        self.fixed = fixed = wl.svc is not None
        self.n = n = wl.times.size
        self.levels = wl.n_levels

        # per-attempt columns
        self.t_arrival = wl.times.tolist()
        self.src = list(range(n))           # index of the logical request
        self.attempt = [0] * n
        self.pri = wl.pri.tolist()
        self.t_start = [_NAN] * n
        self.t_first = [_NAN] * n
        self.t_end = [_NAN] * n
        self.replica = [-1] * n
        self.rejected = [False] * n
        self.hint = [_NAN] * n
        self.abandoned = [False] * n
        self.svc = wl.svc.tolist() if fixed else None
        self.prefill = wl.prefill.tolist() if not fixed else None
        self.out = wl.out.tolist() if not fixed else None

        # admission control
        adm = fleet.admission
        self.admission = adm is not None
        if adm is not None:
            self.max_queue = adm.max_queue
            if isinstance(adm.max_wait_s, dict):
                self.budget = [adm.max_wait_s.get(c) for c in wl.cls_names]
            else:
                self.budget = [adm.max_wait_s] * len(wl.cls_names)
            self.cls = wl.cls.tolist()
            if adm.service_time_s is not None:
                est = adm.service_time_s
            elif fixed:
                est = float(np.mean(wl.svc))
            else:
                tp_S = fleet.service.tpot_table(S)[S]
                est = float(np.mean(wl.prefill) + np.mean(wl.out - 1) * tp_S)
            self.per_slot = est / (R * S if pooled else S)
            self.fixed_hint = adm.retry_after_s

        # client retries
        self.max_retries = 0 if retry is None else retry.max_retries
        self.timeout = None if retry is None else retry.timeout_s
        self.cancel = retry is not None and retry.cancel_on_timeout
        self.queued_on = {}                 # queued attempt -> its replica (per-replica queues, with cancel)
        self.jitter = retry is not None and retry.backoff == "jittered"
        if retry is not None:
            self.base, self.cap, self.honour = retry.base_s, retry.cap_s, retry.honour_retry_after
        self.u_pool = rng.random(65536) if retry is not None else None
        self.u_i = 0

        # routing (draws for the primary attempts up front, after the retry pool)
        draws = _routing_draws(rng, fleet.routing, R, n)
        self.draws = draws.tolist() if draws is not None else None
        self.rr = 0                         # the next replica of a cycle
        self.route = {"pooled": None, "jsq": self._route_jsq, "p2c": self._route_p2c,
                      "random": self._route_random,
                      "strict-round-robin": self._route_cycle}[fleet.routing]

        # slots and queues
        self.running = [0] * R
        self.outst = [0] * R                # running + queued, per replica
        self.free_total = R * S
        if pooled:
            self.queue = [deque() for _ in range(self.levels)]
        else:
            self.rqueue = [[deque() for _ in range(self.levels)] for _ in range(R)]
        self.qlen = [0] * (1 if pooled else R)

        # continuous batching: per replica a virtual token clock V and a heap of (V at end, attempt)
        if not fixed:
            self.tp = fleet.service.tpot_table(S).tolist()
            self.V = [0.0] * R
            self.tl = [0.0] * R             # time of the clock's last update
            self.nxt = [_INF] * R           # time of each replica's next decode completion
            self.hv = [[] for _ in range(R)]

        # the core's due time is min(nxt) and due_id its first index, kept up to date by _reschedule
        self.core = EventCore(self.t_arrival, self._arrive,
                              (self._finish, self._on_prefill_end, self._on_retry, self._on_timeout),
                              n=n, arrivals_first=False, on_due=None if fixed else self._on_decode_end)
        self.heap = self.core.heap
        self.seq = self.core.seq

    # ---------------------------------------------------------------- the run
    def run(self, progress=False):
        """Process every event in time order; return the per-attempt columns."""
        core = self.core
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=self.n, unit="req", desc="simulating")
            arrive = self._arrive

            def counted(k, t):
                arrive(k, t)
                if k % 8192 == 8191:
                    bar.update(8192)

            core.arrive = counted
        done = core.run()
        if bar is not None:
            bar.update(done % 8192)
            bar.close()
        return self._columns()

    def _columns(self):
        src = np.asarray(self.src, dtype=np.int64)
        return dict(request_id=src, attempt=np.asarray(self.attempt, dtype=np.int64), src=src,
                    arrival=np.asarray(self.t_arrival, dtype=float), start=np.asarray(self.t_start, dtype=float),
                    first_token=np.asarray(self.t_first, dtype=float), end=np.asarray(self.t_end, dtype=float),
                    replica=np.asarray(self.replica, dtype=np.int64), rejected=np.asarray(self.rejected, dtype=bool),
                    retry_after=np.asarray(self.hint, dtype=float), abandoned=np.asarray(self.abandoned, dtype=bool))

    # ---------------------------------------------------------------- events
    def _on_prefill_end(self, k, r, t):
        self._advance_clock(r, t)
        self.t_first[k] = t
        rem = self.out[k] - 1
        if rem <= 0:
            self._finish(k, r, t)
            self._reschedule(r, t)
        else:
            h = self.hv[r]
            heappush(h, (self.V[r] + rem, k))
            if h[0][1] == k:
                self._reschedule(r, t)

    def _on_decode_end(self, r, t):
        """Every sequence on replica ``r`` whose last token is due by now finishes."""
        V, h, nr = self.V, self.hv[r], self.running[r]
        if nr:                              # the clock advance of _advance_clock, inlined: hot
            V[r] += (t - self.tl[r]) / self.tp[nr]
        self.tl[r] = t
        if V[r] < h[0][0]:
            V[r] = h[0][0]
        vx = V[r]
        finish = self._finish
        while h and h[0][0] <= vx:
            _, k = heappop(h)
            finish(k, r, t)
        self._reschedule(r, t)

    def _on_retry(self, k, r, t):
        self._arrive(k, t)

    def _on_timeout(self, k, r, t):
        """The client gives up on attempt ``k`` if it has no first token yet (and re-sends)."""
        if self.t_first[k] != self.t_first[k] and not self.rejected[k]:      # NaN: no first token
            self.abandoned[k] = True
            if self.cancel and self.t_start[k] != self.t_start[k]:         # still queued: drop it
                if self.pooled:
                    self.queue[self.pri[k]].remove(k)
                    self.qlen[0] -= 1
                else:
                    q = self.queued_on.pop(k)
                    self.rqueue[q][self.pri[k]].remove(k)
                    self.qlen[q] -= 1
                    self.outst[q] -= 1
            if self.attempt[k] < self.max_retries:
                self._new_attempt(k, t + self._retry_delay(k, _NAN))

    # ---------------------------------------------------------------- arrivals and routing
    def _arrive(self, k, t):
        p = self.pri[k]
        if self.timeout is not None:
            heappush(self.heap, (t + self.timeout, next(self.seq), _TIMEOUT, k, 0))
        if self.pooled:
            if self.free_total > 0:
                running = self.running
                self._start_now(k, running.index(min(running)), t)
                return
            q = self.queue
            ql = self.qlen[0]
        else:
            r = self.route(k)
            if self.running[r] < self.S:
                self._start_now(k, r, t)
                return
            q = self.rqueue[r]
            ql = self.qlen[r]
        if self.admission:
            ahead = ql if p == self.levels - 1 else sum(len(q[i]) for i in range(p + 1))
            budget = self.budget[self.cls[k]]
            if ((self.max_queue is not None and ahead >= self.max_queue)
                    or (budget is not None and (ahead + 1) * self.per_slot > budget)):
                self._reject(k, t, ahead, budget)
                return
        q[p].append(k)
        if self.pooled:
            self.qlen[0] += 1
        else:
            self.qlen[r] += 1
            self.outst[r] += 1
            if self.cancel:
                self.queued_on[k] = r

    def _route_jsq(self, k):
        """The replica with the fewest outstanding requests; ties go round the cycle."""
        outst, rr = self.outst, self.rr
        m = min(outst)
        try:
            r = outst.index(m, rr)
        except ValueError:
            r = outst.index(m)
        self.rr = rr + 1 if rr + 1 < self.R else 0
        return r

    def _route_cycle(self, k):
        r = self.rr
        self.rr = r + 1 if r + 1 < self.R else 0
        return r

    def _route_random(self, k):
        return self.draws[k] if k < self.n else int(self.rng.integers(self.R))

    def _route_p2c(self, k):
        if k < self.n:
            r1, r2 = self.draws[k]
        else:
            R = self.R
            r1 = int(self.rng.integers(R))
            r2 = (r1 + int(self.rng.integers(1, R))) % R if R > 1 else r1
        return r1 if self.outst[r1] <= self.outst[r2] else r2

    def _reject(self, k, t, ahead, budget):
        self.rejected[k] = True
        if self.fixed_hint is not None:
            hint = self.fixed_hint
        else:
            excess = (ahead + 1) * self.per_slot - (budget if budget is not None else 0.0)
            hint = excess if excess > 0.1 else 0.1
        self.hint[k] = hint
        if self.attempt[k] < self.max_retries:
            self._new_attempt(k, t + self._retry_delay(k, hint))

    # ---------------------------------------------------------------- retries
    def _new_attempt(self, k, t_new):
        """Append a retry of attempt ``k`` arriving at ``t_new``."""
        j = len(self.t_arrival)
        self.t_arrival.append(t_new)
        self.src.append(self.src[k])
        self.attempt.append(self.attempt[k] + 1)
        self.pri.append(self.pri[k])
        self.t_start.append(_NAN)
        self.t_first.append(_NAN)
        self.t_end.append(_NAN)
        self.replica.append(-1)
        self.rejected.append(False)
        self.hint.append(_NAN)
        self.abandoned.append(False)
        if self.admission:
            self.cls.append(self.cls[k])
        if self.fixed:
            self.svc.append(self.svc[k])
        else:
            self.prefill.append(self.prefill[k])
            self.out.append(self.out[k])
        heappush(self.heap, (t_new, next(self.seq), _RETRY, j, 0))

    def _uniform(self):
        """One U(0, 1) draw from a pool refilled 65,536 at a time."""
        if self.u_i >= self.u_pool.size:
            self.u_pool = self.rng.random(65536)
            self.u_i = 0
        self.u_i += 1
        return float(self.u_pool[self.u_i - 1])

    def _retry_delay(self, k, hint):
        if self.jitter:
            d = self._uniform() * min(self.cap, self.base * 2.0 ** self.attempt[k])
            if self.honour and hint == hint and hint > d:
                d = hint
            return d
        return self.base

    # ---------------------------------------------------------------- slots
    def _start_now(self, k, r, t):
        """An arrival that finds a free slot on replica ``r`` starts at once."""
        self.outst[r] += 1
        if self.fixed:
            self._start(k, r, t)
        else:
            self._advance_clock(r, t)
            self._start(k, r, t)
            self._reschedule(r, t)

    def _start(self, k, r, t):
        # the caller has advanced replica r's clock to t (continuous batching) and reschedules after
        self.running[r] += 1
        self.free_total -= 1
        self.t_start[k] = t
        self.replica[k] = r
        if self.fixed:
            self.t_first[k] = t
            heappush(self.heap, (t + self.svc[k], next(self.seq), _SERVICE_END, k, r))
        else:
            heappush(self.heap, (t + self.prefill[k], next(self.seq), _PREFILL_END, k, r))

    def _take(self, r):
        """Pop the next waiting attempt for a free slot on replica ``r``, or -1."""
        if self.pooled:
            if self.qlen[0]:
                for q in self.queue:
                    if q:
                        self.qlen[0] -= 1
                        return q.popleft()
        elif self.qlen[r]:
            for q in self.rqueue[r]:
                if q:
                    self.qlen[r] -= 1
                    self.outst[r] -= 1
                    return q.popleft()
        return -1

    def _finish(self, k, r, t):
        """Attempt ``k`` ends on replica ``r``: its slot takes the next waiting attempts."""
        self.t_end[k] = t
        running, outst = self.running, self.outst
        running[r] -= 1
        outst[r] -= 1
        self.free_total += 1
        while running[r] < self.S:
            j = self._take(r)
            if j < 0:
                break
            outst[r] += 1
            self._start(j, r, t)

    # ---------------------------------------------------------------- continuous batching clocks
    def _advance_clock(self, r, t):
        """Move replica ``r``'s virtual token clock to time ``t`` (inlined in :meth:`_on_decode_end`)."""
        nr = self.running[r]
        if nr:
            self.V[r] += (t - self.tl[r]) / self.tp[nr]
        self.tl[r] = t

    def _reschedule(self, r, t):
        """Recompute replica ``r``'s next decode completion and the earliest over replicas."""
        h = self.hv[r]
        v = t + (h[0][0] - self.V[r]) * self.tp[self.running[r]] if h else _INF
        nxt, core = self.nxt, self.core
        nmin, nidx = core.due_t, core.due_id
        nxt[r] = v
        if v < nmin or (v == nmin and r < nidx):
            core.due_t, core.due_id = v, r
        elif r == nidx:
            core.due_t = m = min(nxt)
            core.due_id = nxt.index(m)


# --------------------------------------------------------------------------- results


class SimResult:
    """Per-attempt records of a run and their summaries.

    Attributes
    ----------
    arrival, start, first_token, end : numpy.ndarray
        Seconds from the start of the run, one entry per attempt (``NaN`` where an attempt was
        rejected and so never started).
    wait, ttft, tpot : numpy.ndarray
        ``start - arrival``, ``first_token - arrival`` and ``(end - first_token) /
        (output_tokens - 1)`` in seconds (TPOT is ``NaN`` for fixed service and one-token
        outputs).
    """

    def __init__(self, cols, wl, fleet, warmup_s):
        self.fleet = fleet
        self.warmup_s = warmup_s
        self._wl = wl
        for k, v in cols.items():
            setattr(self, "_replica" if k == "replica" else k, v)
        src = cols["src"]
        self.cls = wl.cls[src]
        self.wait = self.start - self.arrival
        self.ttft = self.first_token - self.arrival
        self.request_arrival = wl.times[src]
        if wl.out is not None:
            self.output_tokens = wl.out[src]
            self.input_tokens = wl.inp[src]
        else:
            self.output_tokens = self.input_tokens = None
        if wl.svc is None:
            dec = self.output_tokens - 1
            with np.errstate(invalid="ignore", divide="ignore"):
                self.tpot = np.where(dec > 0, (self.end - self.first_token) / np.maximum(dec, 1), np.nan)
        else:
            self.tpot = np.full(self.arrival.size, np.nan)
        self.horizon_s = float(wl.times[-1])

    @property
    def served(self) -> np.ndarray:
        """Boolean per attempt: it got a slot (not rejected, not cancelled while queued)."""
        return np.isfinite(self.start)

    @property
    def replica(self) -> np.ndarray:
        """Replica index of each attempt (-1 when rejected)."""
        if self._replica is None:   # pooled-queue fast path: slots assigned on first use
            self._replica = _assign_slots(self.start, self.end, self.fleet.total_slots) // self.fleet.slots
        return self._replica

    @property
    def n_requests(self) -> int:
        """Number of logical requests (first attempts)."""
        return int(self._wl.times.size)

    @property
    def records(self) -> pd.DataFrame:
        """One row per attempt: ids, class, times (s), replica, wait/TTFT/TPOT (s), flags."""
        names = np.asarray(self._wl.cls_names, dtype=object)
        df = pd.DataFrame({
            "request_id": self.request_id,
            "attempt": self.attempt,
            "class": names[self.cls],
            "arrival": self.arrival,
            "start": self.start,
            "first_token": self.first_token,
            "end": self.end,
            "replica": self.replica,
            "wait": self.wait,
            "ttft": self.ttft,
            "tpot": self.tpot,
            "rejected": self.rejected,
            "retry_after": self.retry_after,
            "abandoned": self.abandoned,
            "cancelled": self.abandoned & ~self.served & ~self.rejected,
            "retries": self.attempt,
            "warmup": self.request_arrival < self.warmup_s,
        })
        if self.output_tokens is not None:
            df["input_tokens"] = self.input_tokens
            df["output_tokens"] = self.output_tokens
            if self._wl.truncated is not None:
                df["truncated"] = self._wl.truncated[self.src]
        return df

    def _window(self, warmup_s):
        w = self.warmup_s if warmup_s is None else nonnegative(warmup_s, "warmup_s")
        if w >= self.horizon_s:
            raise ValueError(f"warmup_s={w} leaves no arrivals to measure (last arrival at {self.horizon_s:.3g} s)")
        return w, self.request_arrival >= w

    def summary(self, ttft_target_s: float | None = None, tpot_target_s: float | None = None,
                warmup_s: float | None = None, by_class: bool = False):
        """Latency percentiles, throughput, goodput and rejections after the warm-up.

        Parameters
        ----------
        ttft_target_s, tpot_target_s : float, optional
            Targets for goodput, seconds. A request is *good* when an attempt of it was served,
            its client was still waiting, its first token came within ``ttft_target_s`` of the
            request's *first* arrival (retries count against it) and its TPOT was within
            ``tpot_target_s``. Without targets goodput equals served requests.
        warmup_s : float, optional
            Override the simulation's warm-up.
        by_class : bool
            Return a DataFrame with one row per class (plus ``"all"``).

        Returns
        -------
        dict
            ``requests``, ``attempts``, ``served``, ``rejected_attempts``, ``rejected_share``,
            ``p_wait`` (share of served attempts that waited), ``mean_wait_s``, ``ttft_p50_s``,
            ``ttft_p95_s``, ``ttft_p99_s``, ``tpot_p50_s``, ``tpot_p95_s``, ``tpot_p99_s``,
            ``throughput_rps`` (attempts completed per second inside the window from the warm-up
            to the last arrival), ``goodput_rps`` (good requests of the window completed inside
            it, per second), ``goodput_share`` (good / requests), ``utilisation`` (busy
            slot-seconds of every served attempt inside the window / slot-seconds).
        """
        if by_class:
            rows = {"all": self.summary(ttft_target_s, tpot_target_s, warmup_s)}
            names = self._wl.cls_names
            for i, name in enumerate(names):
                rows[name] = self._summary(ttft_target_s, tpot_target_s, warmup_s, self.cls == i)
            return pd.DataFrame(rows).T
        return self._summary(ttft_target_s, tpot_target_s, warmup_s, None)

    def _summary(self, ttft_target_s, tpot_target_s, warmup_s, mask):
        good = self.good(ttft_target_s, tpot_target_s)     # checks the targets first
        w, m = self._window(warmup_s)
        if mask is not None:
            m = m & mask
        window = self.horizon_s - w
        served = m & self.served
        first = m & (self.attempt == 0)
        n_req = int(first.sum())
        wait = self.wait[served]
        ttft = self.ttft[served]
        tpot = self.tpot[served]
        tpot = tpot[np.isfinite(tpot)]

        def pct(x, q):
            return float(np.percentile(x, q)) if x.size else math.nan

        good &= served
        n_good = int(np.unique(self.src[good]).size)
        # rates count completions inside the window [w, last arrival]
        t1 = self.horizon_s
        done_in = self.served & (self.end >= w) & (self.end <= t1)
        if mask is not None:
            done_in &= mask
        good_in = good & (self.end <= t1)
        n_good_in = int(np.unique(self.src[good_in]).size)
        every = self.served if mask is None else (self.served & mask)
        busy = _busy_slot_seconds(self.start[every], self.end[every], w, t1)
        return {
            "requests": n_req,
            "attempts": int(m.sum()),
            "served": int(served.sum()),
            "rejected_attempts": int((m & self.rejected).sum()),
            "rejected_share": float((m & self.rejected).sum() / max(m.sum(), 1)),
            "abandoned_attempts": int((m & self.abandoned).sum()),
            "p_wait": float(np.mean(wait > 0)) if wait.size else math.nan,
            "mean_wait_s": float(wait.mean()) if wait.size else math.nan,
            "ttft_p50_s": pct(ttft, 50), "ttft_p95_s": pct(ttft, 95), "ttft_p99_s": pct(ttft, 99),
            "tpot_p50_s": pct(tpot, 50), "tpot_p95_s": pct(tpot, 95), "tpot_p99_s": pct(tpot, 99),
            "throughput_rps": float(done_in.sum() / window),
            "goodput_rps": n_good_in / window,
            "goodput_share": n_good / n_req if n_req else math.nan,
            "utilisation": busy / (self.fleet.total_slots * window),
        }

    def good(self, ttft_target_s: float | None = None, tpot_target_s: float | None = None) -> np.ndarray:
        """Boolean per attempt: served, client still waiting, and within both targets.

        TTFT is measured from the request's *first* arrival, so time lost to rejections and
        retries counts against it; a one-token output meets any TPOT target.
        """
        g = self.served & ~self.abandoned
        if ttft_target_s is not None:
            g &= (self.first_token - self.request_arrival) <= positive(ttft_target_s, "ttft_target_s")
        if tpot_target_s is not None:
            tpot_target_s = positive(tpot_target_s, "tpot_target_s")
            if self._wl.svc is not None:
                raise ValueError("tpot_target_s needs a token-based service model (ContinuousBatching); fixed service has no TPOT")
            g &= ~(self.tpot > tpot_target_s)
        return g

    def timeline(self, bin_s: float = 60.0, ttft_target_s: float | None = None,
                 tpot_target_s: float | None = None) -> pd.DataFrame:
        """Per-bin counts over the whole run (warm-up included), for charts of a run over time.

        Returns a DataFrame with ``time_s`` (bin start, seconds) and, per second of the bin:
        ``offered_rps`` (first attempts arriving), ``attempts_rps`` (all attempts arriving,
        retries included), ``rejected_rps``, ``throughput_rps`` (attempts completing) and
        ``goodput_rps`` (good attempts completing, see :meth:`good`); plus ``utilisation``
        (busy slots / slots) and ``waiting`` (mean attempts queued).
        """
        util = self.slot_utilisation(bin_s)
        edges = np.append(util.time_s.to_numpy(), util.time_s.to_numpy()[-1] + bin_s)

        def rate(x):
            x = x[np.isfinite(x)]
            return np.histogram(x, bins=edges)[0] / bin_s

        good = self.good(ttft_target_s, tpot_target_s)
        return pd.DataFrame({
            "time_s": edges[:-1],
            "offered_rps": rate(self.arrival[self.attempt == 0]),
            "attempts_rps": rate(self.arrival),
            "rejected_rps": rate(self.arrival[self.rejected]),
            "throughput_rps": rate(self.end[self.served]),
            "goodput_rps": rate(self.end[good]),
            "utilisation": util.utilisation.to_numpy(),
            "waiting": util.waiting.to_numpy(),
        })

    def slot_utilisation(self, bin_s: float = 60.0) -> pd.DataFrame:
        """Busy slots / total slots over time, averaged in bins of ``bin_s`` seconds.

        Returns a DataFrame with ``time_s`` (bin start), ``utilisation`` (0–1) and
        ``waiting`` (mean number of attempts queued in the bin, counting those that later got a
        slot).
        """
        bin_s = positive(bin_s, "bin_s")
        served = self.served
        t_end = max(float(np.max(self.arrival)), float(np.nanmax(self.end[served])) if served.any() else 0.0)
        edges = np.arange(0.0, t_end + bin_s, bin_s)
        busy = _integrate_intervals(self.start[served], self.end[served], edges)
        waiting = _integrate_intervals(self.arrival[served], self.start[served], edges)
        return pd.DataFrame({"time_s": edges[:-1], "utilisation": busy / (bin_s * self.fleet.total_slots),
                             "waiting": waiting / bin_s})


def _integrate_intervals(a, b, edges):
    """Total length of intervals [a, b) inside each bin given by ``edges``."""
    def cum(x):
        # integral over [0, edge] of #intervals active = sum(clip(edge - a) - clip(edge - b))
        xs = np.sort(x)
        cs = np.concatenate([[0.0], np.cumsum(xs)])
        k = np.searchsorted(xs, edges, side="right")
        return k * edges - cs[k]
    total = cum(a) - cum(b)
    return np.diff(total)


def _busy_slot_seconds(start, end, t0, t1):
    s = np.clip(start, t0, t1)
    e = np.clip(end, t0, t1)
    return float(np.sum(e - s))
