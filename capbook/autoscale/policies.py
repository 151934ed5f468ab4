r"""Autoscaling simulated on time-varying demand: replicas that come and go, and the policies that move them.

A plan sizes a static fleet for the planned peak hour. Demand has a daily and weekly shape; a
fleet that follows it spends fewer GPU-hours, if it scales early enough. This module runs a
fleet whose replica count changes while requests arrive, under a **policy** (one object with
one method, :meth:`Policy.desired`) and a **scaler** (:class:`Scaling`: bounds, lags, warm
standby pool, stabilisation windows), and reports what it cost and what the requests saw.

>>> import numpy as np
>>> from capbook.sim.arrivals import RateArrivals
>>> from capbook.sim.distributions import Exponential
>>> replica = ReplicaModel(slots=4, service=Exponential(2.0))
>>> day = RateArrivals([4.0, 12.0, 4.0], bin_s=600.0)
>>> res = simulate_autoscaling(day, replica, ReactiveWaiting(target=0.7), Scaling(lag_s=60.0), seed=1)
>>> res.requests > 10_000, res.summary()["replicas_max"] > res.summary()["replicas_min"]
(True, True)

**The replica** (:class:`ReplicaModel`). ``slots`` sequences at once (the plan's ``S``); a
request holds one slot for its prefill and then its decode at the TPOT measured at ``S``
sequences (:meth:`ReplicaModel.from_sweep`): the slot model of :mod:`capbook.queueing`, with
holding times drawn per request from its token counts. It is conservative (a replica with fewer
sequences decodes faster than at ``S``) and is what makes a week simulable in seconds; the
continuous-batching engine of :mod:`capbook.sim.slotsim` is the finer model for one hour. TTFT is the
queue wait plus the prefill. ``ReplicaModel(slots, service=distribution)`` holds each request
for a draw of ``distribution`` instead, with TTFT = wait (the M/G/c model, for checks against
theory).

**The fleet.** One queue in front of every serving replica (the pooled, load-aware routing of
:mod:`capbook.routing`), first come first served. A replica is *starting* from the moment the
scaler asks for it (it is paid for from then) until its lag has passed, then *serving*. On
scale-down the scaler first cancels replicas still starting (newest first), then *drains*
serving ones: a draining replica takes no new request, finishes those it holds (no request is
lost) and is released, and paid for, until its last one ends. A warm standby pool
(``Scaling.warm_pool``) holds replicas that are already up (paid for, serving nothing): a
scale-up takes from it with the short ``warm_lag_s`` and the pool refills with the full lag.

**The control loop** runs every ``Scaling.interval_s`` seconds (15 s, the Kubernetes HPA
default): the policy sees an :class:`Observation` of the last ``metric_window_s`` (utilisation,
waiting requests, p99 TTFT, goodput, arrival rate) and returns the replicas it wants. As in
the HPA, a scale-down takes the highest recommendation of the last ``scale_down_window_s``
(stabilisation), a scale-up the lowest of the last ``scale_up_window_s``, both clamped to
``[min_replicas, max_replicas]``.

**The kernel.** The control ticks run on capbook's discrete-event core
(:mod:`capbook.sim.eventcore`, shared with :mod:`capbook.sim.slotsim` and :mod:`capbook.sim.fleetsim`). Between
two ticks the slots serve pooled FCFS with a heap of slot-free times, as the fast path of
:mod:`capbook.sim.slotsim`, made causal: the requests that can start before the next tick are committed
in one batch; one that would wait past it stays queued, so a replica that the next decision
adds is there for it. Requests are generated an hour at a time, so a week at
tens of requests per second runs in seconds and a little memory (``benchmarks/bench_autoscale.py``).
"""
from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

import numpy as np
import pandas as pd

from capbook.forecast.tokens import HOURS_PER_WEEK
from capbook.queueing import replicas_pooled
from capbook.sim.arrivals import ArrivalStream, RateArrivals, TokenLengths
from capbook.sim.distributions import as_distribution, Distribution, Lognormal
from capbook.sim.eventcore import EventCore
from capbook.sim.slotsim import _integrate_intervals
from capbook.slo import SLO
from capbook.validation import array, choice, integer, nonnegative, positive, probability

__all__ = [
    "ReplicaModel",
    "Scaling",
    "ProvisioningLag",
    "Observation",
    "Policy",
    "Static",
    "Schedule",
    "ReactiveUtilisation",
    "ReactiveWaiting",
    "ReactiveLatency",
    "ScheduleReactive",
    "AutoscaleResult",
    "simulate_autoscaling",
    "required_replicas",
]

SECONDS_PER_WEEK = HOURS_PER_WEEK * 3600.0


# --------------------------------------------------------------------------- the replica


class ReplicaModel:
    """How one replica serves: its slots, the holding time of a request and the time to first token.

    Parameters
    ----------
    slots : int
        Sequences a replica runs at once (the plan's ``S``).
    service : Distribution or float, optional
        Holding time per request, seconds, drawn independently of the tokens (TTFT = wait).
    prefill_time : callable, optional
        ``prefill_time(input_tokens) -> seconds`` (vectorised). With ``tpot_s``, the holding time
        is ``prefill + (output_tokens - 1) * tpot_s`` and TTFT = wait + prefill.
    tpot_s : float, optional
        Seconds per output token at ``slots`` sequences.
    gpus : int
        GPUs per replica (tensor parallel), for GPU-hours.

    Give ``service`` or both ``prefill_time`` and ``tpot_s``.
    """

    def __init__(self, slots: int, service=None, *, prefill_time=None, tpot_s: float | None = None,
                 gpus: int = 1):
        self.slots = integer(slots, "slots", minimum=1)
        self.gpus = integer(gpus, "gpus", minimum=1)
        if service is not None:
            if prefill_time is not None or tpot_s is not None:
                raise ValueError("give service, or prefill_time and tpot_s, not both")
            self.service = as_distribution(service, "service")
            self.prefill_time = None
            self.tpot_s = None
        else:
            if prefill_time is None or tpot_s is None:
                raise ValueError("give service (a holding-time distribution) or both prefill_time and tpot_s")
            if not callable(prefill_time):
                raise TypeError("prefill_time must be callable: input tokens -> seconds")
            self.service = None
            self.prefill_time = prefill_time
            self.tpot_s = positive(tpot_s, "tpot_s")

    @classmethod
    def from_sweep(cls, sweep, slots: int, *, tpot_quantile: int = 50, gpus: int | None = None) -> "ReplicaModel":
        """The replica a sweep measured, held at ``slots`` sequences.

        TPOT is the sweep's at ``slots`` (its ``tpot_quantile``, interpolated between measured
        levels and held at the end levels), prefill the sweep's prefill time
        (:meth:`capbook.sweeps.sweep.Sweep.prefill_time`).
        """
        lo = float(sweep.table["concurrency"].min())
        hi = float(sweep.table["concurrency"].max())
        s = integer(slots, "slots", minimum=1)
        tpot = float(sweep.tpot(min(max(float(s), lo), hi), q=tpot_quantile))
        tp = gpus if gpus is not None else int(sweep.config.get("tensor_parallel") or 1)
        return cls(s, prefill_time=sweep.prefill_time, tpot_s=tpot, gpus=tp)

    @classmethod
    def from_plan(cls, plan, sweep, *, gpus: int | None = None) -> "ReplicaModel":
        """The plan's replica: its slots on its sweep (:meth:`from_sweep`), with ``gpus`` GPUs
        (default: the plan's ``tensor_parallel``, else 1)."""
        if gpus is None:
            gpus = int(plan.source.get("tensor_parallel") or 1)
        return cls.from_sweep(sweep, int(plan.slots.S), gpus=integer(gpus, "gpus", minimum=1))

    def draw(self, rng: np.random.Generator, n: int, input_tokens=None, output_tokens=None):
        """``(holding_s, first_token_s)`` arrays for ``n`` requests: seconds in a slot, and seconds
        from the start of service to the first token."""
        if self.service is not None:
            h = np.asarray(self.service.sample(rng, n), dtype=float)
            return h, np.zeros(n)
        if input_tokens is None or output_tokens is None:
            raise ValueError("this replica's holding time comes from tokens: the arrivals must carry "
                             "input and output token counts (RateArrivals(lengths=...))")
        pre = np.asarray(self.prefill_time(np.asarray(input_tokens, dtype=float)), dtype=float)
        h = pre + (np.asarray(output_tokens, dtype=float) - 1.0) * self.tpot_s
        return h, pre

    def service_time_s(self, lengths: TokenLengths | None = None) -> float:
        """Mean seconds a request holds a slot (``lengths`` needed for the token model)."""
        if self.service is not None:
            return float(self.service.mean)
        if lengths is None:
            raise ValueError("the token model's mean holding time needs the token lengths")
        tot = 0.0
        for w, (inp, out) in zip(lengths.shares, lengths.pairs.values()):
            tot += w * float(np.mean(np.asarray(self.prefill_time(inp.astype(float))) + (out - 1.0) * self.tpot_s))
        return tot

    def __repr__(self):
        if self.service is not None:
            return f"ReplicaModel(slots={self.slots}, service={self.service!r})"
        return f"ReplicaModel(slots={self.slots}, tpot_s={self.tpot_s:.4g}, gpus={self.gpus})"


def required_replicas(rate, replica: ReplicaModel, service_time_s: float, *, wait_target_s: float = 0.5,
                      late_share: float = 0.01):
    """Fewest replicas whose pooled queue keeps ``P(wait > wait_target_s) ≤ late_share`` at each rate.

    The Erlang C answer (:func:`capbook.queueing.replicas_pooled`) for ``c = replicas × slots``
    servers of mean holding time ``service_time_s``: what a schedule provisions and what the
    simulation's under-provisioning is measured against.

    Parameters
    ----------
    rate : float or array_like
        Arrival rate(s), requests per second (0 gives 0 replicas).
    replica : ReplicaModel
    service_time_s : float
        Mean seconds a request holds a slot.
    wait_target_s, late_share : float
        The waiting objective.

    Returns
    -------
    numpy.ndarray of int
    """
    r = np.atleast_1d(np.asarray(rate, dtype=float))
    out = np.zeros(r.size, dtype=np.int64)
    cache = {}
    for i, lam in enumerate(r):
        if lam <= 0:
            continue
        key = round(float(lam), 9)
        if key not in cache:
            cache[key] = replicas_pooled(float(lam), replica.slots, service_time_s, wait_target_s, late_share)
        out[i] = cache[key]
    return out


# --------------------------------------------------------------------------- the scaler


class _NoLag(Distribution):
    """A lag of zero seconds (a replica serves the moment it is asked for)."""

    mean = 0.0
    variance = 0.0

    def sample(self, rng, size):
        return np.zeros(size)

    def __repr__(self):
        return "0 s"


def _lag(value, name):
    if isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool):
        if nonnegative(value, name) == 0.0:
            return _NoLag()
    return as_distribution(value, name)


class ProvisioningLag(Distribution):
    """A scale-up lag as the sum of its parts, each lognormal around its mean.

    Parameters
    ----------
    components : dict
        Part name → mean seconds (node, image pull, weights download, model load, ...).
    scv : float
        Squared coefficient of variation of each part (0.25: a part is typically within about
        ±50 % of its mean).

    Notes
    -----
    Build one from the plan's :class:`capbook.plan.fleet.ScaleUpLag` with :meth:`from_scale_up_lag`.

    Examples
    --------
    >>> import numpy as np
    >>> lag = ProvisioningLag({"node": 180.0, "model load": 60.0}, scv=0.25)
    >>> lag.mean, round(float(lag.sample(np.random.default_rng(0), 200_000).mean()), -1)
    (240.0, 240.0)
    """

    def __init__(self, components: dict, scv: float = 0.25):
        if not isinstance(components, dict) or not components:
            raise ValueError("components must map part names to mean seconds")
        self.components = {str(k): nonnegative(v, f"components[{k!r}]") for k, v in components.items()}
        self.scv_each = nonnegative(scv, "scv")
        self._parts = [Lognormal(m, self.scv_each) if (m > 0 and self.scv_each > 0) else m
                       for m in self.components.values()]
        self.mean = float(sum(self.components.values()))
        if self.mean <= 0:
            raise ValueError("the lag's parts add up to 0 s; use lag_s=0 for no lag")
        self.variance = float(sum(self.scv_each * m * m for m in self.components.values()))

    @classmethod
    def from_scale_up_lag(cls, lag, scv: float = 0.25) -> "ProvisioningLag":
        """From a :class:`capbook.plan.fleet.ScaleUpLag` (minutes), without its ``detect`` part: the
        simulator's control loop does the detecting."""
        parts = {"node": lag.node, "image pull": lag.image_pull, "weights download": lag.weights_download,
                 "model load": lag.model_load}
        return cls({k: 60.0 * v for k, v in parts.items() if v > 0}, scv)

    def sample(self, rng, size):
        out = np.zeros(size)
        for p in self._parts:
            out += p.sample(rng, size) if hasattr(p, "sample") else p
        return out

    def __repr__(self):
        return f"ProvisioningLag(mean={self.mean:g} s over {list(self.components)}, scv each={self.scv_each:g})"


@dataclass
class Scaling:
    """How replicas come and go.

    Parameters
    ----------
    min_replicas, max_replicas : int
        Bounds on the replicas serving or starting.
    lag_s : float or Distribution
        Seconds from the scaler's request to a new replica serving (node, image pull, model
        load): a constant or a distribution of :mod:`capbook.sim.distributions`, drawn per replica.
    warm_pool : int
        Standby replicas kept up (and paid for) to take a scale-up with ``warm_lag_s``.
    warm_lag_s : float or Distribution
        Seconds from taking a standby replica to it serving.
    interval_s : float
        Seconds between control decisions.
    metric_window_s : float
        Seconds of history the policy's metrics average over.
    scale_up_window_s, scale_down_window_s : float
        Stabilisation: a scale-up takes the lowest recommendation of the last
        ``scale_up_window_s`` seconds, a scale-down the highest of the last
        ``scale_down_window_s`` (the HPA defaults are 0 and 300).
    initial_replicas : int, optional
        Replicas serving at time 0 (default: the policy's first recommendation).
    """

    min_replicas: int = 1
    max_replicas: int = 1000
    lag_s: float | Distribution = 480.0
    warm_pool: int = 0
    warm_lag_s: float | Distribution = 30.0
    interval_s: float = 15.0
    metric_window_s: float = 60.0
    scale_up_window_s: float = 0.0
    scale_down_window_s: float = 300.0
    initial_replicas: int | None = None

    def __post_init__(self):
        self.min_replicas = integer(self.min_replicas, "min_replicas", minimum=0)
        self.max_replicas = integer(self.max_replicas, "max_replicas", minimum=max(self.min_replicas, 1))
        self.lag_s = _lag(self.lag_s, "lag_s")
        self.warm_pool = integer(self.warm_pool, "warm_pool", minimum=0)
        self.warm_lag_s = _lag(self.warm_lag_s, "warm_lag_s")
        self.interval_s = positive(self.interval_s, "interval_s")
        self.metric_window_s = positive(self.metric_window_s, "metric_window_s")
        self.scale_up_window_s = nonnegative(self.scale_up_window_s, "scale_up_window_s")
        self.scale_down_window_s = nonnegative(self.scale_down_window_s, "scale_down_window_s")
        if self.initial_replicas is not None:
            self.initial_replicas = integer(self.initial_replicas, "initial_replicas", minimum=0)


class Observation:
    """What a policy sees at a control tick (metrics over the last ``Scaling.metric_window_s``).

    Attributes
    ----------
    time_s : float
        Seconds since the start of the run.
    serving, starting, draining, standby : int
        Replicas in each state now.
    slots : int
        Slots per replica.
    arrival_rate : float
        Arrivals per second over the window.
    slot_utilisation : float
        Mean share of the serving replicas' slots busy (sampled at the ticks of the window).
    gpu_utilisation : float
        Mean share of serving replicas running at least one request: what a GPU's "utilisation"
        counter reports (busy whenever any kernel runs), saturating long before the slots do.
    busy : int
        Requests in service on the serving replicas now (a draining replica's last requests are
        not counted: they need no new capacity).
    waiting : int
        Requests queued now.
    ttft_p99_s : float
        p99 TTFT of the requests that started in the window (0 when none did); computed when
        first read.
    goodput : float
        Share of the window's requests that met the TTFT objective and were not refused (1
        when there were none).
    """

    __slots__ = ("time_s", "serving", "starting", "draining", "standby", "slots", "arrival_rate",
                 "slot_utilisation", "gpu_utilisation", "busy", "waiting", "_ttft", "_q", "_p99", "goodput")

    def __init__(self, time_s, serving, starting, draining, standby, slots, arrival_rate, slot_utilisation,
                 gpu_utilisation, busy, waiting, ttft_p99_s=0.0, goodput=1.0, *, ttft_window=None, quantile=0.99):
        self.time_s, self.serving, self.starting, self.draining, self.standby = time_s, serving, starting, draining, standby
        self.slots, self.arrival_rate = slots, arrival_rate
        self.slot_utilisation, self.gpu_utilisation = slot_utilisation, gpu_utilisation
        self.busy, self.waiting = busy, waiting
        self._ttft, self._q = ttft_window, quantile
        self._p99 = float(ttft_p99_s) if ttft_window is None else None
        self.goodput = goodput

    @property
    def ttft_p99_s(self) -> float:
        """p99 TTFT over the window, seconds (0 when no request started in it)."""
        if self._p99 is None:
            parts = [x for x in self._ttft if x.size]
            self._p99 = float(np.quantile(np.concatenate(parts), self._q)) if parts else 0.0
        return self._p99

    def __repr__(self):
        return (f"Observation(t={self.time_s:g} s, serving={self.serving}, starting={self.starting}, "
                f"busy={self.busy}, waiting={self.waiting}, slot_utilisation={self.slot_utilisation:.3f})")

    @property
    def replicas(self) -> int:
        """Replicas serving or starting (what the scaler compares a recommendation with)."""
        return self.serving + self.starting


# --------------------------------------------------------------------------- policies


class Policy:
    """A scaling policy: :meth:`desired` maps an :class:`Observation` to the replicas it wants.

    Every policy has this one method; the scaler applies bounds and stabilisation.
    """

    name = "policy"

    def desired(self, obs: Observation) -> int:  # pragma: no cover - interface
        """The replicas wanted now (serving plus starting), given the last window's observation."""
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}()"


class Static(Policy):
    """Always the same number of replicas (the plan's static fleet)."""

    def __init__(self, replicas: int):
        self.replicas = integer(replicas, "replicas", minimum=0)
        self.name = f"static {self.replicas}"

    def desired(self, obs: Observation) -> int:
        return self.replicas

    def __repr__(self):
        return f"Static({self.replicas})"


class Schedule(Policy):
    """Replicas by time of the period (hour of week by default), looked up ``lead_s`` ahead.

    Parameters
    ----------
    replicas : array_like of int
        Replicas per step of the period (168 hours of a week, 24 of a day, ...).
    step_s : float
        Length of a step, seconds.
    lead_s : float
        Look this far ahead: a step's replicas are asked for ``lead_s`` before it begins, so
        with ``lead_s`` equal to the scale-up lag they serve from its first second.
    offset_s : float
        Position in the period at time 0 of the run, seconds (0: the run starts at step 0).
    """

    def __init__(self, replicas, step_s: float = 3600.0, lead_s: float = 0.0, offset_s: float = 0.0):
        r = array(np.asarray(replicas, dtype=float), "replicas", lo=0.0, nonempty=True).ravel()
        if np.any(r != np.round(r)):
            raise ValueError("replicas must be whole numbers")
        self.replicas = r.astype(np.int64)
        self.step_s = positive(step_s, "step_s")
        self.lead_s = nonnegative(lead_s, "lead_s")
        self.offset_s = nonnegative(offset_s, "offset_s")
        self.name = "schedule" + (f" (lead {self.lead_s / 60:g} min)" if self.lead_s else "")

    @property
    def period_s(self) -> float:
        """Length of the period, seconds."""
        return self.replicas.size * self.step_s

    def at(self, t):
        """Scheduled replicas for the step holding time ``t`` (no lead), seconds."""
        k = np.floor(((np.asarray(t, dtype=float) + self.offset_s) % self.period_s) / self.step_s).astype(np.int64)
        return self.replicas[np.minimum(k, self.replicas.size - 1)]

    def desired(self, obs: Observation) -> int:
        return int(self.at(obs.time_s + self.lead_s))

    @classmethod
    def from_rates(cls, rates, replica: ReplicaModel, service_time_s: float, *, step_s: float = 3600.0,
                   lead_s: float = 0.0, wait_target_s: float = 0.5, late_share: float = 0.01,
                   extra: int = 0) -> "Schedule":
        """The schedule that provisions each step for its rate (:func:`required_replicas`) plus
        ``extra`` replicas (burst headroom)."""
        need = required_replicas(rates, replica, service_time_s, wait_target_s=wait_target_s, late_share=late_share)
        return cls(need + integer(extra, "extra", minimum=0), step_s=step_s, lead_s=lead_s)

    def __repr__(self):
        return f"Schedule(steps={self.replicas.size}, step_s={self.step_s:g}, lead_s={self.lead_s:g})"


class ReactiveUtilisation(Policy):
    """HPA-style target tracking on utilisation: ``ceil(serving × utilisation / target)``.

    Parameters
    ----------
    target : float
        Utilisation to hold, in (0, 1] (the book's advice: 0.6-0.7 of the knee's slots).
    metric : {"slots", "gpu"}
        ``"slots"``: the share of slots busy. ``"gpu"``: the share of replicas running
        anything, what a GPU utilisation counter shows; it reads 100 % at any load that keeps
        one sequence per replica and so cannot tell a replica at 2 of 32 slots from a full
        one (the book's reason not to scale on it).
    tolerance : float
        No change while ``|utilisation / target − 1| ≤ tolerance`` (HPA: 0.1).
    extra : int
        Replicas added on top (burst headroom).
    """

    def __init__(self, target: float = 0.65, metric: str = "slots", tolerance: float = 0.1, extra: int = 0):
        self.target = probability(target, "target", lo_open=True)
        self.metric = choice(metric, "metric", ("slots", "gpu"))
        self.tolerance = nonnegative(tolerance, "tolerance")
        self.extra = integer(extra, "extra", minimum=0)
        self.name = f"{'GPU' if self.metric == 'gpu' else 'slot'} utilisation {self.target:.0%}"

    def desired(self, obs: Observation) -> int:
        u = obs.gpu_utilisation if self.metric == "gpu" else obs.slot_utilisation
        cur = max(obs.serving, 1)
        base = max(obs.serving + obs.starting - self.extra, 0)
        ratio = u / self.target
        if abs(ratio - 1.0) <= self.tolerance:
            return base + self.extra
        return int(math.ceil(cur * ratio - 1e-9)) + self.extra

    def __repr__(self):
        return f"ReactiveUtilisation(target={self.target:g}, metric={self.metric!r}, extra={self.extra})"


class ReactiveWaiting(Policy):
    """Target tracking on requests asking for a slot (running plus waiting):
    ``ceil((busy + waiting) / (slots × target))``.

    Unlike utilisation this does not saturate: a queue raises it above 100 %, in proportion.

    Parameters
    ----------
    target : float
        Share of the slots the requests should fill, in (0, 1].
    extra : int
        Replicas added on top (burst headroom).
    """

    def __init__(self, target: float = 0.65, extra: int = 0):
        self.target = probability(target, "target", lo_open=True)
        self.extra = integer(extra, "extra", minimum=0)
        self.name = f"waiting + running at {self.target:.0%}"

    def desired(self, obs: Observation) -> int:
        return int(math.ceil((obs.busy + obs.waiting) / (obs.slots * self.target) - 1e-9)) + self.extra

    def __repr__(self):
        return f"ReactiveWaiting(target={self.target:g}, extra={self.extra})"


class ReactiveLatency(Policy):
    """Step scaling on what users see: p99 TTFT and goodput over the window.

    Adds ``ceil(step × serving)`` replicas (at least one) when p99 TTFT exceeds the objective or
    goodput falls below its target; removes one when p99 TTFT is below ``down_at`` × the
    objective and the slots are less than ``down_utilisation`` busy. It reacts only once users
    already wait, so it is always at least one lag late.

    Parameters
    ----------
    ttft_target_s : float
        The p99 TTFT objective, seconds.
    goodput_share : float
        Goodput target, in (0, 1].
    step : float
        Share of the serving replicas added per step up.
    down_at, down_utilisation : float
        Conditions for a step down.
    """

    def __init__(self, ttft_target_s: float = 1.0, goodput_share: float = 0.99, step: float = 0.2, down_at: float = 0.5,
                 down_utilisation: float = 0.5):
        self.ttft_target_s = positive(ttft_target_s, "ttft_target_s")
        self.goodput_share = probability(goodput_share, "goodput_share", lo_open=True)
        self.step = positive(step, "step")
        self.down_at = probability(down_at, "down_at", lo_open=True)
        self.down_utilisation = probability(down_utilisation, "down_utilisation", lo_open=True)
        self.name = f"p99 TTFT {self.ttft_target_s:g} s / goodput {self.goodput_share:.0%}"

    def desired(self, obs: Observation) -> int:
        cur = obs.serving + obs.starting
        if obs.ttft_p99_s > self.ttft_target_s or obs.goodput < self.goodput_share:
            if obs.starting:            # the last step is still on its way: wait for it
                return cur
            return cur + max(1, int(math.ceil(self.step * max(obs.serving, 1))))
        if obs.ttft_p99_s < self.down_at * self.ttft_target_s and obs.slot_utilisation < self.down_utilisation:
            return cur - 1
        return cur

    def __repr__(self):
        return f"ReactiveLatency(ttft_target_s={self.ttft_target_s:g}, goodput_share={self.goodput_share:g})"


class ScheduleReactive(Policy):
    """A schedule as the floor, a reactive policy on top: ``max(schedule, reactive)``."""

    def __init__(self, schedule: Schedule, reactive: Policy):
        if not isinstance(schedule, Schedule):
            raise TypeError("schedule must be a capbook.autoscale.policies.Schedule")
        if not isinstance(reactive, Policy):
            raise TypeError("reactive must be a capbook.autoscale.policies.Policy")
        self.schedule, self.reactive = schedule, reactive
        self.name = f"{schedule.name} + {reactive.name}"

    def desired(self, obs: Observation) -> int:
        return max(self.schedule.desired(obs), self.reactive.desired(obs))

    def __repr__(self):
        return f"ScheduleReactive({self.schedule!r}, {self.reactive!r})"


# --------------------------------------------------------------------------- the result


class AutoscaleResult:
    """What a simulated run cost and what its requests saw.

    Attributes
    ----------
    policy : str
        The policy's name.
    hours : pandas.DataFrame
        One row per report bin (an hour by default): ``start_s``, ``arrivals``, ``rate``
        (arrivals per second), ``refused``, ``goodput``, ``ttft_p99_s``, ``serving`` (mean
        replicas serving), ``gpu_hours`` (all paid replica time: serving, starting, draining,
        standby, × GPUs per replica), ``met`` (the hour met both objectives).
    events : pandas.DataFrame
        Scale events: ``time_s``, ``event`` (``request``, ``ready``, ``cancel``, ``drain``,
        ``release``, ``standby``), ``replica``, ``warm`` (taken from the standby pool).
    replicas : pandas.DataFrame
        One row per replica: ``requested_s``, ``ready_s``, ``drain_s``, ``released_s``, ``kind``
        (``serving`` or ``standby``).
    ticks : pandas.DataFrame
        Per control tick: ``time_s``, ``serving``, ``starting``, ``target`` (the scaler's count
        after stabilisation and bounds), ``recommended`` (the policy's), ``waiting``, ``busy``.
    """

    def __init__(self, *, policy, hours, events, replicas, ticks, slo, duration_s, gpus, record=None,
                 slots=1):
        self.policy = policy
        self.hours = hours
        self.events = events
        self.replicas = replicas
        self.ticks = ticks
        self.slo = slo
        self.duration_s = duration_s
        self.gpus = gpus
        self.slots = slots
        self._record = record

    @property
    def requests(self) -> int:
        """Requests that arrived."""
        return int(self.hours["arrivals"].sum())

    @property
    def gpu_hours(self) -> float:
        """GPU-hours paid over the run (all states, × GPUs per replica)."""
        return float(self.hours["gpu_hours"].sum())

    @property
    def records(self) -> pd.DataFrame:
        """Per request (only with ``record=True``): ``arrival``, ``start``, ``end``, ``ttft``,
        ``refused``, ``replica``."""
        if self._record is None:
            raise ValueError("per-request records were not kept: run simulate_autoscaling(..., record=True)")
        return self._record

    def under_provisioned_s(self, required=None) -> float:
        """Seconds with fewer replicas serving than wanted.

        Without ``required``: fewer than the scaler's target (the replicas asked for and not yet
        serving, the cost of the lag). With ``required`` (a callable of time, seconds, or a
        :class:`Schedule`): fewer than that count, e.g. :func:`required_replicas` of the true
        rate. Measured exactly from the replicas' ready and drain times, at the tick resolution
        for the target.
        """
        t0, t1 = 0.0, self.duration_s
        # serving count as a step function: +1 at ready, -1 at drain (or release when never drained)
        r = self.replicas[self.replicas["kind"] == "serving"]
        up = r["ready_s"].dropna().to_numpy()
        down = r.loc[r["ready_s"].notna(), "drain_s"].fillna(np.inf).to_numpy()
        ticks = self.ticks["time_s"].to_numpy()
        if required is None:
            edges = np.append(ticks, t1)
            want = self.ticks["target"].to_numpy()
            pts = np.unique(np.concatenate([edges, up[(up > t0) & (up < t1)], down[(down > t0) & (down < t1)]]))
            a, b = pts[:-1], pts[1:]
            w = want[np.searchsorted(edges, a, side="right") - 1]
        else:
            f = required.at if isinstance(required, Schedule) else required
            step = self.ticks["time_s"].diff().median() if len(ticks) > 1 else 1.0
            pts = np.unique(np.concatenate([np.arange(t0, t1, min(step, 1.0)), up[(up > t0) & (up < t1)],
                                            down[(down > t0) & (down < t1)], [t1]]))
            a, b = pts[:-1], pts[1:]
            w = np.asarray([f(x) for x in a], dtype=float) if not isinstance(required, Schedule) else f(a)
        mid = (a + b) / 2
        serving = np.searchsorted(np.sort(up), mid, side="right") - np.searchsorted(np.sort(down), mid, side="right")
        return float(np.sum((b - a)[serving < w]))

    def summary(self) -> dict:
        """The run in one row: GPU-hours, requests, refused, goodput, p99 TTFT, hours met, replica
        range and scale events."""
        h = self.hours
        n = max(int(h["arrivals"].sum()), 1)
        serving = self.ticks["serving"]
        return {
            "policy": self.policy,
            "gpu_hours": self.gpu_hours,
            "requests": int(h["arrivals"].sum()),
            "refused": int(h["refused"].sum()),
            "goodput": float((h["goodput"] * h["arrivals"]).sum() / n),
            "ttft_p99_s": self._overall_p99,
            "worst_hour_ttft_p99_s": float(h["ttft_p99_s"].max()),
            "hours_met": float(h["met"].mean()),
            "replicas_min": int(serving.min()),
            "replicas_max": int(serving.max()),
            "scale_events": int((self.events["event"].isin(["request", "drain"])).sum()),
        }

    def __repr__(self):
        s = self.summary()
        return (f"AutoscaleResult({s['policy']!r}: {s['gpu_hours']:,.1f} GPU-hours, {s['requests']:,} requests, "
                f"goodput {s['goodput']:.4f}, hours met {s['hours_met']:.1%})")


# --------------------------------------------------------------------------- the simulation


def _window(times, vals, since, pick):
    """``pick`` (min or max) of the values whose time is at or after ``since`` (to 1e-9 s)."""
    lo = since - 1e-9
    return pick(v for (s_, v) in zip(times, vals) if s_ >= lo)


def _refused_inf(tt, start):
    """TTFTs with a refused request's (NaN start) as infinite."""
    return np.where(np.isnan(start), np.inf, tt)


class _Replica:
    __slots__ = ("rid", "requested", "ready", "drain", "released", "kind", "warm", "slot0")

    def __init__(self, rid, requested, ready, kind, warm, slot0):
        self.rid, self.requested, self.ready, self.kind, self.warm = rid, requested, ready, kind, warm
        self.drain = math.nan
        self.released = math.nan
        self.slot0 = slot0


def _as_arrivals(arrivals):
    if isinstance(arrivals, RateArrivals):
        return arrivals, None
    if isinstance(arrivals, ArrivalStream):
        return None, arrivals
    t = np.asarray(arrivals, dtype=float).ravel()
    return None, ArrivalStream(t)


def simulate_autoscaling(arrivals, replica: ReplicaModel, policy: Policy, scaling: Scaling | None = None, *,
                         slo: SLO | None = None, duration_s: float | None = None,
                         report_s: float = 3600.0, max_queue: int | None = None, record: bool = False,
                         seed: int | None = None, rng: np.random.Generator | None = None) -> AutoscaleResult:
    """Run a fleet under a scaling policy through time-varying demand.

    Parameters
    ----------
    arrivals : RateArrivals, ArrivalStream or array_like
        The demand: a rate series (requests generated an hour at a time, with token counts from
        its ``lengths``), or explicit arrival times in seconds (sorted), with tokens when the
        replica model needs them.
    replica : ReplicaModel
    policy : Policy
    scaling : Scaling, optional
        Bounds, lags, standby pool and windows (default :class:`Scaling`).
    slo : capbook.slo.SLO, optional
        How hours are judged: its ``ttft_target_s`` at ``ttft_quantile`` and its
        ``goodput_share`` (default :class:`~capbook.slo.SLO`: p99 TTFT ≤ 1 s, goodput ≥ 99 %).
    duration_s : float, optional
        Seconds to simulate (default: the rate series' length, or the last arrival).
    report_s : float
        Length of a report bin of :attr:`AutoscaleResult.hours`, seconds.
    max_queue : int, optional
        The gateway refuses (429) an arrival that finds this many requests queued.
    record : bool
        Keep per-request records (:attr:`AutoscaleResult.records`; memory grows with the run).
    seed : int, optional
    rng : numpy.random.Generator, optional
        Source of randomness (give one of ``seed``/``rng``; default ``seed=0``).

    Returns
    -------
    AutoscaleResult
    """
    if rng is not None and seed is not None:
        raise ValueError("give seed or rng, not both")
    if rng is None:
        rng = np.random.default_rng(0 if seed is None else seed)
    if not isinstance(replica, ReplicaModel):
        raise TypeError("replica must be a capbook.autoscale.policies.ReplicaModel")
    if not isinstance(policy, Policy):
        raise TypeError("policy must be a capbook.autoscale.policies.Policy (Static, Schedule, ReactiveUtilisation, ...)")
    scaling = Scaling() if scaling is None else scaling
    if not isinstance(scaling, Scaling):
        raise TypeError("scaling must be a capbook.autoscale.policies.Scaling")
    slo = SLO() if slo is None else slo
    if not isinstance(slo, SLO):
        raise TypeError("slo must be a capbook.slo.SLO (its ttft_target_s, ttft_quantile and goodput_share judge each hour)")
    report_s = positive(report_s, "report_s")
    if max_queue is not None:
        max_queue = integer(max_queue, "max_queue", minimum=0)
    source, stream = _as_arrivals(arrivals)
    if stream is not None:
        st = np.asarray(stream.times, dtype=float)
        if st.size == 0:
            raise ValueError("the arrivals hold no requests: nothing to simulate")
        if not np.all(np.isfinite(st)) or st[0] < 0 or np.any(np.diff(st) < 0):
            raise ValueError("arrival times must be finite, non-negative seconds in increasing order")
        end_default = float(st[-1]) + 1e-9
    else:
        end_default = source.duration_s
    T_end = end_default if duration_s is None else positive(duration_s, "duration_s")
    return _Run(source, stream, replica, policy, scaling, slo, T_end, report_s, max_queue, record, rng).run()


class _Run:
    """One simulated run: the control loop as ticks of the event core (:meth:`_tick`), and the
    state of the slot kernel between them."""

    def __init__(self, source, stream, replica, policy, scaling, slo, T_end, report_s, max_queue, record, rng):
        self.source, self.stream, self.rep, self.policy, self.sc = source, stream, replica, policy, scaling
        self.slo, self.T_end, self.report_s, self.max_queue, self.record, self.rng = (
            slo, T_end, report_s, max_queue, record, rng)
        self.S = replica.slots
        # slots: heap of (free time, slot id); a slot is alive while its replica serves
        self.heap = []
        self._heap_arr = None        # (free times, slot ids), sorted: the heap when it is not listed
        self.alive = []              # per slot id
        self.slot_free = np.zeros(64 * self.S)   # per slot id: when its current request ends (grows)
        self.reps = []               # every _Replica ever asked for
        self.serving = []            # rids serving (not draining)
        self._serving_rows = None    # self.serving as an array (None when it changed)
        self.starting = []           # rids asked for, not yet serving (in request order)
        self.pending_ready = []      # heap of (ready time, rid)
        self.standby = []            # rids of standby replicas up
        self.standby_starting = []   # heap of (ready time, rid) of standby replicas on their way
        self.events = []
        self.draining = []           # heap of release times of draining replicas
        self.recs = deque()          # times of the recommendations kept for stabilisation
        self.rec_vals = deque()      # and the recommendations
        self._n_committed = 0
        self._arrived_end = 0        # index past the arrivals before the last commit's end (_commit)
        self._h_positive = False     # every pending holding time is > 0 (_tick checks it per chunk)

    # ---------------------------------------------------------------- replicas
    def _new_replica(self, t, kind, warm=False):
        rid = len(self.reps)
        slot0 = rid * self.S          # == len(self.alive): S slots per replica, in order (_tick reads them as rows)
        if kind == "standby" or not warm:
            lag = float(self.sc.lag_s.sample(self.rng, 1)[0])
        else:
            lag = float(self.sc.warm_lag_s.sample(self.rng, 1)[0])
        r = _Replica(rid, t, t + lag, kind, warm, slot0)
        self.reps.append(r)
        self.alive.extend([False] * self.S)
        if len(self.alive) > self.slot_free.size:
            grown = np.zeros(max(2 * self.slot_free.size, len(self.alive)))
            grown[:self.slot_free.size] = self.slot_free
            self.slot_free = grown
        else:
            self.slot_free[slot0:slot0 + self.S] = 0.0
        return r

    def _request(self, t, k):
        """Ask for ``k`` more serving replicas at time ``t``: from the standby pool first."""
        for _ in range(k):
            if self.standby:
                old = self.reps[self.standby.pop()]
                old.released = t                      # the standby's own record ends; it serves as a new one
                r = self._new_replica(t, "serving", warm=True)   # paid from t: the standby's record ends at t
                self.events.append((t, "request", r.rid, True))
                sb = self._new_replica(t, "standby")  # refill the pool
                heapq.heappush(self.standby_starting, (sb.ready, sb.rid))
                self.events.append((t, "standby", sb.rid, False))
            else:
                r = self._new_replica(t, "serving")
                self.events.append((t, "request", r.rid, False))
            self.starting.append(r.rid)
            heapq.heappush(self.pending_ready, (r.ready, r.rid))
            # its slots join the heap now, free from the ready time: requests already queued see them
            heap = self._heap_list()
            for j in range(r.slot0, r.slot0 + self.S):
                self.alive[j] = True
                self.slot_free[j] = r.ready
                heapq.heappush(heap, (r.ready, j))

    def _remove(self, t, k):
        """Remove ``k`` replicas at time ``t``: cancel those starting (newest first), then drain."""
        while k > 0 and self.starting:
            rid = self.starting.pop()
            r = self.reps[rid]
            r.released = t
            r.ready = math.nan
            for j in range(r.slot0, r.slot0 + self.S):
                self.alive[j] = False
            self.events.append((t, "cancel", rid, r.warm))
            k -= 1
        if k > 0:
            self._drain(t, k)
        # the removed replicas' slots leave the heap now (the hot loop never meets a dead slot)
        alive = self.alive
        heap = self._heap_list()
        heap[:] = [x for x in heap if alive[x[1]]]
        heapq.heapify(heap)

    def _drain(self, t, k):
        """Drain the ``k`` serving replicas that free soonest (their last request ends first)."""
        free = self.slot_free
        order = sorted(self.serving, key=lambda rid: float(free[self.reps[rid].slot0:self.reps[rid].slot0 + self.S].max()))
        for rid in order[:k]:
            r = self.reps[rid]
            r.drain = t
            r.released = max(t, float(free[r.slot0:r.slot0 + self.S].max()))
            for j in range(r.slot0, r.slot0 + self.S):
                self.alive[j] = False
            self.serving.remove(rid)
            self._serving_rows = None
            heapq.heappush(self.draining, r.released)
            self.events.append((t, "drain", rid, False))
            self.events.append((r.released, "release", rid, False))

    def _promote(self, t):
        """Replicas whose lag has passed by ``t`` start serving (they already have slots)."""
        while self.pending_ready and self.pending_ready[0][0] <= t:
            ready, rid = heapq.heappop(self.pending_ready)
            r = self.reps[rid]
            if r.released == r.released:              # cancelled
                continue
            self.starting.remove(rid)
            self.serving.append(rid)
            self._serving_rows = None
            self.events.append((ready, "ready", rid, r.warm))
        while self.standby_starting and self.standby_starting[0][0] <= t:
            ready, rid = heapq.heappop(self.standby_starting)
            self.standby.append(rid)

    # ---------------------------------------------------------------- demand
    def _chunk(self, t0, t1):
        """Arrivals in [t0, t1): times, holding, first-token offsets."""
        rng = self.rng
        if self.source is not None:
            times = self.source.times_between(rng, t0, t1)
            n = times.size
            if self.rep.service is None:
                if self.source.lengths is None:
                    raise ValueError("this replica's holding time comes from tokens: give the RateArrivals "
                                     "lengths= (capbook.sim.arrivals.TokenLengths)")
                inp, out, _ = self.source.lengths.sample(rng, n)
                h, f = self.rep.draw(rng, n, inp, out)
            else:
                h, f = self.rep.draw(rng, n)
            return times, h, f
        st = self.stream
        lo, hi = np.searchsorted(st.times, [t0, t1], side="left")
        times = np.asarray(st.times[lo:hi], dtype=float)
        if self.rep.service is None:
            if st.input_tokens is None or st.output_tokens is None:
                raise ValueError("this replica's holding time comes from tokens: the arrivals must carry "
                                 "input_tokens and output_tokens")
            h, f = self.rep.draw(rng, times.size, st.input_tokens[lo:hi], st.output_tokens[lo:hi])
        else:
            h, f = self.rep.draw(rng, times.size)
        return times, h, f

    # ---------------------------------------------------------------- the loop
    def _heap_list(self):
        """The slot heap as a list of (free time, slot id), listed from the arrays that
        :meth:`_commit_unqueued` leaves when it was the last to change it."""
        if self._heap_arr is not None:
            hv, hj = self._heap_arr
            self.heap[:] = list(zip(hv.tolist(), hj.tolist()))
            self._heap_arr = None
        return self.heap

    def _commit_unqueued(self, A, H, i, k_end):
        """The requests ``A[i:k_end]`` (arrays) that start on arrival, committed at once; returns the
        index of the first that would wait (the heap loop of :meth:`_commit` takes it on) and the
        starts of those committed (None when none was).

        While nobody waits, the slot each arrival takes is the earliest-free one (the heap's top),
        and every slot freed during the batch is freed at or after the arrival that filled it: so
        the k-th slot taken is the k-th smallest of the slot-free times and the batch's end times
        together (sorted as the heap orders them: by time, then slot id), and the arrival waits
        exactly when that time is after it. This gives the heap loop's starts and slots, with its
        heap afterwards, without a Python step per request.
        """
        m = k_end - i
        if m < 64:                                   # the loop is as fast for a handful
            return i, None
        if self._heap_arr is None:
            heap = self.heap
            c = len(heap)
            if not c:
                return i, None
            hv = np.fromiter((x[0] for x in heap), float, c)
            hj = np.fromiter((x[1] for x in heap), np.int64, c)
            o = np.lexsort((hj, hv))                 # in the heap's order: by time, then slot id
            hv, hj = hv[o], hj[o]
        else:
            hv, hj = self._heap_arr
            c = hv.size
        a = A[i:k_end]
        h = H[i:k_end]
        if not self._h_positive and not (h > 0).all():   # a zero holding time could free its slot at its own start
            return i, None
        vals = np.concatenate((hv, a + h))
        # the slot-free times are sorted by (time, slot id): a stable sort keeps that order among equal
        # times and merges the batch's end times in
        order = np.argsort(vals, kind="stable")
        took = order[:m]                             # what the heap's top would be at each arrival
        on_time = vals[took] <= a
        if on_time.all():
            k, src, rest = m, took, order[m:]        # every one starts on arrival (the usual tick)
        else:
            k = int(np.argmin(on_time))
            if not k:
                return i, None
            src = took[:k]
            rest = order[k:]
            rest = rest[(rest < c) | (rest - c < k)]     # the untaken slot-free times and the batch's own ends
        # each request's slot: a slot-free time of the heap's gives its slot id; the end of an earlier
        # request of the batch gives that request's slot (followed until it reaches the heap's)
        ids = np.concatenate((hj, np.full(k, -1, np.int64)))
        ids[c:] = ids[src]                           # ids[c + x]: request x's slot (-1 while not known)
        pend = np.flatnonzero(ids[c:] < 0)
        while pend.size:
            got = ids[src[pend]]
            done = got >= 0
            ids[c + pend[done]] = got[done]
            pend = pend[~done]
        rv = vals[rest]
        rj = ids[rest]
        self._heap_arr = (rv, rj)                    # sorted: a valid heap once listed (_heap_list)
        new = rest >= c
        self.slot_free[rj[new]] = rv[new]            # each slot is in the heap once
        return i + k, a[:k]

    def _commit(self, An, Hn, i, T1, SL):
        """Commit the pending arrivals ``An[i:]`` (arrays of arrival times and holding times) that
        start before ``T1``; return the next index and the starts committed (NaN when refused).

        ``SL`` (when recording) gets each committed request's slot. Requests that start on arrival
        are committed at once (:meth:`_commit_unqueued`); the heap loop takes the rest one by one.
        """
        k_end = An.size if T1 == math.inf else i + int(np.searchsorted(An[i:], T1, side="left"))
        self._arrived_end = k_end                    # the arrivals before T1 end here (the tick counts who waits)
        mq = self.max_queue
        first = None
        if mq is None and SL is None:
            i, first = self._commit_unqueued(An, Hn, i, k_end)
            if i >= k_end:
                return i, (first if first is not None else np.empty(0))
        A, H = An[i:k_end].tolist(), Hn[i:k_end].tolist()
        base, i = i, 0
        ST = []
        sf = self.slot_free
        heapreplace = heapq.heapreplace
        push = ST.append
        nA = len(A)
        heap = self._heap_list()
        if mq is None and SL is None:
            while i < nA:
                a = A[i]
                if not heap:
                    break
                f, j = heap[0]
                st = a if a >= f else f
                if st >= T1:
                    break
                e = st + H[i]
                heapreplace(heap, (e, j))
                sf[j] = e
                push(st)
                i += 1
        else:
            q = self.starts_q
            while i < nA:
                a = A[i]
                if mq is not None:
                    while q and q[0] <= a:
                        q.popleft()
                    if len(q) >= mq:
                        push(math.nan)
                        if SL is not None:
                            SL.append(-1)
                        i += 1
                        continue
                if not heap:
                    break
                f, j = heap[0]
                st = a if a >= f else f
                if st >= T1:
                    break
                e = st + H[i]
                heapreplace(heap, (e, j))
                sf[j] = e
                if mq is not None and st > a:
                    q.append(st)
                push(st)
                if SL is not None:
                    SL.append(j)
                i += 1
        st = np.array(ST, dtype=float)
        return base + i, (st if first is None else np.concatenate((first, st)))

    def run(self):
        sc, S = self.sc, self.S
        dt = sc.interval_s
        T_end = self.T_end
        gen_s = 3600.0 if self.source is None else max(self.source.bin_s, min(3600.0, self.source.duration_s))
        gen_s = max(gen_s, dt)
        if self.source is not None and self.source.rate_cv > 0:      # a burst window never spans two pieces
            w = self.source.window_s
            gen_s = math.ceil(gen_s / w - 1e-9) * w
        self.gen_s = gen_s

        # pending arrivals (generated, not yet committed): arrays consumed from index p
        self.A = self.H = self.F = np.empty(0)
        self.p = 0
        self.gen_t = 0.0
        self.parts = []                 # per tick: (arrival, start, TTFT (inf when refused)[, slot, holding]) arrays
        self.starts_q = deque()         # starts of committed requests not yet started (queue limit)
        win_n = max(1, int(round(sc.metric_window_s / dt)))
        self.win = tuple(deque(maxlen=win_n) for _ in range(6))     # util, gpu, arrivals, ttft, good, total
        self.ticks = []
        self.seen = 0                   # arrivals before the last tick (committed or pending)

        # time 0: the initial fleet, serving at once, and the standby pool up
        obs0 = Observation(0.0, 0, 0, 0, 0, S, 0.0, 0.0, 0.0, 0, 0, 0.0, 1.0)
        n0 = sc.initial_replicas if sc.initial_replicas is not None else self.policy.desired(obs0)
        n0 = min(max(int(n0), sc.min_replicas), sc.max_replicas)
        for _ in range(n0):
            r = self._new_replica(0.0, "serving")
            r.ready = 0.0
            self.serving.append(r.rid)
            for j in range(r.slot0, r.slot0 + S):
                self.alive[j] = True
                heapq.heappush(self._heap_list(), (0.0, j))
            self.events.append((0.0, "ready", r.rid, False))
        for _ in range(sc.warm_pool):
            r = self._new_replica(0.0, "standby")
            r.ready = 0.0
            self.standby.append(r.rid)

        # the control loop: a tick every interval_s on the event core, the last one at T_end.
        # Between two ticks the requests are committed in one batch (_commit), not one event each.
        core = EventCore([], None, arrivals_first=True)
        core.every(min(0.0 + dt, T_end), self._tick)
        core.run()

        # requests still queued at the end: served on the fleet as it stands (no more decisions)
        A, H, F, p, parts = self.A, self.H, self.F, self.p, self.parts
        if p < A.size:
            SL = [] if self.record else None
            i, st = self._commit(A, H, p, math.inf, SL)      # the queue limit still applies
            if i < A.size:
                raise ValueError("requests were still queued at the end of the run with no replica left to "
                                 "serve them: raise min_replicas or run longer")
            tt = st - A[p:] + F[p:]
            parts.append((A[p:], st, _refused_inf(tt, st), None if SL is None else np.asarray(SL, dtype=np.int64),
                          None if SL is None else H[p:]))
        return self._result(parts, self.ticks)

    def _tick(self, T1):
        """A control tick at ``T1``: commit the requests that start before it, observe, decide.
        Returns the time of the next tick (None after the one at the end of the run)."""
        sc, S, slo = self.sc, self.S, self.slo
        dt, T_end = sc.interval_s, self.T_end
        A, H, F, p = self.A, self.H, self.F, self.p
        w_util, w_gpu, w_arr, w_ttft, w_good, w_tot = self.win
        gen_t = self.gen_t
        while gen_t < T1 and gen_t < T_end:          # pending arrivals must cover [.., T1)
            g1 = min(gen_t + self.gen_s, T_end)
            ct, ch, cf = self._chunk(gen_t, g1)
            A = np.concatenate((A[p:], np.asarray(ct, dtype=float)))
            H = np.concatenate((H[p:], np.asarray(ch, dtype=float)))
            F = np.concatenate((F[p:], np.asarray(cf, dtype=float)))
            p = 0
            gen_t = g1
            self._h_positive = bool((H > 0).all())
        self.gen_t = gen_t
        self.A, self.H, self.F = A, H, F
        SL = [] if self.record else None
        i, st_new = self._commit(A, H, p, T1, SL)
        n_new = i - p
        if n_new:
            a_new = A[p:i]
            tt = st_new - a_new + F[p:i]                # NaN when refused
            fin = np.isfinite(tt)
            every = fin.all()
            ok = tt if every else tt[fin]
            self.parts.append((a_new, st_new, tt if every else _refused_inf(tt, st_new),
                               None if SL is None else np.asarray(SL, dtype=np.int64),
                               None if SL is None else H[p:i]))
            w_ttft.append(ok)
            w_good.append(int(np.count_nonzero(ok <= slo.ttft_target_s)))
        else:
            w_ttft.append(np.empty(0))
            w_good.append(0)
        w_tot.append(n_new)
        p = self.p = i
        waiting = self._arrived_end - p              # arrivals before T1 still waiting
        T = T1
        self._promote(T)
        ns = len(self.serving)
        if ns:
            # replica rid holds the slots rid * S … rid * S + S - 1 (_new_replica)
            if self._serving_rows is None:             # set to None wherever self.serving changes
                self._serving_rows = np.array(self.serving)
            slots_busy = self.slot_free.reshape(-1, S)[self._serving_rows] > T
            busy = int(np.count_nonzero(slots_busy))
            gpu = int(np.count_nonzero(slots_busy.any(axis=1))) / ns
            util = busy / (ns * S)
        else:
            busy, gpu, util = 0, 0.0, 0.0
        arrived = self._n_committed + n_new + waiting
        w_arr.append(arrived - self.seen)
        self.seen = arrived
        self._n_committed += n_new
        w_util.append(util)
        w_gpu.append(gpu)
        tot = sum(w_tot)
        dr = self.draining
        while dr and dr[0] <= T:
            heapq.heappop(dr)
        nw = len(w_util)
        obs = Observation(T, ns, len(self.starting), len(dr), len(self.standby), S,
                          sum(w_arr) / (nw * dt), sum(w_util) / nw, sum(w_gpu) / nw,
                          busy, waiting, goodput=(sum(w_good) / tot) if tot else 1.0,
                          ttft_window=tuple(w_ttft), quantile=slo.ttft_quantile)
        rec = int(self.policy.desired(obs))
        target = self._stabilise(T, rec)
        cur = ns + len(self.starting)
        if T >= T_end:                  # the run is over: no decision takes effect
            target = cur
        elif target > cur:
            self._request(T, target - cur)
        elif target < cur:
            self._remove(T, cur - target)
        self.ticks.append((T, ns, len(self.starting), target, rec, waiting, busy))
        if T >= T_end:
            return None
        return min(T + dt, T_end)

    def _stabilise(self, t, rec):
        """The scaler's count: a scale-up takes the lowest recommendation of the scale-up window,
        a scale-down the highest of the scale-down window, then the bounds."""
        sc, recs, vals = self.sc, self.recs, self.rec_vals
        recs.append(t)
        vals.append(rec)
        keep = max(sc.scale_up_window_s, sc.scale_down_window_s)
        while recs[0] < t - keep - 1e-9:
            recs.popleft()
            vals.popleft()
        cur = len(self.serving) + len(self.starting)
        # the longer window holds every recommendation kept (the times only grow)
        if sc.scale_up_window_s > 0:
            up = min(vals) if sc.scale_up_window_s == keep else _window(recs, vals, t - sc.scale_up_window_s, min)
        else:
            up = rec
        if up > cur:
            target = up
        elif rec < cur:
            if sc.scale_down_window_s > 0:
                down = (max(vals) if sc.scale_down_window_s == keep
                        else _window(recs, vals, t - sc.scale_down_window_s, max))
            else:
                down = rec
            target = down if down < cur else cur
        else:
            target = cur
        return min(max(target, sc.min_replicas), sc.max_replicas)

    # ---------------------------------------------------------------- the result
    def _result(self, parts, ticks):
        T_end, rep_s, slo = self.T_end, self.report_s, self.slo
        nb = int(math.ceil(T_end / rep_s - 1e-9))
        edges = np.arange(nb + 1) * rep_s
        edges[-1] = T_end
        # TTFT (inf when refused) and requests per report bin, part by part: a week holds tens of
        # millions of requests, and whole-run temporaries of that size cost more than the sums
        arrivals = np.zeros(nb, dtype=np.int64)
        tts = []
        for x in parts:
            a = x[0]
            if not a.size:
                continue
            tts.append(x[2])
            b0, b1 = min(int(a[0] // rep_s), nb - 1), min(int(a[-1] // rep_s), nb - 1)
            if b0 == b1:                                     # a tick's requests: nearly always one bin
                arrivals[b0] += a.size
            else:
                arrivals += np.bincount(np.minimum((a // rep_s).astype(np.int64), nb - 1), minlength=nb)
        ttft = np.concatenate(tts) if tts else np.empty(0)
        refused = np.zeros(nb, dtype=np.int64)
        good = np.zeros(nb, dtype=np.int64)
        p99 = np.full(nb, np.nan)
        bounds = np.r_[0, np.cumsum(arrivals)]              # requests are in arrival order: bins are contiguous
        for k in range(nb):
            seg = ttft[bounds[k]:bounds[k + 1]]
            if seg.size:
                refused[k] = np.count_nonzero(np.isinf(seg))
                good[k] = np.count_nonzero(seg <= slo.ttft_target_s)
                if not refused[k]:
                    p99[k] = float(np.quantile(seg, slo.ttft_quantile))
                    continue
                # refused requests count as an infinite TTFT; numpy's linear interpolation gives NaN
                # (inf - inf) when the quantile falls among them, so interpolate here
                lo = float(np.quantile(seg, slo.ttft_quantile, method="lower"))
                hi = float(np.quantile(seg, slo.ttft_quantile, method="higher"))
                p99[k] = lo if hi == lo else (math.inf if math.isinf(hi) else float(np.quantile(seg, slo.ttft_quantile)))
        # replicas
        R = pd.DataFrame({
            "requested_s": [r.requested for r in self.reps],
            "ready_s": [r.ready for r in self.reps],
            "drain_s": [r.drain for r in self.reps],
            "released_s": [r.released for r in self.reps],
            "kind": [r.kind for r in self.reps],
            "warm": [r.warm for r in self.reps],
        })
        paid_end = R["released_s"].fillna(T_end).clip(upper=T_end).to_numpy()
        paid_start = R["requested_s"].to_numpy()
        gpu_h = _integrate_intervals(paid_start, np.maximum(paid_end, paid_start), edges) / 3600.0 * self.rep.gpus
        srv = R["kind"].eq("serving") & R["ready_s"].notna()
        s_on = R.loc[srv, "ready_s"].to_numpy()
        s_off = R.loc[srv, "drain_s"].fillna(R.loc[srv, "released_s"]).fillna(T_end).clip(upper=T_end).to_numpy()
        serving = _integrate_intervals(s_on, np.maximum(s_off, s_on), edges) / np.diff(edges)
        with np.errstate(invalid="ignore", divide="ignore"):
            goodput = np.where(arrivals > 0, good / np.maximum(arrivals, 1), 1.0)
        met = (np.nan_to_num(p99, nan=0.0) <= slo.ttft_target_s) & (goodput >= slo.goodput_share)
        hours = pd.DataFrame({"start_s": edges[:-1], "arrivals": arrivals, "rate": arrivals / np.diff(edges),
                              "refused": refused, "goodput": goodput, "ttft_p99_s": p99, "serving": serving,
                              "gpu_hours": gpu_h, "met": met})
        events = pd.DataFrame(self.events, columns=["time_s", "event", "replica", "warm"]).sort_values(
            "time_s", kind="stable").reset_index(drop=True)
        ticks = pd.DataFrame(ticks, columns=["time_s", "serving", "starting", "target", "recommended", "waiting", "busy"])
        record = None
        if self.record:
            cat = (lambda k: np.concatenate([x[k] for x in parts])) if parts else (lambda k: np.empty(0))
            t, start = cat(0), cat(1)
            ref = np.isnan(start)
            sl = np.concatenate([x[3] for x in parts]) if parts else np.empty(0, dtype=np.int64)
            hold = np.concatenate([x[4] for x in parts]) if parts else np.empty(0)
            record = pd.DataFrame({"arrival": t, "start": start, "end": start + hold,
                                   "ttft": np.where(ref, np.nan, ttft), "refused": ref,
                                   "replica": np.where(sl >= 0, sl // self.S, -1)})
        res = AutoscaleResult(policy=self.policy.name, hours=hours, events=events, replicas=R, ticks=ticks,
                              slo=slo, duration_s=T_end, gpus=self.rep.gpus, record=record, slots=self.S)
        fin = ttft[np.isfinite(ttft)] if refused.any() else ttft
        res._overall_p99 = float(np.quantile(fin, slo.ttft_quantile)) if fin.size else math.nan
        return res
