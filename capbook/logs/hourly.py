"""Hourly sums of a request log: the layout a forecast reads, checked row by row.

A gateway's long history is often kept as hourly sums beside a log of its busiest hours
(``capbook plan --history``): :func:`read_token_csv` reads such a CSV, :func:`read_history`
turns a file or frame into the plan's hourly table.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd


__all__ = ["HOURLY_COLUMNS", "MAX_REQUESTS_PER_HOUR", "MAX_TOKENS_PER_REQUEST", "read_token_csv", "read_history"]

#: Columns of the trace layer's hourly frame.
HOURLY_COLUMNS = ("period_start", "model", "tier", "requests", "throttled", "input_tokens", "output_tokens")

#: The largest request count an hour of a history may hold: a stated physical ceiling (about
#: 280,000 requests a second, more than any one deployment's gateway serves).
MAX_REQUESTS_PER_HOUR = 1_000_000_000
#: The most tokens one request may carry (the request-log reader's limit too): an hour's input or
#: output tokens above its requests times this cannot come from real requests.
MAX_TOKENS_PER_REQUEST = 10_000_000


def _lines(mask: np.ndarray, most: int = 5) -> str:
    """'lines 3, 7 and 9' of the first rows where ``mask`` holds (file lines: the header is line 1)."""
    idx = np.flatnonzero(mask)[:most] + 2
    text = ", ".join(map(str, idx[:-1])) + (f" and {idx[-1]}" if len(idx) > 1 else str(idx[-1]))
    more = int(mask.sum()) - len(idx)
    return ("line " if len(idx) == 1 else "lines ") + text + (f" (and {more} more)" if more > 0 else "")


def read_token_csv(path: str | Path) -> pd.DataFrame:
    """Read an hourly token CSV in the trace layer's hourly format, checked row by row.

    Columns ``period_start`` (ISO-8601 UTC, on the hour), ``model``, ``tier``, ``requests``,
    ``throttled``, ``input_tokens``, ``output_tokens`` (counts per hour); other columns (such as
    ``tenant``) are kept.

    Raises
    ------
    ValueError
        Naming the file, the line (the header is line 1) and the column: a missing column, a time
        that is not ISO-8601 or not on the hour, an empty model or tier, a count that is not a
        number, negative, above :data:`MAX_REQUESTS_PER_HOUR` requests an hour or above
        :data:`MAX_TOKENS_PER_REQUEST` tokens per request of its hour, more throttled requests
        than requests, or the same hour twice for one model, tier (and tenant): rows are never
        summed silently.
    """
    path = Path(path)
    try:
        df = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not a readable CSV ({str(exc).strip().splitlines()[0]})") from None
    return _checked_hourly(df, str(path))


def _checked_hourly(df: pd.DataFrame, path: str) -> pd.DataFrame:
    """The checks of :func:`read_token_csv` on a frame read from ``path`` (a copy, times parsed);
    line numbers count the header as line 1, as in the file."""
    missing = [c for c in HOURLY_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; expected {list(HOURLY_COLUMNS)}")
    if df.empty:
        raise ValueError(f"{path}: no rows")
    df = df.reset_index(drop=True).copy()
    raw = df["period_start"]
    t = pd.to_datetime(raw.astype("string"), utc=True, errors="coerce", format="ISO8601")
    bad = t.isna().to_numpy()
    if bad.any():
        raise ValueError(f"{path}: column 'period_start' at {_lines(bad)}: {raw[bad].iloc[0]!r} is not an ISO-8601 "
                         "time such as 2026-01-05T14:00:00Z")
    off = (t != t.dt.floor("h")).to_numpy()
    if off.any():
        raise ValueError(f"{path}: column 'period_start' at {_lines(off)}: {raw[off].iloc[0]!r} is not on the hour; "
                         "each row sums one whole UTC hour")
    df["period_start"] = t
    for c in ("model", "tier"):
        empty = (df[c].isna() | (df[c].astype("string").str.strip() == "")).to_numpy()
        if empty.any():
            raise ValueError(f"{path}: column {c!r} is empty at {_lines(empty)}")
        df[c] = df[c].astype(str)
    for c in HOURLY_COLUMNS[3:]:
        if not pd.api.types.is_numeric_dtype(df[c]) or pd.api.types.is_bool_dtype(df[c]):
            v = pd.to_numeric(df[c], errors="coerce")
            nonnum = (v.isna() & df[c].notna()).to_numpy()
            raise ValueError(f"{path}: column {c!r} is not numeric"
                             + (f" at {_lines(nonnum)} ({df[c][nonnum].iloc[0]!r})" if nonnum.any() else ""))
        v = df[c].to_numpy(dtype=float)
        for mask, why in ((np.isnan(v), "empty"), (~np.isfinite(v) & ~np.isnan(v), "infinite"),
                          (v < 0, "negative")):
            if mask.any():
                raise ValueError(f"{path}: column {c!r} is {why} at {_lines(mask)}")
    req = df["requests"].to_numpy(dtype=float)
    over = req > MAX_REQUESTS_PER_HOUR
    if over.any():
        raise ValueError(f"{path}: column 'requests' at {_lines(over)}: {req[over][0]:.4g} requests in an hour, above "
                         f"the ceiling of {MAX_REQUESTS_PER_HOUR:,} an hour (about {MAX_REQUESTS_PER_HOUR / 3600:,.0f} "
                         "a second); check the file's units")
    thr = df["throttled"].to_numpy(dtype=float) > req
    if thr.any():
        raise ValueError(f"{path}: column 'throttled' at {_lines(thr)}: more throttled requests than requests in "
                         "the hour")
    for c in ("input_tokens", "output_tokens"):
        v = df[c].to_numpy(dtype=float)
        over = v > req * MAX_TOKENS_PER_REQUEST
        if over.any():
            i = int(np.argmax(over))
            raise ValueError(f"{path}: column {c!r} at {_lines(over)}: {v[i]:.4g} tokens from {req[i]:.0f} request(s), "
                             f"more than {MAX_TOKENS_PER_REQUEST:,} tokens per request; check the file's units")
    keys = ["period_start", "model", "tier"] + (["tenant"] if "tenant" in df.columns else [])
    dup = df.duplicated(keys, keep=False).to_numpy()
    if dup.any():
        first = df[dup].iloc[0]
        same = (df[keys] == first[keys]).all(axis=1).to_numpy()
        what = ", ".join(f"{k} {first[k]!r}" if k != "period_start" else f"hour {first[k]:%Y-%m-%dT%H:%MZ}"
                         for k in keys)
        raise ValueError(f"{path}: {int(dup.sum())} rows repeat an hour: {_lines(same)} are all {what}; each "
                         f"({', '.join(keys)}) must appear once (rows are not summed: remove the repeats, or give "
                         "each its own tenant)")
    return df


def read_history(history) -> tuple[pd.DataFrame, str]:
    """An hourly history as the plan reads it: one row per hour, model and tier, and its name.

    Parameters
    ----------
    history : str, pathlib.Path or pandas.DataFrame
        A CSV in the hourly layout (:func:`read_token_csv`) or such a frame; other columns (such
        as ``tenant``) are summed over.

    Returns
    -------
    tuple
        ``(frame, name)``: the hourly sums (:data:`HOURLY_COLUMNS`) and the history's name.
    """
    if isinstance(history, (str, Path)):
        if not Path(history).is_file():
            raise FileNotFoundError(f"history {history}: no such file")
        frame, where = read_token_csv(history), str(history)
    elif isinstance(history, pd.DataFrame):
        frame, where = _checked_hourly(history, "history"), "hourly history"
    else:
        raise ValueError(f"history must be a path to an hourly CSV or a pandas DataFrame, got {type(history).__name__}")
    if frame.empty:
        raise ValueError(f"history {where}: no rows")
    sums = list(HOURLY_COLUMNS[3:])
    hourly = frame.groupby(["period_start", "model", "tier"], as_index=False, sort=True)[sums].sum()
    return hourly, where
