"""Token forecasting: trend × weekly shape × noise, quantile bands, overlays for known events.

The explainable baseline that a capacity planner can walk a finance partner through:

* a **log-linear trend on weekly totals**, so growth compounds: ``log W_k = a + b k`` and the
  weekly growth rate is ``exp(b) - 1``;
* times the **average 168-hour weekly shape**: the share of each week's tokens that falls in
  each hour of the week (the 168 shares sum to 1);
* times **noise**, roughly log-normal, whose quantiles come from the forecaster's own
  out-of-sample log errors.

Two ways to turn those errors into quantile bands at a horizon of ``h`` weeks:

``method="sqrt_h"``
    take the one-week-ahead log errors and widen their spread by ``sqrt(h)`` (the textbook
    random-walk rule);
``method="calibrated"``
    take the log errors *at horizon h* from rolling-origin backtests on the training weeks
    (every origin that leaves ``h`` weeks to score), so each horizon gets its own error
    distribution.

Known launches and mix shifts are kept out of the statistical fit and applied afterwards as
*overlays* from an event calendar (:func:`event_calendar`, :func:`apply_overlays`).

Input is an hourly series on a complete UTC index, either a :class:`pandas.Series` or the
trace layer's hourly frame (columns ``period_start, model, tier, requests, throttled,
input_tokens, output_tokens``) from which :func:`hourly_series` selects one model and tier.
Scores and backtests live in :mod:`capbook.forecast.scoring`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from capbook.logs.hourly import (HOURLY_COLUMNS, MAX_REQUESTS_PER_HOUR, MAX_TOKENS_PER_REQUEST,  # noqa: F401
                                 _checked_hourly, read_token_csv)
from capbook.paths import data_path
from capbook.validation import array, integer, nonnegative, number, positive

__all__ = [
    "HOURS_PER_WEEK",
    "MIN_TREND_WEEKS",
    "TrendShapeFit",
    "TokenForecast",
    "hourly_series",
    "validate_hourly",
    "fit_trend_shape",
    "forecast_tokens",
    "rolling_log_errors",
    "peak_to_mean",
    "idle_share",
    "weekly_profile",
    "synthetic_token_series",
    "event_calendar",
    "describe_events",
    "overlay_factors",
    "apply_overlays",
    "remove_overlays",
    "sample_token_path",
    "load_sample_series",
    "trim_to_whole_weeks",
    "read_servegen_hourly",
    "quantile_name",
]

#: Hours in a week: the length of the seasonal shape.
HOURS_PER_WEEK = 168
#: A trend needs at least this many weekly totals (two points fit any line exactly).
MIN_TREND_WEEKS = 3
_HOUR = pd.Timedelta(hours=1)
_WEEK = pd.Timedelta(weeks=1)


def quantile_name(q: float) -> str:
    """Column name of quantile ``q`` in forecast frames: ``0.9 -> "p90"``, ``0.975 -> "p97.5"``."""
    return f"p{100 * q:g}"


# --------------------------------------------------------------------------------------------
# Input: validation and selection
# --------------------------------------------------------------------------------------------
def validate_hourly(series: pd.Series, *, name: str = "series", whole_weeks: bool = True,
                    min_weeks: int = 1) -> pd.Series:
    """Check an hourly series and return it as float on a UTC index.

    Parameters
    ----------
    series : pandas.Series
        Hourly values (tokens or requests per hour) indexed by hourly timestamps. Naive
        timestamps are taken as UTC; aware ones are converted to UTC.
    name : str
        Name used in error messages.
    whole_weeks : bool
        Require a whole number of weeks (a multiple of 168 hours).
    min_weeks : int
        Minimum number of whole weeks.

    Returns
    -------
    pandas.Series
        The values as float64, index in UTC, name kept.

    Raises
    ------
    TypeError
        If ``series`` is not a Series with a DatetimeIndex.
    ValueError
        On non-numeric, missing or negative values, duplicate or unsorted timestamps, gaps or
        off-the-hour timestamps, a length that is not whole weeks, or too few weeks; the
        message names the first offending timestamp.
    """
    if not isinstance(series, pd.Series):
        raise TypeError(f"{name} must be a pandas Series indexed by hourly timestamps, got {type(series).__name__}")
    if not isinstance(series.index, pd.DatetimeIndex):
        raise TypeError(f"{name} must be indexed by a DatetimeIndex of hourly UTC timestamps, "
                        f"got {type(series.index).__name__}")
    if len(series) == 0:
        raise ValueError(f"{name} is empty")
    if not pd.api.types.is_numeric_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype):
        raise ValueError(f"{name} must hold numbers (tokens or requests per hour), got dtype {series.dtype}")
    idx = series.index
    idx = idx.tz_localize("UTC") if idx.tz is None else idx.tz_convert("UTC")
    values = series.to_numpy(dtype=float)
    bad = ~np.isfinite(values)
    if bad.any():
        raise ValueError(f"{name} has a missing or non-finite value at {idx[np.argmax(bad)]}; "
                         "an hour with no traffic must be 0, not missing")
    neg = values < 0
    if neg.any():
        i = int(np.argmax(neg))
        raise ValueError(f"{name} has a negative value {values[i]:g} at {idx[i]}; hourly token counts cannot be negative")
    off = (idx != idx.floor("h"))
    if off.any():
        raise ValueError(f"{name} has a timestamp that is not on the hour: {idx[np.argmax(off)]}")
    steps = np.diff(idx.as_unit("ns").asi8)
    hour_ns = _HOUR.value
    if len(steps):
        dup = steps == 0
        if dup.any():
            raise ValueError(f"{name} has a duplicate timestamp {idx[int(np.argmax(dup)) + 1]}")
        back = steps < 0
        if back.any():
            raise ValueError(f"{name} is not sorted by time: {idx[int(np.argmax(back)) + 1]} follows {idx[int(np.argmax(back))]}")
        gap = steps != hour_ns
        if gap.any():
            i = int(np.argmax(gap))
            missing = steps[i] // hour_ns - 1
            raise ValueError(f"{name} has a gap: {missing} hour(s) missing between {idx[i]} and {idx[i + 1]}; "
                             "the hourly index must be complete (empty hours are 0)")
    n = len(values)
    if whole_weeks and n % HOURS_PER_WEEK:
        raise ValueError(f"{name} has {n} hours = {n // HOURS_PER_WEEK} weeks + {n % HOURS_PER_WEEK} hours; "
                         "the forecaster needs whole weeks (a multiple of 168 hours): trim the partial week")
    weeks = n // HOURS_PER_WEEK
    if weeks < min_weeks:
        raise ValueError(f"{name} has {weeks} whole week(s) ({n} hours); at least {min_weeks} are needed")
    return pd.Series(values, index=idx, name=series.name)


def hourly_series(data: pd.Series | pd.DataFrame, column: str = "output_tokens", *,
                  model: str | None = None, tier: str | Sequence[str] | None = None,
                  exclude_tiers: Sequence[str] = ("batch",)) -> pd.Series:
    """One hourly series to forecast, from a Series or from the trace layer's hourly frame.

    Parameters
    ----------
    data : pandas.Series or pandas.DataFrame
        A Series indexed by hourly UTC timestamps, returned validated; or a frame with the
        columns ``period_start`` and ``column`` (usually the trace layer's hourly sums with
        ``model`` and ``tier``).
    column : str
        Column to forecast: ``"output_tokens"`` (decode load), ``"input_tokens"`` (prefill
        load) or ``"requests"``.
    model : str, optional
        Model to select. Required when the frame holds more than one model: tokens of
        different models load different replicas and are forecast separately.
    tier : str or sequence of str, optional
        Tier(s) to keep. By default every tier except ``exclude_tiers``.
    exclude_tiers : sequence of str
        Tiers left out when ``tier`` is not given: batch work is deferred to troughs and stays
        out of the peak forecast.

    Returns
    -------
    pandas.Series
        Hourly sum of ``column`` over the selected rows, named ``column``, validated by
        :func:`validate_hourly` (whole weeks not required here).
    """
    if isinstance(data, pd.Series):
        return validate_hourly(data, name="series", whole_weeks=False)
    if not isinstance(data, pd.DataFrame):
        raise TypeError(f"data must be a pandas Series or DataFrame, got {type(data).__name__}")
    for col in ("period_start", column):
        if col not in data.columns:
            raise ValueError(f"data has no column {col!r}; columns are {list(data.columns)}")
    frame = data
    if "model" in frame.columns:
        models = pd.unique(frame["model"])
        if model is None:
            if len(models) > 1:
                raise ValueError(f"data holds {len(models)} models {sorted(map(str, models))}; "
                                 "pass model= to forecast one (each model has its own rating)")
        else:
            if model not in set(models):
                raise ValueError(f"model {model!r} is not in data; models are {sorted(map(str, models))}")
            frame = frame[frame["model"] == model]
    elif model is not None:
        raise ValueError("model= was given but data has no 'model' column")
    if "tier" in frame.columns:
        tiers = set(pd.unique(frame["tier"]))
        if tier is not None:
            wanted = [tier] if isinstance(tier, str) else list(tier)
            unknown = [t for t in wanted if t not in tiers]
            if unknown:
                raise ValueError(f"tier {unknown} not in data; tiers are {sorted(map(str, tiers))}")
            frame = frame[frame["tier"].isin(wanted)]
        else:
            frame = frame[~frame["tier"].isin(list(exclude_tiers))]
            if frame.empty:
                raise ValueError(f"no rows left after excluding tiers {list(exclude_tiers)}; pass tier= to choose")
    elif tier is not None:
        raise ValueError("tier= was given but data has no 'tier' column")
    ts = pd.to_datetime(frame["period_start"], utc=True)
    values = frame[column]
    if values.isna().any():
        raise ValueError(f"column {column!r} has a missing value at period_start {ts[values.isna()].iloc[0]}")
    s = pd.Series(values.to_numpy(dtype=float), index=pd.DatetimeIndex(ts)).groupby(level=0).sum()
    s.index.name = "period_start"
    s.name = column
    return validate_hourly(s, name=f"{column} series", whole_weeks=False)


def _as_weeks(series: pd.Series, name: str, min_weeks: int) -> tuple[pd.Series, np.ndarray]:
    s = validate_hourly(series, name=name, whole_weeks=True, min_weeks=min_weeks)
    return s, s.to_numpy().reshape(-1, HOURS_PER_WEEK)


# --------------------------------------------------------------------------------------------
# The trend × shape model
# --------------------------------------------------------------------------------------------
def _fit_kernel(x: np.ndarray, trend: bool) -> tuple[float, float, np.ndarray]:
    """(intercept, slope, shape) from a (weeks, 168) array; no validation."""
    totals = x.sum(axis=1)
    logw = np.log(totals)
    k = np.arange(len(totals), dtype=float)
    if trend:
        kc = k - k.mean()
        slope = float(np.dot(kc, logw - logw.mean()) / np.dot(kc, kc))
        intercept = float(logw.mean() - slope * k.mean())
    else:
        slope, intercept = 0.0, float(logw.mean())
    shape = (x / totals[:, None]).mean(axis=0)
    return intercept, slope, shape


def _predict_kernel(intercept: float, slope: float, shape: np.ndarray, weeks: np.ndarray) -> np.ndarray:
    """Point forecast, shape (len(weeks), 168): weekly total exp(a + b k) times the shape."""
    return np.exp(intercept + slope * np.asarray(weeks, dtype=float))[:, None] * shape[None, :]


@dataclass(frozen=True)
class TrendShapeFit:
    """A fitted trend × weekly-shape model.

    Attributes
    ----------
    start : pandas.Timestamp
        First hour of the training data (UTC); week 0 starts here.
    n_weeks : int
        Training weeks.
    intercept : float
        Fitted log weekly total at week 0 (log of tokens per week).
    slope : float
        Fitted change of the log weekly total per week.
    shape : numpy.ndarray
        168 shares of the week, one per hour of the week counted from ``start``; sums to 1.
    trend : bool
        Whether a trend was fitted (``False``: flat level, the mean log weekly total).
    name : str or None
        Name of the series (for example ``"output_tokens"``).
    """

    start: pd.Timestamp
    n_weeks: int
    intercept: float
    slope: float
    shape: np.ndarray = field(repr=False)
    trend: bool = True
    name: str | None = None

    @property
    def growth(self) -> float:
        """Fitted weekly growth rate, ``exp(slope) - 1`` (0.035 means 3.5 % a week)."""
        return float(np.expm1(self.slope))

    def weekly_total(self, week: float | np.ndarray) -> np.ndarray:
        """Fitted weekly total (tokens per week) at week number(s) ``week`` (0 = first training week)."""
        return np.exp(self.intercept + self.slope * np.asarray(week, dtype=float))

    def predict(self, horizon_weeks: int) -> pd.Series:
        """Point forecast (tokens per hour) of the ``horizon_weeks`` weeks after the training data.

        This is the mean forecast: weekly total from the trend times the average share of each
        hour of the week.
        """
        horizon = integer(horizon_weeks, "horizon_weeks", minimum=1)
        weeks = np.arange(self.n_weeks, self.n_weeks + horizon)
        values = _predict_kernel(self.intercept, self.slope, self.shape, weeks).ravel()
        index = pd.date_range(self.start + self.n_weeks * _WEEK, periods=len(values), freq="h", name="period_start")
        return pd.Series(values, index=index, name=self.name)

    def fitted(self) -> pd.Series:
        """In-sample fitted values (tokens per hour) over the training weeks."""
        values = _predict_kernel(self.intercept, self.slope, self.shape, np.arange(self.n_weeks)).ravel()
        index = pd.date_range(self.start, periods=len(values), freq="h", name="period_start")
        return pd.Series(values, index=index, name=self.name)


def fit_trend_shape(series: pd.Series, *, trend: bool = True) -> TrendShapeFit:
    """Fit the log-linear trend on weekly totals and the average weekly shape.

    Parameters
    ----------
    series : pandas.Series
        Hourly tokens (or requests) on a complete UTC index, whole weeks, no negatives. Week
        ``k`` is hours ``168 k .. 168 k + 167`` counted from the first timestamp.
    trend : bool
        Fit the trend (needs at least :data:`MIN_TREND_WEEKS` weeks). With ``False`` the level
        is flat (one week is enough) and the growth is 0.

    Returns
    -------
    TrendShapeFit

    Notes
    -----
    With weekly totals :math:`W_k` and hourly values :math:`x_{k,j}`:

    .. math::

        \\log W_k = a + b k \\;(\\text{least squares}),\\qquad
        s_j = \\frac{1}{n}\\sum_k \\frac{x_{k,j}}{W_k},\\qquad
        \\hat x_{k,j} = e^{a + b k} s_j .
    """
    s, x = _as_weeks(series, "series", 1)
    if trend and x.shape[0] < MIN_TREND_WEEKS:
        raise ValueError(f"series has {x.shape[0]} week(s); fitting a trend needs at least {MIN_TREND_WEEKS} "
                         "weekly totals (two points fit any line exactly); pass trend=False for a flat level")
    totals = x.sum(axis=1)
    if (totals <= 0).any():
        k = int(np.argmax(totals <= 0))
        raise ValueError(f"series week {k} (starting {s.index[k * HOURS_PER_WEEK]}) has a total of 0; "
                         "a log-linear trend needs positive weekly totals")
    a, b, shape = _fit_kernel(x, trend)
    return TrendShapeFit(start=s.index[0], n_weeks=x.shape[0], intercept=a, slope=b, shape=shape,
                         trend=trend, name=s.name)


# --------------------------------------------------------------------------------------------
# Out-of-sample errors and quantile bands
# --------------------------------------------------------------------------------------------
def _rolling_errors_kernel(x: np.ndarray, horizon: int, min_fit_weeks: int, trend: bool) -> list[list[np.ndarray]]:
    """errs[h-1] = list of 168-hour log-error arrays, one per origin that leaves h weeks."""
    n = x.shape[0]
    out: list[list[np.ndarray]] = [[] for _ in range(horizon)]
    logx = np.log(x)
    for k in range(min_fit_weeks, n):
        a, b, shape = _fit_kernel(x[:k], trend)
        hmax = min(horizon, n - k)
        err = logx[k:k + hmax] - np.log(_predict_kernel(a, b, shape, np.arange(k, k + hmax)))
        for h in range(hmax):
            out[h].append(err[h])
    return out


def rolling_log_errors(series: pd.Series, horizon_weeks: int, *, min_fit_weeks: int = 4,
                       trend: bool = True) -> pd.DataFrame:
    """Out-of-sample log errors of the trend × shape model from rolling-origin backtests.

    For every origin ``k`` (``min_fit_weeks <= k < n``) the model is fitted on weeks
    ``0..k-1`` and forecasts weeks ``k..k+horizon_weeks-1`` (as many as the data holds);
    each forecast hour gives the log error ``log(actual / forecast)``.

    Parameters
    ----------
    series : pandas.Series
        Hourly tokens, whole weeks, every hour positive (log errors).
    horizon_weeks : int
        Largest horizon to score, in weeks.
    min_fit_weeks : int
        Weeks in the first (smallest) fit.
    trend : bool
        Fit a trend at every origin.

    Returns
    -------
    pandas.DataFrame
        Columns ``origin_week`` (weeks in the fit), ``horizon_week`` (1 = the week right after
        the fit), ``hour_of_week`` (0..167), ``log_error`` (natural log of actual over forecast).
    """
    horizon = integer(horizon_weeks, "horizon_weeks", minimum=1)
    min_fit = integer(min_fit_weeks, "min_fit_weeks")
    if min_fit < (MIN_TREND_WEEKS if trend else 1):
        raise ValueError(f"min_fit_weeks={min_fit_weeks} is too small: a trend fit needs at least {MIN_TREND_WEEKS} weeks")
    s, x = _as_weeks(series, "series", min_fit + 1)
    _check_positive(s)
    rows = []
    errs = _rolling_errors_kernel(x, horizon, min_fit, trend)
    for h, per_origin in enumerate(errs, start=1):
        for j, e in enumerate(per_origin):
            rows.append(pd.DataFrame({"origin_week": min_fit + j, "horizon_week": h,
                                      "hour_of_week": np.arange(HOURS_PER_WEEK), "log_error": e}))
    return pd.concat(rows, ignore_index=True)


def _check_positive(s: pd.Series) -> None:
    zero = s.to_numpy() <= 0
    if zero.any():
        raise ValueError(f"series is 0 at {s.index[int(np.argmax(zero))]}; quantile bands come from log errors and "
                         "need every hour positive (forecast a sum of tiers or models, or a busier series)")


def _check_quantiles(quantiles) -> tuple[float, ...]:
    """Quantile levels in (0, 1), distinct, sorted (the domain rule on top of validation.array)."""
    levels = array(quantiles, "quantiles", lo=0, hi=1, lo_open=True, hi_open=True, nonempty=True)
    if levels.ndim > 1:
        raise ValueError(f"quantiles must be a sequence of levels, got shape {levels.shape}")
    qs = tuple(float(q) for q in np.atleast_1d(levels))
    if len(set(qs)) != len(qs):
        raise ValueError(f"quantiles has duplicates: {qs}")
    return tuple(sorted(qs))


@dataclass
class TokenForecast:
    """Quantile forecast of an hourly token series.

    Attributes
    ----------
    frame : pandas.DataFrame
        Indexed by ``period_start`` (UTC hours of the forecast weeks); columns
        ``horizon_week`` (1..H), ``hour_of_week`` (0..167), ``point`` (mean forecast, tokens
        per hour) and one column per quantile (``p10``, ``p50``, ``p90`` …, tokens per hour),
        plus ``overlay`` (the multiplier applied by overlays, 1 without events).
    fit : TrendShapeFit
        The model fitted on all training weeks.
    method : str
        ``"calibrated"`` or ``"sqrt_h"``.
    quantiles : tuple of float
    log_offsets : pandas.DataFrame
        Index ``horizon_week``, one column per quantile: the log offset added to the log point
        forecast (the band is ``point * exp(offset)``).
    n_errors : pandas.Series
        Number of out-of-sample log errors behind each horizon's offsets.
    peak_log_offsets : pandas.DataFrame
        Like ``log_offsets`` for the week's busiest hour, relative to the busiest point-forecast
        hour. Each backtest origin's week of log errors (at that horizon) is laid over the
        week's point forecast and the largest hour taken; the quantiles of those maxima give
        the lines. One sample per origin, so with few origins read them as rough.
    events : pandas.DataFrame or None
        The event calendar applied (see :func:`apply_overlays`).
    error_weeks : tuple of numpy.ndarray or None
        ``error_weeks[h - 1]``: the backtest's out-of-sample log errors at horizon ``h``, one
        row of 168 hours per origin (dimensionless, log of actual over forecast), the sample
        ``peak_log_offsets`` are quantiles of (for ``"sqrt_h"`` the one-week errors widened by
        √h about their median). Kept so that a caller reads the forecast week's distribution
        without running the backtest again.
    """

    frame: pd.DataFrame
    fit: TrendShapeFit
    method: str
    quantiles: tuple[float, ...]
    log_offsets: pd.DataFrame
    n_errors: pd.Series
    peak_log_offsets: pd.DataFrame | None = None
    events: pd.DataFrame | None = None
    error_weeks: tuple | None = field(default=None, repr=False, compare=False)

    def peak(self) -> pd.DataFrame:
        """Forecast of each week's busiest hour (tokens per hour).

        Returns
        -------
        pandas.DataFrame
            Index ``horizon_week``; ``peak_hour`` (the hour where the point forecast peaks),
            ``point`` (the point forecast there) and one column per quantile: the peak-hour
            quantile, ``point × exp(peak_log_offsets)`` (overlays included).
        """
        g = self.frame.groupby("horizon_week")["point"]
        at = g.idxmax()
        out = pd.DataFrame({"peak_hour": at, "point": g.max()})
        for name in self.log_offsets.columns:
            out[name] = out["point"].to_numpy() * np.exp(self.peak_log_offsets[name].to_numpy())
        return out

    @property
    def growth(self) -> float:
        """Fitted weekly growth rate (0.035 = 3.5 % a week)."""
        return self.fit.growth

    @property
    def column(self) -> str | None:
        """Name of the forecast series (``"output_tokens"`` …)."""
        return self.fit.name

    @property
    def origin(self) -> pd.Timestamp:
        """First forecast hour (UTC)."""
        return self.frame.index[0]

    def band(self, q: float) -> pd.Series:
        """The quantile-``q`` line (tokens per hour)."""
        name = quantile_name(q)
        if name not in self.frame.columns:
            raise ValueError(f"quantile {q} was not forecast; quantiles are {self.quantiles}")
        return self.frame[name]


def forecast_tokens(series: pd.Series | pd.DataFrame, horizon_weeks: int = 4, *,
                    quantiles: Iterable[float] = (0.1, 0.5, 0.9), method: str = "calibrated",
                    min_fit_weeks: int = 4, min_origins: int = 3, trend: bool = True,
                    events: pd.DataFrame | None = None, column: str = "output_tokens",
                    model: str | None = None, tier: str | None = None) -> TokenForecast:
    """Forecast hourly tokens ``horizon_weeks`` ahead with quantile bands.

    Parameters
    ----------
    series : pandas.Series or pandas.DataFrame
        Hourly training data: whole weeks, complete UTC index, every hour positive. A frame is
        reduced with :func:`hourly_series` (``column``, ``model``, ``tier``; batch tier left
        out by default).
    horizon_weeks : int
        Weeks to forecast after the training data.
    quantiles : iterable of float
        Quantile levels in (0, 1).
    method : {"calibrated", "sqrt_h"}
        ``"calibrated"``: the band at horizon ``h`` uses the empirical quantiles of the
        rolling-origin log errors at horizon ``h``. ``"sqrt_h"``: the one-week-ahead log errors
        with their spread around the median widened by ``sqrt(h)``.
    min_fit_weeks : int
        Weeks in the smallest fit of the rolling-origin backtest.
    min_origins : int
        Fewest backtest origins (each gives 168 errors) behind any horizon's quantiles.
    trend : bool
        Fit a trend (else a flat level).
    events : pandas.DataFrame, optional
        Event calendar applied after the fit (see :func:`apply_overlays`).

    Returns
    -------
    TokenForecast

    Raises
    ------
    ValueError
        If the series is too short for the requested horizon: ``calibrated`` needs
        ``min_fit_weeks + horizon_weeks + min_origins - 1`` weeks, ``sqrt_h`` needs
        ``min_fit_weeks + min_origins``.

    Notes
    -----
    With point forecast :math:`\\hat x` and log errors :math:`e` (actual over forecast), the
    quantile-:math:`q` line at horizon :math:`h` is

    .. math::

        \\text{calibrated: } \\hat x\\, e^{Q_q(e_h)}, \\qquad
        \\sqrt{h}\\text{ rule: } \\hat x\\, e^{m_1 + \\sqrt{h}\\,(Q_q(e_1) - m_1)},

    where :math:`e_h` are the errors at horizon :math:`h` and :math:`m_1` is the median of the
    one-week-ahead errors.
    """
    if isinstance(series, pd.DataFrame):
        series = hourly_series(series, column, model=model, tier=tier)
    horizon = integer(horizon_weeks, "horizon_weeks", minimum=1)
    qs = _check_quantiles(quantiles)
    if method not in ("calibrated", "sqrt_h"):
        raise ValueError(f"method must be 'calibrated' or 'sqrt_h', got {method!r}")
    min_fit = integer(min_fit_weeks, "min_fit_weeks")
    if min_fit < (MIN_TREND_WEEKS if trend else 1):
        raise ValueError(f"min_fit_weeks={min_fit_weeks} is too small: a trend fit needs at least {MIN_TREND_WEEKS} weeks")
    min_origins = integer(min_origins, "min_origins", minimum=1)
    err_h = horizon if method == "calibrated" else 1
    need = min_fit + err_h + int(min_origins) - 1
    s, x = _as_weeks(series, "series", 1)
    if x.shape[0] < need:
        raise ValueError(
            f"series has {x.shape[0]} week(s); method={method!r} with horizon_weeks={horizon} needs at least {need} "
            f"(min_fit_weeks={min_fit} + {err_h} week(s) scored + min_origins={min_origins} - 1) so that every "
            "horizon's error quantiles rest on enough backtest origins")
    _check_positive(s)
    fit = fit_trend_shape(s, trend=trend)
    errs = _rolling_errors_kernel(x, err_h, min_fit, trend)
    point = fit.predict(horizon)
    weeks = point.to_numpy().reshape(horizon, HOURS_PER_WEEK)
    offsets = np.empty((horizon, len(qs)))
    peak_offsets = np.empty((horizon, len(qs)))
    counts = np.empty(horizon, dtype=int)
    error_weeks = []
    if method == "calibrated":
        for h in range(horizon):
            e = np.stack(errs[h])  # one row of 168 log errors per backtest origin
            offsets[h] = np.quantile(e, qs)
            peak_offsets[h] = _peak_offsets(weeks[h], e, qs)
            counts[h] = e.size
            error_weeks.append(e)
    else:
        e1 = np.stack(errs[0])
        m1 = float(np.median(e1))
        q1 = np.quantile(e1, qs)
        for h in range(horizon):
            offsets[h] = m1 + np.sqrt(h + 1) * (q1 - m1)
            eh = m1 + np.sqrt(h + 1) * (e1 - m1)
            peak_offsets[h] = _peak_offsets(weeks[h], eh, qs)
            counts[h] = e1.size
            error_weeks.append(eh)
    hw = np.repeat(np.arange(1, horizon + 1), HOURS_PER_WEEK)
    frame = pd.DataFrame({"horizon_week": hw, "hour_of_week": np.tile(np.arange(HOURS_PER_WEEK), horizon),
                          "point": point.to_numpy()}, index=point.index)
    for j, q in enumerate(qs):
        frame[quantile_name(q)] = point.to_numpy() * np.exp(offsets[hw - 1, j])
    frame["overlay"] = 1.0
    hidx = pd.Index(np.arange(1, horizon + 1), name="horizon_week")
    names = [quantile_name(q) for q in qs]
    fc = TokenForecast(frame=frame, fit=fit, method=method, quantiles=qs,
                       log_offsets=pd.DataFrame(offsets, index=hidx, columns=names),
                       n_errors=pd.Series(counts, index=hidx, name="n_errors"),
                       peak_log_offsets=pd.DataFrame(peak_offsets, index=hidx, columns=names),
                       error_weeks=tuple(error_weeks))
    if events is not None:
        fc = apply_overlays(fc, events)
    return fc


def _peak_offsets(point_week: np.ndarray, err_weeks: np.ndarray, qs) -> np.ndarray:
    """Log offsets of the quantiles of a week's busiest hour over the busiest forecast hour.

    Each backtest origin's week of log errors is laid over this week's point forecast and the
    largest hour taken: one sample of the week's peak per origin.
    """
    peaks = (point_week[None, :] * np.exp(err_weeks)).max(axis=1)
    return np.log(np.quantile(peaks, qs) / point_week.max())


# --------------------------------------------------------------------------------------------
# Peak-to-mean
# --------------------------------------------------------------------------------------------
def _values(x, name: str) -> np.ndarray:
    v = array(x, name, lo=0, nonempty=True).ravel()
    if v.max() <= 0:
        raise ValueError(f"{name} is all zeros: peak-to-mean is undefined")
    return v


def peak_to_mean(x: pd.Series | np.ndarray) -> float:
    """Peak-to-mean ratio of an hourly series or a weekly shape: ``max / mean`` (≥ 1).

    Parameters
    ----------
    x : pandas.Series or array-like
        Hourly tokens (or requests, or shares); non-negative, not all zero.
    """
    v = _values(x, "x")
    return float(v.max() / v.mean())


def idle_share(x: pd.Series | np.ndarray) -> float:
    """Share of peak-sized capacity that sits idle on average: ``1 - mean / peak``.

    A fleet sized for the peak hour of ``x`` uses only ``mean / peak`` of its capacity on
    average; the rest is the budget for deferrable (batch) work.
    """
    return 1.0 - 1.0 / peak_to_mean(x)


# --------------------------------------------------------------------------------------------
# Synthetic series
# --------------------------------------------------------------------------------------------
def weekly_profile(*, peak_hour_utc: float = 14.5, width_hours: float = 4.5, base: float = 0.35,
                   weekend_level: float = 0.6, first_day: int = 0) -> np.ndarray:
    """A 168-hour weekly shape with a weekday afternoon peak (shares summing to 1).

    Each weekday's profile is ``base + (1 - base) * exp(-d^2 / (2 width^2))`` where ``d`` is
    the circular distance in hours from ``peak_hour_utc``; weekend days are ``weekend_level``
    times a weekday.

    Parameters
    ----------
    peak_hour_utc : float
        Hour of the daily peak (UTC, 0–24).
    width_hours : float
        Standard deviation of the afternoon bump, hours.
    base : float
        Night level as a fraction of the bump's top (0–1).
    weekend_level : float
        Weekend days relative to weekdays (0.6 = 60 %).
    first_day : int
        Weekday of hour 0 (0 = Monday).
    """
    peak_hour_utc = number(peak_hour_utc, "peak_hour_utc")
    width_hours = positive(width_hours, "width_hours")
    base = number(base, "base", lo=0, hi=1)
    weekend_level = positive(weekend_level, "weekend_level")
    first_day = integer(first_day, "first_day", minimum=0, maximum=6)
    h = np.arange(24)
    d = (h - peak_hour_utc + 12) % 24 - 12
    day = base + (1 - base) * np.exp(-0.5 * (d / width_hours) ** 2)
    days = [(first_day + i) % 7 for i in range(7)]
    week = np.concatenate([day * (weekend_level if dd >= 5 else 1.0) for dd in days])
    return week / week.sum()


def synthetic_token_series(weeks: int = 20, *, growth: float = 0.035, noise: float = 0.08,
                           weekend_level: float = 0.6, peak_hour_utc: float = 14.5, base: float = 0.35,
                           start: str | pd.Timestamp = "2026-01-05",
                           output_tokens_per_week: float = 2.0e9, input_per_output: float = 4.0,
                           output_tokens_per_request: float = 350.0, noise_correlation: float = 0.7,
                           capacity_requests_per_hour: float | None = None, model: str = "m-chat",
                           tier: str = "interactive", events: pd.DataFrame | None = None,
                           seed: int | np.random.Generator = 0) -> pd.DataFrame:
    """Generate an hourly token series in the trace layer's hourly format.

    Demand is ``level × (1 + growth)^(t / 168) × shape × exp(noise × z)`` per hour ``t``,
    with the weekday-afternoon shape of :func:`weekly_profile`, ``z`` standard normal
    (median-one log-normal noise), separate but correlated noise for input and output tokens.
    Throttled requests are counted in ``requests`` and in both token columns (they are demand).

    Parameters
    ----------
    weeks : int
        Length in weeks.
    growth : float
        Weekly growth rate (0.035 = 3.5 % a week), compounding hour by hour.
    noise : float
        Standard deviation of the log noise of each hour (0.08 ≈ 8 %).
    weekend_level : float
        Weekend days relative to weekdays.
    peak_hour_utc, base : float
        Daily peak hour (UTC) and night level of :func:`weekly_profile`.
    start : str or Timestamp
        First hour (UTC). The default is a Monday.
    output_tokens_per_week : float
        Output tokens in the first week (before noise).
    input_per_output : float
        Input tokens per output token.
    output_tokens_per_request : float
        Mean output tokens per request (sets ``requests``).
    noise_correlation : float
        Correlation of the input and output log noise.
    capacity_requests_per_hour : float, optional
        Requests above this in an hour are counted as ``throttled`` (still in the demand).
    model, tier : str
        Labels of the rows.
    events : pandas.DataFrame, optional
        Event calendar (timestamps only) whose multipliers are applied to the true demand.
        Events on ``"all"`` (or ``"requests"``) change the number of requests; events on one
        token column change that column's tokens per request.
    seed : int or numpy.random.Generator

    Returns
    -------
    pandas.DataFrame
        Columns ``period_start, model, tier, requests, throttled, input_tokens,
        output_tokens`` (integers), ``weeks × 168`` rows.
    """
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    weeks = integer(weeks, "weeks", minimum=1)
    noise = nonnegative(noise, "noise")
    growth = number(growth, "growth", lo=-1, lo_open=True)
    noise_correlation = number(noise_correlation, "noise_correlation", lo=-1, hi=1)
    start = pd.Timestamp(start)
    start = start.tz_localize("UTC") if start.tz is None else start.tz_convert("UTC")
    n = weeks * HOURS_PER_WEEK
    index = pd.date_range(start, periods=n, freq="h", name="period_start")
    shape = weekly_profile(weekend_level=weekend_level, first_day=start.day_of_week, peak_hour_utc=peak_hour_utc,
                           base=base)
    t = np.arange(n)
    mean_out = output_tokens_per_week * np.tile(shape, weeks) * np.exp(np.log1p(growth) * t / HOURS_PER_WEEK)
    z1 = rng.standard_normal(n)
    z2 = noise_correlation * z1 + np.sqrt(1 - noise_correlation ** 2) * rng.standard_normal(n)
    base_out = mean_out * np.exp(noise * z1)
    out = base_out
    inp = input_per_output * mean_out * np.exp(noise * z2)
    per_request = np.full(n, output_tokens_per_request)
    if events is not None:
        f_out = overlay_factors(index, events, "output_tokens").to_numpy()
        f_req = overlay_factors(index, events, "requests").to_numpy()
        out = out * f_out
        inp = inp * overlay_factors(index, events, "input_tokens").to_numpy()
        per_request = per_request * f_out / f_req  # events on tokens only change tokens per request
    requests = np.maximum(np.rint(out / per_request * np.exp(0.02 * rng.standard_normal(n))), 1)
    throttled = np.zeros(n) if capacity_requests_per_hour is None else np.maximum(requests - capacity_requests_per_hour, 0)
    return pd.DataFrame({"period_start": index, "model": model, "tier": tier,
                         "requests": requests.astype(np.int64), "throttled": np.rint(throttled).astype(np.int64),
                         "input_tokens": np.rint(inp).astype(np.int64), "output_tokens": np.rint(out).astype(np.int64)})


# --------------------------------------------------------------------------------------------
# Overlays from an event calendar
# --------------------------------------------------------------------------------------------
_EVENT_COLUMNS = ("event", "column", "start", "full", "share", "multiplier")
_TARGETS = ("input_tokens", "output_tokens", "requests", "all")


def event_calendar(rows: pd.DataFrame | Iterable[dict]) -> pd.DataFrame:
    """Validate an event calendar: known launches and mix shifts, as a small reviewable table.

    Each row says: from ``start`` a slice of traffic grows linearly to ``share`` of the
    traffic at ``full`` (a step when ``full == start``), and on that slice ``column`` is
    multiplied by ``multiplier``. The series is multiplied by
    ``1 + share(t) × (multiplier − 1)``; several events multiply.

    Parameters
    ----------
    rows : pandas.DataFrame or iterable of dict
        Columns ``event`` (a name), ``column`` (``"input_tokens"``, ``"output_tokens"``,
        ``"requests"`` or ``"all"``), ``start`` and ``full`` (UTC timestamps, or whole numbers
        ``k`` meaning the first hour of forecast week ``k``, 1 = the first forecast week),
        ``share`` (fraction of traffic in the slice at full ramp, in (0, 1]) and
        ``multiplier`` (factor on that slice, > 0). Example: a feature that reaches 30 % of
        traffic in week 6 and triples output tokens for that slice is
        ``{"event": "reasoning mode", "column": "output_tokens", "start": 2, "full": 6,
        "share": 0.3, "multiplier": 3.0}``; a launch that adds 25 % traffic in week 3 is
        ``{"event": "launch", "column": "all", "start": 3, "full": 3, "share": 1.0,
        "multiplier": 1.25}``.

    Returns
    -------
    pandas.DataFrame
        The calendar with the six columns, in order.
    """
    df = rows.copy() if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    missing = [c for c in _EVENT_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"event calendar is missing column(s) {missing}; it needs {list(_EVENT_COLUMNS)}")
    df = df[list(_EVENT_COLUMNS)].reset_index(drop=True)
    for i, r in df.iterrows():
        where = f"event calendar row {i} ({r['event']!r})"
        if r["column"] not in _TARGETS:
            raise ValueError(f"{where}: column must be one of {_TARGETS}, got {r['column']!r}")
        share, mult = r["share"], r["multiplier"]
        if not (isinstance(share, (int, float, np.number)) and 0 < share <= 1):
            raise ValueError(f"{where}: share must be in (0, 1], got {share!r}")
        if not (isinstance(mult, (int, float, np.number)) and np.isfinite(mult) and mult > 0):
            raise ValueError(f"{where}: multiplier must be positive, got {mult!r}")
        kinds = {_time_kind(r["start"], where, "start"), _time_kind(r["full"], where, "full")}
        if len(kinds) > 1:
            raise ValueError(f"{where}: start and full must both be timestamps or both forecast week numbers")
        if kinds == {"week"}:
            if r["full"] < r["start"]:
                raise ValueError(f"{where}: full (week {r['full']}) is before start (week {r['start']})")
        elif pd.Timestamp(r["full"]) < pd.Timestamp(r["start"]):
            raise ValueError(f"{where}: full ({r['full']}) is before start ({r['start']})")
    return df


def _time_kind(v, where: str, what: str) -> str:
    if isinstance(v, (bool, np.bool_)):
        raise ValueError(f"{where}: {what} must be a timestamp or a forecast week number, got {v!r}")
    if isinstance(v, (int, np.integer)):
        if v < 1:
            raise ValueError(f"{where}: {what} week number must be 1 or more (1 = first forecast week), got {v}")
        return "week"
    try:
        pd.Timestamp(v)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{where}: {what} must be a timestamp or a forecast week number, got {v!r}") from exc
    return "time"


def _resolve_time(v, origin: pd.Timestamp | None, where: str) -> pd.Timestamp:
    if isinstance(v, (int, np.integer)):
        if origin is None:
            raise ValueError(f"{where}: week numbers need a forecast origin; use timestamps to apply it to a history")
        return origin + (int(v) - 1) * _WEEK
    t = pd.Timestamp(v)
    return t.tz_localize("UTC") if t.tz is None else t.tz_convert("UTC")


def overlay_factors(index: pd.DatetimeIndex, events: pd.DataFrame, column: str, *,
                    origin: pd.Timestamp | None = None) -> pd.Series:
    """Multiplier of each hour of ``index`` for ``column`` implied by an event calendar.

    Parameters
    ----------
    index : pandas.DatetimeIndex
        Hours (UTC; naive taken as UTC).
    events : pandas.DataFrame
        Event calendar (see :func:`event_calendar`).
    column : str
        The series the factors are for; events on ``column`` or ``"all"`` apply.
    origin : pandas.Timestamp, optional
        First forecast hour: week numbers ``k`` in the calendar mean ``origin + (k-1)`` weeks.

    Returns
    -------
    pandas.Series
        Dimensionless factors (1 where no event applies), indexed like ``index``.
    """
    ev = event_calendar(events)
    idx = pd.DatetimeIndex(index)
    idx = idx.tz_localize("UTC") if idx.tz is None else idx.tz_convert("UTC")
    t = idx.as_unit("ns").asi8.astype(float)
    factor = np.ones(len(idx))
    for i, r in ev.iterrows():
        if r["column"] not in (column, "all"):
            continue
        where = f"event calendar row {i} ({r['event']!r})"
        t0 = _resolve_time(r["start"], origin, where).value
        t1 = _resolve_time(r["full"], origin, where).value
        if t1 > t0:
            ramp = np.clip((t - t0) / (t1 - t0), 0.0, 1.0)
        else:
            ramp = (t >= t0).astype(float)
        factor *= 1.0 + r["share"] * ramp * (r["multiplier"] - 1.0)
    return pd.Series(factor, index=index, name="overlay")


def apply_overlays(forecast: TokenForecast, events: pd.DataFrame) -> TokenForecast:
    """Apply an event calendar to a statistical forecast (after the fit).

    The point forecast and every quantile line are multiplied by :func:`overlay_factors` for
    the forecast's column; week numbers in the calendar count forecast weeks (1 = first).
    The statistical forecast is kept as ``point_statistical``. The overlay's own uncertainty
    is not modelled: review the calendar's numbers as you would any estimate.

    Returns
    -------
    TokenForecast
        A new forecast whose ``events`` is the calendar and whose ``frame["overlay"]`` holds
        the factors.
    """
    ev = event_calendar(events)
    column = forecast.column or "all"
    f = overlay_factors(forecast.frame.index, ev, column, origin=forecast.origin).to_numpy()
    frame = forecast.frame.copy()
    if "point_statistical" not in frame.columns:
        frame.insert(frame.columns.get_loc("point"), "point_statistical", frame["point"] / frame["overlay"])
    base = frame["overlay"].to_numpy()
    for c in ["point"] + [quantile_name(q) for q in forecast.quantiles]:
        frame[c] = frame[c].to_numpy() * f
    frame["overlay"] = base * f
    prior = forecast.events
    events_all = ev if prior is None else pd.concat([prior, ev], ignore_index=True)
    return TokenForecast(frame=frame, fit=forecast.fit, method=forecast.method, quantiles=forecast.quantiles,
                         log_offsets=forecast.log_offsets, n_errors=forecast.n_errors,
                         peak_log_offsets=forecast.peak_log_offsets, events=events_all,
                         error_weeks=forecast.error_weeks)


def remove_overlays(series: pd.Series, events: pd.DataFrame, column: str | None = None, *,
                    origin: pd.Timestamp | None = None) -> pd.Series:
    """Divide past events out of a history before fitting, so a launch is not read as trend.

    Parameters
    ----------
    series : pandas.Series
        Hourly history (tokens per hour).
    events : pandas.DataFrame
        Event calendar (see :func:`event_calendar`).
    column : str, optional
        Which series this is (default: the series name); events on it or on ``"all"`` apply.
    origin : pandas.Timestamp, optional
        The hour that week number 1 of the calendar starts at (needed only when the calendar
        uses week numbers).
    """
    s = validate_hourly(series, name="series", whole_weeks=False)
    col = column or s.name or "all"
    f = overlay_factors(s.index, events, col, origin=origin)
    return (s / f.to_numpy()).rename(s.name)


def describe_events(events: pd.DataFrame) -> str:
    """A printable, reviewable sentence per event in the calendar."""
    ev = event_calendar(events)
    lines = []
    for _, r in ev.iterrows():
        def when(v):
            return f"forecast week {int(v)}" if isinstance(v, (int, np.integer)) else str(pd.Timestamp(v))
        target = "all traffic" if r["column"] == "all" else r["column"]
        effect = r["share"] * (r["multiplier"] - 1)
        if when(r["start"]) == when(r["full"]):
            timing = f"from {when(r['start'])} (a step)"
        else:
            timing = f"ramping from {when(r['start'])} to full at {when(r['full'])}"
        lines.append(f"{r['event']}: {r['share']:.0%} of traffic, {target} × {r['multiplier']:g} on that slice, "
                     f"{timing}: {target} {effect:+.0%} at full share")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Data readers
# --------------------------------------------------------------------------------------------
def sample_token_path(name: str) -> Path:
    """Path of a sample hourly token file in ``tokens/`` of the sample data (``"weeks20"`` or
    ``"weeks56"``); the folder is :func:`capbook.paths.data_path`'s (``CAPBOOK_DATA`` honoured).
    """
    folder = data_path("tokens")
    path = folder / f"{name}.csv"
    if not path.is_file():
        known = sorted(p.stem for p in folder.glob("*.csv")) if folder.is_dir() else []
        raise ValueError(f"no sample token series {name!r} in {folder}; available: {known}")
    return path


def load_sample_series(name: str = "weeks20") -> pd.DataFrame:
    """A generated sample series (:func:`sample_token_path`) in the trace layer's hourly format.

    ``"weeks20"``: 20 weeks, 3.5 % weekly growth, 8 % noise (train 16, forecast 4).
    ``"weeks56"``: 56 weeks with a launch step, a mix shift and a batch tier. See
    ``data/README.md`` and ``tools/make_token_series.py``.
    """
    return read_token_csv(sample_token_path(name))


def trim_to_whole_weeks(series: pd.Series, *, keep: str = "last") -> pd.Series:
    """Drop the hours of a partial week so the series holds whole weeks.

    Parameters
    ----------
    series : pandas.Series
        Hourly series (validated: complete index, no negatives).
    keep : {"last", "first"}
        Keep the most recent whole weeks (drop the oldest partial hours) or the earliest.

    Returns
    -------
    pandas.Series
        The series with ``len % 168`` hours removed from the other end.
    """
    s = validate_hourly(series, name="series", whole_weeks=False, min_weeks=0)
    extra = len(s) % HOURS_PER_WEEK
    if len(s) < HOURS_PER_WEEK:
        raise ValueError(f"series has {len(s)} hours, less than one week")
    if keep not in ("last", "first"):
        raise ValueError(f"keep must be 'last' or 'first', got {keep!r}")
    if extra == 0:
        return s
    return s.iloc[extra:] if keep == "last" else s.iloc[:-extra]


def read_servegen_hourly(folder: str | Path, *, start: str | pd.Timestamp = "2025-01-06") -> pd.Series:
    """Hourly request counts from ServeGen per-client rate descriptors.

    Each ``chunk-*-trace.csv`` (no header: ``window_start_s, rate_req_per_s, iat_cv,
    iat_dist, shape, scale``) holds one client's request rate per 600 s window. The rates are
    summed over clients, multiplied by the window length to give requests per window, and
    summed to hours.

    Parameters
    ----------
    folder : str or Path
        Folder holding the ``chunk-*-trace.csv`` files.
    start : str or Timestamp
        UTC time given to window 0. The files carry offsets only; the default (a Monday) is a
        labelling choice, not a fact of the data.

    Returns
    -------
    pandas.Series
        Requests per hour, named ``"requests"``.
    """
    folder = Path(folder)
    files = sorted(folder.glob("chunk-*-trace.csv"))
    if not files:
        raise ValueError(f"{folder}: no chunk-*-trace.csv files")
    total = None
    for f in files:
        d = pd.read_csv(f, header=None, usecols=[0, 1], names=["window_start_s", "rate"])
        if d["rate"].isna().any() or (d["rate"] < 0).any():
            raise ValueError(f"{f}: rate_req_per_s is missing or negative")
        r = d.set_index("window_start_s")["rate"]
        total = r if total is None else total.add(r, fill_value=0.0)
    starts = total.index.to_numpy()
    width = np.diff(starts)
    if len(width) == 0 or (width != width[0]).any():
        raise ValueError(f"{folder}: windows are not evenly spaced")
    width = float(width[0])
    if 3600 % width:
        raise ValueError(f"{folder}: window length {width:g} s does not divide an hour")
    requests = total.to_numpy() * width
    hours = (starts // 3600).astype(int)
    per_hour = pd.Series(requests).groupby(hours).sum()
    counts = pd.Series(1, index=hours).groupby(level=0).size()
    full = counts.to_numpy() == int(3600 // width)
    if not full.all():
        raise ValueError(f"{folder}: hour {per_hour.index[int(np.argmax(~full))]} is not fully covered by windows")
    t0 = pd.Timestamp(start)
    t0 = t0.tz_localize("UTC") if t0.tz is None else t0.tz_convert("UTC")
    index = t0 + pd.to_timedelta(per_hour.index.to_numpy(), unit="h")
    return pd.Series(per_hour.to_numpy(), index=pd.DatetimeIndex(index, name="period_start"), name="requests")
