"""Statistics of a request log: volumes per period, token percentiles, burstiness, service times.

Every statistic is a DuckDB query over the validated canonical view of a
:class:`capbook.logs.requestlog.RequestLog` (the rows its reader kept), so a log of tens of millions of
rows is summarised with bounded memory. :class:`LogStats` holds them; each is also a method
of the log (``log.hourly()`` is ``LogStats(log).hourly()``).

They describe the traffic only. What it means for a queue (waits, replicas, the
Allen–Cunneen approximation with these Ca² and Cs²) is :mod:`capbook.queueing`'s: compute it
from these numbers there.

Statistics over clock hours (peak-to-mean, the busiest hour) use only the hours the log covers
entirely (from before the hour's start to after its end): a partial first or last hour would
compare a few minutes of traffic with full hours. :meth:`LogStats.coverage` counts them and
carries a caveat when there is none, or fewer than 24.

Examples
--------
>>> format_duration(3437.0)
'57.3 min'
>>> from capbook.logs.requestlog import load_sample_requests
>>> stats = LogStats(load_sample_requests())
>>> stats.coverage()["full_hours"] >= 24
True
"""
from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np
import pandas as pd

from capbook.logs import sql as logsql
from capbook.validation import array, integer, positive

from capbook.sweeps.sweep import Sweep

if TYPE_CHECKING:  # pragma: no cover
    from capbook.logs.requestlog import RequestLog

__all__ = ["LogStats", "busiest_window", "format_duration"]

US_PER_S = 1_000_000  # the log's times are integer microseconds since the Unix epoch
US_PER_H = 3_600_000_000


def utc(us: Any) -> pd.Timestamp:
    """The UTC timestamp of ``us`` microseconds since the Unix epoch."""
    return pd.Timestamp(int(us), unit="us", tz="UTC")


def format_duration(seconds: float) -> str:
    """A span of ``seconds`` in the unit that reads best: ``"57.3 min"``, ``"10.4 h"``, ``"28.0 days"``."""
    for limit, div, unit in ((120, 1, "s"), (7200, 60, "min"), (3 * 86400, 3600, "h")):
        if seconds < limit:
            return f"{seconds / div:,.1f} {unit}"
    return f"{seconds / 86400:,.1f} days"


def busiest_window(per_minute: pd.DataFrame, span_s: float, start=None, end=None, *, minutes: int = 60,
                   measure: str = "output_tokens") -> dict:
    """The busiest ``minutes`` consecutive whole minutes of a log, by ``measure``.

    The one definition of "the busiest hour" that ``capbook plan`` sizes from and ``capbook
    trace`` prints beside the busiest clock hour: a window sliding minute by minute, so it may
    start at 15:23 and end at 16:23. A log spanning less than ``minutes`` (first to last
    arrival) has no such window: its whole span stands for it, and rates are over the span.

    Parameters
    ----------
    per_minute : pandas.DataFrame
        Per-minute sums (:meth:`LogStats.per_minute`, any grouping: summed here) with
        ``period_start``, ``requests``, ``input_tokens`` and ``output_tokens``.
    span_s : float
        Seconds from the first to the last arrival of the log.
    start, end : pandas.Timestamp, optional
        First and last arrival, reported for a log shorter than the window.
    minutes : int
        Window length in minutes (60).
    measure : str
        ``requests``, ``input_tokens``, ``output_tokens`` or ``total_tokens``: what "busiest" means
        (the plan sizes from output tokens).

    Returns
    -------
    dict
        ``start``, ``end`` (UTC), ``seconds`` (3600 for a full window, else the span, at least
        60), ``whole_log`` (True when the log is shorter than the window), ``measure``,
        ``requests``, ``input_tokens``, ``output_tokens`` (sums over the window),
        ``request_rate`` (requests/s) and ``output_tps``, ``input_tps`` (tokens/s).

    Examples
    --------
    >>> t = pd.date_range("2026-01-01 10:00", periods=120, freq="1min", tz="UTC")
    >>> pm = pd.DataFrame({"period_start": t, "requests": 1, "input_tokens": 0,
    ...                    "output_tokens": [1] * 90 + [5] * 30})
    >>> w = busiest_window(pm, 7200.0)
    >>> str(w["start"]), w["output_tokens"], w["requests"]
    ('2026-01-01 11:00:00+00:00', 180, 60)
    """
    minutes = integer(minutes, "minutes", minimum=1)
    cols = ["requests", "input_tokens", "output_tokens"]
    if measure not in (*cols, "total_tokens"):
        raise ValueError(f"measure must be one of {cols + ['total_tokens']}, got {measure!r}")
    pm = per_minute.groupby("period_start", sort=True)[cols].sum()
    pm["total_tokens"] = pm["input_tokens"] + pm["output_tokens"]
    if len(pm) >= minutes and span_s >= minutes * 60.0:
        roll = pm.rolling(minutes).sum()
        v = roll[measure].to_numpy(float)
        i = int(np.argmax(np.where(np.isnan(v), -np.inf, v)))   # the earliest full window of the largest sum
        sums = roll.iloc[i]
        first = pm.index[i - minutes + 1]
        w = {"start": first, "end": first + pd.Timedelta(minutes=minutes), "seconds": minutes * 60.0,
             "whole_log": False}
    else:
        sums = pm.sum()
        w = {"start": start if start is not None else (pm.index.min() if len(pm) else None),
             "end": end if end is not None else None, "seconds": max(float(span_s), 60.0), "whole_log": True}
    w["measure"] = measure
    for c in cols:
        w[c] = int(sums[c])
    w["request_rate"] = w["requests"] / w["seconds"]
    w["output_tps"] = w["output_tokens"] / w["seconds"]
    w["input_tps"] = w["input_tokens"] / w["seconds"]
    return w


class LogStats:
    """The statistics of one request log.

    Parameters
    ----------
    log : capbook.logs.requestlog.RequestLog
        A log read by :func:`capbook.logs.requestlog.read_requests`.
    """

    def __init__(self, log: "RequestLog"):
        self.log = log

    def aggregate(self, period_s: float, by: Iterable[str] = ("model", "tier"), *,
                  full_periods_only: bool = False) -> pd.DataFrame:
        """Requests and tokens per period on a complete time index.

        Parameters
        ----------
        period_s : float
            Period length in seconds (3600 for hourly). Periods are aligned to the Unix epoch
            (whole hours, whole minutes), in UTC.
        by : iterable of str
            Grouping columns among ``model``, ``tier``, ``status``, ``tenant``; empty for totals.
        full_periods_only : bool
            Keep only the periods the log covers entirely (first arrival at or before the
            period's start, last arrival at or after its end); the partial first and last
            periods are left out. The result has no rows when no period is covered.

        Returns
        -------
        pandas.DataFrame
            Columns ``period_start`` (UTC), the ``by`` columns, ``requests`` (every request,
            throttled and failed included), ``throttled``, ``input_tokens``, ``output_tokens``.
            Every period from the first to the last arrival appears for every group seen in
            the log; empty periods are zeros.
        """
        by = tuple(by)
        self._check_by(by)
        period_s = positive(period_s, "period_s")
        p_us = int(round(period_s * US_PER_S))
        if p_us < 1:
            raise ValueError(f"period_s={period_s!r}: shorter than a microsecond")
        src = self.log._validated_hourly_sql(by) if p_us == US_PER_H else None
        if src is None:
            src = logsql.hourly_sql(self.log._d, p_us, by)
        agg = self.log.query(src)
        first, last = self.log.first_us // p_us, self.log.last_us // p_us
        if full_periods_only:
            first, last = -(-self.log.first_us // p_us), self.log.last_us // p_us - 1
        periods = np.arange(first, last + 1, dtype=np.int64)
        cols = ["requests", "throttled", "input_tokens", "output_tokens"]
        if by:
            groups = agg[list(by)].drop_duplicates().sort_values(list(by))
            idx = pd.MultiIndex.from_arrays(
                [np.repeat(periods, len(groups))]
                + [np.tile(groups[b].to_numpy(), len(periods)) for b in by],
                names=["p", *by],
            )
            full = agg.set_index(["p", *by])[cols].reindex(idx, fill_value=0).reset_index()
        else:
            full = agg.set_index("p")[cols].reindex(periods, fill_value=0).rename_axis("p").reset_index()
        full[cols] = full[cols].fillna(0).astype("int64")
        full.insert(0, "period_start",
                    pd.to_datetime(full.pop("p").to_numpy("int64") * p_us, unit="us", utc=True).as_unit("ns"))
        for b in by:
            full[b] = full[b].astype(object)
        return full.reset_index(drop=True)

    def _check_by(self, by: tuple) -> None:
        allowed = {"model", "tier", "status", "tenant"}
        bad = [b for b in by if b not in allowed]
        if bad:
            raise ValueError(f"by={by}: unknown column(s) {bad}; use any of {sorted(allowed)}")
        if "tenant" in by and "tenant" not in self.log.columns:
            raise ValueError("by contains 'tenant' but this log has no tenant column")

    def hourly(self, by: Iterable[str] = ("model", "tier"), *,
               full_hours_only: bool = False) -> pd.DataFrame:
        """Hourly sums per group on a complete hourly index; see :meth:`aggregate`
        (``full_hours_only``: only the hours the log covers entirely, see :meth:`coverage`)."""
        return self.aggregate(3600, by, full_periods_only=full_hours_only)

    def per_minute(self, by: Iterable[str] = ("model", "tier")) -> pd.DataFrame:
        """Per-minute sums per group on a complete index; see :meth:`aggregate`."""
        return self.aggregate(60, by)

    def busiest_hour(self, measure: str = "output_tokens") -> dict:
        """The busiest 60 consecutive minutes of the whole log by ``measure``
        (:func:`busiest_window`: the definition ``capbook plan`` sizes from)."""
        return busiest_window(self.per_minute(by=()), self.log.span_s, self.log.start, self.log.end,
                              measure=measure)

    def token_stats(self, output_cap: int | None = None, input_cap: int | None = None,
                    by: str | Sequence[str] | None = None) -> pd.DataFrame:
        """Distribution of input and output tokens per request.

        Percentiles interpolate linearly between order statistics (numpy's default).

        Parameters
        ----------
        output_cap, input_cap : int, optional
            A max-tokens cap (tokens); adds ``share_above_cap``, the fraction of requests with
            more tokens than the cap.
        by : str or sequence of str, optional
            Group by ``model``, ``tier``, ``status`` or ``tenant``.

        Returns
        -------
        pandas.DataFrame
            One row per token kind (and group): ``requests``, ``mean``, ``p50``, ``p95``,
            ``p99``, ``max``, ``min`` in tokens, and ``share_above_cap`` when a cap is given
            (``<NA>`` on the row of the kind without a cap).
        """
        if output_cap is not None:
            output_cap = integer(output_cap, "output_cap", minimum=0)
        if input_cap is not None:
            input_cap = integer(input_cap, "input_cap", minimum=0)
        by = (by,) if isinstance(by, str) else tuple(by or ())
        self._check_by(by)
        parts = [logsql.token_stats_sql(self.log._d, col, kind, by, cap) for kind, col, cap in
                 (("input_tokens", "i", input_cap), ("output_tokens", "o", output_cap))]
        dfs = [self.log.query(s) for s in parts]
        df = pd.concat(dfs, ignore_index=True)
        if "share_above_cap" in df:  # not applicable (no cap) for the other kind: NA, not NaN
            df["share_above_cap"] = df["share_above_cap"].astype("Float64")
        df = df.sort_values([*by, "tokens"]).set_index([*by, "tokens"]) if by else df.set_index("tokens")
        for c in ("requests", "max", "min"):
            df[c] = df[c].astype("int64")
        return df

    def arrival_stats(self, windows: Sequence[float] = (1, 10, 60, 600, 3600)) -> dict:
        """Burstiness of arrivals.

        Parameters
        ----------
        windows : sequence of float
            Window lengths in seconds for the index of dispersion of counts.

        Returns
        -------
        dict
            ``ca2``: squared coefficient of variation of inter-arrival times (population
            variance / mean², 1 for Poisson); ``iat_mean_s``; ``zero_gap_share``: the share of
            inter-arrival times equal to zero; ``distinct_times``; ``ca2_distinct``: Ca² between
            distinct timestamps (each clump counted as one batch arrival); ``mean_batch``: mean
            requests per distinct timestamp; ``resolution_s``: the coarsest of 1, 0.001 and
            1e-6 s that divides every arrival time; ``idc``: {window_s: variance/mean of the
            counts per window}, windows starting at the first arrival, empty windows included
            (only windows no longer than half the span); ``clumped``: True when more than 5 %
            of gaps are zero, and ``caveat``: a sentence saying why Ca² is then unreliable.
        """
        windows = array(windows, "windows", lo=0, lo_open=True, nonempty=True, ndim=1)
        if self.log.rows < 3:
            raise ValueError(f"arrival_stats needs at least 3 requests; the log has {self.log.rows}")
        d = self.log._d
        n_gaps, mean_us, var_us, zero_share = self.log.query_one(logsql.gap_moments_sql(d))
        rd = self.log.query_one(logsql.gap_moments_sql(d, distinct=True))
        distinct = int(rd[0]) + 1
        res = self.log.query_one(logsql.resolution_sql(d, self.log.first_us))
        resolution = 1.0 if res[0] else (0.001 if res[1] else 1e-6)
        out: dict[str, Any] = {
            "requests": self.log.rows,
            "iat_mean_s": mean_us / US_PER_S if mean_us is not None else math.nan,
            "ca2": var_us / mean_us**2 if mean_us else math.inf,
            "zero_gap_share": float(zero_share),
            "distinct_times": distinct,
            "mean_batch": self.log.rows / distinct,
            "ca2_distinct": (rd[2] / rd[1] ** 2) if (rd[0] and rd[1]) else math.nan,
            "resolution_s": resolution,
        }
        idc = {}
        span_us = self.log.last_us - self.log.first_us
        for w in windows:
            w_us = int(round(w * US_PER_S))
            nbins = span_us // w_us + 1
            if w_us * 2 > span_us:
                continue
            s = self.log.query_one(logsql.window_counts_sql(d, self.log.first_us, w_us))
            mean = self.log.rows / nbins
            var = s[0] / nbins - mean**2
            idc[float(w)] = var / mean
        out["idc"] = idc
        out["clumped"] = out["zero_gap_share"] > 0.05
        out["caveat"] = (
            f"{100 * out['zero_gap_share']:.1f} % of inter-arrival times are zero "
            f"({distinct:,} distinct timestamps for {self.log.rows:,} requests): arrivals are logged in "
            f"clumps, so Ca² mixes true batches with timestamp rounding; compare ca2_distinct and "
            f"the index of dispersion at windows longer than the clumps."
            if out["clumped"] else ""
        )
        return out

    def service_times(self, sweep: "Sweep | None" = None, concurrency: float | None = None, *,
                      prefill_rate_tps: float | None = None, tpot_s: float | None = None) -> dict:
        """Service-time moments and where they came from; see :meth:`service_cv2`.

        Returns
        -------
        dict
            ``cs2``, ``mean_s`` (seconds), ``requests`` used, ``source`` (``"sweep"``: modelled
            from the sweep's prefill rate and TPOT; ``"given rates"``: modelled from the
            ``prefill_rate_tps`` and ``tpot_s`` passed; ``"measured"``: from end times) and,
            when modelled, ``prefill_rate_tps``, ``tpot_s`` and ``concurrency`` (None when the
            numbers were given).
        """
        given = prefill_rate_tps is not None or tpot_s is not None
        if sweep is not None and given:
            raise ValueError("sweep: pass a sweep (with concurrency=) or prefill_rate_tps= and "
                             "tpot_s=, not both")
        if sweep is not None:
            if not isinstance(sweep, Sweep):
                raise ValueError(f"sweep must be a capbook.sweeps.sweep.Sweep, got {type(sweep).__name__}; "
                                 f"for other numbers pass prefill_rate_tps= and tpot_s=")
            if concurrency is None:
                raise ValueError("concurrency: say at which concurrency to read the sweep's TPOT "
                                 "(e.g. the slots S of capbook.sweeps.sweep.choose_slots)")
            concurrency = positive(concurrency, "concurrency")
            prefill = positive(sweep.prefill_rate_tps, "sweep.prefill_rate_tps")
            tpot = positive(float(sweep.tpot(concurrency)), f"sweep.tpot({concurrency:g})")
        elif given:
            if prefill_rate_tps is None or tpot_s is None:
                raise ValueError("prefill_rate_tps and tpot_s: give both (input tokens per second "
                                 "and seconds per output token), or a sweep")
            prefill = positive(prefill_rate_tps, "prefill_rate_tps")
            tpot = positive(tpot_s, "tpot_s")
            concurrency = None
        if sweep is not None or given:
            a, b = 1.0 / prefill, tpot
            r = self.log.query_one(logsql.service_moments_sql(self.log._d))
            n, ei, eo, eii, eoo, eio = r
            if not n:
                raise ValueError("service_cv2: the log has no served or throttled requests")
            m1 = a * ei + b * eo
            m2 = a * a * eii + b * b * eoo + 2 * a * b * eio
            return {"cs2": m2 / m1**2 - 1.0, "mean_s": m1, "requests": int(n),
                    "source": "sweep" if sweep is not None else "given rates",
                    "prefill_rate_tps": prefill, "tpot_s": tpot, "concurrency": concurrency}
        if "end_time" not in self.log.columns:
            raise ValueError(
                f"service_cv2: {self.log.path} has no end_time (or duration) column, so service "
                f"times cannot be measured; pass sweep= (a capbook.sweeps.sweep.Sweep) or prefill_rate_tps= "
                f"and tpot_s=")
        r = self.log.query_one(logsql.measured_service_sql(self.log._d))
        n, mean, var, neg = r
        if neg:
            raise ValueError(f"service_cv2: {neg} served rows of {self.log.path} end before they arrive")
        if not n or not mean:
            raise ValueError("service_cv2: no served row has an end time")
        return {"cs2": var / mean**2, "mean_s": mean, "requests": int(n), "source": "measured"}

    def service_cv2(self, sweep: "Sweep | None" = None, concurrency: float | None = None, *,
                    prefill_rate_tps: float | None = None, tpot_s: float | None = None) -> float:
        """Squared coefficient of variation of service times, Cs².

        With a sweep (or the two numbers a sweep gives), each request's service time is
        ``input_tokens / prefill_rate_tps + output_tokens * tpot_s`` (seconds; failed rows
        excluded, throttled rows kept as demand). Without them, the measured ``end_time -
        arrival_time`` of served rows is used (it includes any queueing in the logged system,
        so it overstates pure service time).

        Parameters
        ----------
        sweep : capbook.sweeps.sweep.Sweep, optional
            Gives the prefill rate (:attr:`~capbook.sweeps.sweep.Sweep.prefill_rate_tps`) and the
            p50 TPOT at ``concurrency``.
        concurrency : float, optional
            Concurrency at which to read the sweep's TPOT (required with a sweep), e.g. S.
        prefill_rate_tps, tpot_s : float, optional
            Instead of a sweep: input tokens per second of prefill, and seconds per output
            token.

        Returns
        -------
        float
            Cs² = Var[T] / E[T]² (population variance).
        """
        return float(self.service_times(sweep, concurrency, prefill_rate_tps=prefill_rate_tps,
                                        tpot_s=tpot_s)["cs2"])

    def coverage(self) -> dict:
        """Which clock hours the log covers entirely, and what that allows.

        An hour (UTC, aligned to the Unix epoch) is *fully covered* when the first arrival is
        at or before its start and the last arrival at or after its end. Partial first and
        last hours hold only part of an hour's traffic, so hourly statistics leave them out.

        Returns
        -------
        dict
            ``full_hours`` (int); ``first_full_hour`` and ``last_full_hour`` (UTC start of the
            first and last covered hour, None when there is none); ``span_s``; ``daily_shape``
            (True with 24 full hours or more) and ``caveat``: "" with 24 full hours or more,
            else a sentence saying what cannot be computed ("the log covers 0 full hours
            (57.3 min): peak-to-mean over hours is not defined", or "...: shorter than a day:
            no daily shape; ...").
        """
        first = -(-self.log.first_us // US_PER_H)  # first hour starting at or after the first arrival
        end = self.log.last_us // US_PER_H  # hours ending at or before the last arrival end here
        n = max(0, end - first)
        span = format_duration(self.log.span_s)
        if n == 0:
            caveat = (f"the log covers 0 full hours ({span}): peak-to-mean over hours is not "
                      f"defined")
        elif n < 24:
            caveat = (f"the log covers {n} full hour{'s' if n > 1 else ''} ({span}): shorter than a "
                      f"day: no daily shape; " + (
                          "the peak-to-mean of a single hour is 1 by definition" if n == 1 else
                          f"the peak-to-mean compares those {n} hours only"))
        else:
            caveat = ""
        return {"full_hours": int(n),
                "first_full_hour": utc(first * US_PER_H) if n else None,
                "last_full_hour": utc((end - 1) * US_PER_H) if n else None,
                "span_s": self.log.span_s, "daily_shape": n >= 24, "caveat": caveat}

    def peak_to_mean(self, model: str | None = None, tier: str | None = None) -> pd.DataFrame:
        """Busiest hour against the mean hour, over the fully covered clock hours.

        Only hours the log covers entirely count (see :meth:`coverage`); hours without
        requests inside that range count as zeros.

        Parameters
        ----------
        model, tier : str, optional
            Restrict to one model and/or tier (e.g. ``tier="interactive"``: batch can wait).

        Returns
        -------
        pandas.DataFrame
            Index ``requests``, ``input_tokens``, ``output_tokens``, ``total_tokens``; columns
            ``peak`` (per hour), ``mean`` (per full hour), ``ratio`` = peak / mean,
            ``peak_hour`` (UTC start of the busiest hour), ``full_hours`` (the hours used) and
            ``caveat`` (:meth:`coverage`'s sentence; "" with 24 full hours or more). With no
            full hour, ``peak``, ``mean`` and ``ratio`` are NaN and ``peak_hour`` NaT, and
            ``caveat`` says why; a ratio is also NaN when the mean is zero (caveat says so).
        """
        by = [b for b, v in (("model", model), ("tier", tier)) if v is not None]
        h = self.hourly(by=tuple(by))
        for b, v in (("model", model), ("tier", tier)):
            if v is not None:
                if v not in set(h[b]):
                    raise ValueError(f"{b}={v!r}: not in the log (has {sorted(set(h[b]))})")
                h = h[h[b] == v]
        cov = self.coverage()
        h = h.groupby("period_start", sort=True)[["requests", "input_tokens", "output_tokens"]].sum()
        if cov["full_hours"]:
            h = h.loc[cov["first_full_hour"]:cov["last_full_hour"]]
        else:
            h = h.iloc[:0]
        h["total_tokens"] = h["input_tokens"] + h["output_tokens"]
        rows = []
        for c in ("requests", "input_tokens", "output_tokens", "total_tokens"):
            s = h[c]
            caveat = cov["caveat"]
            if len(s) == 0:
                peak, mean, ratio, at = math.nan, math.nan, math.nan, pd.NaT
            else:
                peak, mean, at = int(s.max()), float(s.mean()), s.idxmax()
                ratio = peak / mean if mean > 0 else math.nan
                if mean == 0:
                    caveat = (caveat + "; " if caveat else "") + f"no {c.replace('_', ' ')} in the full hours"
            rows.append({"measure": c, "peak": peak, "mean": mean, "ratio": ratio,
                         "peak_hour": at, "full_hours": cov["full_hours"], "caveat": caveat})
        return pd.DataFrame(rows).set_index("measure")

    def summary(self, sweep: "Sweep | None" = None, concurrency: float | None = None,
                output_cap: int | None = None, *, prefill_rate_tps: float | None = None,
                tpot_s: float | None = None) -> dict:
        """Everything the CLI prints: size, span, rate, tokens, burstiness, Cs², peak hour.

        Cs² is included when a sweep (or ``prefill_rate_tps`` and ``tpot_s``, see
        :meth:`service_cv2`) is given or the log has end times (else None); arrival statistics
        need at least three requests (else None).

        Returns
        -------
        dict
            ``path``, ``format``, ``rows``, ``rows_read``, ``dropped``, ``report`` (list of
            dicts, see :attr:`capbook.logs.requestlog.RequestLog.report`), ``notes`` (list of str), ``start``,
            ``end`` (UTC timestamps), ``span_s``, ``rate_rps`` (inf for a zero span, with a
            caveat), ``status`` ({status: rows}), ``groups`` (DataFrame of model, tier, n),
            ``tokens`` (:meth:`token_stats`), ``arrivals`` (:meth:`arrival_stats` or None),
            ``service`` (:meth:`service_times` or None), ``no_service`` (why ``service`` is
            None, e.g. no end_time column; "" otherwise), ``peak_to_mean``
            (:meth:`peak_to_mean`, the busiest *clock* hour: NaN values only with its ``caveat``
            column set), ``busiest_60min`` (:meth:`capbook.logs.stats.LogStats.busiest_hour`, the busiest 60 consecutive
            minutes by output tokens, as ``capbook plan`` reads them; None for an empty log),
            ``full_hours`` (int, fully covered clock hours), ``coverage`` (:meth:`coverage`,
            timestamps as ISO strings) and ``caveats`` (list of str: every sentence a reader
            of the numbers must see, e.g. no full hour, shorter than a day, a zero span,
            fewer than three requests; empty when there is nothing to say).
        """
        tok = self.token_stats(output_cap=output_cap)
        arr = self.arrival_stats() if self.log.rows >= 3 else None
        no_service = ""
        try:
            svc = self.service_times(sweep, concurrency, prefill_rate_tps=prefill_rate_tps,
                                     tpot_s=tpot_s)
        except ValueError as exc:
            if sweep is not None or prefill_rate_tps is not None or tpot_s is not None:
                raise
            svc = None
            no_service = re.sub(r"^service_cv2: ", "", str(exc))
        ptm = self.peak_to_mean()
        busiest = self.busiest_hour() if self.log.rows else None
        cov = self.coverage()
        caveats = [cov["caveat"]] if cov["caveat"] else []
        if self.log.span_s == 0:
            caveats.append(f"all {self.log.rows:,} requests arrive at the same instant: no rate "
                           f"and no inter-arrival statistics")
        if arr is None:
            caveats.append(f"fewer than 3 requests ({self.log.rows}): no arrival statistics")
        status = self.log.query(logsql.status_counts_sql(self.log._d))
        models = self.log.query(logsql.group_counts_sql(self.log._d))
        return {
            "path": self.log.path, "format": self.log.format, "rows": self.log.rows, "rows_read": self.log.rows_read,
            "dropped": self.log.dropped, "report": list(self.log.report), "notes": list(self.log.notes),
            "start": self.log.start, "end": self.log.end, "span_s": self.log.span_s, "rate_rps": self.log.rate,
            "status": dict(zip(status["status"], status["n"].astype(int))),
            "groups": models, "tokens": tok, "arrivals": arr, "service": svc,
            "no_service": no_service, "peak_to_mean": ptm, "busiest_60min": busiest,
            "full_hours": cov["full_hours"],
            "coverage": {k: (v.isoformat() if isinstance(v, pd.Timestamp) else v)
                         for k, v in cov.items()},
            "caveats": caveats,
        }
