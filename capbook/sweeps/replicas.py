r"""From tokens to replicas: a replica's two-number rating and the linear mix.

A forecast in tokens becomes GPUs last. A replica is rated by two measured numbers at the
latency objective: how many **output** tokens per second it decodes (memory-bandwidth bound)
and how many **input** tokens per second it prefills (compute bound). When one replica
interleaves prefill and decode (the usual continuous-batching engine: a prefill step pauses
the running decodes), the GPU's time is shared between the two kinds of work, so the fraction
of a replica a load uses is linear in the two token rates:

.. math::  f = \frac{\text{output tok/s}}{R_\text{out}} + \frac{\text{input tok/s}}{R_\text{in}},
           \qquad \text{replicas} = \left\lceil \frac{f}{h} \right\rceil

with ``h`` the headroom (the share of a replica you plan to use: the rest absorbs restarts,
uneven balancing and maintenance).

When prefill and decode are **disaggregated** (separate prefill and decode pools), the two
terms do not share a GPU: forecast and size each pool separately
(:func:`replicas_disaggregated`).

Ratings from a sweep
--------------------
``R_in`` is the prefill speed at concurrency 1, where a TTFT is one prefill and nothing else
(the sweep's ``prefill_rate_tps``). ``R_out`` is then the decode rate that makes the linear mix
hold at the operating point (slots ``S`` chosen for the TPOT target): at ``S`` the replica is
fully used, ``O/R_out + I/R_in = 1`` with ``O`` and ``I`` the output and input tokens per second
measured there, so ``R_out = O / (1 - I/R_in)``. It is larger than ``S / TPOT(S)`` because the
measured TPOT includes the pauses for other requests' prefills. With two sweeps of different
mixes on the same deployment, :func:`rating_from_sweeps` solves for both numbers without the
concurrency-1 assumption — and a third mix validates the linear model.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from capbook.validation import array, nonnegative, positive, probability

__all__ = [
    "ReplicaRating",
    "rating_from_sweep",
    "rating_from_sweeps",
    "ReplicaNeed",
    "replicas_for_tokens",
    "replicas_disaggregated",
]


@dataclass(frozen=True)
class ReplicaRating:
    """A replica's capacity in tokens per second at the latency objective.

    Attributes
    ----------
    output_tps : float
        Output (decode) tokens per second one replica sustains when it only decodes.
    input_tps : float
        Input (prefill) tokens per second one replica sustains when it only prefills.
    source : str
        Where the numbers came from (a sweep's name, "given", …).
    """

    output_tps: float
    input_tps: float
    source: str = "given"

    def __post_init__(self):
        positive(self.output_tps, "output_tps")
        positive(self.input_tps, "input_tps")

    def fraction(self, output_tps, input_tps) -> float:
        """Fraction of one replica that a load of ``output_tps`` and ``input_tps`` uses."""
        return nonnegative(output_tps, "output_tps") / self.output_tps + nonnegative(input_tps, "input_tps") / self.input_tps


def rating_from_sweep(sweep, slots: float, output_tps: float | None = None,
                      input_tps: float | None = None) -> ReplicaRating:
    """Rate a replica from a sweep at its operating point (``slots`` sequences in flight).

    Parameters
    ----------
    sweep : capbook.sweeps.sweep.Sweep
        Concurrency sweep of the deployment.
    slots : float
        Slots chosen for the TPOT target (see :func:`capbook.sweeps.sweep.choose_slots`).
    output_tps, input_tps : float, optional
        Overrides (tokens per second) for either number, e.g. from a vendor's rating or a
        dedicated prefill benchmark.

    Returns
    -------
    ReplicaRating

    Raises
    ------
    ValueError
        If the operating point spends all its time in prefill by this rating (the sweep's
        concurrency-1 TTFT is then not a pure prefill; pass ``input_tps``).
    """
    s = positive(slots, "slots")
    tab = sweep.table
    n = tab["concurrency"].to_numpy(float)
    if s < n.min() or s > n.max():
        raise ValueError(f"slots={s:g} is outside the sweep's measured concurrency [{n.min():g}, {n.max():g}]")
    r_in = positive(input_tps, "input_tps") if input_tps is not None else float(sweep.prefill_rate_tps)
    if output_tps is not None:
        return ReplicaRating(positive(output_tps, "output_tps"), r_in, source=f"{sweep.name} (output overridden)")
    out = float(np.interp(s, n, tab["output_throughput_tps"].to_numpy(float)))
    req = float(np.interp(s, n, tab["request_throughput_rps"].to_numpy(float)))
    inp = req * float(np.interp(s, n, tab["mean_input_tokens"].to_numpy(float)))
    busy_prefill = inp / r_in
    if busy_prefill >= 1:
        raise ValueError(
            f"sweep {sweep.name!r} at concurrency {s:g}: input tokens {inp:,.0f}/s exceed the prefill "
            f"rating {r_in:,.0f}/s, so the concurrency-1 TTFT is not a pure prefill; pass input_tps"
        )
    return ReplicaRating(out / (1 - busy_prefill), r_in, source=f"{sweep.name} at concurrency {s:g}")


def rating_from_sweeps(points) -> ReplicaRating:
    """Solve both ratings from saturated operating points of two or more token mixes.

    Parameters
    ----------
    points : sequence of (output_tps, input_tps)
        Measured output and input tokens per second of one replica, each at its full
        operating point, for different mixes (e.g. chat and summarisation sweeps).

    Returns
    -------
    ReplicaRating
        The least-squares solution of ``O_i / R_out + I_i / R_in = 1``. With three or more
        points, the residuals say how well the linear mix holds.
    """
    pts = array(points, "points", lo=0)
    if pts.ndim != 2 or pts.shape[1] != 2 or len(pts) < 2:
        raise ValueError("points must be two or more (output_tps, input_tps) pairs")
    x, _, rank, _ = np.linalg.lstsq(pts, np.ones(len(pts)), rcond=None)
    if rank < 2 or np.any(x <= 0):
        raise ValueError(
            "these operating points do not fit a linear mix with positive ratings (the mixes are "
            "too similar, or the measurements are not at full load)"
        )
    return ReplicaRating(1 / x[0], 1 / x[1], source=f"{len(pts)} mixes")


@dataclass(frozen=True)
class ReplicaNeed:
    """Replicas for a token load under the linear mix (see :func:`replicas_for_tokens`)."""

    output_tps: float
    input_tps: float
    rating: ReplicaRating
    headroom: float
    output_equivalents: float
    input_equivalents: float

    @property
    def equivalents(self) -> float:
        """Replica-equivalents of work (100 % busy replicas), output plus input."""
        return self.output_equivalents + self.input_equivalents

    @property
    def replicas(self) -> int:
        """Replicas to run: ``ceil(equivalents / headroom)``."""
        return int(math.ceil(self.equivalents / self.headroom - 1e-12))

    @property
    def utilisation(self) -> float:
        """Average share of each planned replica the load uses."""
        return self.equivalents / self.replicas

    def table(self) -> pd.DataFrame:
        """The calculation as a small table, for a review document."""
        return pd.DataFrame(
            {
                "value": [
                    self.output_tps, self.rating.output_tps, self.output_equivalents,
                    self.input_tps, self.rating.input_tps, self.input_equivalents,
                    self.equivalents, self.headroom, self.replicas,
                ]
            },
            index=[
                "output tokens/s", "output rating (tok/s per replica)", "output replica-equivalents",
                "input tokens/s", "input rating (tok/s per replica)", "input replica-equivalents",
                "replica-equivalents", "headroom", "replicas",
            ],
        )


def replicas_for_tokens(output_tps, input_tps, rating: ReplicaRating, headroom: float = 0.8) -> ReplicaNeed:
    """Replicas for a token load when each replica interleaves prefill and decode.

    Parameters
    ----------
    output_tps : float
        Output tokens per second at the planned peak (e.g. the forecast's P90 peak hour).
    input_tps : float
        Input tokens per second at the same peak.
    rating : ReplicaRating
        The replica's rating at the latency objective.
    headroom : float
        Share of each replica to plan on using, in (0, 1].

    Examples
    --------
    >>> need = replicas_for_tokens(27_600, 6 * 27_600, ReplicaRating(9_000, 60_000), 0.8)
    >>> round(need.output_equivalents, 2), round(need.input_equivalents, 2), need.replicas
    (3.07, 2.76, 8)
    """
    out = nonnegative(output_tps, "output_tps")
    inp = nonnegative(input_tps, "input_tps")
    if not isinstance(rating, ReplicaRating):
        raise ValueError("rating must be a ReplicaRating")
    h = probability(headroom, "headroom", hi_open=False)  # the share of a replica to use
    return ReplicaNeed(out, inp, rating, h, out / rating.output_tps, inp / rating.input_tps)


def replicas_disaggregated(output_tps, input_tps, decode_rating_tps, prefill_rating_tps,
                           headroom: float = 0.8) -> dict:
    """Replicas for separate prefill and decode pools (disaggregated serving).

    Each pool is sized on its own token rate: the decode pool on output tokens, the prefill
    pool on input tokens. Returns ``{"decode": n, "prefill": m, "total": n + m}``.
    """
    out = nonnegative(output_tps, "output_tps")
    inp = nonnegative(input_tps, "input_tps")
    rd = positive(decode_rating_tps, "decode_rating_tps")
    rp = positive(prefill_rating_tps, "prefill_rating_tps")
    h = probability(headroom, "headroom", hi_open=False)  # the share of a replica to use
    d = int(math.ceil(out / rd / h - 1e-12))
    p = int(math.ceil(inp / rp / h - 1e-12))
    return {"decode": d, "prefill": p, "total": d + p}
