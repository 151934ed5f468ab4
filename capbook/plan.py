r"""The capstone: a capacity plan from a request log and a sweep.

:func:`capacity_plan` chains the book, one chapter per step:

1. **Hourly tokens** per model and tier from the request log (:meth:`capbook.traces.RequestLog.hourly`);
   the plan is for one model (one deployment, one sweep) and, by default, the interactive
   tier (batch work is deferred to troughs, not planned for at the peak).
2. **Forecast** the output tokens at the horizon that matches the lead time of the decision
   (:data:`HORIZONS`: one week for reserved capacity already on hand, four for a quota or
   reservation request, twelve for a hardware order) and read the **P90 peak hour** of the
   forecast week (:meth:`capbook.forecast.TokenForecast.peak`). A short log is forecast with
   what it supports (calibrated bands, else the √h rule with fewer backtest origins); a log of
   less than four whole weeks, or with empty hours, cannot be forecast and the plan says so and
   uses the busiest observed hour (times an explicit weekly growth, 0 unless given).
3. **Replicas from the rating**: the replica's two-number rating from the sweep at the slots
   the TPOT objective allows (:func:`capbook.replicas.rating_from_sweep`), the linear mix and
   the headroom (:func:`capbook.replicas.replicas_for_tokens`).
4. **Queueing check at the peak**, both models of the book: Erlang C for the pooled fleet
   (``P(wait > t) ≤ target``, :func:`capbook.queueing.replicas_pooled`) and the load-dependent
   model of continuous batching (TTFT tail, :func:`capbook.loadqueue.replicas_needed`). The
   plan takes the largest of the three counts.
5. **Burst headroom** (demand that climbs while new replicas start,
   :func:`capbook.fleet.burst_headroom`) and **failure spares**
   (:func:`capbook.fleet.failure_spares`).
6. **Per-tenant token-per-minute limits** that sum below what the in-service fleet serves
   (:func:`capbook.fleet.allocate_tpm`).
7. **Replay check**: the log's busiest hours, time-scaled to the forecast peak
   (:func:`capbook.arrivals.stack_busy_periods`), through the planned in-service fleet in the
   continuous-batching simulator (:mod:`capbook.sim`): TTFT at the objective's quantile, p99
   TPOT and goodput against the objectives, on the log's own bursts and prompt lengths rather
   than Poisson arrivals and means. When the replay misses the TTFT objective or the goodput
   target (:attr:`SLO.goodput_share`), the plan adds in-service replicas (doubling, then
   bisecting, up to :data:`REPLAY_CAP_FACTOR` times the models' count) until it meets them;
   the headline is that verified number, printed beside the models' number. When no fleet
   size can meet them (the prefill of the long prompts alone exceeds the TTFT objective, or
   the fleet saturates up to the cap), the plan keeps the models' number and says loudly, in
   its first line and its notes, that it is not verified and why.

The result, :class:`CapacityPlan`, prints as text, and exports a table (:meth:`~CapacityPlan.table`,
:meth:`~CapacityPlan.to_csv`), a Markdown review document (:meth:`~CapacityPlan.to_markdown`)
and an Altair chart (:meth:`~CapacityPlan.chart`).

Units: tokens per second for token rates, requests per second for arrival rates, seconds for
times, replicas as whole numbers.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

__all__ = [
    "HORIZONS",
    "SLO",
    "CapacityPlan",
    "capacity_plan",
    "horizon_for_lead_time",
    "peak_forecast",
    "PeakForecast",
]

#: Forecast horizons (weeks) and the decision each one feeds: the lead time of that decision.
HORIZONS: dict[int, str] = {
    1: "shift reserved capacity already on hand; set next week's autoscaling floor",
    4: "request quota or a cloud reservation",
    12: "order hardware or sign a capacity contract",
}

#: Sample sweeps matching the models of the sample request log (used when no sweep is given).
SAMPLE_SWEEP_FOR_MODEL = {"chat-70b": "llama70b_h100_tp4_chat", "chat-8b": "llama8b_h100_chat"}


def _num(x, name: str, *, lo: float = 0.0, lo_open: bool = True, hi: float | None = None,
         hi_open: bool = False) -> float:
    if isinstance(x, bool):
        raise ValueError(f"{name} must be a number, got {x!r}")
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {x!r}") from None
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {x!r}")
    if (lo_open and v <= lo) or (not lo_open and v < lo):
        raise ValueError(f"{name} must be {'>' if lo_open else '>='} {lo:g}, got {x!r}")
    if hi is not None and ((hi_open and v >= hi) or (not hi_open and v > hi)):
        raise ValueError(f"{name} must be {'<' if hi_open else '<='} {hi:g}, got {x!r}")
    return v


# --------------------------------------------------------------------------------------------
# Objectives
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SLO:
    """The latency objectives the plan is built to meet.

    Attributes
    ----------
    ttft_s : float
        Time-to-first-token objective, seconds, at quantile ``ttft_quantile``.
    ttft_quantile : float
        e.g. 0.99 for a p99 TTFT objective.
    tpot_s : float
        Time-per-output-token objective, seconds, at percentile ``tpot_percentile`` of the
        sweep (it sets the slots per replica, :func:`capbook.sweep.choose_slots`).
    tpot_percentile : int
        50, 95 or 99.
    wait_s : float
        Erlang C check: at most ``late_share`` of requests wait longer than this, seconds.
    late_share : float
        Largest acceptable share of requests waiting longer than ``wait_s``, in (0, 1). This
        is the Erlang C model's target only, not a goodput target.
    goodput_share : float
        Smallest acceptable share of the replayed requests that meet *both* the TTFT and the
        TPOT objective (the replay's goodput), in (0, 1]. Default: ``ttft_quantile`` (a p99
        TTFT objective already asks 99 % of requests to start in time; goodput asks the same
        share to also stream in time).
    """

    ttft_s: float = 2.0
    ttft_quantile: float = 0.99
    tpot_s: float = 0.05
    tpot_percentile: int = 95
    wait_s: float = 0.5
    late_share: float = 0.01
    goodput_share: float | None = None

    def __post_init__(self):
        _num(self.ttft_s, "ttft_s")
        _num(self.ttft_quantile, "ttft_quantile", hi=1, hi_open=True)
        _num(self.tpot_s, "tpot_s")
        if self.tpot_percentile not in (50, 95, 99):
            raise ValueError(f"tpot_percentile must be 50, 95 or 99, got {self.tpot_percentile!r}")
        _num(self.wait_s, "wait_s", lo_open=False)
        _num(self.late_share, "late_share", hi=1, hi_open=True)
        if self.goodput_share is None:
            object.__setattr__(self, "goodput_share", float(self.ttft_quantile))
        _num(self.goodput_share, "goodput_share", hi=1)

    _KEYS = {"ttft": "ttft_s", "ttft_q": "ttft_quantile", "tpot": "tpot_s", "tpot_p": "tpot_percentile",
             "wait": "wait_s", "late": "late_share", "goodput": "goodput_share"}

    @classmethod
    def parse(cls, text: str) -> "SLO":
        """Parse ``"ttft=2,tpot=0.05,wait=0.5,late=0.01,goodput=0.99"`` (any subset; seconds and shares).

        Keys: ``ttft`` (s), ``ttft_q`` (quantile, 0.99), ``tpot`` (s), ``tpot_p`` (percentile,
        95), ``wait`` (s), ``late`` (share), ``goodput`` (share of replayed requests meeting both
        objectives; default ``ttft_q``). Values may carry ``s`` or ``ms`` (``tpot=50ms``) and
        shares a ``%`` (``late=1%``, ``goodput=99%``).
        """
        if not isinstance(text, str) or not text.strip():
            raise ValueError("slo must be a non-empty string like 'ttft=2,tpot=0.05'")
        kw: dict = {}
        for part in text.split(","):
            if not part.strip():
                continue
            if "=" not in part:
                raise ValueError(f"slo item {part.strip()!r} is not key=value; keys are {sorted(cls._KEYS)}")
            k, v = (s.strip() for s in part.split("=", 1))
            if k not in cls._KEYS:
                raise ValueError(f"slo key {k!r} is unknown; keys are {sorted(cls._KEYS)}")
            scale = 1.0
            if v.endswith("ms"):
                v, scale = v[:-2], 1e-3
            elif v.endswith("%"):
                v, scale = v[:-1], 1e-2
            elif v.endswith("s"):
                v = v[:-1]
            try:
                val = float(v) * scale
            except ValueError:
                raise ValueError(f"slo value for {k!r} is not a number: {v!r}") from None
            kw[cls._KEYS[k]] = int(val) if k == "tpot_p" else val
        return cls(**kw)

    def describe(self) -> str:
        """One line, e.g. ``p99 TTFT ≤ 2 s, p95 TPOT ≤ 50 ms, P(wait > 0.5 s) ≤ 1 %, goodput ≥ 99 %``."""
        return (f"p{100 * self.ttft_quantile:g} TTFT ≤ {self.ttft_s:g} s, p{self.tpot_percentile} TPOT ≤ "
                f"{1000 * self.tpot_s:g} ms, P(wait > {self.wait_s:g} s) ≤ {100 * self.late_share:g} %, "
                f"goodput ≥ {100 * self.goodput_share:g} %")


def horizon_for_lead_time(lead_time_weeks: float) -> int:
    """The forecast horizon (weeks) a decision with this lead time needs.

    Capacity ordered today arrives after the lead time, so the plan must cover the week it
    lands in: the smallest of :data:`HORIZONS` that is at least the lead time; beyond twelve
    weeks, the lead time rounded up.
    """
    lt = _num(lead_time_weeks, "lead_time_weeks")
    for h in sorted(HORIZONS):
        if lt <= h:
            return h
    return int(math.ceil(lt))


# --------------------------------------------------------------------------------------------
# The peak to plan for
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PeakForecast:
    """The planned peak hour at one horizon.

    Attributes
    ----------
    horizon_weeks : int
    output_tps : float
        Output tokens per second in the planned peak hour (the quantile line of the forecast
        week's busiest hour, or the observed peak when no forecast was possible).
    method : str
        ``"calibrated"``, ``"sqrt_h"`` or ``"observed"`` (no forecast).
    peak_hour : pandas.Timestamp or None
        Hour (UTC) of the forecast week's busiest point-forecast hour.
    point_tps : float
        Point forecast at that hour (tokens/s).
    note : str
        How the number was obtained, in a sentence (why a fallback was used).
    """

    horizon_weeks: int
    output_tps: float
    method: str
    peak_hour: pd.Timestamp | None
    point_tps: float
    note: str


_LADDER = (("calibrated", 4, 3), ("calibrated", 3, 1), ("sqrt_h", 4, 3), ("sqrt_h", 3, 1))


def peak_forecast(series: pd.Series, horizons: Sequence[int], *, quantile: float = 0.9,
                  growth_per_week: float = 0.0, observed_peak_tps: float | None = None) -> dict[int, PeakForecast]:
    """Planned peak output tokens/s per horizon, forecasting as much as the series allows.

    Parameters
    ----------
    series : pandas.Series
        Hourly output tokens (tokens per hour) on a complete UTC index.
    horizons : sequence of int
        Horizons in weeks.
    quantile : float
        Quantile of the forecast week's busiest hour to plan for (0.9: the P90 peak hour).
    growth_per_week : float
        Used only when no forecast is possible: weekly growth applied to the observed peak.
    observed_peak_tps : float, optional
        The observed peak (tokens/s) to use when no forecast is possible; default: the
        busiest hour of ``series``.

    Returns
    -------
    dict
        ``{horizon: PeakForecast}``. For each horizon the first method of the ladder that the
        series supports is used: calibrated bands (4 fit weeks, 3 origins), calibrated with 3
        fit weeks and 1 origin, the √h rule (4 and 3), the √h rule (3 and 1). With less than
        four whole weeks or an empty hour none works, and the observed peak is used.
    """
    from . import forecast as fc

    q = _num(quantile, "quantile", hi=1, hi_open=True)
    g = _num(growth_per_week, "growth_per_week", lo=-1)
    hs = sorted({int(h) for h in horizons})
    if not hs or hs[0] < 1:
        raise ValueError(f"horizons must be positive whole weeks, got {list(horizons)!r}")
    name = fc.quantile_name(q)
    why = ""
    s = None
    try:
        s = fc.trim_to_whole_weeks(series)
        if (s <= 0).any():
            raise ValueError(f"the series has {int((s <= 0).sum())} hour(s) with no tokens "
                             f"(first at {s.index[np.argmax((s <= 0).to_numpy())]}); the trend × "
                             "weekly-shape model needs every hour positive")
    except ValueError as exc:
        why, s = str(exc), None
    if observed_peak_tps is None:
        observed_peak_tps = float(series.max()) / 3600.0
    out: dict[int, PeakForecast] = {}
    for h in hs:
        got = None
        if s is not None:
            errors = []
            for method, mf, mo in _LADDER:
                try:
                    f = fc.forecast_tokens(s, h, quantiles=sorted({0.5, q}), method=method,
                                           min_fit_weeks=mf, min_origins=mo)
                except ValueError as exc:
                    errors.append(str(exc))
                    continue
                pk = f.peak().loc[h]
                weeks = len(s) // fc.HOURS_PER_WEEK
                note = (f"{method} bands from {weeks} whole weeks of history "
                        f"(fit ≥ {mf} weeks, {mo} backtest origin{'s' if mo > 1 else ''} or more); "
                        f"weekly growth {100 * f.growth:+.1f} %")
                if (method, mf, mo) != _LADDER[0]:
                    note += "; rough: too little history for the full calibrated method"
                got = PeakForecast(h, float(pk[name]) / 3600.0, method, pd.Timestamp(pk["peak_hour"]),
                                   float(pk["point"]) / 3600.0, note)
                break
            if got is None:
                why = errors[-1]
        if got is None:
            tps = observed_peak_tps * (1.0 + g) ** h
            got = PeakForecast(h, tps, "observed", None, tps,
                               f"no forecast ({why}); the busiest observed hour"
                               + (f" grown {100 * g:g} % a week" if g else " with no growth assumed"))
        out[h] = got
    return out


# --------------------------------------------------------------------------------------------
# The plan
# --------------------------------------------------------------------------------------------
_KIND = {"token load": "floor", "rating headroom": "queueing", "queueing check": "queueing",
         "burst headroom": "burst", "replay check": "queueing", "failure spare": "spare", "total": "total"}


@dataclass
class CapacityPlan:
    """A capacity plan and every number behind it (build it with :func:`capacity_plan`).

    Attributes
    ----------
    source : dict
        Where the data came from: ``requests``, ``sweep``, ``model``, ``tier``.
    slo : SLO
    horizon_weeks : int
        The horizon the plan is for; ``lead_time_weeks`` the decision's lead time.
    peaks : dict
        ``{horizon: PeakForecast}`` for 1, 4 and 12 weeks and the plan's horizon.
    output_tps, input_tps, request_rate : float
        The planned peak: output and input tokens per second and requests per second.
    mean_input_tokens, mean_output_tokens : float
        Tokens per request of the planned traffic (from the log).
    slots : capbook.sweep.SlotChoice
    service_time_s : float
        Mean seconds a request holds a slot at ``slots`` (T).
    need : capbook.replicas.ReplicaNeed
        Replicas from the rating and headroom.
    erlang_replicas : int
        Fewest pooled replicas meeting ``P(wait > wait_s) ≤ late_share`` (Erlang C).
    loadq_replicas : int or None
        Fewest pooled replicas meeting the TTFT tail in the load-dependent model (None when the
        sweep does not support the model; see ``notes``).
    burst : capbook.fleet.BurstHeadroom
    spare : int
    tpm : pandas.DataFrame
        Per-tenant limits (:func:`capbook.fleet.allocate_tpm`).
    capacity_tpm : float
        Tokens per minute the in-service fleet serves at the headroom.
    sim : dict
        Replay summary (:meth:`capbook.sim.SimResult.summary`) of the headline fleet
        (:attr:`in_service` replicas) plus ``replicas``, ``replayed_requests``,
        ``p99_input_tokens``, ``ttft_q_s`` (TTFT at the objective's quantile) and
        ``measured_rate`` (requests per second the replay arrived at); empty when the replay
        was skipped.
    model_spare : int or None
        Failure spare for the models' in-service count (None: the same as ``spare``, which is
        the spare for the headline in-service count).
    replay_added : int
        Replicas the replay check added to the models' in-service count so that the replay
        meets the TTFT objective and the goodput target (0 when the models' count already
        does, or when the replay was skipped or cannot meet them).
    verification : dict
        The replay check: ``status`` (``"met"``: the models' count meets it; ``"added"``:
        more replicas were needed and found; ``"not met"``: none up to ``cap`` replicas met it;
        ``"impossible"``: no fleet size can, see ``reason``; ``"skipped"``), ``met`` (bool, or
        None when skipped), ``reason`` (a sentence), ``cap`` (the most in-service replicas
        tried) and ``tried`` (a DataFrame, one row per fleet size replayed: ``ttft_q_s``,
        ``goodput_share``, ``meets``), ``seconds`` (wall-clock time of the check).
    notes : list of str
        Caveats: fallbacks, mismatches, anything a reviewer should know.
    """

    source: dict
    slo: SLO
    horizon_weeks: int
    lead_time_weeks: float
    quantile: float
    headroom: float
    demand_scale: float
    peaks: dict
    output_tps: float
    input_tps: float
    request_rate: float
    mean_input_tokens: float
    mean_output_tokens: float
    observed_peak_output_tps: float
    slots: object
    service_time_s: float
    rating: object
    need: object
    erlang_replicas: int
    erlang_late_share: float
    loadq_replicas: int | None
    loadq_ttft_s: float | None
    ramp_per_min: float
    lag_min: float
    burst: object
    spares: int
    zones: int | None
    spare: int
    capacity_tpm: float
    tpm: pd.DataFrame
    sim: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    model_spare: int | None = None
    replay_added: int = 0
    verification: dict = field(default_factory=dict)
    engine_check: dict = field(default_factory=dict)

    # -- the replica count -----------------------------------------------------------------
    @property
    def floor(self) -> int:
        """Replicas 100 % busy with the token load (rating only, no headroom)."""
        return max(1, int(math.ceil(self.need.equivalents - 1e-9)))

    @property
    def serving(self) -> int:
        """Replicas meeting the objectives at the peak: the largest of the rating with
        headroom, Erlang C and the load-dependent model."""
        return max(self.need.replicas, self.erlang_replicas, self.loadq_replicas or 0, self.floor)

    @property
    def model_in_service(self) -> int:
        """In-service replicas by the models: serving + burst headroom."""
        return self.serving + self.burst.replicas

    @property
    def model_total(self) -> int:
        """Replicas by the models (rating, Erlang C, load-dependent model, burst, spare), before
        the replay check."""
        return self.model_in_service + (self.spare if self.model_spare is None else self.model_spare)

    @property
    def in_service(self) -> int:
        """Replicas that must stay in service through a failure: serving + burst headroom + what
        the replay check added."""
        return self.model_in_service + self.replay_added

    @property
    def total(self) -> int:
        """Replicas to run (the headline): the in-service fleet + failure spare. It is the
        replay-verified number when :attr:`verified`; otherwise the models' number."""
        return self.in_service + self.spare

    @property
    def verified(self) -> bool | None:
        """True when the replay of :attr:`in_service` replicas meets the TTFT objective and the
        goodput target, False when it does not, None when the replay was skipped."""
        return self.verification.get("met")

    @property
    def verified_total(self) -> int | None:
        """The replay-verified replica count (None when the replay was skipped or failed)."""
        return self.total if self.verified else None

    def headline(self) -> str:
        """The first line of :meth:`render`: the count, and how it stands against the replay."""
        head = f"Capacity plan: {self.total} replicas of {self.source['model']} for week {self.horizon_weeks}"
        v = self.verification
        status = v.get("status", "skipped")
        if status == "met":
            return head + f" (models: {self.model_total}; replay-verified: {self.total})"
        if status == "added":
            return head + (f" (models: {self.model_total}; replay-verified: {self.total}, +{self.replay_added} "
                           "for the log's bursts and prompt lengths)")
        if status == "impossible":
            return head + f" (models: {self.model_total}) -- NOT VERIFIED: {v.get('reason', '')}"
        if status == "not met":
            return head + (f" (models: {self.model_total}) -- NOT VERIFIED: the replay misses the objectives"
                           f" at every fleet size tried; {v.get('reason', '')}")
        return head + f" (models: {self.model_total}; not replay-verified)"

    @property
    def binding(self) -> str:
        """Which check set the serving count."""
        cands = [("rating and headroom", self.need.replicas), ("Erlang C wait", self.erlang_replicas),
                 ("load-dependent TTFT", self.loadq_replicas or 0)]
        return max(cands, key=lambda c: c[1])[0]

    def stages(self) -> pd.DataFrame:
        """The waterfall: token load → rating headroom → queueing check → burst → replay check →
        spare → total (the replay check adds what the replay of the log needs beyond the models).

        Columns ``added`` (replicas the stage adds), ``replicas`` (running total) and ``kind``.
        """
        steps = [
            ("token load", self.floor),
            ("rating headroom", max(self.need.replicas - self.floor, 0)),
            ("queueing check", self.serving - max(self.need.replicas, self.floor)),
            ("burst headroom", self.burst.replicas),
            ("replay check", self.replay_added),
            ("failure spare", self.spare),
        ]
        rows, n = [], 0
        for name, add in steps:
            n += add
            rows.append((name, add, n, _KIND[name]))
        rows.append(("total", self.total, self.total, "total"))
        return pd.DataFrame(rows, columns=["stage", "added", "replicas", "kind"]).set_index("stage")

    def horizons(self) -> pd.DataFrame:
        """Planned peak and replicas (rating with headroom) per horizon, with the decision each
        horizon feeds."""
        from .replicas import replicas_for_tokens

        ratio = self.input_tps / self.output_tps if self.output_tps > 0 else 0.0
        rows = []
        for h, p in sorted(self.peaks.items()):
            out = p.output_tps * self.demand_scale
            need = replicas_for_tokens(out, out * ratio, self.rating, self.headroom)
            rows.append({"horizon_weeks": h, "decision": HORIZONS.get(h, f"lead time of {h} weeks"),
                         "method": p.method, "peak_output_tps": out, "peak_input_tps": out * ratio,
                         "replicas_by_rating": need.replicas, "planned": h == self.horizon_weeks})
        return pd.DataFrame(rows).set_index("horizon_weeks")

    # -- exports -----------------------------------------------------------------------------
    def table(self) -> pd.DataFrame:
        """Every number of the plan, one row each: ``step``, ``quantity``, ``value``, ``unit``."""
        r = []

        def add(step, quantity, value, unit):
            r.append({"step": step, "quantity": quantity, "value": value, "unit": unit})

        pk = self.peaks[self.horizon_weeks]
        add("data", "request log", self.source["requests"], "")
        add("data", "sweep", self.source["sweep"], "")
        add("data", "model / tier", f"{self.source['model']} / {self.source['tier']}", "")
        add("objectives", "SLO", self.slo.describe(), "")
        add("forecast", "lead time", self.lead_time_weeks, "weeks")
        add("forecast", "horizon", self.horizon_weeks, "weeks")
        add("forecast", "method", pk.method, "")
        add("forecast", "observed peak hour, output", self.observed_peak_output_tps, "tokens/s")
        add("forecast", f"P{100 * self.quantile:g} peak hour, output", pk.output_tps, "tokens/s")
        if self.demand_scale != 1:
            add("forecast", "demand scale (overlay)", self.demand_scale, "x")
        add("peak", "output tokens", self.output_tps, "tokens/s")
        add("peak", "input tokens", self.input_tps, "tokens/s")
        add("peak", "requests", self.request_rate, "requests/s")
        add("peak", "mean input tokens per request", self.mean_input_tokens, "tokens")
        add("peak", "mean output tokens per request", self.mean_output_tokens, "tokens")
        add("replica", "slots (S)", self.slots.S, "sequences")
        add("replica", "service time (T)", self.service_time_s, "s")
        add("replica", "output rating", self.rating.output_tps, "tokens/s")
        add("replica", "input rating", self.rating.input_tps, "tokens/s")
        add("rating", "output replica-equivalents", self.need.output_equivalents, "replicas")
        add("rating", "input replica-equivalents", self.need.input_equivalents, "replicas")
        add("rating", "headroom", self.headroom, "share")
        add("rating", "replicas by rating", self.need.replicas, "replicas")
        add("queueing", "Erlang C replicas", self.erlang_replicas, "replicas")
        add("queueing", f"P(wait > {self.slo.wait_s:g} s) at the serving count", self.erlang_late_share, "share")
        add("queueing", "load-dependent replicas", self.loadq_replicas if self.loadq_replicas is not None else "n/a",
            "replicas")
        if self.loadq_ttft_s is not None:
            add("queueing", f"model p{100 * self.slo.ttft_quantile:g} TTFT at the serving count", self.loadq_ttft_s, "s")
        e = self.engine_check
        if e:
            add("engine model", "model", e["model"], "")
            add("engine model", "saturation per replica", e["saturation_rps"], "requests/s")
            add("engine model", "highest rate per replica meeting p99 TTFT", e["max_rate_rps"]
                if e["max_rate_rps"] is not None else "none", "requests/s")
            add("engine model", "replicas the engine model needs", e["replicas"] or "n/a", "replicas")
            if e.get("ttft_p99_s") is not None:
                add("engine model", "p99 TTFT per replica at the serving count", e["ttft_p99_s"], "s")
        add("fleet", "serving replicas", self.serving, "replicas")
        add("fleet", "burst headroom", self.burst.replicas, "replicas")
        add("fleet", "replicas by the models", self.model_total, "replicas")
        add("fleet", "added by the replay check", self.replay_added, "replicas")
        add("fleet", "failure spare", self.spare, "replicas")
        add("fleet", "total replicas", self.total, "replicas")
        add("limits", "fleet capacity", self.capacity_tpm, "tokens/min")
        for tenant, row in self.tpm.iterrows():
            add("limits", f"limit for {tenant}", int(row["limit"]), "tokens/min")
        v = self.verification
        add("replay", "verification", v.get("status", "skipped"), "")
        add("replay", "verified replicas", self.verified_total if self.verified else "not verified", "replicas")
        if self.sim:
            add("replay", "replicas replayed (in service)", self.sim["replicas"], "replicas")
        for k, name, unit in (("ttft_p99_s", "p99 TTFT", "s"), ("tpot_p99_s", "p99 TPOT", "s"),
                              ("goodput_share", "goodput", "share"), ("utilisation", "slot utilisation", "share")):
            if k in self.sim:
                add("replay", name, self.sim[k], unit)
        if self.sim:
            if self.slo.ttft_quantile != 0.99:
                add("replay", f"p{100 * self.slo.ttft_quantile:g} TTFT", self.sim["ttft_q_s"], "s")
            add("replay", "requests replayed", self.sim["replayed_requests"], "requests")
            add("replay", "arrival rate replayed", self.sim["measured_rate"], "requests/s")
        if v.get("reason") and not self.verified:
            add("replay", "why not verified", v["reason"], "")
        return pd.DataFrame(r)

    def to_csv(self, path) -> Path:
        """Write :meth:`table` as CSV; returns the path."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        self.table().to_csv(p, index=False)
        return p

    def to_markdown(self, path=None) -> str:
        """The plan as a Markdown review document; written to ``path`` when given."""
        text = self.render(markdown=True)
        if path is not None:
            p = Path(path)
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, encoding="utf-8")
        return text

    def render(self, markdown: bool = False) -> str:
        """The plan as text for a terminal (or Markdown with ``markdown=True``)."""
        pk = self.peaks[self.horizon_weeks]
        h1 = "# " if markdown else ""
        h2 = "## " if markdown else ""
        lines = [f"{h1}{self.headline()}", ""]
        lines += [f"- Data: {self.source['requests']} (model {self.source['model']}, tier {self.source['tier']});"
                  f" sweep {self.source['sweep']}",
                  f"- Objectives: {self.slo.describe()}",
                  f"- Lead time {self.lead_time_weeks:g} weeks → forecast horizon {self.horizon_weeks} weeks "
                  f"({HORIZONS.get(self.horizon_weeks, 'custom horizon')})",
                  f"- Planned peak (P{100 * self.quantile:g} peak hour, {pk.method}): "
                  f"{self.output_tps:,.0f} output + {self.input_tps:,.0f} input tokens/s = "
                  f"{self.request_rate:,.3g} requests/s (busiest observed hour: "
                  f"{self.observed_peak_output_tps:,.0f} output tokens/s)",
                  f"- Replica: S = {self.slots.S} slots, T = {self.service_time_s:.2f} s; rating "
                  f"{self.rating.output_tps:,.0f} output / {self.rating.input_tps:,.0f} input tokens/s",
                  f"- Serving replicas set by: {self.binding}"]
        v = self.verification
        if v.get("status") == "added":
            lines.append(f"- The replay check added {self.replay_added} in-service replica(s) to the models' "
                         f"{self.model_in_service}: the models miss the log's bursts and real prompt lengths")
        elif v.get("status") in ("not met", "impossible"):
            lines.append(f"- **NOT VERIFIED**: {v.get('reason', '')}" if markdown else
                         f"- NOT VERIFIED: {v.get('reason', '')}")
        elif v.get("status", "skipped") == "skipped":
            lines.append("- The replay was skipped: this is the models' number, not verified against the log")
        e = self.engine_check
        if e and e.get("max_rate_rps"):
            lines.append(f"- Engine model ({e['model']}, capbook predict, the step cost fitted to the sweep, requests of "
                         f"{e['input_tokens']:,.0f} input and {e['output_tokens']:,.0f} output tokens): one replica saturates at "
                         f"{e['saturation_rps']:.3g} requests/s and meets p99 TTFT ≤ {self.slo.ttft_s:g} s up to "
                         f"{e['max_rate_rps']:.3g} requests/s → {e['replicas']} replica(s) for "
                         f"{self.request_rate:.3g} requests/s")
        lines.append("")
        lines += [f"{h2}Replicas", "", _frame_text(self.stages()[["added", "replicas"]], markdown), ""]
        lines += [f"{h2}Horizons", "", _frame_text(self.horizons()[["method", "peak_output_tps", "peak_input_tps",
                                                                     "replicas_by_rating", "decision"]], markdown), ""]
        lines += [f"{h2}Per-tenant limits (tokens per minute)", "",
                  _frame_text(self.tpm[["demand", "limit", "granted_share"]], markdown), ""]
        if self.sim:
            s = self.sim
            qn = f"p{100 * self.slo.ttft_quantile:g}"
            lines += [f"{h2}Replay check", "",
                      f"{s['replayed_requests']:,} requests of the log's busiest hours, time-scaled to "
                      f"{self.request_rate:.3g} requests/s (replayed at {s['measured_rate']:.3g}), through "
                      f"{s['replicas']} in-service replicas: {qn} TTFT {s['ttft_q_s']:.2f} s (objective "
                      f"{self.slo.ttft_s:g} s), p99 TPOT {1000 * s['tpot_p99_s']:.1f} ms, goodput "
                      f"{100 * s['goodput_share']:.2f} % of requests (target {100 * self.slo.goodput_share:g} %), "
                      f"slot utilisation {100 * s['utilisation']:.1f} %.", ""]
            tried = v.get("tried")
            if tried is not None and len(tried) > 1:
                t = tried.copy()
                t["ttft_q_s"] = t["ttft_q_s"].round(3)
                t["goodput_share"] = t["goodput_share"].round(4)
                lines += [f"Fleet sizes replayed ({v.get('seconds', 0):.1f} s):", "",
                          _frame_text(t[["ttft_q_s", "goodput_share", "meets"]], markdown), ""]
        if self.notes:
            lines += [f"{h2}Notes", ""] + [f"- {n}" for n in self.notes] + [""]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()

    def chart(self):
        """Altair chart: the replica waterfall beside the planned peak per horizon."""
        import altair as alt

        from . import charts
        from .fleet import waterfall_chart

        st = self.stages().reset_index()
        water = waterfall_chart(st[["stage", "added", "kind"]],
                                title=f"{self.total} replicas for week {self.horizon_weeks}"
                                + ("" if self.verified else " (not replay-verified)"))
        hz = self.horizons().reset_index()
        hz["horizon"] = [f"{h} wk" for h in hz["horizon_weeks"]]
        bars = alt.Chart(hz).mark_bar(size=36).encode(
            x=alt.X("horizon:N", sort=list(hz["horizon"]), title="forecast horizon"),
            y=alt.Y("replicas_by_rating:Q", title="replicas by rating (before checks)"),
            color=alt.Color("planned:N", scale=alt.Scale(domain=[True, False],
                                                         range=[charts.PALETTE[0], charts.PALETTE[5]]),
                            legend=alt.Legend(title="planned horizon")),
            tooltip=["horizon:N", "method:N", alt.Tooltip("peak_output_tps:Q", format=",.0f", title="output tok/s"),
                     alt.Tooltip("replicas_by_rating:Q", title="replicas"), "decision:N"],
        ).properties(title="Peak per horizon", width=220, height=200)
        # stacked, not side by side: the two panels together must fit the book's content column
        return alt.vconcat(water, bars)

    def _repr_markdown_(self) -> str:
        return self.render(markdown=True)


def _frame_text(df: pd.DataFrame, markdown: bool) -> str:
    out = df.copy()
    for c in out.columns:
        if pd.api.types.is_float_dtype(out[c]):
            out[c] = [f"{v:,.3g}" if abs(v) < 10 else f"{v:,.0f}" for v in out[c]]
        elif pd.api.types.is_integer_dtype(out[c]) and not pd.api.types.is_bool_dtype(out[c]):
            out[c] = [f"{v:,}" for v in out[c]]
    if markdown:
        cols = [out.index.name or ""] + [str(c) for c in out.columns]
        lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for idx, row in out.iterrows():
            lines.append("| " + " | ".join([str(idx)] + [str(v) for v in row]) + " |")
        return "\n".join(lines)
    return out.to_string()


# --------------------------------------------------------------------------------------------
# Building the plan
# --------------------------------------------------------------------------------------------
_CACHE: "weakref.WeakKeyDictionary" = None  # type: ignore[assignment]


def _aggregates(log) -> dict:
    """Hourly and per-minute sums of a log, computed once per log object (plans re-use them)."""
    global _CACHE
    import weakref

    if _CACHE is None:
        _CACHE = weakref.WeakKeyDictionary()
    try:
        got = _CACHE.get(log)
    except TypeError:  # not weak-referenceable
        got = None
    if got is None:
        got = {"hourly": log.hourly()}
        try:
            got["minute"] = log.per_minute(by=("model", "tier", "tenant"))
            got["tenant"] = True
        except ValueError:
            got["minute"] = log.per_minute(by=("model", "tier"))
            got["tenant"] = False
        try:
            _CACHE[log] = got
        except TypeError:
            pass
    return got


def _observed_peak(log, per_minute: pd.DataFrame, model, tier) -> float:
    """Busiest 60 minutes of output tokens/s for the selection (mean rate for shorter logs).

    A log spanning less than an hour (first to last arrival) may still touch 60 clock minutes
    (58.4 minutes from 18:15:46 do); its busiest 60 minutes are then all of it, over its span,
    not over 3600 s.
    """
    sel = _select(per_minute, model, tier)
    per_min = sel.groupby("period_start")["output_tokens"].sum().sort_index()
    if len(per_min) >= 60 and log.span_s >= 3600.0:
        return float(per_min.rolling(60).sum().max()) / 3600.0
    span = max(log.span_s, 60.0)
    return float(per_min.sum()) / span


def _split_rating(sweep, S: int, why: Exception):
    """A replica's rating when the sweep's input tokens/s at S exceed its concurrency-1 prefill rate.

    That happens when prompts are cached (prefix caching) or prefill is chunked into the decode
    steps, so the lowest level's TTFT is not the cost of a prompt at load. The measured operating
    point at S (output ``O`` and input ``I`` tokens/s) is kept exactly; the time is split as at the
    lowest level, where a request spends ``f = TTFT / (TTFT + output tokens × TPOT)`` of its time
    in prefill: ``R_in = I / f``, ``R_out = O / (1 - f)`` (so ``O / R_out + I / R_in = 1``).
    """
    from .replicas import ReplicaRating

    tab = sweep.table
    n = tab["concurrency"].to_numpy(float)
    lo = tab.iloc[int(np.argmin(n))]
    f = float(lo["ttft_p50_s"]) / (float(lo["ttft_p50_s"]) + float(lo["mean_output_tokens"]) * float(lo["tpot_p50_s"]))
    out = float(np.interp(S, n, tab["output_throughput_tps"].to_numpy(float)))
    req = float(np.interp(S, n, tab["request_throughput_rps"].to_numpy(float)))
    inp = req * float(np.interp(S, n, tab["mean_input_tokens"].to_numpy(float)))
    if not (0 < f < 1 and out > 0 and inp > 0):
        raise ValueError(f"cannot rate a replica from sweep {sweep.name!r}: {why}") from None
    return ReplicaRating(out / (1 - f), inp / f,
                         source=f"{sweep.name} at concurrency {S:g}, {100 * f:.1f} % of the time in prefill")


def _is_sample_log(log) -> bool:
    """True when ``log`` is the book's sample request log."""
    from .paths import data_path
    from .traces import SAMPLE_REQUESTS

    try:
        return Path(str(getattr(log, "path", ""))).resolve() == data_path(*SAMPLE_REQUESTS).resolve()
    except (OSError, ValueError):
        return False


def _select(frame: pd.DataFrame, model, tier) -> pd.DataFrame:
    out = frame
    if model is not None and "model" in out.columns:
        out = out[out["model"] == model]
    if tier is not None and "tier" in out.columns:
        out = out[out["tier"] == tier]
    return out


def capacity_plan(log=None, sweep=None, *, model: str | None = None, tier: str | None = "interactive",
                  slo: SLO | None = None, lead_time_weeks: float = 4, quantile: float = 0.9,
                  headroom: float = 0.8, demand_scale: float = 1.0, growth_per_week: float = 0.0,
                  ramp_per_min: float = 0.0125, lag_min: float = 8.0, spares: int = 1,
                  zones: int | None = None, tpm_reserve: float = 0.1, simulate: bool = True,
                  sim_requests: int = 6_000, seed: int = 2026) -> CapacityPlan:
    """Build the capacity plan for one model from a request log and a sweep.

    Parameters
    ----------
    log : capbook.traces.RequestLog, optional
        The request log; default :func:`capbook.datasets.load_requests` (the sample log, or
        ``CAPBOOK_REQUESTS``).
    sweep : capbook.sweep.Sweep, optional
        The deployment's sweep; default ``CAPBOOK_SWEEP`` or, for the sample log, the sample
        sweep matching the model (:data:`SAMPLE_SWEEP_FOR_MODEL`), else the book's sweep.
    model : str, optional
        Model to plan (a plan is for one deployment). Default: the only model, or the one with
        the most output tokens (a note says so).
    tier : str or None
        Tier to plan for (default ``"interactive"`` when the log has it; ``None``: every tier).
    slo : SLO, optional
        Objectives (default :class:`SLO`).
    lead_time_weeks : float
        Lead time of the decision; the horizon is :func:`horizon_for_lead_time` of it.
    quantile : float
        Quantile of the forecast week's busiest hour to plan for (0.9 = the P90 peak hour).
    headroom : float
        Share of each replica's rating to plan on using, in (0, 1].
    demand_scale : float
        A known-event overlay on top of the forecast (a launch expected to bring 3× the
        traffic is 3), > 0.
    growth_per_week : float
        Weekly growth applied to the observed peak when the log is too short to forecast.
    ramp_per_min : float
        How fast demand can climb, as a share of the peak per minute (0.0125 = 1.25 % a
        minute).
    lag_min : float
        Minutes from the autoscaler's trigger to a new replica serving.
    spares, zones : int
        Failure policy: N+``spares``, and survive losing one of ``zones`` zones (optional).
    tpm_reserve : float
        Share of the fleet's tokens per minute kept out of every tenant limit, in [0, 1).
    simulate : bool
        Replay the log through the planned fleet and add replicas until the replay meets the
        objectives (seconds to a minute). ``False`` keeps the models' number, marked as not
        verified.
    sim_requests : int
        Most requests replayed (the busiest hours of the log, time-scaled to the peak).
    seed : int
        Seed of the simulation.

    Returns
    -------
    CapacityPlan

    Raises
    ------
    ValueError
        On invalid parameters, an unknown model or tier, a log with no requests of the
        selection, or a sweep whose slowest level already misses the TPOT objective.
    """
    from . import datasets, fleet, loadqueue, queueing
    from .replicas import rating_from_sweep, replicas_for_tokens
    from .sweep import Sweep, choose_slots, load_sample_sweep

    slo = SLO() if slo is None else slo
    if not isinstance(slo, SLO):
        raise ValueError("slo must be a capbook.plan.SLO")
    lead = _num(lead_time_weeks, "lead_time_weeks")
    q = _num(quantile, "quantile", hi=1, hi_open=True)
    h_room = _num(headroom, "headroom", hi=1)
    scale = _num(demand_scale, "demand_scale")
    ramp = _num(ramp_per_min, "ramp_per_min", lo_open=False)
    lag = _num(lag_min, "lag_min", lo_open=False)
    reserve = _num(tpm_reserve, "tpm_reserve", lo_open=False, hi=1, hi_open=True)
    if isinstance(spares, bool) or int(spares) != spares or spares < 0:
        raise ValueError(f"spares must be a non-negative whole number, got {spares!r}")
    n_sim = int(_num(sim_requests, "sim_requests"))
    notes: list[str] = []

    if log is None:
        log = datasets.load_requests()
    sample_log = _is_sample_log(log)
    req_src = str(getattr(log, "path", "")) or "request log"
    if sample_log:
        req_src = "sample request log (data/requests)"

    agg = _aggregates(log)
    hourly = agg["hourly"]
    # model
    models = sorted(map(str, pd.unique(hourly["model"])))
    if model is None:
        if len(models) > 1:
            tot = hourly.groupby("model")["output_tokens"].sum()
            model = str(tot.idxmax())
            notes.append(f"the log holds {len(models)} models {models}; planning {model!r} (most output "
                         "tokens); each model has its own replicas: plan the others with model=")
        else:
            model = models[0]
    elif model not in models:
        raise ValueError(f"model {model!r} is not in the request log; models are {models}")
    tiers = sorted(map(str, pd.unique(hourly.loc[hourly["model"] == model, "tier"])))
    if tier is not None and tier not in tiers:
        if tier == "interactive":
            notes.append(f"the log has no 'interactive' tier (tiers {tiers}); planning every tier")
            tier = None
        else:
            raise ValueError(f"tier {tier!r} is not in the request log for model {model!r}; tiers are {tiers}")
    sel = _select(hourly, model, tier)
    if sel["requests"].sum() == 0 or sel["output_tokens"].sum() == 0:
        raise ValueError(f"the request log has no requests with output tokens for model {model!r}"
                         + (f", tier {tier!r}" if tier else ""))

    # sweep
    if sweep is None:
        if datasets.sweep_path() is None and sample_log and model in SAMPLE_SWEEP_FOR_MODEL:
            sweep = load_sample_sweep(SAMPLE_SWEEP_FOR_MODEL[model])
            sweep_src = f"sample sweep {SAMPLE_SWEEP_FOR_MODEL[model]} (modelled, not measured)"
        else:
            sweep = datasets.load_sweep()
            sweep_src = str(datasets.sweep_path()) if datasets.sweep_path() else \
                "sample sweep illustrative_chat (modelled, not measured)"
            if datasets.sweep_path() is None:
                notes.append("no sweep given: the book's illustrative sample sweep (an 8B model on one "
                             "A100) stands in for your deployment; measure yours and pass it")
    else:
        sweep_src = getattr(sweep, "name", None) or "sweep"
    if not isinstance(sweep, Sweep):
        raise ValueError(f"sweep must be a capbook.sweep.Sweep, got {type(sweep).__name__}")

    # 1-2: tokens and the forecast peak
    s_out = sel.groupby("period_start")["output_tokens"].sum().astype(float).sort_index()
    s_out.index = pd.DatetimeIndex(s_out.index)
    tot_in, tot_out, tot_req = (float(sel[c].sum()) for c in ("input_tokens", "output_tokens", "requests"))
    ratio = tot_in / tot_out
    mean_in, mean_out = tot_in / tot_req, tot_out / tot_req
    horizon = horizon_for_lead_time(lead)
    observed = _observed_peak(log, agg["minute"], model, tier)
    peaks = peak_forecast(s_out, sorted(set(HORIZONS) | {horizon}), quantile=q,
                          growth_per_week=growth_per_week, observed_peak_tps=observed)
    pk = peaks[horizon]
    if pk.method == "observed":
        notes.append(f"forecast not possible: {pk.note}")
    elif pk.method != "calibrated" or "rough" in pk.note:
        notes.append(f"week-{horizon} forecast: {pk.note}")
    out_tps = pk.output_tps * scale
    in_tps = out_tps * ratio
    lam = out_tps / mean_out
    if scale != 1:
        notes.append(f"demand scaled by {scale:g} on top of the forecast (an overlay for a known event)")

    # 3: slots, service time, rating, replicas
    if not sweep.has("tpot", slo.tpot_percentile):
        # a tool that reports fewer percentiles: the stricter one if it has it, else the median
        have = [q_ for q_ in (99, 95, 50) if sweep.has("tpot", q_)]
        if not have:
            raise ValueError(f"sweep {sweep.name!r} holds no TPOT percentile (p50, p95 or p99)")
        stricter = [q_ for q_ in have if q_ > slo.tpot_percentile]
        q_new = min(stricter) if stricter else max(have)
        notes.append(f"the sweep reports no p{slo.tpot_percentile} TPOT (it has "
                     f"{', '.join(f'p{q_}' for q_ in sorted(have))}): the TPOT objective is checked at "
                     f"p{q_new}" + ("" if stricter else ", less strict than asked: measure the "
                                    f"p{slo.tpot_percentile} to plan on it"))
        slo = dataclasses.replace(slo, tpot_percentile=q_new)
    choice = choose_slots(sweep, slo.tpot_s, q=slo.tpot_percentile)
    if choice.S == 0:
        raise ValueError(f"sweep {sweep.name!r} cannot meet p{slo.tpot_percentile} TPOT ≤ {slo.tpot_s:g} s at any "
                         f"measured concurrency ({choice.reason}); relax the TPOT objective or change hardware")
    S = int(choice.S)
    T = float(sweep.service_time(S, mean_in, mean_out))
    try:
        rating = rating_from_sweep(sweep, S)
    except ValueError as exc:
        rating = _split_rating(sweep, S, exc)
        tab = sweep.table
        sw_ratio = float(np.interp(S, tab["concurrency"], tab["mean_input_tokens"])
                         / np.interp(S, tab["concurrency"], tab["mean_output_tokens"]))
        msg = (f"rating: {exc}. The plan splits the replica's time at S between prefill and decode as at "
               f"the sweep's lowest level instead ({rating.source}): exact at the sweep's own mix "
               f"({sw_ratio:.1f} input tokens per output token)")
        if not 0.5 <= ratio / sw_ratio <= 2:
            msg += (f", an extrapolation for this log's {ratio:.1f}; if the sweep's prompts were cached (prefix "
                    "caching), the log's are unlikely to be, and the input rating is optimistic")
        notes.append(msg + "; measure prefill on its own to do better")
    need = replicas_for_tokens(out_tps, in_tps, rating, h_room)
    for n in getattr(sweep, "notes", []):
        notes.append(f"sweep: {n}")

    # 4: queueing at the peak
    erl = int(queueing.replicas_pooled(lam, S, T, slo.wait_s, slo.late_share))
    lq_n, lq_ttft = None, None
    pf_mean = float(sweep.prefill_time(mean_in))
    if pf_mean >= slo.ttft_s:
        # TTFT >= prefill, so the model's search could only fail, slowly (it doubles to 2**20)
        notes.append(f"load-dependent model not used: the mean prompt ({mean_in:,.0f} tokens) alone takes "
                     f"{pf_mean:.2f} s to prefill, not less than the TTFT objective of {slo.ttft_s:g} s")
    else:
        try:
            lq_n = int(loadqueue.replicas_needed(sweep, lam, S, slo.ttft_s, slo.ttft_quantile,
                                                 input_tokens=mean_in, output_tokens=mean_out))
        except ValueError as exc:
            notes.append(f"load-dependent model not used: {exc}")
    serving = max(need.replicas, erl, lq_n or 0, max(1, int(math.ceil(need.equivalents - 1e-9))))
    engine_check = _engine_check(sweep, lam, serving, slo, seed, notes, mean_in, mean_out)
    if engine_check.get("replicas"):
        serving = max(serving, int(engine_check["replicas"]))
    late = float(fleet.late_share(serving, S, lam, T, slo.wait_s, "pooled"))
    if lq_n is not None:
        try:
            model_q = loadqueue.from_sweep(sweep, S, replicas=serving, input_tokens=mean_in, output_tokens=mean_out)
            lq_ttft = float(model_q.solve(lam).ttft_quantile(slo.ttft_quantile))
        except ValueError as exc:
            notes.append(f"load-dependent model's TTFT at the serving count not available: {exc}")

    # 5: burst and spares
    burst = fleet.burst_headroom(ramp * lam, lag, lam / serving)
    before = serving + burst.replicas
    spare = fleet.failure_spares(before, int(spares), zones)

    # 6: tenant limits, on the models' in-service fleet: replicas the replay check adds absorb the
    # log's bursts and long prompts and are not handed out as tenant quota
    per_rep_out = h_room / (1.0 / rating.output_tps + ratio / rating.input_tps)
    capacity_tpm = 60.0 * before * per_rep_out * (1.0 + ratio)
    growth = out_tps / observed if observed > 0 else 1.0
    if agg["tenant"]:
        pm = _select(agg["minute"], model, tier)
        tok = (pm["input_tokens"] + pm["output_tokens"]).groupby([pm["tenant"], pm["period_start"]]).sum()
        demands = (tok.groupby(level=0).quantile(0.99) * growth).to_dict()
        demands = {str(k): float(v) for k, v in demands.items()}
    else:
        demands = {"all callers": 60.0 * (out_tps + in_tps)}
        notes.append("the log has no tenant column: one limit for all callers")
    tpm = fleet.allocate_tpm(capacity_tpm, demands, reserve=reserve)

    plan = CapacityPlan(
        source={"requests": req_src, "sweep": sweep_src, "model": model, "tier": tier or "all tiers"},
        slo=slo, horizon_weeks=horizon, lead_time_weeks=lead, quantile=q, headroom=h_room,
        demand_scale=scale, peaks=peaks, output_tps=out_tps, input_tps=in_tps, request_rate=lam,
        mean_input_tokens=mean_in, mean_output_tokens=mean_out, observed_peak_output_tps=observed,
        slots=choice, service_time_s=T, rating=rating, need=need, erlang_replicas=erl,
        erlang_late_share=late, loadq_replicas=lq_n, loadq_ttft_s=lq_ttft, ramp_per_min=ramp,
        lag_min=lag, burst=burst, spares=int(spares), zones=zones, spare=spare,
        capacity_tpm=capacity_tpm, tpm=tpm, notes=notes, engine_check=engine_check)

    # 7: replay, and replicas until the replay meets the objectives
    if simulate:
        _verify(plan, log, sweep, n_sim, seed, spares=int(spares), zones=zones)
    else:
        plan.verification = {"status": "skipped", "met": None,
                             "reason": "the replay was skipped (simulate=False)"}
        notes.append("replay skipped: the replica count is the models' and is not verified against the log")
    return plan


def _engine_check(sweep, lam: float, serving: int, slo, seed: int, notes: list,
                  mean_in: float, mean_out: float) -> dict:
    """The engine model of :mod:`capbook.predict` on one replica, for requests of the log's mean
    lengths (the step cost is per token, so it carries over from the sweep's mix): its saturation
    rate, the highest rate meeting p99 TTFT within the objective, the replicas that implies for
    ``lam`` requests/s, and its p99 TTFT at ``lam / serving``. Empty (with a note) when the sweep
    cannot be fitted."""
    import dataclasses

    from .engine import fit_engine
    from .predict import predict

    try:
        eng = fit_engine(sweep)
        eng = dataclasses.replace(eng, prompt_tokens=float(mean_in), output_tokens=float(mean_out),
                                  output_quantiles=None, prompt_p99=None, notes=list(eng.notes))
        p = predict(sweep, lam / max(serving, 1), ttft_p99_target_s=slo.ttft_s, seed=seed, requests=2000,
                    models=("simulation",), engine=eng)
    except ValueError as exc:
        notes.append(f"engine model not used: {exc}")
        return {}
    sim = p.models["simulation"]
    mr = sim.max_rate_rps
    reps = int(math.ceil(lam / mr - 1e-9)) if mr else None
    if mr is None:
        notes.append(f"engine model: no rate meets p99 TTFT ≤ {slo.ttft_s:g} s on one replica (its TTFT at "
                     "the lightest load is already above it)")
    return {"model": "simulation", "saturation_rps": sim.saturation_rps, "max_rate_rps": mr, "replicas": reps,
            "ttft_p99_s": sim.ttft_p99_s, "input_tokens": float(mean_in), "output_tokens": float(mean_out)}


class _ReplayService:
    """The sweep as the replay's service model, held at the measured end levels.

    Below the lowest measured concurrency the TPOT of the lowest level is used (an upper bound:
    fewer sequences do not decode slower), not a linear extrapolation towards 0; above the
    highest, the highest level's (the replay never runs more than S sequences a replica, and S
    is a measured level, so this only matters for a sweep whose S lies above its range).
    """

    def __init__(self, sweep):
        self.sweep = sweep
        n = sweep.table["concurrency"].to_numpy(float)
        self.lo, self.hi = float(n.min()), float(n.max())
        self.prefill_rate_tps = float(sweep.prefill_rate_tps)

    def tpot(self, concurrency):
        x = np.clip(np.asarray(concurrency, dtype=float), self.lo, self.hi)
        return self.sweep.tpot(x)

    def prefill_time(self, input_tokens):
        return self.sweep.prefill_time(input_tokens)


def _replay_arrivals(plan: CapacityPlan, log, n_requests: int) -> pd.DataFrame:
    """The log's busiest hours of the plan's model and tier, stacked at the plan's request rate."""
    from .arrivals import stack_busy_periods

    agg = _aggregates(log)
    if "frame" not in agg:
        agg["frame"] = log.to_pandas()
    frame = agg["frame"]
    if plan.source["model"] is not None and "model" in frame.columns:
        frame = frame[frame["model"] == plan.source["model"]]
    tier = plan.source["tier"] if plan.source["tier"] != "all tiers" else None
    per_hour = pd.to_datetime(frame["arrival_time"], utc=True).dt.floor("h")
    if tier is not None:
        per_hour = per_hour[frame["tier"].astype(str) == tier]
    # the busiest hours first, as many as it takes to hold n_requests requests
    counts = np.sort(per_hour.value_counts().to_numpy())[::-1]
    n_periods = int(min(np.searchsorted(np.cumsum(counts), n_requests) + 1, counts.size))
    data = stack_busy_periods(frame, plan.request_rate, n_periods=n_periods, tier=tier)
    data = data.iloc[:min(len(data), int(n_requests))].reset_index(drop=True)
    # Each stacked hour arrives at the plan's rate on average, but a prefix of the stack (the
    # first n_requests of a long busy hour) need not: its local rate is the hour's shape. One more
    # factor on every gap makes the replayed requests arrive at exactly the rate the plan states.
    t = data["arrival_time"].to_numpy(dtype=float)
    if t.size > 1 and t[-1] > t[0]:
        k = ((t.size - 1) / (t[-1] - t[0])) / plan.request_rate
        data["arrival_time"] = (t - t[0]) * k
        data["scale"] = data["scale"] * k
    return data


def _run_replay(plan: CapacityPlan, data: pd.DataFrame, sweep, n_rep: int, seed: int) -> dict:
    from .arrivals import TraceArrivals
    from .sim import ContinuousBatching, Fleet, Simulation

    t = data["arrival_time"].to_numpy(dtype=float)
    warm = float(t[-1]) * 0.05
    fleet = Fleet(int(n_rep), int(plan.slots.S), ContinuousBatching(_ReplayService(sweep)))
    res = Simulation(fleet, TraceArrivals(data), warmup_s=warm, seed=seed).run()
    s = res.summary(ttft_slo_s=plan.slo.ttft_s, tpot_slo_s=plan.slo.tpot_s)
    keep = res.served & (res.request_arrival >= warm) & (res.attempt == 0)
    ttft = res.ttft[keep]
    s["ttft_q_s"] = float(np.quantile(ttft, plan.slo.ttft_quantile)) if ttft.size else math.inf
    s["replicas"] = int(n_rep)
    s["replayed_requests"] = int(len(data))
    s["p99_input_tokens"] = float(np.percentile(data["input_tokens"], 99))
    s["measured_rate"] = (len(t) - 1) / (t[-1] - t[0]) if t[-1] > t[0] else math.inf
    return s


def replay_plan(plan: CapacityPlan, log, sweep, *, replicas: int | None = None, n_requests: int = 6_000,
                seed: int = 2026) -> dict:
    """Replay the log's busiest hours, time-scaled to the plan's peak, through the fleet.

    The busiest clock hours of the plan's model and tier (as many as it takes to hold
    ``n_requests``) are stacked by :func:`capbook.arrivals.stack_busy_periods`, each scaled so
    that its requests over the part of the hour the log covers arrive at
    ``plan.request_rate``, and run through ``replicas`` replicas of ``plan.slots.S`` slots in
    the continuous-batching simulator. The sweep's TPOT is held at its lowest measured level
    below that level (and at its highest above it), so a sweep that starts above concurrency 1
    replays instead of failing.

    Parameters
    ----------
    plan : CapacityPlan
    log : capbook.traces.RequestLog
    sweep : capbook.sweep.Sweep
    replicas : int, optional
        Fleet size (default: the plan's in-service count, serving + burst + what the replay
        check added, with the spare held back as it would be during a failure).
    n_requests : int
        Most requests replayed.
    seed : int

    Returns
    -------
    dict
        :meth:`capbook.sim.SimResult.summary` against the plan's TTFT and TPOT objectives, plus
        ``replicas``, ``replayed_requests``, ``p99_input_tokens``, ``ttft_q_s`` (TTFT at the
        objective's quantile, seconds) and ``measured_rate`` (arrivals replayed per second,
        ``(n - 1) / (last - first)``).
    """
    n_rep = plan.in_service if replicas is None else int(replicas)
    if n_rep < 1:
        raise ValueError(f"replicas must be a positive whole number, got {replicas!r}")
    n = int(_num(n_requests, "n_requests"))
    return _run_replay(plan, _replay_arrivals(plan, log, n), sweep, n_rep, seed)


#: Most in-service replicas the replay check tries, as a multiple of the models' count
#: (and never more than :data:`REPLAY_CAP_MAX`).
REPLAY_CAP_FACTOR = 4
REPLAY_CAP_MAX = 1000
#: Wall-clock seconds the replay check may spend searching (it stops and says so beyond).
REPLAY_BUDGET_S = 45.0


def _meets(plan: CapacityPlan, s: dict) -> bool:
    return bool(s["ttft_q_s"] <= plan.slo.ttft_s and s["goodput_share"] >= plan.slo.goodput_share)


def _verify(plan: CapacityPlan, log, sweep, n_requests: int, seed: int, *, spares: int, zones) -> None:
    """Replay the models' fleet; add replicas until the replay meets the objectives, or say why not.

    Sets ``plan.sim``, ``plan.replay_added``, ``plan.spare``/``plan.model_spare`` and
    ``plan.verification``, and appends to ``plan.notes``.
    """
    import time

    from . import fleet as fl

    t_start = time.perf_counter()
    slo = plan.slo
    qn = f"p{100 * slo.ttft_quantile:g}"
    data = _replay_arrivals(plan, log, n_requests)
    svc = _ReplayService(sweep)
    S = int(plan.slots.S)
    if svc.lo > 1:
        plan.notes.append(
            f"replay below the sweep's lowest level: the sweep starts at concurrency {svc.lo:g}, so the replay "
            f"holds that level's TPOT ({1000 * float(sweep.tpot(svc.lo)):.1f} ms) when fewer sequences run "
            "(an upper bound, not an extrapolation)")
    if S > svc.hi:
        plan.notes.append(
            f"replay above the sweep's highest level ({svc.hi:g}): the replay holds that level's TPOT up to "
            f"S = {S} sequences, which understates the decode time there")

    # lower bounds at any fleet size: TTFT >= prefill, TPOT >= the fastest TPOT of the sweep
    warm = float(data["arrival_time"].iloc[-1]) * 0.05
    sel = data[data["arrival_time"] >= warm]
    inp = sel["input_tokens"].to_numpy(dtype=float)
    out = sel["output_tokens"].to_numpy(dtype=float)
    prefill = np.asarray(svc.prefill_time(inp), dtype=float)
    fastest = float(np.min(svc.tpot(np.arange(1, S + 1))))
    best_good = float(np.mean((prefill <= slo.ttft_s) & ((out <= 1) | (fastest <= slo.tpot_s)))) if inp.size else 1.0
    pf_q = float(np.quantile(prefill, slo.ttft_quantile)) if inp.size else 0.0
    impossible = []
    if pf_q > slo.ttft_s:
        impossible.append(
            f"prefill alone of the {qn} prompt ({np.quantile(inp, slo.ttft_quantile):,.0f} tokens at "
            f"{svc.prefill_rate_tps:,.0f} tokens/s) takes {pf_q:.2f} s, more than the TTFT objective of "
            f"{slo.ttft_s:g} s, with no queueing at all; relax the objective (e.g. "
            f"slo='ttft={math.ceil(1.5 * pf_q):g}'), plan the long prompts as a tier of their own, or, if "
            "the sweep's prefill rate is too low, pass a measured prefill_rate_tps=")
    if best_good < slo.goodput_share and not impossible:
        why = (f"only {100 * best_good:.2f} % of the replayed requests could meet both objectives even on an "
               "idle fleet")
        if fastest > slo.tpot_s:
            why += f" (the sweep's fastest TPOT, {1000 * fastest:.1f} ms, misses the {1000 * slo.tpot_s:g} ms objective)"
        else:
            why += f" (their prompts alone take longer than {slo.ttft_s:g} s to prefill)"
        impossible.append(why + f", below the goodput target of {100 * slo.goodput_share:g} %")

    base = plan.model_in_service
    cap = int(min(max(REPLAY_CAP_FACTOR * base, base + 8), REPLAY_CAP_MAX))
    cap = max(cap, base)
    tried: dict[int, dict] = {}

    def run(n):
        if n not in tried:
            tried[n] = _run_replay(plan, data, sweep, n, seed)
        return tried[n]

    def table():
        rows = [{"replicas": n, "ttft_q_s": r["ttft_q_s"], "goodput_share": r["goodput_share"], "meets": _meets(plan, r)}
                for n, r in sorted(tried.items())]
        return pd.DataFrame(rows).set_index("replicas")

    first = run(base)
    headline_n = base
    status, reason = "met", f"the replay of the models' {base} in-service replicas meets the objectives"
    if impossible:
        status = "impossible"
        reason = "no fleet size can meet the objectives (adding replicas cannot help): " + "; ".join(impossible)
    elif not _meets(plan, first):
        lo, hi = base, None
        n = base
        over_budget = False
        while hi is None and n < cap:
            if time.perf_counter() - t_start > REPLAY_BUDGET_S:
                over_budget = True
                break
            n = min(max(2 * n, n + 1), cap)
            if _meets(plan, run(n)):
                hi = n
            else:
                lo = n
        if hi is None:
            last = tried[max(tried)]
            status = "not met"
            if over_budget:
                reason = (f"the search stopped after {REPLAY_BUDGET_S:g} s at {max(tried)} in-service replicas, "
                          f"which still miss ({qn} TTFT {last['ttft_q_s']:.2f} s, goodput "
                          f"{100 * last['goodput_share']:.2f} %)")
            else:
                reason = (f"even {max(tried)} in-service replicas (the search's cap: {REPLAY_CAP_FACTOR}x the "
                          f"models' {base}, at least 8 more, at most {REPLAY_CAP_MAX}) miss: {qn} TTFT {last['ttft_q_s']:.2f} s against {slo.ttft_s:g} s, "
                          f"goodput {100 * last['goodput_share']:.2f} % against {100 * slo.goodput_share:g} %, at "
                          f"slot utilisation {100 * last['utilisation']:.1f} %")
                if last["utilisation"] < 0.5:
                    reason += ("; the fleet is mostly idle, so the misses come from the requests themselves (long "
                               f"prompts: p99 prefill {float(np.percentile(prefill, 99)):.2f} s), not from queueing")
                else:
                    reason += "; the replicas saturate: throughput, not the tail, is short"
        else:
            while hi - lo > 1:
                if time.perf_counter() - t_start > 2 * REPLAY_BUDGET_S:
                    break                       # hi meets; it may be a few replicas more than needed
                mid = (lo + hi) // 2
                if _meets(plan, run(mid)):
                    hi = mid
                else:
                    lo = mid
            headline_n = hi
            status = "added"
            r = tried[hi]
            reason = (f"the models' {base} in-service replicas miss in the replay ({qn} TTFT "
                      f"{first['ttft_q_s']:.2f} s, goodput {100 * first['goodput_share']:.2f} %); {hi} meet it "
                      f"({qn} TTFT {r['ttft_q_s']:.2f} s, goodput {100 * r['goodput_share']:.2f} %)"
                      + ("" if hi - lo == 1 else f"; the search stopped before pinning the count ({lo} miss)"))
    met = status in ("met", "added")
    plan.replay_added = headline_n - base
    plan.sim = tried[headline_n]
    if plan.replay_added:
        plan.model_spare = plan.spare
        plan.spare = int(fl.failure_spares(headline_n, spares, zones))
    plan.verification = {"status": status, "met": met, "reason": reason, "cap": cap, "tried": table(),
                         "seconds": time.perf_counter() - t_start}
    if status == "added":
        plan.notes.append(
            f"replay check: {reason}. The plan adds {plan.replay_added} in-service replica(s): the models assume "
            "Poisson arrivals and mean prompt lengths, the replay uses the log's own bursts and prompts")
    elif not met:
        plan.notes.append(f"REPLAY CHECK FAILED, the plan is not verified: the {plan.total} replicas are the models' "
                          "number and do NOT meet "
                          f"the objectives in the replay ({qn} TTFT {first['ttft_q_s']:.2f} s against "
                          f"{slo.ttft_s:g} s, goodput {100 * first['goodput_share']:.2f} % against "
                          f"{100 * slo.goodput_share:g} %): {reason}. Relax the objectives, cap prompt length or "
                          "give long prompts their own objective, or change the hardware")
    s = plan.sim
    if not met or status == "added":
        p99_in = s["p99_input_tokens"]
        pf = p99_in / svc.prefill_rate_tps
        if first["ttft_q_s"] > slo.ttft_s:
            if pf >= 0.5 * slo.ttft_s:
                plan.notes.append(
                    f"the models use the mean prompt ({plan.mean_input_tokens:,.0f} tokens), the replay real ones "
                    f"(p99 {p99_in:,.0f} tokens, {pf:.2f} s of prefill alone)")
            else:
                plan.notes.append(
                    f"prefill is short (p99 prompt {p99_in:,.0f} tokens, {pf:.2f} s), so the replay's tail comes "
                    "from queueing: the log's arrivals are burstier than the Poisson arrivals the models assume")
