"""Open-loop arrival processes for the simulator: Poisson, renewal with a chosen Ca², trace replay.

Every process has ``generate(rng, n_requests=None, duration_s=None)`` returning an
:class:`ArrivalStream`: arrival times in seconds from the start of the run, plus, for a replayed
trace, the token counts and tier of each request. Arrivals are open-loop: they do not depend on
how the fleet is doing (retries, which do, are added by the simulator).

>>> import numpy as np
>>> stream = PoissonArrivals(4.0).generate(np.random.default_rng(1), n_requests=100_000)
>>> len(stream), round((len(stream) - 1) / float(stream.times[-1]), 1)
(100000, 4.0)
>>> len(RenewalArrivals(2.0, ca2=4.0).generate(np.random.default_rng(1), duration_s=60.0)) > 0
True
>>> PoissonArrivals("4")
Traceback (most recent call last):
...
ValueError: rate must be a number, got '4' (str)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from capbook.sim.distributions import as_distribution, Gamma
from capbook.validation import array, integer, nonnegative, positive

__all__ = ["ArrivalStream", "PoissonArrivals", "RenewalArrivals", "TraceArrivals", "stack_busy_periods",
           "RateArrivals", "TokenLengths", "rate_cv_from_log"]


@dataclass
class ArrivalStream:
    """Arrival times (seconds, sorted, from 0) and optional per-request attributes.

    ``input_tokens``/``output_tokens`` are integer arrays (tokens) or ``None`` when the process
    does not carry tokens; ``tier`` is an array of class names or ``None``.
    """

    times: np.ndarray
    input_tokens: np.ndarray | None = None
    output_tokens: np.ndarray | None = None
    tier: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.times.size)


class RenewalArrivals:
    """Renewal arrivals: i.i.d. gamma inter-arrival times with a chosen Ca².

    ``ca2 = 1`` is Poisson; ``ca2 > 1`` is burstier than Poisson, ``ca2 < 1`` more regular.

    Parameters
    ----------
    rate : float
        Mean arrival rate, requests per second.
    ca2 : float, optional
        Squared coefficient of variation of the inter-arrival times (default 1).
    """

    def __init__(self, rate: float, ca2: float = 1.0):
        self.rate = rate = positive(rate, "rate")
        self.ca2 = ca2 = positive(ca2, "ca2")
        self.interarrival = Gamma(1.0 / rate, ca2)

    def _draw(self, rng, size):
        if self.ca2 == 1.0:
            return rng.exponential(1.0 / self.rate, size)
        return self.interarrival.sample(rng, size)

    def generate(self, rng: np.random.Generator, n_requests: int | None = None,
                 duration_s: float | None = None) -> ArrivalStream:
        """Draw arrival times (seconds from 0) for ``n_requests`` or up to ``duration_s``."""
        if n_requests is None and duration_s is None:
            raise ValueError("give n_requests or duration_s (or both)")
        if duration_s is not None:
            duration_s = positive(duration_s, "duration_s")
        if n_requests is not None:
            n_requests = integer(n_requests, "n_requests", minimum=1)
            times = np.cumsum(self._draw(rng, n_requests))
            if duration_s is not None:
                times = times[times < duration_s]
            return ArrivalStream(times)
        chunks, t0 = [], 0.0
        block = int(self.rate * duration_s * 1.1 + 10 * math.sqrt(self.rate * duration_s) + 16)
        while True:
            t = t0 + np.cumsum(self._draw(rng, block))
            chunks.append(t[t < duration_s])
            if t[-1] >= duration_s:
                break
            t0 = t[-1]
        return ArrivalStream(np.concatenate(chunks))

    def __repr__(self):
        return f"{type(self).__name__}(rate={self.rate:g}, ca2={self.ca2:g})"


class PoissonArrivals(RenewalArrivals):
    """Poisson arrivals at ``rate`` requests per second (exponential gaps, Ca² = 1)."""

    def __init__(self, rate: float):
        super().__init__(rate, 1.0)

    def __repr__(self):
        return f"PoissonArrivals(rate={self.rate:g})"


_TRACE_COLUMNS = ("arrival_time", "input_tokens", "output_tokens")


class TraceArrivals:
    """Replay a request log (arrival times and token counts), optionally time-scaled.

    Parameters
    ----------
    log : pandas.DataFrame, capbook.logs.requestlog.RequestLog or ReplayArrays
        The canonical request log (or any object with ``arrays()`` or ``to_pandas()``): ``arrival_time`` (UTC datetimes, or numbers of seconds),
        ``input_tokens``, ``output_tokens`` and optionally ``tier`` and ``status``. Every row is
        replayed, whatever its status: a log that records rejected requests records demand.
    rate : float, optional
        Target mean arrival rate, requests per second: the gaps are scaled by one factor so the
        replayed log's mean rate ``(n - 1) / span`` equals ``rate``; the shape of the bursts is
        kept. ``None`` replays at the recorded speed.
    speedup : float, optional
        Alternatively, divide all gaps by this factor (2 = twice the recorded rate).

    Notes
    -----
    ``generate`` replays the rows in time order from the first arrival (time 0); with
    ``n_requests`` smaller than the log it takes the first ``n_requests``; with a larger one it
    raises rather than invent requests.
    """

    def __init__(self, log, rate: float | None = None, speedup: float | None = None):
        if hasattr(log, "arrays") and callable(log.arrays) and not isinstance(log, pd.DataFrame):
            log = log.arrays()          # a capbook.logs.requestlog.RequestLog: skip the DataFrame
        if hasattr(log, "arrival_s") and not isinstance(log, pd.DataFrame):
            # capbook.logs.requestlog.ReplayArrays: seconds from the first arrival, sorted
            log = pd.DataFrame({"arrival_time": np.asarray(log.arrival_s, dtype=float),
                                "input_tokens": log.input_tokens, "output_tokens": log.output_tokens,
                                "tier": log.tier})
        elif hasattr(log, "to_pandas") and not isinstance(log, pd.DataFrame):
            log = log.to_pandas()
        if not isinstance(log, pd.DataFrame):
            raise TypeError(f"log must be a pandas DataFrame or have to_pandas(), got {type(log).__name__}")
        if len(log) == 0:
            raise ValueError("the request log (trace) has no rows: nothing to replay")
        missing = [c for c in _TRACE_COLUMNS if c not in log.columns]
        if missing:
            raise ValueError(f"the request log lacks column(s) {missing}; it needs {list(_TRACE_COLUMNS)}")
        if rate is not None and speedup is not None:
            raise ValueError("give rate or speedup, not both")
        t = log["arrival_time"]
        if pd.api.types.is_datetime64_any_dtype(t):
            if t.isna().any():
                raise ValueError(f"arrival_time is missing in row {int(np.flatnonzero(t.isna().to_numpy())[0])}")
            secs = (t - t.min()).dt.total_seconds().to_numpy(dtype=float)
        else:
            secs = pd.to_numeric(t, errors="coerce").to_numpy(dtype=float)
            bad = ~np.isfinite(secs)
            if bad.any():
                raise ValueError(f"arrival_time is not a finite time in row {int(np.flatnonzero(bad)[0])}")
            secs = secs - secs.min()
        tokens = {}
        for col in ("input_tokens", "output_tokens"):
            v = pd.to_numeric(log[col], errors="coerce").to_numpy(dtype=float)
            bad = ~np.isfinite(v) | (v < 0) | (v != np.round(v))
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                raise ValueError(f"{col} must be a non-negative whole number of tokens; row {row} has {log[col].iloc[row]!r}")
            tokens[col] = v.astype(np.int64)
        order = np.argsort(secs, kind="stable")
        self.times = secs[order]
        self.input_tokens = tokens["input_tokens"][order]
        self.output_tokens = tokens["output_tokens"][order]
        self.tier = log["tier"].astype(str).to_numpy()[order] if "tier" in log.columns else None
        span = float(self.times[-1])
        self.recorded_rate = (len(self.times) - 1) / span if span > 0 else math.inf
        if rate is not None:
            rate = positive(rate, "rate")
            if span <= 0:
                raise ValueError("cannot time-scale a trace whose arrivals all share one timestamp")
            self.scale = self.recorded_rate / rate
        elif speedup is not None:
            speedup = positive(speedup, "speedup")
            self.scale = 1.0 / speedup
        else:
            self.scale = 1.0
        self.rate = self.recorded_rate / self.scale

    def __len__(self):
        return int(self.times.size)

    def generate(self, rng: np.random.Generator | None = None, n_requests: int | None = None,
                 duration_s: float | None = None) -> ArrivalStream:
        """Return the (scaled) recorded arrivals; ``rng`` is unused (a replay is deterministic)."""
        times = self.times * self.scale
        keep = np.ones(times.size, dtype=bool)
        if duration_s is not None:
            keep &= times < positive(duration_s, "duration_s")
        idx = np.flatnonzero(keep)
        if n_requests is not None:
            n_requests = integer(n_requests, "n_requests", minimum=1)
            if n_requests > idx.size:
                raise ValueError(f"n_requests={n_requests} exceeds the {idx.size} requests in the trace")
            idx = idx[:n_requests]
        if idx.size == 0:
            raise ValueError("no trace arrivals fall inside duration_s")
        return ArrivalStream(times[idx], self.input_tokens[idx], self.output_tokens[idx],
                             None if self.tier is None else self.tier[idx])

    def __repr__(self):
        return f"TraceArrivals(n={len(self)}, rate={self.rate:g})"


def stack_busy_periods(log, rate: float, n_periods: int = 40, period_s: float = 3600.0,
                       tier: str | None = None) -> pd.DataFrame:
    """Stack a log's busiest periods back to back, each time-scaled to a planned peak rate.

    A gateway log rarely holds a long stretch at the planned peak: its busiest hour may carry a
    few hundred requests, and a plan is for tens of requests per second. This picks the
    ``n_periods`` busiest periods (hours by default, by request count), compresses the gaps of
    each by one factor so that its mean rate equals ``rate``, and lays them end to end in time
    order. The burst structure inside each period is kept; the diurnal shape between periods is
    not.

    A period's rate is its request count over the part of it the log **covers**: the whole
    period inside the log, but only from the log's first arrival for the period it starts in,
    and only to the log's last arrival for the period it ends in (first to last arrival for a
    log shorter than one period). So a 17-minute log, or one that starts at 18:15, replays at
    ``rate``, not at ``rate`` times 60/17 or 60/45 (scaling by the full period length would).
    Each stacked period lasts ``count / rate`` seconds, so the whole replay holds
    ``len(result) / rate`` seconds of arrivals.

    Parameters
    ----------
    log : pandas.DataFrame, capbook.logs.requestlog.RequestLog or object with ``to_pandas()``
        Request log with ``arrival_time`` (UTC datetimes or seconds), ``input_tokens``,
        ``output_tokens`` and optionally ``tier``.
    rate : float
        Planned peak, requests per second.
    n_periods : int
        How many of the busiest periods to stack.
    period_s : float
        Period length, seconds (3600 = clock hours; periods start at multiples of it).
    tier : str, optional
        Keep only rows of this tier (e.g. ``"interactive"``: batch is deferred, not planned for).

    Returns
    -------
    pandas.DataFrame
        ``arrival_time`` (seconds from 0), ``input_tokens``, ``output_tokens``, ``tier`` (when
        the log has it), ``period_start`` (seconds of the period in the original log),
        ``covered_s`` (seconds of the period the log covers) and ``scale`` (replayed seconds per
        recorded second; 0 for a period whose arrivals share one instant and whose coverage is
        therefore empty: they replay as one burst followed by ``count / rate`` seconds of
        nothing), sorted by ``arrival_time``; ready for :class:`TraceArrivals`.
    """
    if hasattr(log, "to_pandas") and not isinstance(log, pd.DataFrame):
        log = log.to_pandas()
    if not isinstance(log, pd.DataFrame):
        raise TypeError("log must be a pandas DataFrame or have to_pandas()")
    missing = [c for c in _TRACE_COLUMNS if c not in log.columns]
    if missing:
        raise ValueError(f"the request log lacks column(s) {missing}; it needs {list(_TRACE_COLUMNS)}")
    rate = positive(rate, "rate")
    period_s = positive(period_s, "period_s")
    n_periods = integer(n_periods, "n_periods", minimum=1)
    if tier is not None:
        if "tier" not in log.columns:
            raise ValueError("tier was given but the request log has no tier column")
        log = log[log["tier"].astype(str) == tier]
    if len(log) == 0:
        raise ValueError("the request log (trace) has no rows" + (f" of tier {tier!r}" if tier else ""))
    t = log["arrival_time"]
    if pd.api.types.is_datetime64_any_dtype(t):
        secs = (t - t.min()).dt.total_seconds().to_numpy(dtype=float)
        origin = t.min()
        offset = (origin - origin.floor(pd.Timedelta(seconds=period_s))).total_seconds()
        secs = secs + offset
    else:
        secs = pd.to_numeric(t, errors="coerce").to_numpy(dtype=float)
    if not np.all(np.isfinite(secs)):
        raise ValueError(f"arrival_time is not a finite time in row {int(np.flatnonzero(~np.isfinite(secs))[0])}")
    period = np.floor(secs / period_s)
    ids, counts = np.unique(period, return_counts=True)
    if n_periods > ids.size:
        raise ValueError(f"n_periods={n_periods} but the log has only {ids.size} periods with requests")
    order = np.lexsort((ids, -counts))            # busiest first, earlier first among ties
    chosen = np.sort(ids[order[:n_periods]])
    return _stack_chosen(log, secs, period, chosen, float(secs.min()), float(secs.max()), rate, period_s)


def _stack_chosen(log: pd.DataFrame, secs: np.ndarray, period: np.ndarray, chosen, first: float, last: float,
                  rate: float, period_s: float) -> pd.DataFrame:
    """The rows of the periods ``chosen`` stacked at ``rate`` (the body of :func:`stack_busy_periods`).

    ``secs`` are the rows' seconds and ``period`` their period numbers (from the log's first
    period); ``first`` and ``last`` are the seconds of the whole log's first and last arrival
    (of which ``log`` may hold only the chosen periods' rows).
    """
    parts, t0 = [], 0.0
    for pid in chosen:
        idx = np.flatnonzero(period == pid)
        idx = idx[np.argsort(secs[idx], kind="stable")]
        # the part of this period the log covers: [period start, period end] cut to [first, last]
        lo = max(pid * period_s, first)
        hi = min((pid + 1) * period_s, last)
        covered = max(hi - lo, 0.0)
        length = idx.size / rate                      # replayed seconds of this period
        scale = length / covered if covered > 0 else 0.0
        part = pd.DataFrame({
            "arrival_time": t0 + (secs[idx] - lo) * scale,
            "input_tokens": log["input_tokens"].to_numpy()[idx],
            "output_tokens": log["output_tokens"].to_numpy()[idx],
        })
        if "tier" in log.columns:
            part["tier"] = log["tier"].astype(str).to_numpy()[idx]
        part["period_start"] = pid * period_s
        part["covered_s"] = covered
        part["scale"] = scale
        parts.append(part)
        t0 += length
    return pd.concat(parts, ignore_index=True)


# --------------------------------------------------------------------------- time-varying demand


class TokenLengths:
    """Token counts per request, drawn per tier: resampled (input, output) pairs or two distributions.

    Parameters
    ----------
    pairs : dict
        Tier name → ``(input_tokens, output_tokens)`` arrays of equal length (tokens): the
        requests of that tier, resampled jointly with replacement (so a long prompt keeps its
        own answer length).
    shares : dict, optional
        Tier name → share of arrivals (normalised). Default: each tier's share of the pairs.

    Notes
    -----
    Build one from a request log with :meth:`from_log`, or from two distributions of
    :mod:`capbook.sim.distributions` with :meth:`from_distributions`.
    """

    def __init__(self, pairs: dict, shares: dict | None = None):
        if not isinstance(pairs, dict) or not pairs:
            raise ValueError("pairs must map at least one tier name to (input_tokens, output_tokens)")
        self.pairs = {}
        for name, (inp, out) in pairs.items():
            inp = np.asarray(inp, dtype=np.int64).ravel()
            out = np.asarray(out, dtype=np.int64).ravel()
            if inp.size == 0 or inp.size != out.size:
                raise ValueError(f"tier {name!r}: input and output token arrays must be non-empty and of equal length")
            if (inp < 0).any() or (out < 1).any():
                raise ValueError(f"tier {name!r}: input tokens must be >= 0 and output tokens >= 1")
            self.pairs[str(name)] = (inp, out)
        if shares is None:
            shares = {k: v[0].size for k, v in self.pairs.items()}
        unknown = set(shares) - set(self.pairs)
        if unknown:
            raise ValueError(f"shares name tier(s) {sorted(unknown)} that have no token pairs")
        w = np.array([float(shares.get(k, 0.0)) for k in self.pairs])
        if not np.all(np.isfinite(w)) or (w < 0).any() or w.sum() <= 0:
            raise ValueError("shares must be non-negative numbers that sum to a positive number")
        self.tiers = list(self.pairs)
        self.shares = w / w.sum()

    @classmethod
    def from_log(cls, log, tier: str | None = None) -> "TokenLengths":
        """The (input, output) pairs of a request log, per tier (``tier`` keeps one)."""
        if hasattr(log, "to_pandas") and not isinstance(log, pd.DataFrame):
            log = log.to_pandas()
        missing = [c for c in ("input_tokens", "output_tokens") if c not in log.columns]
        if missing:
            raise ValueError(f"the request log lacks column(s) {missing}")
        if tier is not None:
            if "tier" not in log.columns:
                raise ValueError("tier was given but the request log has no tier column")
            log = log[log["tier"].astype(str) == tier]
            if len(log) == 0:
                raise ValueError(f"the request log has no rows of tier {tier!r}")
        if "tier" in log.columns:
            groups = {str(k): g for k, g in log.groupby(log["tier"].astype(str), sort=True)}
        else:
            groups = {"default": log}
        return cls({k: (g["input_tokens"].to_numpy(), np.maximum(g["output_tokens"].to_numpy(), 1))
                    for k, g in groups.items()})

    @classmethod
    def from_distributions(cls, input_tokens, output_tokens, n: int = 65_536, seed: int = 0) -> "TokenLengths":
        """Independent input and output lengths from two distributions (``n`` pairs drawn once)."""
        rng = np.random.default_rng(seed)
        di, do = as_distribution(input_tokens, "input_tokens"), as_distribution(output_tokens, "output_tokens")
        inp = np.maximum(np.rint(di.sample(rng, n)), 0).astype(np.int64)
        out = np.maximum(np.rint(do.sample(rng, n)), 1).astype(np.int64)
        return cls({"default": (inp, out)})

    @property
    def mean_input_tokens(self) -> float:
        """Mean prompt length over the tiers' shares, tokens."""
        return float(sum(w * p[0].mean() for w, p in zip(self.shares, self.pairs.values())))

    @property
    def mean_output_tokens(self) -> float:
        """Mean answer length over the tiers' shares, tokens."""
        return float(sum(w * p[1].mean() for w, p in zip(self.shares, self.pairs.values())))

    def sample(self, rng: np.random.Generator, n: int):
        """``(input_tokens, output_tokens, tier_index)`` arrays for ``n`` requests."""
        k = len(self.tiers)
        if k == 1:                                     # one tier: the pairs drawn straight (the same draws)
            a, b = next(iter(self.pairs.values()))
            pick = rng.integers(a.size, size=n)
            return a[pick], b[pick], np.zeros(n, dtype=np.int64)
        tier = rng.choice(k, size=n, p=self.shares)
        inp = np.empty(n, dtype=np.int64)
        out = np.empty(n, dtype=np.int64)
        for j, (a, b) in enumerate(self.pairs.values()):
            idx = np.flatnonzero(tier == j)
            pick = rng.integers(a.size, size=idx.size)
            inp[idx] = a[pick]
            out[idx] = b[pick]
        return inp, out, tier

    def __repr__(self):
        return f"TokenLengths(tiers={self.tiers}, mean_in={self.mean_input_tokens:.0f}, mean_out={self.mean_output_tokens:.0f})"


class RateArrivals:
    """Non-homogeneous Poisson arrivals from a rate series, optionally burstier than Poisson.

    The rate is piecewise constant: ``rates[k]`` requests per second during
    ``[k * bin_s, (k + 1) * bin_s)``. Within a bin, arrivals are a Poisson process at that rate
    (exactly: a Poisson count, placed uniformly). With ``rate_cv > 0`` the rate is also multiplied,
    window by window of ``window_s`` seconds, by independent gamma factors of mean 1 and
    coefficient of variation ``rate_cv`` (a doubly stochastic, Cox, process): bursts on top of
    the daily shape, as measured from a log by :func:`rate_cv_from_log`.

    Parameters
    ----------
    rates : array_like or pandas.Series
        Arrival rate per bin, requests per second (>= 0, finite, not all zero).
    bin_s : float
        Bin length, seconds (3600 for an hourly series, 600 for ServeGen's windows).
    rate_cv : float
        Coefficient of variation of the burst factor (0 = no bursts beyond Poisson).
    window_s : float
        Length of a burst window, seconds.
    lengths : TokenLengths, optional
        Token counts per request (drawn per tier); without it the stream carries times only.

    Notes
    -----
    The index of dispersion of the counts in one window of a bin at rate ``λ`` is
    ``1 + λ · window_s · rate_cv²`` (1 for Poisson).

    Examples
    --------
    >>> import numpy as np
    >>> arr = RateArrivals([2.0, 8.0], bin_s=3600.0)
    >>> s = arr.generate(np.random.default_rng(1))
    >>> n1, n2 = int((s.times < 3600).sum()), int((s.times >= 3600).sum())
    >>> round(n1 / 3600, 1), round(n2 / 3600, 1), arr.duration_s
    (2.0, 8.0, 7200.0)
    """

    def __init__(self, rates, bin_s: float, *, rate_cv: float = 0.0, window_s: float = 60.0,
                 lengths: TokenLengths | None = None):
        self.rates = array(np.asarray(rates, dtype=float), "rates", lo=0.0, nonempty=True).ravel()
        if not self.rates.sum() > 0:
            raise ValueError("rates are all zero: no request would ever arrive")
        self.bin_s = positive(bin_s, "bin_s")
        self.rate_cv = nonnegative(rate_cv, "rate_cv")
        self.window_s = positive(window_s, "window_s")
        if lengths is not None and not isinstance(lengths, TokenLengths):
            raise TypeError("lengths must be a capbook.sim.arrivals.TokenLengths or None")
        self.lengths = lengths

    @property
    def duration_s(self) -> float:
        """Length of the series, seconds."""
        return float(self.rates.size * self.bin_s)

    @property
    def mean_rate(self) -> float:
        """Mean arrival rate over the series, requests per second."""
        return float(self.rates.mean())

    def rate_at(self, t):
        """The (unmodulated) rate at time(s) ``t`` seconds; 0 outside the series."""
        t = np.asarray(t, dtype=float)
        k = np.floor(t / self.bin_s).astype(np.int64)
        ok = (k >= 0) & (k < self.rates.size)
        return np.where(ok, self.rates[np.clip(k, 0, self.rates.size - 1)], 0.0)

    def times_between(self, rng: np.random.Generator, t0: float, t1: float) -> np.ndarray:
        """Sorted arrival times in ``[t0, t1)``, seconds (one piece of :meth:`generate`)."""
        t1 = min(float(t1), self.duration_s)
        if t1 <= t0:
            return np.empty(0)
        edges = np.arange(math.floor(t0 / self.bin_s), math.ceil(t1 / self.bin_s) + 1) * self.bin_s
        if self.rate_cv > 0:
            w = np.arange(math.floor(t0 / self.window_s), math.ceil(t1 / self.window_s) + 1) * self.window_s
            edges = np.union1d(edges, w)
        edges = np.clip(edges, t0, t1)
        edges = np.unique(edges)
        a, b = edges[:-1], edges[1:]
        lam = self.rates[np.minimum((a // self.bin_s).astype(np.int64), self.rates.size - 1)]
        if self.rate_cv > 0:
            win = np.floor(a / self.window_s).astype(np.int64)
            uw, inv = np.unique(win, return_inverse=True)
            k = 1.0 / self.rate_cv**2
            lam = lam * rng.gamma(k, 1.0 / k, size=uw.size)[inv]
        counts = rng.poisson(lam * (b - a))
        times = np.repeat(a, counts) + rng.random(int(counts.sum())) * np.repeat(b - a, counts)
        return _sorted_within(times, t0, t1)

    def generate(self, rng: np.random.Generator, n_requests: int | None = None,
                 duration_s: float | None = None) -> ArrivalStream:
        """Arrivals over the series (or its first ``duration_s`` seconds, or first ``n_requests``)."""
        end = self.duration_s if duration_s is None else min(positive(duration_s, "duration_s"), self.duration_s)
        times = self.times_between(rng, 0.0, end)
        if n_requests is not None:
            times = times[:integer(n_requests, "n_requests", minimum=1)]
        if self.lengths is None:
            return ArrivalStream(times)
        inp, out, tier = self.lengths.sample(rng, times.size)
        return ArrivalStream(times, inp, out, np.asarray(self.lengths.tiers, dtype=object)[tier].astype(str))

    def scaled(self, *, peak: float | None = None, mean: float | None = None) -> "RateArrivals":
        """The same shape with its busiest bin (or its mean) at the given rate, requests per second."""
        if (peak is None) == (mean is None):
            raise ValueError("give peak or mean (one of them)")
        f = positive(peak, "peak") / self.rates.max() if peak is not None else positive(mean, "mean") / self.rates.mean()
        return RateArrivals(self.rates * f, self.bin_s, rate_cv=self.rate_cv, window_s=self.window_s,
                            lengths=self.lengths)

    def __repr__(self):
        return (f"RateArrivals(bins={self.rates.size}, bin_s={self.bin_s:g}, mean={self.mean_rate:g}/s, "
                f"peak={self.rates.max():g}/s, rate_cv={self.rate_cv:g})")


def _sorted_within(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """``np.sort(x)`` for values that lie in ``[lo, hi]`` (about uniformly): a long array is
    bucketed by value (a linear radix pass), then each bucket is sorted on its own, which is
    about twice as fast as one sort of the whole array (a week's hour holds ~10⁵ arrivals).
    The bucket of a value never decreases with the value, so the result is the sorted array."""
    n = x.size
    buckets = min(n // 128, 32767)                    # int16 keys: numpy sorts them by radix
    if buckets < 64 or not hi > lo:
        return np.sort(x)
    key = (x - lo) * (buckets / (hi - lo))
    np.clip(key, 0, buckets - 1, out=key)
    key = key.astype(np.int16)
    out = x[np.argsort(key, kind="stable")]
    start = 0
    for end in np.cumsum(np.bincount(key, minlength=buckets)).tolist():
        out[start:end].sort()
        start = end
    return out


def rate_cv_from_log(arrival_s, window_s: float = 60.0, trend_s: float = 3600.0) -> float:
    """The burstiness of a log beyond its trend: the coefficient of variation of the rate per window.

    The log's arrivals are counted in windows of ``window_s``; each window's expected count is
    the mean count of its ``trend_s`` period (the slow shape). Poisson noise is subtracted, so a
    Poisson process with any trend gives about 0:
    ``cv² = Σ[(n − m)² − m] / Σ m²`` (clipped at 0).

    Parameters
    ----------
    arrival_s : array_like
        Arrival times, seconds (any origin).
    window_s, trend_s : float
        Burst window and trend period, seconds (``trend_s`` a multiple of ``window_s``).

    Returns
    -------
    float
        ``rate_cv`` for :class:`RateArrivals`.
    """
    t = np.sort(np.asarray(arrival_s, dtype=float).ravel())
    if t.size < 2 or not np.all(np.isfinite(t)):
        raise ValueError("arrival_s must hold at least two finite arrival times")
    window_s, trend_s = positive(window_s, "window_s"), positive(trend_s, "trend_s")
    per = int(round(trend_s / window_s))
    if per < 2 or abs(per * window_s - trend_s) > 1e-9 * trend_s:
        raise ValueError("trend_s must be a multiple (>= 2) of window_s")
    t = t - t[0]
    n_win = int(t[-1] // window_s) + 1
    if (n_win // per) * per < per:
        raise ValueError(f"the log spans less than one trend period of {trend_s:g} s")
    return _rate_cv_counts(np.bincount((t // window_s).astype(np.int64), minlength=n_win), per, trend_s)


def _rate_cv_counts(counts: np.ndarray, per: int, trend_s: float) -> float:
    """:func:`rate_cv_from_log` from the counts per window (window 0 holds the first arrival,
    the last non-empty window the last; ``per`` windows a trend period)."""
    n_win = (counts.size // per) * per
    if n_win < per:
        raise ValueError(f"the log spans less than one trend period of {trend_s:g} s")
    counts = np.asarray(counts)[:n_win].astype(float)
    m = np.repeat(counts.reshape(-1, per).mean(axis=1), per)
    f = (per - 1) / per
    den = float(np.sum(m**2)) * f
    if den <= 0:
        return 0.0
    return float(math.sqrt(max(float(np.sum((counts - m) ** 2 - m * f)) / den, 0.0)))
