"""Demand shapes: a real day-and-week shape of demand to borrow when a forecast has none.

:func:`load_demand_shape` reads the shipped ServeGen shape (``data/demand``); the plan's
autoscaling week borrows it when the plan carries no forecast week of its own.
"""
from __future__ import annotations

from pathlib import Path

from capbook.paths import data_dir

__all__ = ["DEMAND_SHAPE_FILE", "DEMAND_SHAPE_SOURCE", "demand_shape_path", "load_demand_shape"]

#: The real demand shape derived from Alibaba ServeGen (``tools/make_demand_shape.py``),
#: relative to :func:`~capbook.paths.data_dir`.
DEMAND_SHAPE_FILE = Path("demand") / "servegen_m_large_10min.csv"
#: The demand shape's one-line attribution, kept in ``series.attrs["source"]``.
DEMAND_SHAPE_SOURCE = ("Alibaba ServeGen, language model m-large (alibaba/ServeGen data/language/m-large, "
                       "commit f891d118, Apache-2.0): sum over 162 clients of rate_req_per_s per 600 s window")


def demand_shape_path() -> Path:
    """The shipped demand shape, ``data/demand/servegen_m_large_10min.csv``.

    The path is inside :func:`~capbook.paths.data_dir`, so ``CAPBOOK_DATA`` moves it with the rest of the
    data; it is not checked (:func:`load_demand_shape` says what is missing).

    Returns
    -------
    pathlib.Path
    """
    return data_dir() / DEMAND_SHAPE_FILE


def load_demand_shape(path=None):
    """A real day-and-week shape of demand: 14 days of request rates in 600 s windows.

    Alibaba Bailian's production traffic to the language model "m-large", as published in
    Alibaba's ServeGen (alibaba/ServeGen ``data/language/m-large``, commit ``f891d118``,
    Apache-2.0): the rate of each of 162 clients summed per 10-minute window by
    ``tools/make_demand_shape.py``. The window labels are offsets from the start of the data;
    day 0 is not a known weekday and hour 0 not a known time of day. See ``data/README.md``.
    Rescale it (``series / series.mean() * your_mean``) to use it as the shape of another
    service's demand.

    Parameters
    ----------
    path : str or Path, optional
        A file in the same layout (``#`` comment lines, then the header
        ``window_start_s,rate_req_per_s,active_clients``); default :func:`demand_shape_path`.

    Returns
    -------
    pandas.Series
        Requests per second (float) per window, named ``"rate_req_per_s"``, indexed by
        ``window_start_s`` (int, seconds from the start: 0, 600, …). ``attrs["bin_s"]`` is the
        window length in seconds (600.0) and ``attrs["source"]`` the one-line attribution.

    Raises
    ------
    FileNotFoundError
        When the file is not there.
    ValueError
        When a column is missing, a rate is missing, negative or not finite, or the windows do
        not start at 0 and follow each other every 600 s; the message names the file and row.

    Examples
    --------
    >>> s = load_demand_shape()
    >>> len(s), s.attrs["bin_s"], int(s.index[-1])
    (2016, 600.0, 1209000)
    >>> round(float(s.mean()), 1), round(float(s.max() / s.mean()), 2)
    (195.8, 2.98)
    """
    import numpy as np
    import pandas as pd

    path = Path(path) if path is not None else demand_shape_path()
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: regenerate it with tools/make_demand_shape.py "
                                "from the ServeGen data/language/m-large folder")
    df = pd.read_csv(path, comment="#")
    missing = [c for c in ("window_start_s", "rate_req_per_s") if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: no {', '.join(repr(c) for c in missing)} column (columns: "
                         f"{', '.join(map(str, df.columns))}); expected window_start_s,rate_req_per_s,active_clients")
    if df.empty:
        raise ValueError(f"{path}: no rows")
    rate = pd.to_numeric(df["rate_req_per_s"], errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(rate) | (rate < 0)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{path}: data row {i + 1}, column rate_req_per_s: {df['rate_req_per_s'].iloc[i]!r} is not "
                         "a finite rate >= 0 (requests per second)")
    start = pd.to_numeric(df["window_start_s"], errors="coerce").to_numpy(dtype=float)
    expected = 600.0 * np.arange(len(df))
    off = start != expected
    if off.any():
        i = int(np.argmax(off))
        raise ValueError(f"{path}: data row {i + 1}, column window_start_s: {df['window_start_s'].iloc[i]!r}, "
                         f"expected {expected[i]:.0f} (windows of 600 s from 0, in order, none missing)")
    series = pd.Series(rate, index=pd.Index(start.astype(np.int64), name="window_start_s"), name="rate_req_per_s")
    series.attrs["bin_s"] = 600.0
    series.attrs["source"] = DEMAND_SHAPE_SOURCE
    return series
