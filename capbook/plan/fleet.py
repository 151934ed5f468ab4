r"""Fleet sizing: routing, burst headroom, failure spares, the plan, token limits and alert levels.

The queueing core (:mod:`capbook.queueing`) answers "how many replicas meet this SLO behind
one queue". A fleet plan needs four more answers, and this module computes them:

1. **Routing.** Load-aware routing (one shared queue, or join-shortest-queue on free slots)
   makes the fleet one M/M/c with ``c = replicas × slots``; random or round-robin routing gives
   every replica its own queue and throws most of the pooling away
   (:func:`compare_routing`, :func:`replicas_for_routing`, :func:`replicas_partitioned`).
2. **Burst headroom.** Demand can climb while new replicas start. The headroom is
   ``ramp rate × scale-up lag`` requests per second, converted to replicas at the pooled
   operating point (:func:`burst_headroom`, :class:`ScaleUpLag`).
3. **Failure spares.** N+k replicas, or enough replicas that losing the largest of ``Z`` zones
   still leaves the fleet its pre-failure capacity (:func:`replicas_surviving_zone_loss`,
   :func:`failure_spares`).
4. **Units callers see.** Tokens per second and per minute at the planned peak, and per-tenant
   tokens-per-minute limits that sum below capacity (:func:`token_rates`,
   :func:`allocate_tpm`, :func:`check_tpm_limits`).

:func:`plan_fleet` puts them together in a :class:`FleetPlan` that renders as a table and as an
Altair waterfall; :func:`alert_levels` turns the plan into the slot-utilisation and queue-wait
levels at which an alert should fire before the SLO is breached.

Units: rates in requests per second; service and wait times in seconds; demand ramps in
requests per second gained per minute; scale-up lags in minutes; tokens per request and
tokens per minute as counted by the gateway (input plus output unless stated otherwise).

The SLO is always of the form ``P(queue wait > t) ≤ target`` with Poisson arrivals and
exponential service (the models of :mod:`capbook.queueing`). Where real traffic is burstier,
scale the waits with Allen–Cunneen (:func:`capbook.queueing.allen_cunneen_wait`) or measure
with the simulator.
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from capbook import queueing as q
from capbook.routing import queue_model, resolve
from capbook.validation import array, fewest, integer, nonnegative, number, positive, probability

# Altair (and capbook.charts) are imported inside the chart methods, so that ``import capbook``
# stays light for code that only computes plans.

__all__ = [
    "late_share",
    "replicas_for_routing",
    "replicas_partitioned",
    "late_share_round_robin",
    "replicas_round_robin",
    "RoutingComparison",
    "compare_routing",
    "ScaleUpLag",
    "BurstHeadroom",
    "burst_headroom",
    "replicas_surviving_zone_loss",
    "failure_spares",
    "FleetPlan",
    "plan_fleet",
    "UtilisationPlan",
    "plan_by_utilisation",
    "TokenRates",
    "token_rates",
    "allocate_tpm",
    "check_tpm_limits",
    "AlertLevels",
    "alert_levels",
    "waterfall_chart",
]

def _slo(arrival_rate, slots, service_time_s, wait_target_s, late_share):
    return (positive(arrival_rate, "arrival_rate"), integer(slots, "slots", minimum=1),
            positive(service_time_s, "service_time_s"), nonnegative(wait_target_s, "wait_target_s"), probability(late_share, "late_share"))


# ---------------------------------------------------------------------------
# Routing
# ---------------------------------------------------------------------------

def late_share(replicas, slots, arrival_rate, service_time_s, wait_target_s, routing="pooled"):
    """Share of requests that wait longer than ``wait_target_s`` seconds for a slot, under a routing policy.

    Parameters
    ----------
    replicas : int or array_like of int
        Replicas in service, ≥ 1.
    slots : int
        Slots per replica (S).
    arrival_rate : float
        Requests per second reaching the fleet.
    service_time_s : float
        Mean seconds a request holds a slot (T).
    wait_target_s : float
        Wait threshold, seconds.
    routing : str
        ``"pooled"`` (one M/M/c with ``c = replicas × slots``); ``"round-robin"`` /
        ``"random"`` (each replica an M/M/S fed ``arrival_rate / replicas``: exact for a random
        split of Poisson arrivals, and the model of round-robin used for sizing, since several
        load-balancer instances each cycling on their own merge into a nearly random split); or
        ``"strict-round-robin"`` (one dispatcher cycling over the replicas: each replica sees
        every n-th arrival, an E_n/M/S queue, computed exactly by
        :func:`late_share_round_robin`).

    Returns
    -------
    float or ndarray
        ``P(wait > wait_target_s)``; 1 at or beyond saturation.

    Examples
    --------
    >>> round(late_share(16, 32, 40, 12.25, 0.5), 3)
    0.095
    """
    kind = queue_model(routing)
    n = array(replicas, "replicas", lo=1, integer=True).astype(np.int64)
    s = integer(slots, "slots", minimum=1)
    lam = nonnegative(arrival_rate, "arrival_rate")
    ts = positive(service_time_s, "service_time_s")
    tt = nonnegative(wait_target_s, "wait_target_s")
    if n.ndim == 0:
        n = int(n)  # a plain int keeps queueing on its scalar (math-module) path
        if kind == "pooled":
            return q.prob_wait_exceeds(tt, n * s, lam, ts)
        if kind == "cyclic":
            return _late_cyclic(n, s, lam, ts, tt)
        return q.prob_wait_exceeds(tt, s, lam / n, ts)
    if kind == "pooled":
        return q.prob_wait_exceeds(tt, n * s, lam, ts)
    if kind == "cyclic":
        out = np.array([_late_cyclic(int(k), s, lam, ts, tt) for k in np.ravel(n)]).reshape(n.shape)
        return out.item() if out.ndim == 0 else out
    return q.prob_wait_exceeds(tt, s, lam / n, ts)


def replicas_for_routing(arrival_rate, slots, service_time_s, wait_target_s, late_share, routing="pooled"):
    """Fewest replicas meeting ``P(wait > wait_target_s) ≤ late_share`` under a routing policy.

    ``"pooled"`` calls :func:`capbook.queueing.replicas_pooled`; ``"round-robin"``,
    ``"random"`` and ``"per-replica"`` call :func:`capbook.queueing.replicas_isolated`;
    ``"strict-round-robin"`` calls :func:`replicas_round_robin`.

    Examples
    --------
    >>> replicas_for_routing(40, 32, 12.25, 0.5, 0.01, "round-robin")
    24
    """
    kind = queue_model(routing)
    lam, s, ts, tt, p = _slo(arrival_rate, slots, service_time_s, wait_target_s, late_share)
    if kind == "pooled":
        return q.replicas_pooled(lam, s, ts, tt, p)
    if kind == "cyclic":
        return replicas_round_robin(lam, s, ts, tt, p)
    return q.replicas_isolated(lam, s, ts, tt, p)


# ---------------------------------------------------------------------------
# Strict round-robin: each replica an E_n/M/S queue, solved exactly
# ---------------------------------------------------------------------------

def _cyclic_boundary(n: int, slots: int, arrival_rate: float, service_time_s: float):
    """Strict round-robin (E_n/M/S): the probability an arrival waits and the decay ratio σ.

    The replica sees every n-th arrival of a Poisson stream of rate λ, so its inter-arrival
    time A is Erlang(n, λ). Between two of its arrivals the number in the replica follows a
    pure-death process with generator G (rate ``min(m, S) / T`` in state m), and
    ``E[exp(G A)] = (λ (λI − G)^{-1})^n`` exactly: the transition matrix of the chain embedded
    at arrival epochs. As in every GI/M/c queue the arrival-epoch probabilities are geometric
    from S − 1 up, ``q_{S-1+k} = C σ^k`` with σ the root in (0, 1) of
    ``σ = (λ / (λ + S μ (1 − σ)))^n``. The balance equations of states 0 … S − 1 with that tail
    give q_0 … q_{S-2} and C; the geometric sums are cut where the neglected terms (weight
    σ^k times the probability of falling below S in one inter-arrival time) are below 1e-16.

    Returns
    -------
    (prob_wait, sigma)
    """
    from scipy import linalg, optimize

    mu = 1.0 / service_time_s
    smu = slots * mu
    lam = arrival_rate

    def g(sig):
        return n * math.log(lam / (lam + smu * (1.0 - sig))) - math.log(sig)

    hi = 1.0 - 1e-12
    if g(hi) > 0:  # pragma: no cover - only when ρ is within 1e-12 of 1
        return 1.0, hi
    sigma = optimize.brentq(g, 1e-300, hi, xtol=1e-16, rtol=4 * np.finfo(float).eps)

    extra = 64
    while True:
        size = slots + extra + 1
        m = np.arange(size)
        death = mu * np.minimum(m, slots)
        band = np.zeros((2, size))
        band[0] = lam + death
        band[1, :-1] = -death[1:]
        # columns j < S of R^n, R = λ (λI − G)^{-1}
        cols = np.eye(size)[:, :slots]
        if n <= 32:  # n banded solves on S columns
            for _ in range(n):
                cols = linalg.solve_banded((1, 0), band, lam * cols, check_finite=False)
        else:  # binary powering of the dense R (einsum: immune to BLAS thread contention)
            r = linalg.solve_banded((1, 0), band, lam * np.eye(size), check_finite=False)
            k = n
            while k:
                if k & 1:
                    cols = np.einsum("ij,jk->ik", r, cols)
                k >>= 1
                if k:
                    r = np.einsum("ij,jk->ik", r, r)
        # P[i, j] = (R^n)[i + 1, j]: the arrival joins, then the interval passes
        low = cols[1:]  # rows i = 0 .. size-2, columns j = 0 .. S-1
        # rows beyond the cut carry weight σ^k ≤ σ^extra and reach below S with probability at
        # most that of the last row kept: bound the neglected part of every balance equation
        if low[-1].sum() * sigma**extra / (1.0 - sigma) < 1e-16 or extra >= 4096:
            break
        extra *= 2
    k = np.arange(low.shape[0] - (slots - 1))
    weights = sigma ** k  # q_{S-1+k} / C
    tail = weights @ low[slots - 1:]  # sum_k σ^k P[S-1+k, j] for j < S
    # unknowns x = (q_0 .. q_{S-2}, C); equations q_j = Σ_i q_i P[i, j] for j = 0 .. S-1
    a = np.zeros((slots, slots))
    a[:, : slots - 1] = low[: slots - 1, :].T
    a[:, slots - 1] = tail
    a -= np.eye(slots)  # x_j for j < S-1 is q_j; x_{S-1} = C = q_{S-1}
    # replace one balance equation (they are linearly dependent) by the normalisation
    a[-1, : slots - 1] = 1.0
    a[-1, slots - 1] = 1.0 / (1.0 - sigma)
    b = np.zeros(slots)
    b[-1] = 1.0
    x = np.linalg.solve(a, b)
    c = x[-1]
    return float(min(1.0, max(0.0, c * sigma / (1.0 - sigma)))), sigma


def _late_cyclic(n: int, slots: int, arrival_rate: float, service_time_s: float, wait_target_s: float) -> float:
    if arrival_rate == 0:
        return 0.0
    if arrival_rate * service_time_s / n >= slots:
        return 1.0
    pw, sigma = _cyclic_boundary(n, slots, arrival_rate, service_time_s)
    # a request that waits needs a geometric number of exponential(S/T) departures: its wait
    # beyond zero is exponential with rate S (1 − σ) / T
    return float(pw * math.exp(-slots * (1.0 - sigma) * wait_target_s / service_time_s))


def late_share_round_robin(replicas, slots, arrival_rate, service_time_s, wait_target_s) -> float:
    r"""``P(wait > wait_target_s)`` under strict round-robin from a single dispatcher, computed exactly.

    Each replica receives every ``replicas``-th request of a Poisson stream, so its arrivals
    are Erlang-distributed (much more regular than Poisson) while its slots still form a
    separate queue: an E_n/M/S queue. The distribution of requests an arrival finds at its
    replica comes from the chain embedded at arrival epochs (see Notes). A request finding
    ``j ≥ S`` waits for ``j − S + 1`` departures at rate ``S / T``, and above ``S − 1`` that
    distribution is geometric with ratio σ, so the wait of a request that waits is exponential:

    .. math:: P(W > t) = P(W > 0)\, e^{-S (1 - \sigma) t / T}.

    Parameters
    ----------
    replicas : int
        Replicas the dispatcher cycles over (n), ≥ 1.
    slots : int
        Slots per replica (S).
    arrival_rate : float
        Requests per second reaching the dispatcher (Poisson).
    service_time_s : float
        Mean seconds in service (exponential).
    wait_target_s : float
        Wait threshold, seconds.

    Returns
    -------
    float

    Notes
    -----
    For an Erlang(n, λ) inter-arrival time A and the pure-death generator G of a replica,
    ``E[exp(G A)] = (λ (λI − G)^{-1})^n``: the embedded transition matrix is exact, not
    integrated numerically. σ is the root in (0, 1) of ``σ = (λ/(λ + Sμ(1 − σ)))^n``; the
    boundary probabilities solve S linear equations. With one replica the result is the M/M/S
    tail (Erlang C), and the tests check it against a simulation of strict round-robin.

    Several load-balancer instances, each cycling on its own, merge into a stream that each
    replica sees as nearly Poisson again: that case is the random split
    (``routing="round-robin"``), not this one.

    Examples
    --------
    >>> round(late_share_round_robin(21, 32, 40, 12.25, 0.5), 4)
    0.0051
    """
    n = integer(replicas, "replicas", minimum=1)
    s = integer(slots, "slots", minimum=1)
    lam = nonnegative(arrival_rate, "arrival_rate")
    ts = positive(service_time_s, "service_time_s")
    tt = nonnegative(wait_target_s, "wait_target_s")
    return _late_cyclic(n, s, lam, ts, tt)


def replicas_round_robin(arrival_rate, slots, service_time_s, wait_target_s, late_share) -> int:
    """Fewest replicas meeting ``P(wait > wait_target_s) ≤ late_share`` under strict round-robin (exact E_n/M/S).

    Parameters
    ----------
    arrival_rate, slots, service_time_s, wait_target_s, late_share
        As in :func:`capbook.queueing.replicas_pooled`.

    Returns
    -------
    int
        Never fewer than the pooled answer, never more than the random-split answer.

    Examples
    --------
    >>> replicas_round_robin(40, 32, 12.25, 0.5, 0.01)
    21
    """
    lam, s, ts, tt, p = _slo(arrival_rate, slots, service_time_s, wait_target_s, late_share)
    # the tail falls as replicas are added; the pooled answer is a lower bound
    return fewest(lambda n: _late_cyclic(n, s, lam, ts, tt) <= p, q.replicas_pooled(lam, s, ts, tt, p))


def replicas_partitioned(arrival_rate, slots, service_time_s, wait_target_s, late_share, shares):
    """Replicas when the traffic is split into groups that cannot share replicas.

    Each group is its own pool (load-aware routing inside the group), sized separately with
    :func:`capbook.queueing.replicas_pooled`. This is what per-tenant dedicated replicas,
    multi-model fleets and strict prefix-cache affinity (every request of a prompt family goes
    to that family's replicas) do to a fleet.

    Parameters
    ----------
    arrival_rate, slots, service_time_s, wait_target_s, late_share
        As in :func:`capbook.queueing.replicas_pooled`; ``arrival_rate`` is the total.
    shares : sequence of float
        Share of the traffic in each group, each > 0, summing to 1 (within 1e-9).
        ``service_time_s`` may instead be a sequence of the same length (one T per group, e.g. a
        shorter T where a cached prefix skips part of the prefill).

    Returns
    -------
    list of int
        Replicas per group; the fleet is their sum.

    Examples
    --------
    >>> sum(replicas_partitioned(40, 32, 12.25, 0.5, 0.01, [0.25] * 4))
    20
    """
    sh = array(shares, "shares", lo=0, lo_open=True, nonempty=True, ndim=1)
    if abs(sh.sum() - 1.0) > 1e-9:
        raise ValueError(f"shares must sum to 1, they sum to {sh.sum():.6g}")
    if np.ndim(service_time_s) == 0:
        times = [service_time_s] * sh.size
    else:
        times = list(service_time_s)
        if len(times) != sh.size:
            raise ValueError(
                f"service_time_s has {len(times)} entries but shares has {sh.size}: give one T per group"
            )
    lam = positive(arrival_rate, "arrival_rate")
    return [q.replicas_pooled(lam * f, slots, ts, wait_target_s, late_share) for f, ts in zip(sh, times)]


@dataclass(frozen=True)
class RoutingComparison:
    """Three ways to serve one peak: by the mean, per-replica queues, and one pooled queue.

    Attributes
    ----------
    arrival_rate, slots, service_time_s, wait_target_s, late_share
        The demand, the replica rating and the SLO ``P(wait > wait_target_s) ≤ late_share``.
    by_mean, per_replica, pooled : int
        Replicas under each approach.
    """

    arrival_rate: float
    slots: int
    service_time_s: float
    wait_target_s: float
    late_share: float
    by_mean: int
    per_replica: int
    pooled: int

    @property
    def saving(self) -> int:
        """Replicas pooling saves against per-replica queues."""
        return self.per_replica - self.pooled

    @property
    def saving_share(self) -> float:
        """The saving as a share of the per-replica fleet (0.29 means 29 % fewer replicas)."""
        return self.saving / self.per_replica

    def table(self) -> pd.DataFrame:
        """One row per approach: replicas, slot utilisation at the peak, late share, SLO met.

        The "by the mean" row is evaluated behind one shared queue, the most favourable
        routing: even then it misses the SLO.
        """
        a = self.arrival_rate * self.service_time_s
        rows = []
        for name, n, kind in (
            ("by the mean", self.by_mean, "pooled"),
            ("random / round-robin", self.per_replica, "per-replica"),
            ("load-aware (pooled)", self.pooled, "pooled"),
        ):
            late = float(late_share(n, self.slots, self.arrival_rate, self.service_time_s, self.wait_target_s, kind))
            rows.append(
                {
                    "approach": name,
                    "queues": "one shared queue" if kind == "pooled" else "one per replica",
                    "replicas": n,
                    "slots": n * self.slots,
                    "utilisation": a / (n * self.slots),
                    "late_share": late,
                    "meets_slo": late <= self.late_share,
                }
            )
        return pd.DataFrame(rows).set_index("approach")

    def chart(self):
        """Bars of replicas per approach, coloured by whether the SLO is met, labelled with the
        late share (an ``altair.LayerChart``)."""
        import altair as alt

        from capbook import theme as charts

        df = self.table().reset_index()
        df["label"] = [f"{n} replicas, {100 * p:.2g} % late" for n, p in zip(df.replicas, df.late_share)]
        df["verdict"] = np.where(df.meets_slo, "meets the SLO", "misses the SLO")
        base = alt.Chart(df).encode(
            y=alt.Y("approach:N", sort=list(df.approach), title=None),
            x=alt.X("replicas:Q", title="replicas", scale=alt.Scale(domain=[0, 1.4 * float(df.replicas.max())])),
        )
        bars = base.mark_bar().encode(
            color=alt.Color(
                "verdict:N",
                scale=alt.Scale(domain=["meets the SLO", "misses the SLO"], range=[charts.PALETTE[2], charts.PALETTE[1]]),
                title=None,
            ),
            tooltip=[
                "approach:N",
                "replicas:Q",
                alt.Tooltip("utilisation:Q", format=".1%"),
                alt.Tooltip("late_share:Q", title=f"P(wait > {self.wait_target_s:g} s)", format=".2%"),
            ],
        )
        text = base.mark_text(align="left", dx=4).encode(text="label:N")
        return (bars + text).properties(
            height=120,
            title=f"{self.arrival_rate:g} req/s, {self.slots} slots, T = {self.service_time_s:g} s: "
            f"P(wait > {self.wait_target_s:g} s) ≤ {100 * self.late_share:g} %",
        )

    def _repr_html_(self) -> str:
        return (
            f"<p><b>Routing comparison</b>: pooling saves {self.saving} replicas "
            f"({100 * self.saving_share:.0f} %) against per-replica queues.</p>"
            + _format_table(self.table()).to_html()
        )


def compare_routing(arrival_rate, slots, service_time_s, wait_target_s, late_share) -> RoutingComparison:
    """Size one peak three ways: by the mean, with per-replica queues, and with one pooled queue.

    Parameters
    ----------
    arrival_rate : float
        Peak requests per second.
    slots : int
        Slots per replica (S).
    service_time_s : float
        Mean seconds a request holds a slot (T).
    wait_target_s : float
        Wait threshold of the SLO, seconds.
    late_share : float
        Largest acceptable share of requests waiting longer than ``wait_target_s``.

    Returns
    -------
    RoutingComparison

    Examples
    --------
    >>> r = compare_routing(40, 32, 12.25, 0.5, 0.01)
    >>> r.by_mean, r.per_replica, r.pooled, r.saving
    (16, 24, 17, 7)
    """
    lam, s, ts, tt, p = _slo(arrival_rate, slots, service_time_s, wait_target_s, late_share)
    return RoutingComparison(
        arrival_rate=lam,
        slots=s,
        service_time_s=ts,
        wait_target_s=tt,
        late_share=p,
        by_mean=q.replicas_by_mean(lam, s, ts),
        per_replica=q.replicas_isolated(lam, s, ts, tt, p),
        pooled=q.replicas_pooled(lam, s, ts, tt, p),
    )


# ---------------------------------------------------------------------------
# Burst headroom
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ScaleUpLag:
    """Minutes from "demand is climbing" to "a new replica takes traffic", by component.

    The defaults are an illustrative cold start that adds up to 8 minutes; replace them with
    your own measured numbers.

    Attributes
    ----------
    detect : float
        Metrics scrape, autoscaler evaluation and its stabilisation window, minutes.
    node : float
        Provisioning a GPU node (cloud instance boot, driver and device-plugin start), minutes.
    image_pull : float
        Pulling the serving container image onto the node, minutes.
    weights_download : float
        Fetching the model weights from object storage, minutes.
    model_load : float
        Loading the weights into GPU memory, compiling kernels and warming up, minutes.
    """

    detect: float = 1.0
    node: float = 3.0
    image_pull: float = 1.0
    weights_download: float = 2.0
    model_load: float = 1.0

    def __post_init__(self):
        for name in ("detect", "node", "image_pull", "weights_download", "model_load"):
            nonnegative(getattr(self, name), name)

    @property
    def total(self) -> float:
        """Total lag, minutes."""
        return self.detect + self.node + self.image_pull + self.weights_download + self.model_load

    def with_prewarmed_standby(self) -> "ScaleUpLag":
        """A standby node is already up with the image pulled: no node or image-pull time."""
        return replace(self, node=0.0, image_pull=0.0)

    def with_cached_weights(self) -> "ScaleUpLag":
        """Weights are on local disk or a node-local cache: no download."""
        return replace(self, weights_download=0.0)

    def table(self) -> pd.Series:
        """The components and the total, minutes."""
        d = {k: getattr(self, k) for k in ("detect", "node", "image_pull", "weights_download", "model_load")}
        d["total"] = self.total
        return pd.Series(d, name="minutes")


@dataclass(frozen=True)
class BurstHeadroom:
    """Result of :func:`burst_headroom`.

    Attributes
    ----------
    rate : float
        Requests per second of demand that can arrive before new capacity lands.
    per_replica_rate : float
        Requests per second one replica carries at the operating point used for conversion.
    replicas_exact : float
        ``rate / per_replica_rate``.
    replicas : int
        ``replicas_exact`` rounded up.
    """

    rate: float
    per_replica_rate: float
    replicas_exact: float
    replicas: int


def burst_headroom(ramp_per_min, lag_min, per_replica_rate) -> BurstHeadroom:
    """Headroom for demand that climbs while new replicas start, in req/s and in replicas.

    ``rate = ramp_per_min × lag_min``: the demand added between the moment the autoscaler
    should react and the moment a new replica serves. It is converted to replicas at a given
    per-replica rate, normally the pooled operating point ``peak / pooled replicas``.

    Parameters
    ----------
    ramp_per_min : float
        How fast demand climbs, requests per second gained per minute, ≥ 0.
    lag_min : float or ScaleUpLag
        Scale-up lag, minutes, ≥ 0 (or a :class:`ScaleUpLag`, whose total is used).
    per_replica_rate : float
        Requests per second one replica carries at the operating point, > 0.

    Returns
    -------
    BurstHeadroom

    Notes
    -----
    Converting at the pooled operating point (the load each replica carries at the peak
    when the fleet just meets the SLO) is conservative for a pooled fleet: a bigger pool runs
    hotter at the same SLO, so re-solving the pool for ``peak + rate`` never needs more
    replicas than this conversion adds (tested as a property).

    Examples
    --------
    >>> b = burst_headroom(0.5, 8, 40 / 17)
    >>> b.rate, round(b.replicas_exact, 2), b.replicas
    (4.0, 1.7, 2)
    """
    ramp = nonnegative(ramp_per_min, "ramp_per_min")
    lag = lag_min.total if isinstance(lag_min, ScaleUpLag) else nonnegative(lag_min, "lag_min")
    per = positive(per_replica_rate, "per_replica_rate")
    rate = ramp * lag
    exact = rate / per
    # guard against 1.0000000000000002 from floating error
    return BurstHeadroom(rate=rate, per_replica_rate=per, replicas_exact=exact, replicas=int(math.ceil(exact - 1e-9)))


# ---------------------------------------------------------------------------
# Failure spares
# ---------------------------------------------------------------------------

def replicas_surviving_zone_loss(required, zones) -> int:
    """Fewest replicas, spread evenly over ``zones``, that keep ``required`` after losing a zone.

    With ``n`` replicas spread as evenly as possible the largest zone holds ``ceil(n / Z)``;
    the fleet must satisfy ``n − ceil(n / Z) ≥ required``. Since ``n − ceil(n/Z) =
    floor(n (Z − 1) / Z)``, the answer is ``ceil(required × Z / (Z − 1))``.

    Parameters
    ----------
    required : int
        Replicas that must remain in service after the loss, ≥ 1.
    zones : int
        Zones the fleet is spread over, ≥ 2 (a single zone cannot survive its own loss).

    Returns
    -------
    int

    Examples
    --------
    >>> replicas_surviving_zone_loss(19, 3)   # 29 replicas: zones of 10, 10, 9
    29
    """
    r = integer(required, "required", minimum=1)
    z = integer(zones, "zones", minimum=1)
    if z == 1:
        raise ValueError(
            "zones=1: with every replica in one zone, losing that zone loses the whole fleet; "
            "no number of replicas survives it. Spread the fleet over at least 2 zones, or "
            "plan N+k spares against single-replica failures instead"
        )
    return -((-r * z) // (z - 1))


def failure_spares(required, spares=1, zones=None) -> int:
    """Spare replicas so that the failure the policy names leaves ``required`` in service.

    Parameters
    ----------
    required : int
        Replicas the fleet needs in service (queueing plus burst headroom), ≥ 1.
    spares : int
        N+k: the fleet survives the loss of ``spares`` replicas, ≥ 0.
    zones : int, optional
        When given, the fleet is spread over ``zones`` zones and must also survive losing the
        largest one (:func:`replicas_surviving_zone_loss`). The result covers both policies.

    Returns
    -------
    int
        Replicas to add to ``required``.

    Examples
    --------
    >>> failure_spares(19, 1), failure_spares(19, 1, zones=3)
    (1, 10)
    """
    r = integer(required, "required", minimum=1)
    k = integer(spares, "spares", minimum=0)
    total = r + k
    if zones is not None:
        z = integer(zones, "zones", minimum=1)
        total = max(total, replicas_surviving_zone_loss(r, z))
    return total - r


# ---------------------------------------------------------------------------
# Tokens
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class TokenRates:
    """Token throughput at a request rate (see :func:`token_rates`)."""

    request_rate: float
    tokens_per_request: float
    per_second: float
    per_minute: float


def token_rates(request_rate, tokens_per_request) -> TokenRates:
    """Translate requests per second into tokens per second and per minute.

    Parameters
    ----------
    request_rate : float
        Requests per second, ≥ 0.
    tokens_per_request : float
        Mean tokens per request as the callers are billed or limited (usually input plus
        output), ≥ 0.

    Returns
    -------
    TokenRates

    Examples
    --------
    >>> r = token_rates(40, 1800)
    >>> r.per_second, r.per_minute
    (72000.0, 4320000.0)
    """
    lam = nonnegative(request_rate, "request_rate")
    tok = nonnegative(tokens_per_request, "tokens_per_request")
    return TokenRates(request_rate=lam, tokens_per_request=tok, per_second=lam * tok, per_minute=lam * tok * 60.0)


def _tenant_map(x, name: str) -> dict:
    if isinstance(x, pd.Series):
        x = x.to_dict()
    if not isinstance(x, dict) or not x:
        raise ValueError(f"{name} must be a non-empty mapping of tenant -> tokens per minute")
    return {k: nonnegative(v, f"{name}[{k!r}]") for k, v in x.items()}


def allocate_tpm(capacity_tpm, demands, *, reserve=0.1, minimums=None, weights=None) -> pd.DataFrame:
    """Allocate per-tenant tokens-per-minute limits that sum below capacity (max-min fair).

    The budget is ``capacity_tpm × (1 − reserve)``. When the demands fit, every tenant gets its
    demand. Otherwise limits are water-filled: every tenant gets ``min(demand, level)`` (but at
    least its minimum), with the common ``level`` as high as the budget allows, so small
    tenants keep their whole demand and the largest are capped equally. Limits are rounded down
    to whole tokens, so their sum never exceeds the budget.

    Parameters
    ----------
    capacity_tpm : float
        Tokens per minute the fleet serves within the SLO (e.g. :attr:`FleetPlan.tokens`
        ``.per_minute`` at the planned peak), > 0.
    demands : mapping of str to float
        Tokens per minute each tenant asks for at its own peak, ≥ 0.
    reserve : float
        Share of capacity kept out of every limit, in [0, 1): room for the burst inside a
        minute and for tenants added later.
    minimums : mapping of str to float, optional
        Guaranteed tokens per minute for some tenants (committed contracts).
    weights : mapping of str to float, optional
        Tenants each entry stands for (default 1): an entry of weight ``w`` is capped at ``w ×
        level``, so a pool of many small tenants is not capped like one tenant.

    Returns
    -------
    pandas.DataFrame
        Indexed by tenant: ``demand``, ``minimum``, ``limit`` (tokens per minute, integer),
        ``granted_share`` (limit / demand, NaN-free: 1 where demand is 0) and
        ``capacity_share`` (limit / capacity).

    Raises
    ------
    ValueError
        If the minimums alone exceed the budget, naming both totals.

    Examples
    --------
    >>> df = allocate_tpm(1000, {"a": 100, "b": 600, "c": 600}, reserve=0.1)
    >>> df["limit"].to_dict()
    {'a': 100, 'b': 400, 'c': 400}
    >>> allocate_tpm(1000, {"a": 100, "b": 600, "pool": 600}, weights={"pool": 2})["limit"].to_dict()
    {'a': 100, 'b': 266, 'pool': 533}
    """
    cap = positive(capacity_tpm, "capacity_tpm")
    res = number(reserve, "reserve", lo=0, hi=1, hi_open=True)
    d = _tenant_map(demands, "demands")
    m = {k: 0.0 for k in d}
    if minimums is not None:
        given = _tenant_map(minimums, "minimums")
        unknown = sorted(set(given) - set(d), key=str)
        if unknown:
            raise ValueError(f"minimums names tenants that are not in demands: {unknown!r}")
        m.update(given)
    budget = cap * (1.0 - res)
    names = list(d)
    dem = np.array([d[k] for k in names])
    lo = np.array([m[k] for k in names])
    if lo.sum() > budget:
        raise ValueError(
            f"minimums sum to {lo.sum():,.0f} tokens/min, more than the budget of {budget:,.0f} "
            f"(capacity_tpm {cap:,.0f} × (1 − reserve {res:g})): the fleet cannot honour them; "
            "buy capacity, lower the reserve or renegotiate the minimums"
        )
    hi = np.maximum(dem, lo)
    w = np.ones(len(names))
    if weights is not None:
        given_w = {k: positive(v, f"weights[{k!r}]") for k, v in dict(weights).items()}
        unknown = sorted(set(given_w) - set(d), key=str)
        if unknown:
            raise ValueError(f"weights names tenants that are not in demands: {unknown!r}")
        w = np.array([given_w.get(k, 1.0) for k in names])

    def alloc(level: float) -> np.ndarray:
        return np.maximum(lo, np.minimum(hi, w * level))

    if hi.sum() <= budget:
        lim = hi
    else:
        a, b = 0.0, float((hi / w).max())
        for _ in range(200):  # bisection on the water level; sum is monotone in the level
            mid = 0.5 * (a + b)
            if alloc(mid).sum() <= budget:
                a = mid
            else:
                b = mid
        lim = alloc(a)
    lim_int = np.floor(lim + 1e-9).astype(np.int64)
    # the floor can only lower the sum; never exceed the budget
    while lim_int.sum() > budget:  # pragma: no cover - defensive against rounding
        lim_int[np.argmax(lim_int)] -= 1
    out = pd.DataFrame(
        {
            "demand": dem,
            "minimum": lo,
            "limit": lim_int,
        },
        index=pd.Index(names, name="tenant"),
    )
    out["granted_share"] = np.where(dem > 0, lim_int / np.where(dem > 0, dem, 1.0), 1.0)
    out["capacity_share"] = lim_int / cap
    return out


def check_tpm_limits(limits, capacity_tpm) -> dict:
    """Check that per-tenant tokens-per-minute limits sum to no more than capacity.

    Parameters
    ----------
    limits : mapping of str to float or pandas.Series
        Tokens per minute per tenant, ≥ 0.
    capacity_tpm : float
        Tokens per minute the fleet serves within the SLO, > 0.

    Returns
    -------
    dict
        ``total`` (tokens per minute), ``capacity``, ``headroom`` (capacity − total) and
        ``utilisation`` (total / capacity).

    Raises
    ------
    ValueError
        If the limits sum above capacity; the message gives the excess and the largest tenants.

    Examples
    --------
    >>> check_tpm_limits({"a": 1_000_000, "b": 2_000_000}, 4_320_000)["headroom"]
    1320000.0
    """
    lim = _tenant_map(limits, "limits")
    cap = positive(capacity_tpm, "capacity_tpm")
    total = sum(lim.values())
    if total > cap:
        biggest = sorted(lim.items(), key=lambda kv: -kv[1])[:3]
        top = ", ".join(f"{k!r}: {v:,.0f}" for k, v in biggest)
        raise ValueError(
            f"limits sum to {total:,.0f} tokens/min, {total - cap:,.0f} above capacity_tpm "
            f"{cap:,.0f}: if every tenant used its limit at once the fleet would miss its SLO "
            f"(largest limits: {top})"
        )
    return {"total": total, "capacity": cap, "headroom": cap - total, "utilisation": total / cap}


# ---------------------------------------------------------------------------
# The plan
# ---------------------------------------------------------------------------

_STAGE_KIND = {
    "Little's-law floor": "floor",
    "queueing": "queueing",
    "burst headroom": "burst",
    "failure spare": "spare",
    "total": "total",
}


@dataclass(frozen=True)
class FleetPlan:
    """A fleet plan with its breakdown. Build it with :func:`plan_fleet`.

    Attributes
    ----------
    peak_rate, slots, service_time_s, wait_target_s, target
        Peak requests per second, slots per replica, mean seconds in service, and the SLO
        ``P(wait > wait_target_s) ≤ target``.
    routing : str
        The queue model of the routing policy (:func:`capbook.routing.queue_model`):
        ``"pooled"``, ``"per-replica"`` or ``"cyclic"``.
    ramp_per_min, lag_min
        Demand ramp (req/s per minute) and scale-up lag (minutes).
    spares, zones
        The failure policy: N+``spares``, and survival of losing the largest of ``zones``
        zones (``None``: no zone policy).
    floor_exact : float
        Little's-law floor in replicas, ``peak × T / S`` (fractional).
    floor : int
        The floor rounded up: what a mean-based spreadsheet buys.
    serving : int
        Replicas serving the peak: the larger of ``queueing_replicas`` and the ``at_least``
        that other checks asked for.
    burst : BurstHeadroom
        The burst headroom, converted at ``peak / serving`` req/s per replica.
    spare : int
        Replicas added for failures.
    tokens_per_request : float or None
        Tokens per request for the token translation.
    queueing_replicas : int
        Fewest replicas meeting ``P(wait > wait_target_s) ≤ target`` at the peak under ``routing``.
    """

    peak_rate: float
    slots: int
    service_time_s: float
    wait_target_s: float
    target: float
    routing: str
    ramp_per_min: float
    lag_min: float
    spares: int
    zones: int | None
    floor_exact: float
    floor: int
    serving: int
    burst: BurstHeadroom
    spare: int
    tokens_per_request: float | None = None
    queueing_replicas: int = 0
    _lost_in_failure: int = field(default=0, repr=False)

    @property
    def total(self) -> int:
        """Replicas to run at the peak: serving + burst + spare."""
        return self.in_service + self.spare

    @property
    def in_service(self) -> int:
        """Replicas the fleet must keep in service through a failure: serving + burst."""
        return self.serving + self.burst.replicas

    @property
    def per_replica_rate(self) -> float:
        """Requests per second per replica at the serving operating point."""
        return self.peak_rate / self.serving

    @property
    def lost_in_failure(self) -> int:
        """Replicas the failure policy must survive losing (k for N+k, or the largest zone)."""
        return self._lost_in_failure

    @property
    def tokens(self) -> TokenRates | None:
        """Tokens per second and per minute at the planned peak (None without
        ``tokens_per_request``)."""
        if self.tokens_per_request is None:
            return None
        return token_rates(self.peak_rate, self.tokens_per_request)

    def late_share(self, replicas, arrival_rate=None) -> float:
        """``P(wait > wait_target_s)`` with ``replicas`` in service at ``arrival_rate`` (default: the peak)."""
        lam = self.peak_rate if arrival_rate is None else arrival_rate
        return float(late_share(replicas, self.slots, lam, self.service_time_s, self.wait_target_s, self.routing))

    def utilisation(self, replicas, arrival_rate=None) -> float:
        """Average slot utilisation ``λ T / (replicas × S)``."""
        lam = self.peak_rate if arrival_rate is None else arrival_rate
        return lam * self.service_time_s / (replicas * self.slots)

    def table(self) -> pd.DataFrame:
        """The breakdown, one row per stage.

        Columns: ``added`` (replicas the stage adds), ``replicas`` (cumulative), ``slots``,
        ``utilisation`` and ``late_share`` (``P(wait > wait_target_s)``), both at the peak with that many
        replicas under the plan's routing.
        """
        steps = [
            ("Little's-law floor", self.floor),
            ("queueing", self.serving - self.floor),
            ("burst headroom", self.burst.replicas),
            ("failure spare", self.spare),
        ]
        rows, n = [], 0
        for name, add in steps:
            n += add
            rows.append((name, add, n))
        rows.append(("total", self.total, self.total))
        df = pd.DataFrame(rows, columns=["stage", "added", "replicas"]).set_index("stage")
        df["slots"] = df["replicas"] * self.slots
        df["utilisation"] = [self.utilisation(n) for n in df["replicas"]]
        df["late_share"] = [self.late_share(n) for n in df["replicas"]]
        return df

    def checks(self) -> pd.DataFrame:
        """The scenarios the plan is built to survive, each with its late share.

        Rows: the peak on the full fleet; the peak plus the burst headroom (demand that arrives
        before new replicas land) on the full fleet; and the same burst after the failure the
        spare policy covers. ``meets_slo`` should be True in every row.
        """
        lam_b = self.peak_rate + self.burst.rate
        lost = self.lost_in_failure
        rows = [
            ("peak, full fleet", self.total, self.peak_rate),
            ("peak + burst headroom, full fleet", self.total, lam_b),
            (f"peak + burst headroom, {lost} replica{'s' if lost != 1 else ''} lost", self.total - lost, lam_b),
        ]
        out = []
        for name, n, lam in rows:
            ls = self.late_share(n, lam) if n >= 1 else 1.0
            out.append(
                {
                    "scenario": name,
                    "replicas": n,
                    "arrival_rate": lam,
                    "utilisation": self.utilisation(n, lam) if n >= 1 else math.inf,
                    "late_share": ls,
                    "meets_slo": ls <= self.target,
                }
            )
        return pd.DataFrame(out).set_index("scenario")

    def chart(self, title: str | None = None):
        """The breakdown as an Altair waterfall (floor → queueing → burst → spare → total)."""
        tab = self.table()
        steps = pd.DataFrame(
            {"stage": tab.index, "added": tab["added"].to_numpy(), "kind": [_STAGE_KIND[s] for s in tab.index]}
        )
        if title is None:
            title = (
                f"{self.peak_rate:g} req/s → {self.total} replicas "
                f"({self.routing} routing; mean-based sizing buys {self.floor})"
            )
        return waterfall_chart(steps, title=title)

    def _repr_html_(self) -> str:
        head = (
            f"<p><b>Fleet plan: {self.total} replicas</b> for {self.peak_rate:g} req/s at "
            f"{self.slots} slots × T = {self.service_time_s:g} s, "
            f"P(wait &gt; {self.wait_target_s:g} s) ≤ {100 * self.target:g} %, routing {html.escape(resolve(self.routing).label)}. "
            f"Burst: {self.ramp_per_min:g} req/s per min × {self.lag_min:g} min = {self.burst.rate:g} req/s "
            f"→ {self.burst.replicas} replica(s) at {self.per_replica_rate:.2f} req/s each. "
            f"Spare policy: N+{self.spares}"
            + (f", survive losing 1 of {self.zones} zones" if self.zones else "")
            + ".</p>"
        )
        tok = ""
        if self.tokens is not None:
            tk = self.tokens
            tok = (
                f"<p>At the planned peak: {tk.per_second:,.0f} tokens/s = "
                f"{tk.per_minute / 1e6:,.2f} M tokens/min.</p>"
            )
        return head + _format_table(self.table()).to_html() + "<p>Checks:</p>" + _format_table(self.checks()).to_html() + tok

    def __str__(self) -> str:
        return self.table().to_string()


def _format_table(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    if "utilisation" in out:
        out["utilisation"] = [f"{100 * u:.1f} %" if math.isfinite(u) else "∞" for u in out["utilisation"]]
    if "late_share" in out:
        out["late_share"] = [_pct(p) for p in out["late_share"]]
    return out


def _pct(p: float) -> str:
    if p >= 0.001:
        return f"{100 * p:.2f} %"
    if p == 0:
        return "0 %"
    return f"{100 * p:.1e} %"


def plan_fleet(
    peak_rate,
    slots,
    service_time_s,
    wait_target_s,
    late_share,
    *,
    routing="pooled",
    ramp_per_min=0.0,
    lag_min=0.0,
    spares=1,
    zones=None,
    tokens_per_request=None,
    max_replicas=None,
    at_least=None,
    serving=None,
) -> FleetPlan:
    """Plan a fleet from one replica's rating: floor, queueing, burst headroom, failure spare.

    The plan has four stages:

    1. **Little's-law floor**: ``ceil(peak × T / S)``, what dividing by the mean buys.
    2. **Queueing**: the fewest replicas meeting ``P(wait > wait_target_s) ≤ late_share`` at the peak under
       ``routing`` (:func:`replicas_for_routing`), or ``at_least`` when other checks need more:
       the **serving** replicas.
    3. **Burst headroom**: ``ramp_per_min × lag_min`` req/s, converted to replicas at the
       operating point of stage 2, ``peak / serving`` req/s per replica, rounded up
       (:func:`burst_headroom`).
    4. **Failure spare**: enough replicas that the failure the policy names (``spares``
       replicas, and with ``zones`` the largest zone) leaves stages 2 + 3 in service, so a
       failure during a ramp does not stack on the ramp (:func:`failure_spares`).

    Parameters
    ----------
    peak_rate : float
        Peak requests per second (busy-hour peak, not a daily average), > 0.
    slots : int
        Slots per replica (S), ≥ 1.
    service_time_s : float
        Mean seconds a request holds a slot (T), > 0.
    wait_target_s : float
        Wait threshold of the SLO, seconds, ≥ 0.
    late_share : float
        Largest acceptable share of requests waiting longer than ``wait_target_s``, in (0, 1).
    routing : str
        ``"pooled"`` (load-aware: one queue or join-shortest-queue on free slots) or
        ``"round-robin"`` / ``"random"`` (a queue per replica). See :mod:`capbook.routing`.
    ramp_per_min : float
        How fast demand can climb, req/s per minute, ≥ 0.
    lag_min : float or ScaleUpLag
        Minutes from the autoscaler's trigger to a new replica serving, ≥ 0.
    spares : int
        N+k spares against single-replica failures, ≥ 0.
    zones : int, optional
        Zones the fleet is spread over (≥ 2); the plan then also survives losing the largest.
    tokens_per_request : float, optional
        Mean tokens per request, to translate the peak into tokens per second and per minute.
    max_replicas : int, optional
        A quota. If the plan needs more, a ``ValueError`` says which stage breaks it.
    at_least : int, optional
        Serving replicas other checks need at the peak (a token rating with headroom, a TTFT
        model, ...): the serving count is the larger of this and the queueing answer, and the
        burst and spare stack on it.
    serving : int, optional
        The serving count decided elsewhere (:func:`capbook.plan.steps.capacity_plan` passes the
        smallest fleet its simulation verifies): the queueing answer is then only reported
        (``queueing_replicas``), and the burst and spare stack on ``serving``.

    Returns
    -------
    FleetPlan

    Examples
    --------
    >>> p = plan_fleet(40, 32, 12.25, 0.5, 0.01, ramp_per_min=0.5, lag_min=8, spares=1)
    >>> p.floor, p.serving, p.burst.replicas, p.spare, p.total
    (16, 17, 2, 1, 20)
    """
    lam, s, ts, tt, p = _slo(peak_rate, slots, service_time_s, wait_target_s, late_share)
    kind = queue_model(routing)
    ramp = nonnegative(ramp_per_min, "ramp_per_min")
    lag = lag_min.total if isinstance(lag_min, ScaleUpLag) else nonnegative(lag_min, "lag_min")
    k = integer(spares, "spares", minimum=0)
    z = None if zones is None else integer(zones, "zones", minimum=1)
    if z == 1:
        replicas_surviving_zone_loss(1, 1)  # raises the explanatory error
    tok = None if tokens_per_request is None else nonnegative(tokens_per_request, "tokens_per_request")
    quota = None if max_replicas is None else integer(max_replicas, "max_replicas", minimum=1)
    need = 0 if at_least is None else integer(at_least, "at_least", minimum=0)

    floor_exact = lam * ts / s
    floor = q.replicas_by_mean(lam, s, ts)
    queueing = replicas_for_routing(lam, s, ts, tt, p, kind)
    serving = max(queueing, need) if serving is None else integer(serving, "serving", minimum=1)
    burst = burst_headroom(ramp, lag, lam / serving)
    before = serving + burst.replicas
    spare = failure_spares(before, k, z)
    total = before + spare
    lost = k
    if z is not None:
        lost = max(k, -(-total // z))
    plan = FleetPlan(
        peak_rate=lam,
        slots=s,
        service_time_s=ts,
        wait_target_s=tt,
        target=p,  # pending integrator: FleetPlan.target -> late_share with FleetPlan.late_share() -> late_share_at()
        routing=kind,
        ramp_per_min=ramp,
        lag_min=lag,
        spares=k,
        zones=z,
        floor_exact=floor_exact,
        floor=floor,
        serving=serving,
        burst=burst,
        spare=spare,
        tokens_per_request=tok,
        queueing_replicas=queueing,
        _lost_in_failure=lost,
    )
    if quota is not None and total > quota:
        if serving > quota:
            why = (f"the SLO alone needs {serving} at the peak" if serving == queueing
                   else f"the serving checks need {serving} at the peak")
        elif before > quota:
            why = f"the SLO plus burst headroom needs {before}"
        else:
            policy = f"N+{k}" + (f" and losing 1 of {z} zones" if z else "")
            why = (
                f"the spare policy ({policy}) needs {total} = {before} + {spare} spares; "
                f"the quota cannot absorb that failure"
            )
        raise ValueError(f"max_replicas={quota} is too small: {why}")
    return plan


# ---------------------------------------------------------------------------
# The utilisation rule of thumb, checked against Erlang C
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class UtilisationPlan:
    """A plan made with a planning utilisation instead of a queueing model.

    Attributes
    ----------
    busy_slots : float
        ``arrival_rate × service_time_s``: slots busy on average (Little's law).
    at_full : int
        Replicas at 100 % slot utilisation, ``ceil(busy_slots / S)``.
    at_planning : int
        Replicas at the planning utilisation, ``ceil(busy_slots / (S × u))``.
    total : int
        ``at_planning + spares``.
    """

    arrival_rate: float
    slots: int
    service_time_s: float
    planning_utilisation: float
    spares: int
    busy_slots: float
    at_full: int
    at_planning: int
    total: int

    def late_share(self, wait_target_s, replicas=None, routing="pooled") -> float:
        """``P(wait > wait_target_s)`` at ``arrival_rate`` with ``replicas`` (default: ``total``)."""
        n = self.total if replicas is None else replicas
        return float(late_share(n, self.slots, self.arrival_rate, self.service_time_s, wait_target_s, routing))


def plan_by_utilisation(arrival_rate, slots, service_time_s, planning_utilisation=0.72, spares=1) -> UtilisationPlan:
    """Size a fleet the spreadsheet way: busy slots divided by a planning utilisation.

    Parameters
    ----------
    arrival_rate : float
        Peak requests per second, > 0.
    slots : int
        Slots per replica.
    service_time_s : float
        Mean seconds in service.
    planning_utilisation : float
        Target average slot utilisation, in (0, 1].
    spares : int
        Replicas added for redundancy, ≥ 0.

    Returns
    -------
    UtilisationPlan

    Examples
    --------
    >>> p = plan_by_utilisation(10, 8, 8.0, 0.72, 1)
    >>> p.busy_slots, p.at_full, p.at_planning, p.total
    (80.0, 10, 14, 15)
    """
    lam = positive(arrival_rate, "arrival_rate")
    s = integer(slots, "slots", minimum=1)
    ts = positive(service_time_s, "service_time_s")
    u = probability(planning_utilisation, "planning_utilisation", hi_open=False)
    k = integer(spares, "spares", minimum=0)
    busy = lam * ts
    at_full = int(math.ceil(busy / s - 1e-12))
    at_plan = int(math.ceil(busy / (s * u) - 1e-12))
    return UtilisationPlan(lam, s, ts, u, k, busy, at_full, at_plan, at_plan + k)


# ---------------------------------------------------------------------------
# Alert levels
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class AlertLevels:
    """Where an alert should fire on the climb up the hockey stick (see :func:`alert_levels`).

    ``table()`` has one row per level (``warn``, ``breach``) with the arrival rate, the slot
    utilisation, the probability of waiting at all, the mean and p95 queue wait (seconds),
    the mean queue depth (requests waiting) and the late share ``P(wait > wait_target_s)``.
    """

    replicas: int
    slots: int
    service_time_s: float
    wait_target_s: float
    late_share: float
    routing: str
    warn_rate: float
    breach_rate: float
    ramp_per_min: float | None

    @property
    def minutes_of_warning(self) -> float | None:
        """Minutes between the warn and breach levels at ``ramp_per_min`` (None without it)."""
        if not self.ramp_per_min:
            return None
        return (self.breach_rate - self.warn_rate) / self.ramp_per_min

    def _row(self, lam: float) -> dict:
        n, s, ts = self.replicas, self.slots, self.service_time_s
        if self.routing == "pooled":
            c, lam_q, copies = n * s, lam, 1
        else:
            c, lam_q, copies = s, lam / n, n
        wq = float(q.mean_wait(c, lam_q, ts))
        return {
            "arrival_rate": lam,
            "slot_utilisation": lam * ts / (n * s),
            "prob_wait": float(q.prob_wait(c, lam_q, ts)),
            "mean_wait": wq,
            "p95_wait": float(q.wait_quantile(0.95, c, lam_q, ts)),
            "queue_depth": copies * lam_q * wq,
            "late_share": float(q.prob_wait_exceeds(self.wait_target_s, c, lam_q, ts)),
        }

    def table(self) -> pd.DataFrame:
        """One row per level: ``warn`` and ``breach``."""
        return pd.DataFrame(
            [self._row(self.warn_rate), self._row(self.breach_rate)], index=pd.Index(["warn", "breach"], name="level")
        )

    def _repr_html_(self) -> str:
        extra = ""
        if self.minutes_of_warning is not None:
            extra = f" At {self.ramp_per_min:g} req/s per minute the warning comes {self.minutes_of_warning:.1f} min before the breach."
        return f"<p><b>Alert levels</b> for {self.replicas} replicas × {self.slots} slots.{extra}</p>" + self.table().to_html(
            float_format=lambda v: f"{v:.4g}"
        )


def alert_levels(
    replicas,
    slots,
    service_time_s,
    wait_target_s,
    late_share,
    *,
    routing="pooled",
    warn_fraction=0.1,
    ramp_per_min=None,
    lead_min=None,
) -> AlertLevels:
    """Slot-utilisation and queue-wait levels at which to alert before the SLO is breached.

    The **breach** level is the arrival rate at which ``P(wait > wait_target_s)`` reaches ``late_share`` on
    this fleet. The **warn** level is, by default, the rate at which it reaches
    ``warn_fraction × target``. With ``ramp_per_min`` and ``lead_min`` the warn level is instead
    the rate ``lead_min`` minutes of ramp below the breach, so the alert fires early enough for
    a scale-up of that lag to land in time.

    Parameters
    ----------
    replicas : int
        Replicas in service, ≥ 1.
    slots : int
        Slots per replica.
    service_time_s : float
        Mean seconds in service.
    wait_target_s, late_share : float
        The SLO ``P(wait > wait_target_s) ≤ late_share``.
    routing : str
        As in :func:`plan_fleet`.
    warn_fraction : float
        Share of the target at which to warn, in (0, 1).
    ramp_per_min : float, optional
        Demand ramp, req/s per minute (≥ 0); gives :attr:`AlertLevels.minutes_of_warning`.
    lead_min : float, optional
        Minutes of warning wanted at ``ramp_per_min`` (needs ``ramp_per_min``).

    Returns
    -------
    AlertLevels

    Examples
    --------
    >>> a = alert_levels(17, 32, 12.25, 0.5, 0.01)
    >>> round(float(a.table().loc["breach", "slot_utilisation"]), 3)
    0.927
    """
    n = integer(replicas, "replicas", minimum=1)
    s = integer(slots, "slots", minimum=1)
    ts = positive(service_time_s, "service_time_s")
    tt = nonnegative(wait_target_s, "wait_target_s")
    p = probability(late_share, "late_share")
    kind = queue_model(routing)
    if kind == "cyclic":
        raise ValueError(
            "routing='strict-round-robin' is not supported by alert_levels (its queue depth has "
            "no closed form here); use 'round-robin' (the conservative per-replica model) or 'pooled'"
        )
    f = probability(warn_fraction, "warn_fraction")
    ramp = None if ramp_per_min is None else nonnegative(ramp_per_min, "ramp_per_min")

    def rate_at(level: float) -> float:
        if kind == "pooled":
            return q.max_arrival_rate(n * s, ts, tt, level)
        return n * q.max_arrival_rate(s, ts, tt, level)

    breach = rate_at(p)
    if lead_min is not None:
        lead = nonnegative(lead_min, "lead_min")
        if not ramp:
            raise ValueError("lead_min needs a positive ramp_per_min to turn minutes into req/s")
        warn = breach - ramp * lead
        if warn <= 0:
            raise ValueError(
                f"lead_min={lead:g} at ramp_per_min={ramp:g} asks for a warning {ramp * lead:g} req/s "
                f"below the breach rate {breach:.3g} req/s: this fleet cannot give that much notice"
            )
    else:
        warn = rate_at(f * p)
    return AlertLevels(n, s, ts, tt, p, kind, warn, breach, ramp)


# ---------------------------------------------------------------------------
# Chart
# ---------------------------------------------------------------------------

#: Stage kinds of a waterfall and their index in :data:`capbook.theme.PALETTE`.
_KIND_COLOURS = {"floor": 5, "queueing": 0, "burst": 4, "spare": 3, "total": 7}


def waterfall_chart(steps: pd.DataFrame, *, title: str = "", y_title: str = "replicas"):
    """A waterfall: each step a floating bar from the running total, the last bar from zero.

    Parameters
    ----------
    steps : pandas.DataFrame
        Columns ``stage`` (label, in order), ``added`` (the step) and ``kind`` (one of
        ``floor``, ``queueing``, ``burst``, ``spare``, ``total``: colours the bar). A row of kind
        ``total`` is drawn from zero to its ``added`` value.
    title : str
        Chart title.
    y_title : str
        Axis title (the unit).

    Returns
    -------
    altair.LayerChart
    """
    import altair as alt

    from capbook import theme as charts

    need = {"stage", "added", "kind"}
    if not need <= set(steps.columns):
        raise ValueError(f"steps must have columns {sorted(need)}, got {list(steps.columns)}")
    rows, run = [], 0.0
    for st, add, kind in zip(steps["stage"], steps["added"], steps["kind"]):
        if kind == "total":
            start, end = 0.0, float(add)
            label = f"{add:g}"
        else:
            start, end = run, run + float(add)
            run = end
            label = f"+{add:g}" if kind != "floor" else f"{add:g}"
        rows.append({"stage": st, "start": start, "end": end, "kind": kind, "label": label, "top": max(start, end)})
    df = pd.DataFrame(rows)
    order = list(df["stage"])
    kinds = [k for k in _KIND_COLOURS if k in set(df["kind"])]
    base = alt.Chart(df).encode(x=alt.X("stage:N", sort=order, title=None, axis=alt.Axis(labelAngle=0)))
    bars = base.mark_bar(size=48).encode(
        y=alt.Y("start:Q", title=y_title),
        y2="end:Q",
        color=alt.Color(
            "kind:N",
            scale=alt.Scale(domain=kinds, range=[charts.PALETTE[_KIND_COLOURS[k]] for k in kinds]),
            legend=None,
        ),
        tooltip=["stage:N", alt.Tooltip("label:N", title="replicas"), alt.Tooltip("end:Q", title="running total")],
    )
    text = base.mark_text(dy=-8).encode(y="top:Q", text="label:N")
    return (bars + text).properties(title=title, width=charts.WIDTH, height=charts.HEIGHT)
