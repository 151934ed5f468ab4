"""Scoring token forecasts: coverage and pinball loss per horizon, the peak hour, backtests.

A forecast is scored on weeks it did not see. The records scored here are frames with one
row per forecast hour: ``actual``, ``horizon_week`` and quantile columns (``p90`` …), plus an
``origin`` column when they come from several forecast origins (:func:`backtest`).

* **Coverage** of the quantile-``q`` line: the share of actual hours at or below it; near
  ``q`` when calibrated.
* **Pinball loss** at ``q``: ``q (y − f)`` when the actual ``y`` is above the line ``f``,
  ``(1 − q)(f − y)`` when below; its mean over hours is in tokens per hour and is reported
  also as a percentage of the mean actual.
* **Peak hour**: in each forecast week, the busiest actual hour; its actual over the P90 line
  at that hour, and whether it was covered. A ratio drifting above 1 is the earliest warning
  that growth changed.
"""
from __future__ import annotations

from typing import Callable, Iterable

import numpy as np
import pandas as pd

from capbook.forecast.tokens import (HOURS_PER_WEEK, TokenForecast, _check_quantiles, forecast_tokens, quantile_name,
                       validate_hourly)
from capbook.validation import array, integer, probability

__all__ = ["pinball_loss", "coverage", "attach_actuals", "score_forecast", "peak_hour_scores",
           "backtest", "score_backtest", "compare_forecasts"]


def pinball_loss(actual, predicted, q: float) -> float:
    """Mean pinball (quantile) loss of the quantile-``q`` forecast ``predicted``.

    Parameters
    ----------
    actual, predicted : array-like
        Actual values and the quantile-``q`` forecast, same length and units (tokens per
        hour).
    q : float
        Quantile level in (0, 1).

    Returns
    -------
    float
        ``mean(max(q (y − f), (q − 1)(y − f)))``, in the units of the inputs.
    """
    y = array(actual, "actual", nonempty=True).ravel()
    f = array(predicted, "predicted", nonempty=True).ravel()
    if y.shape != f.shape:
        raise ValueError(f"actual has {y.size} values but predicted has {f.size}")
    q = probability(q, "q")
    d = y - f
    return float(np.mean(np.maximum(q * d, (q - 1) * d)))


def coverage(actual, upper) -> float:
    """Share of actual values at or below the line ``upper`` (0–1)."""
    y = array(actual, "actual", nonempty=True).ravel()
    u = array(upper, "upper", nonempty=True).ravel()
    if y.shape != u.shape:
        raise ValueError(f"actual has {y.size} values but upper has {u.size}")
    return float(np.mean(y <= u))


def attach_actuals(forecast: TokenForecast | pd.DataFrame, actual: pd.Series) -> pd.DataFrame:
    """The forecast frame with an ``actual`` column taken from the held-out series.

    Raises ``ValueError`` if any forecast hour is missing from ``actual``.
    """
    frame = forecast.frame if isinstance(forecast, TokenForecast) else forecast
    a = validate_hourly(actual, name="actual", whole_weeks=False)
    missing = frame.index.difference(a.index)
    if len(missing):
        raise ValueError(f"actual has no value for {len(missing)} forecast hour(s), first {missing[0]}; "
                         "score on held-out weeks the series covers")
    out = frame.copy()
    out["actual"] = a.reindex(frame.index).to_numpy()
    return out


def _quantiles_in(records: pd.DataFrame) -> list[float]:
    qs = []
    for c in records.columns:
        if c.startswith("p") and c[1:].replace(".", "", 1).isdigit():
            qs.append(float(c[1:]) / 100)
    return sorted(qs)


def _check_records(records: pd.DataFrame) -> None:
    for c in ("actual", "horizon_week"):
        if c not in records.columns:
            raise ValueError(f"records have no {c!r} column; build them with attach_actuals or backtest")


def peak_hour_scores(records: pd.DataFrame, q: float = 0.9) -> pd.DataFrame:
    """Score the busiest actual hour of every forecast week.

    Parameters
    ----------
    records : pandas.DataFrame
        Forecast hours with ``actual``, ``horizon_week``, the quantile column for ``q`` and
        optionally ``origin`` (index: ``period_start``).
    q : float
        Quantile whose line is scored (0.9 for P90).

    Returns
    -------
    pandas.DataFrame
        One row per (origin,) forecast week: ``horizon_week``, ``peak_hour`` (timestamp),
        ``actual``, ``band`` (the quantile line there), ``ratio`` (actual / band) and
        ``covered`` (actual ≤ band).
    """
    _check_records(records)
    name = quantile_name(probability(q, "q"))
    if name not in records.columns:
        raise ValueError(f"records have no {name!r} column; quantiles present: {_quantiles_in(records)}")
    keys = ["origin", "horizon_week"] if "origin" in records.columns else ["horizon_week"]
    r = records.reset_index().rename(columns={records.index.name or "index": "period_start"})
    i = r.groupby(keys)["actual"].idxmax()
    peak = r.loc[i.to_numpy(), keys + ["period_start", "actual", name]].rename(
        columns={"period_start": "peak_hour", name: "band"})
    peak["ratio"] = peak["actual"] / peak["band"]
    peak["covered"] = peak["actual"] <= peak["band"]
    return peak.reset_index(drop=True)


def _score(records: pd.DataFrame, quantiles: Iterable[float] | None, peak_q: float) -> pd.DataFrame:
    _check_records(records)
    qs = _quantiles_in(records) if quantiles is None else list(_check_quantiles(quantiles))
    for q in qs:
        if quantile_name(q) not in records.columns:
            raise ValueError(f"records have no {quantile_name(q)!r} column")
    rows = []
    peaks = peak_hour_scores(records, peak_q) if quantile_name(peak_q) in records.columns else None
    for h, g in records.groupby("horizon_week"):
        row = {"horizon_week": int(h), "hours": len(g), "mean_actual": float(g["actual"].mean())}
        for q in qs:
            n = quantile_name(q)
            row[f"coverage_{n}"] = coverage(g["actual"], g[n])
            loss = pinball_loss(g["actual"], g[n], q)
            row[f"pinball_{n}"] = loss
            row[f"pinball_{n}_pct"] = 100 * loss / row["mean_actual"]
        if peaks is not None:
            p = peaks[peaks["horizon_week"] == h]
            row["peak_coverage"] = float(p["covered"].mean())
            row["peak_ratio_mean"] = float(p["ratio"].mean())
            row["peak_ratio_max"] = float(p["ratio"].max())
        rows.append(row)
    return pd.DataFrame(rows).set_index("horizon_week")


def score_forecast(forecast: TokenForecast | pd.DataFrame, actual: pd.Series, *,
                   quantiles: Iterable[float] | None = None, peak_q: float = 0.9) -> pd.DataFrame:
    """Coverage and pinball loss per horizon week, and the peak-hour scores, of one forecast.

    Parameters
    ----------
    forecast : TokenForecast or pandas.DataFrame
        The forecast (a frame needs ``horizon_week`` and quantile columns).
    actual : pandas.Series
        The held-out hourly series covering every forecast hour (tokens per hour).
    quantiles : iterable of float, optional
        Quantiles to score (default: every quantile column present).
    peak_q : float
        Quantile scored at each week's busiest hour.

    Returns
    -------
    pandas.DataFrame
        Index ``horizon_week``; columns ``hours``, ``mean_actual``, and per quantile ``pXX``:
        ``coverage_pXX`` (0–1), ``pinball_pXX`` (tokens per hour), ``pinball_pXX_pct``
        (% of the mean actual); ``peak_coverage`` (share of weeks whose busiest hour was
        covered), ``peak_ratio_mean`` and ``peak_ratio_max`` (actual / P``peak_q``).
    """
    return _score(attach_actuals(forecast, actual), quantiles, peak_q)


def backtest(series: pd.Series, horizon_weeks: int, *, first_origin: int | None = None,
             step_weeks: int = 1,
             forecaster: Callable[[pd.Series, int], pd.DataFrame | TokenForecast] | None = None,
             **forecast_kw) -> pd.DataFrame:
    """Rolling-origin backtest: forecast from many origins, keep every forecast hour and its actual.

    At each origin ``k`` (weeks ``first_origin, first_origin + step_weeks, …`` with
    ``k + horizon_weeks <= n``) the forecaster sees weeks ``0..k-1`` only and forecasts
    ``horizon_weeks`` weeks. Quantile methods that backtest internally (``calibrated``) do so
    on the training weeks of that origin only, so nothing leaks from the scored weeks.

    Parameters
    ----------
    series : pandas.Series
        Hourly tokens, whole weeks.
    horizon_weeks : int
        Weeks forecast from each origin.
    first_origin : int, optional
        First origin (weeks of training). Default: the fewest weeks the forecaster accepts,
        found by trying.
    step_weeks : int
        Weeks between origins.
    forecaster : callable, optional
        ``forecaster(train, horizon_weeks)`` returning a :class:`TokenForecast` or a frame
        indexed by forecast hours with ``horizon_week`` and quantile columns (a candidate
        model to compare). Default: :func:`capbook.forecast.tokens.forecast_tokens` with
        ``forecast_kw``.

    Returns
    -------
    pandas.DataFrame
        Index ``period_start``; columns ``origin`` (weeks of training), ``horizon_week``,
        ``actual``, ``point`` (if given) and the quantile columns.
    """
    horizon = integer(horizon_weeks, "horizon_weeks", minimum=1)
    s = validate_hourly(series, name="series", whole_weeks=True, min_weeks=1)
    n = len(s) // HOURS_PER_WEEK
    step = integer(step_weeks, "step_weeks", minimum=1)
    if forecaster is None:
        def forecaster(train, h):
            return forecast_tokens(train, h, **forecast_kw)
    elif forecast_kw:
        raise ValueError(f"forecast options {sorted(forecast_kw)} only apply to the default forecaster")
    first = 1 if first_origin is None else integer(first_origin, "first_origin", minimum=1)
    origins = range(first, n - horizon + 1, step)
    out = []
    last_error: ValueError | None = None
    for k in origins:
        train = s.iloc[:k * HOURS_PER_WEEK]
        try:
            fc = forecaster(train, horizon)
        except ValueError as exc:
            if first_origin is None and not out:
                last_error = exc
                continue  # still too short for this forecaster: try the next origin
            raise
        frame = fc.frame if isinstance(fc, TokenForecast) else fc
        rec = attach_actuals(frame, s)
        rec.insert(0, "origin", k)
        out.append(rec)
    if not out:
        why = f" (the forecaster said: {last_error})" if last_error is not None else ""
        raise ValueError(f"series has {n} weeks: no origin leaves {horizon} week(s) to score after a fit the "
                         f"forecaster accepts; use a longer series or a shorter horizon{why}") from last_error
    return pd.concat(out)


def score_backtest(records: pd.DataFrame, *, quantiles: Iterable[float] | None = None,
                   peak_q: float = 0.9) -> pd.DataFrame:
    """Scores per horizon week pooled over every origin of a :func:`backtest` (same columns as
    :func:`score_forecast`, plus ``origins``)."""
    out = _score(records, quantiles, peak_q)
    if "origin" in records.columns:
        out.insert(0, "origins", records.groupby("horizon_week")["origin"].nunique())
    return out


def compare_forecasts(records_candidate: pd.DataFrame, records_baseline: pd.DataFrame, *,
                      q: float = 0.9) -> pd.DataFrame:
    """Candidate against baseline on the same held-out hours, per horizon week.

    Parameters
    ----------
    records_candidate, records_baseline : pandas.DataFrame
        Scored records (from :func:`attach_actuals` or :func:`backtest`) over exactly the same
        hours (and origins).
    q : float
        Quantile compared.

    Returns
    -------
    pandas.DataFrame
        Index ``horizon_week``; ``pinball_candidate``, ``pinball_baseline`` (tokens per hour),
        ``pinball_ratio`` (candidate / baseline; below 1 means the candidate is better),
        ``coverage_candidate``, ``coverage_baseline`` and ``candidate_wins``.
    """
    keys = ["origin"] if "origin" in records_candidate.columns else []
    def key(r):
        return pd.MultiIndex.from_arrays([r[k] for k in keys] + [r.index], names=keys + ["period_start"])
    kc, kb = key(records_candidate), key(records_baseline)
    if len(kc) != len(kb) or not kc.sort_values().equals(kb.sort_values()):
        raise ValueError("candidate and baseline were not scored on the same held-out hours (and origins)")
    if not np.allclose(records_candidate["actual"].to_numpy()[np.argsort(kc)],
                       records_baseline["actual"].to_numpy()[np.argsort(kb)]):
        raise ValueError("candidate and baseline records disagree on the actual values")
    sc = _score(records_candidate, [q], q)
    sb = _score(records_baseline, [q], q)
    n = quantile_name(q)
    out = pd.DataFrame({
        "pinball_candidate": sc[f"pinball_{n}"], "pinball_baseline": sb[f"pinball_{n}"],
        "coverage_candidate": sc[f"coverage_{n}"], "coverage_baseline": sb[f"coverage_{n}"]})
    out.insert(2, "pinball_ratio", out["pinball_candidate"] / out["pinball_baseline"])
    out["candidate_wins"] = out["pinball_ratio"] < 1
    return out
