"""Request logs: one canonical schema, adapters for public traces, validation, statistics.

A *request log* has one row per request that reached the gateway, served or not. Every reader
in this module maps its source onto the canonical columns

====================== ============================ ==========================================
column                 type                         meaning
====================== ============================ ==========================================
``arrival_time``       datetime64[ns, UTC]          when the request arrived at the gateway
``input_tokens``       int64                        prompt tokens (tokens)
``output_tokens``      int64                        generated tokens (tokens)
``model``              str                          model the caller asked for
``tier``               str                          service tier (interactive, batch, ...)
``status``             str                          served, throttled or failed
``first_token_time``   datetime64[ns, UTC], opt.    when the first output token left the server
``end_time``           datetime64[ns, UTC], opt.    when the last output token left the server
``tenant``             str, optional                the calling team or key
====================== ============================ ==========================================

The data stay in the source file: :func:`read_requests` runs one streaming DuckDB pass that
validates every row and aggregates hourly sums at the same time, and every later statistic is
another DuckDB query over the file. A log of tens of millions of rows is therefore summarised
with bounded memory; pandas only ever sees the small results (and :meth:`RequestLog.to_pandas`
for logs that fit in memory).

Validation never drops a row silently. A missing column, an unparseable timestamp, a token
count that is missing, negative, fractional or NaN, an unknown status, rows out of arrival
order, duplicated rows or an empty file raise :class:`ValueError` naming the file, the column,
the reason and the first offending rows. With ``drop_invalid=True`` bad rows are dropped and
counted in :attr:`RequestLog.report` (and a warning says how many and why); with ``sort=True``
rows out of order are accepted and sorted. A sanity check on span and rate catches a time unit
read wrongly (milliseconds read as seconds). For Parquet files, a check that the file's own
column statistics rule out (no nulls in a column, no negative minimum) is skipped.
"""
from __future__ import annotations

import math
import os
import re
import threading
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Sequence

import duckdb
import numpy as np
import pandas as pd

__all__ = [
    "CANONICAL_COLUMNS",
    "FORMATS",
    "STATUSES",
    "Mapping",
    "RequestLog",
    "ReplayArrays",
    "detect_format",
    "load_sample_requests",
    "read_requests",
    "sample_requests_path",
]

#: The canonical columns, in order (the last three are optional).
CANONICAL_COLUMNS = (
    "arrival_time",
    "input_tokens",
    "output_tokens",
    "model",
    "tier",
    "status",
    "first_token_time",
    "end_time",
    "tenant",
)
#: Allowed values of ``status``.
STATUSES = ("served", "throttled", "failed")
#: Names accepted by the ``format`` argument of :func:`read_requests`.
FORMATS = ("auto", "canonical", "azure2023", "azure2024", "burstgpt", "mooncake", "litellm")

_US_PER_UNIT = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": 0.001}
_US_PER_S = 1_000_000
_US_PER_H = 3_600_000_000
_FIRST_ROWS = 5  # offending rows quoted in an error message

# sanity limits of the span/rate check (see RequestLog._check_units)
_MAX_SPAN_DAYS = 400.0
_SLOW_SPAN_DAYS = 7.0
_SLOW_RATE = 1 / 200  # requests per second (18 per hour)
_FAST_RATE = 20_000.0  # requests per second
_EARLIEST = pd.Timestamp("1970-01-01", tz="UTC")
_LATEST = pd.Timestamp("2100-01-01", tz="UTC")


# --------------------------------------------------------------------------------------------
# the mapping from a source file's columns to the canonical ones
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Mapping:
    """Which column of a source file holds which canonical field, and how to read times.

    Write one in a few lines for your own gateway log::

        Mapping(arrival_time="ts", input_tokens="prompt", output_tokens="completion",
                model="model", time_unit="ms")

    Parameters
    ----------
    arrival_time, input_tokens, output_tokens : str
        Source column names (matched exactly, never by position).
    model, tier, tenant : str or tuple of str, optional
        Source columns. A tuple means "the first non-empty of these columns". When ``model``
        is None every row gets ``default_model`` (or the file's stem); when ``tier`` is None
        every row gets ``default_tier``.
    status : str, optional
        Source column of the outcome. Its values are translated through ``status_values``
        (raw value -> ``served``/``throttled``/``failed``); without ``status_values`` the
        values must already be canonical (case and surrounding blanks ignored). Without a
        status column every row is ``served`` unless ``failed_if_zero_output``.
    first_token_time, end_time : str, optional
        Source columns, read like ``arrival_time``. Empty values are allowed (a throttled
        request has no first token).
    duration : str, optional
        Source column of the end-to-end time in seconds; sets ``end_time = arrival_time +
        duration`` when ``end_time`` is None.
    time_unit : {"datetime", "s", "ms", "us", "ns"}
        ``"datetime"``: times are date-time strings (ISO 8601; no zone means UTC) or typed
        timestamps. Otherwise times are numbers in that unit counted from ``epoch``.
    time_format : str, optional
        strptime format for date-time strings that are not ISO 8601, e.g. ``"%d/%m/%Y %H:%M:%S"``.
    epoch : str
        Time zero (UTC) of numeric times. The default, 1970-01-01, reads Unix times; a trace
        whose times count from its own start gets dates in January 1970 unless you pass the
        real start.
    default_model, default_tier : str, optional
        Values used when there is no model or tier column.
    failed_if_zero_output : bool
        Mark rows with zero output tokens as ``failed`` (BurstGPT's convention).
    optional : tuple of str
        Canonical fields whose source column may be absent from the file.
    name : str
        Label of the mapping (the format name for the built-in ones).
    """

    arrival_time: str
    input_tokens: str
    output_tokens: str
    model: str | tuple[str, ...] | None = None
    tier: str | tuple[str, ...] | None = None
    status: str | None = None
    first_token_time: str | None = None
    end_time: str | None = None
    tenant: str | tuple[str, ...] | None = None
    duration: str | None = None
    time_unit: str = "datetime"
    time_format: str | None = None
    epoch: str = "1970-01-01 00:00:00"
    default_model: str | None = None
    default_tier: str = "interactive"
    status_values: dict[str, str] | None = None
    failed_if_zero_output: bool = False
    optional: tuple[str, ...] = ()
    name: str = "custom"

    def __post_init__(self) -> None:
        if self.time_unit not in ("datetime", *_US_PER_UNIT):
            raise ValueError(
                f"Mapping.time_unit={self.time_unit!r}: use 'datetime', 's', 'ms', 'us' or 'ns'"
            )
        for f in ("arrival_time", "input_tokens", "output_tokens"):
            if not isinstance(getattr(self, f), str) or not getattr(self, f):
                raise ValueError(f"Mapping.{f} must name a source column (a non-empty string)")
        if self.status_values is not None:
            bad = {k: v for k, v in self.status_values.items() if v not in STATUSES}
            if bad:
                raise ValueError(
                    f"Mapping.status_values maps to {sorted(set(bad.values()))}; "
                    f"canonical statuses are {STATUSES}"
                )
        try:
            pd.Timestamp(self.epoch)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"Mapping.epoch={self.epoch!r} is not a date-time: {exc}") from None

    def columns(self) -> dict[str, tuple[str, ...]]:
        """Canonical field -> source column names it reads (only the fields that are mapped)."""
        out: dict[str, tuple[str, ...]] = {}
        for f in ("arrival_time", "input_tokens", "output_tokens", "model", "tier", "status",
                  "first_token_time", "end_time", "tenant", "duration"):
            v = getattr(self, f)
            if v is None:
                continue
            out[f] = (v,) if isinstance(v, str) else tuple(v)
        return out


_BUILTIN: dict[str, Mapping] = {
    "canonical": Mapping(
        arrival_time="arrival_time", input_tokens="input_tokens", output_tokens="output_tokens",
        model="model", tier="tier", status="status", first_token_time="first_token_time",
        end_time="end_time", tenant="tenant",
        optional=("first_token_time", "end_time", "tenant"), name="canonical",
    ),
    # Azure LLM inference trace 2023: TIMESTAMP has 7 fractional digits and no zone (UTC).
    "azure2023": Mapping(
        arrival_time="TIMESTAMP", input_tokens="ContextTokens", output_tokens="GeneratedTokens",
        name="azure2023",
    ),
    # Azure 2024 week-long variant: same columns, timestamps with "+00:00" (fraction optional).
    "azure2024": Mapping(
        arrival_time="TIMESTAMP", input_tokens="ContextTokens", output_tokens="GeneratedTokens",
        name="azure2024",
    ),
    # BurstGPT: seconds from 00:00 of the trace's first day; release 3 adds Session ID and
    # Elapsed time (end-to-end seconds). Zero response tokens marks a failed request.
    "burstgpt": Mapping(
        arrival_time="Timestamp", input_tokens="Request tokens", output_tokens="Response tokens",
        model="Model", duration="Elapsed time", time_unit="s", failed_if_zero_output=True,
        optional=("duration",), name="burstgpt",
    ),
    # Mooncake FAST'25: timestamp in milliseconds from the trace start.
    "mooncake": Mapping(
        arrival_time="timestamp", input_tokens="input_length", output_tokens="output_length",
        time_unit="ms", name="mooncake",
    ),
    # LiteLLM spend logs exported to CSV/Parquet.
    "litellm": Mapping(
        arrival_time="startTime", input_tokens="prompt_tokens", output_tokens="completion_tokens",
        model=("model_group", "model"), status="status", first_token_time="completionStartTime",
        end_time="endTime", tenant=("team_id", "user"),
        status_values={"success": "served", "failure": "failed"},
        optional=("status", "first_token_time", "end_time", "tenant"), name="litellm",
    ),
}

_SIGNATURES = [  # (format, columns that identify it), most specific first
    ("canonical", {"arrival_time", "input_tokens", "output_tokens"}),
    ("azure", {"TIMESTAMP", "ContextTokens", "GeneratedTokens"}),
    ("burstgpt", {"Timestamp", "Request tokens", "Response tokens"}),
    ("mooncake", {"timestamp", "input_length", "output_length"}),
    ("litellm", {"startTime", "prompt_tokens", "completion_tokens"}),
]


# --------------------------------------------------------------------------------------------
# SQL helpers
# --------------------------------------------------------------------------------------------
def _q(name: str) -> str:
    """Quote an identifier for DuckDB."""
    return '"' + name.replace('"', '""') + '"'


def _lit(value: str) -> str:
    """Quote a string literal for DuckDB."""
    return "'" + str(value).replace("'", "''") + "'"


def _file_kind(path: str) -> str:
    p = path.lower()
    for suffix in (".gz", ".zst", ".zstd"):
        if p.endswith(suffix):
            p = p[: -len(suffix)]
    if p.endswith((".parquet", ".pq")):
        return "parquet"
    if p.endswith((".jsonl", ".json", ".ndjson")):
        return "json"
    if p.endswith((".csv", ".tsv", ".txt")):
        return "csv"
    raise ValueError(
        f"{path}: cannot tell the file type from the name; use a .csv, .tsv, .parquet or "
        ".jsonl file (optionally .gz)"
    )


def _connect(threads: int | None = None, memory_limit: str | None = None) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(":memory:")
    con.execute("SET TimeZone='UTC'")
    con.execute("SET enable_progress_bar_print=false")  # capbook shows its own (tqdm) bar
    if threads:
        con.execute(f"SET threads={int(threads)}")
    if memory_limit:
        con.execute(f"SET memory_limit={_lit(memory_limit)}")
    return con


def _source_sql(con: duckdb.DuckDBPyConnection, path: str) -> tuple[str, dict[str, str]]:
    """SQL table function reading ``path`` leniently, and the column -> type of its columns."""
    kind = _file_kind(path)
    lp = _lit(path)
    if kind == "csv":
        sql = f"read_csv({lp}, header=true, all_varchar=true)"
    elif kind == "parquet":
        sql = f"read_parquet({lp})"
    else:
        # sniff the keys, then read every key as text so that a bad value cannot abort the read
        try:
            desc = con.execute(
                f"DESCRIBE SELECT * FROM read_json({lp}, format='newline_delimited')"
            ).fetchall()
        except duckdb.Error as exc:
            raise ValueError(f"{path}: cannot read as JSON lines: {exc}") from None
        cols = ", ".join(f"{_lit(r[0])}: 'VARCHAR'" for r in desc)
        sql = f"read_json({lp}, format='newline_delimited', columns={{{cols}}})"
    try:
        desc = con.execute(f"DESCRIBE SELECT * FROM {sql}").fetchall()
    except duckdb.Error as exc:
        msg = str(exc)
        if "No files found" in msg or "does not exist" in msg:
            raise FileNotFoundError(f"{path}: no such file") from None
        if kind == "csv" and os.path.isfile(path) and os.path.getsize(path) == 0:
            raise ValueError(f"{path}: the file is empty (no header, no rows)") from None
        raise ValueError(f"{path}: cannot read as {kind}: {msg.splitlines()[0]}") from None
    if kind == "csv" and len(desc) == 1 and any(d in desc[0][0] for d in (",", ";", "\t", "|")):
        raise ValueError(
            f"{path}: the CSV reader could not split the header {desc[0][0]!r} into columns; a row "
            "near the top probably has a different number of fields than the header")
    return sql, {r[0]: r[1] for r in desc}


def _parquet_stats(con: duckdb.DuckDBPyConnection, sql: str, path: str) -> dict[str, dict]:
    """Per-column null count, numeric min and text min over every row group of a Parquet file
    (only for columns whose statistics are present in every row group)."""
    if not sql.startswith("read_parquet("):
        return {}
    try:
        rows = con.execute(
            "SELECT path_in_schema, count(*) = count(stats_null_count), sum(stats_null_count), "
            "min(TRY_CAST(stats_min_value AS DOUBLE)), count(*) = count(stats_min_value), "
            f"min(stats_min_value) FROM parquet_metadata({_lit(path)}) GROUP BY 1"
        ).fetchall()
    except duckdb.Error:
        return {}
    return {r[0]: {"nulls": int(r[2]) if r[1] else None, "min_num": r[3] if r[4] else None,
                   "min_text": r[5] if r[4] else None} for r in rows}


def detect_format(path: str | os.PathLike) -> str:
    """Name the format of a request log from its column names.

    Parameters
    ----------
    path : str or path-like
        CSV, Parquet or JSON-lines file.

    Returns
    -------
    str
        One of ``canonical``, ``azure2023``, ``azure2024``, ``burstgpt``, ``mooncake``,
        ``litellm``.
    """
    path = os.fspath(path)
    con = _connect()
    sql, cols = _source_sql(con, path)
    return _detect(con, path, sql, cols)


def _detect(con, path: str, sql: str, cols: dict[str, str]) -> str:
    names = set(cols)
    for fmt, sig in _SIGNATURES:
        if sig <= names:
            if fmt != "azure":
                return fmt
            first = con.execute(
                f"SELECT CAST({_q('TIMESTAMP')} AS VARCHAR) FROM {sql} "
                f"WHERE {_q('TIMESTAMP')} IS NOT NULL LIMIT 1"
            ).fetchone()
            v = first[0] if first else ""
            return "azure2024" if re.search(r"(\+|-)\d\d:?\d\d$|Z$", v or "") else "azure2023"
    raise ValueError(
        f"{path}: cannot recognise the format from its columns {sorted(names)}; pass "
        f"format= one of {FORMATS[1:]} or a capbook.traces.Mapping naming your columns"
    )


# --------------------------------------------------------------------------------------------
# building the per-row expressions
# --------------------------------------------------------------------------------------------
@dataclass
class _Check:
    field: str  # canonical field
    column: str  # source column(s), for the message
    reason: str
    cond: str  # SQL boolean: the row has this problem
    shown: str  # SQL expression of the offending raw value


@dataclass
class _Plan:
    exprs: dict[str, str]  # canonical field -> SQL expression (valid rows)
    checks: list[_Check]
    raw_cols: list[str]
    optional_present: list[str] = field(default_factory=list)
    throttled: str = "false"  # SQL boolean on the raw status column: the row is throttled
    zero_output_fails: bool = False  # rows with zero output tokens are failed, not throttled
    label_cols: list[str] = field(default_factory=list)  # raw columns of model, tier, status

    def ok(self, which: str = "all") -> str:
        """SQL boolean: the row has none of the problems (NULL-safe; a NULL condition only
        arises where a 'missing' or 'unparseable' condition of the same row is true).

        ``which``: ``"all"``, ``"row"`` (checks on times and tokens) or ``"label"`` (checks on
        model, tier and status, which depend only on the label columns)."""
        checks = [c for c in self.checks
                  if which == "all" or (which == "label") == (c.field in _LABEL_FIELDS)]
        if not checks:
            return "true"
        return "NOT COALESCE(" + " OR ".join(f"({c.cond})" for c in checks) + ", false)"


_LABEL_FIELDS = ("model", "tier", "status")


_INT_TYPES = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
              "UINTEGER", "UBIGINT", "UHUGEINT"}


def _time_expr(col: str, ctype: str, m: Mapping) -> tuple[str, list[tuple[str, str]]]:
    """Expression for microseconds since the Unix epoch, and (reason, condition) problems."""
    c = _q(col)
    if ctype.startswith("TIMESTAMP") or ctype == "DATE":
        expr = f"epoch_us(CAST({c} AS TIMESTAMP))" if ctype == "DATE" else f"epoch_us({c})"
        return expr, [("missing timestamp", f"{c} IS NULL")]
    if m.time_unit == "datetime":
        if ctype in _INT_TYPES or ctype in ("DOUBLE", "FLOAT") or ctype.startswith("DECIMAL"):
            raise ValueError(
                f"column {col!r} holds numbers ({ctype}) but the mapping reads it as date-times; "
                "set Mapping.time_unit to 's', 'ms', 'us' or 'ns'"
            )
        txt = f"NULLIF(TRIM(CAST({c} AS VARCHAR)), '')"
        if m.time_format:
            parsed = f"try_strptime({txt}, {_lit(m.time_format)})"
        else:
            parsed = f"TRY_CAST({txt} AS TIMESTAMPTZ)"
        expr = f"epoch_us({parsed})"
        return expr, [
            ("missing timestamp", f"{txt} IS NULL"),
            ("unparseable timestamp", f"{txt} IS NOT NULL AND {parsed} IS NULL"),
        ]
    ep = pd.Timestamp(m.epoch)
    ep = ep.tz_localize("UTC") if ep.tzinfo is None else ep.tz_convert("UTC")
    epoch_us = int(ep.value // 1000)
    f = _US_PER_UNIT[m.time_unit]
    if ctype in _INT_TYPES:
        num = f"CAST({c} AS DOUBLE)"
        probs = [("missing timestamp", f"{c} IS NULL")]
    else:
        txt = f"NULLIF(TRIM(CAST({c} AS VARCHAR)), '')"
        num = f"TRY_CAST({txt} AS DOUBLE)"
        probs = [
            ("missing timestamp", f"{txt} IS NULL"),
            ("unparseable timestamp",
             f"{txt} IS NOT NULL AND ({num} IS NULL OR isnan({num}) OR isinf({num}))"),
        ]
    expr = f"TRY_CAST({epoch_us} + round({num} * {f!r}) AS BIGINT)"
    return expr, probs


def _token_expr(col: str, ctype: str) -> tuple[str, list[tuple[str, str]]]:
    c = _q(col)
    if ctype in _INT_TYPES:
        return f"CAST({c} AS BIGINT)", [
            ("missing token count", f"{c} IS NULL"),
            ("negative token count", f"{c} < 0"),
        ]
    if ctype in ("DOUBLE", "FLOAT") or ctype.startswith("DECIMAL"):
        num = f"CAST({c} AS DOUBLE)"
        missing = f"{c} IS NULL"
        probs = [("missing token count", missing)]
    else:
        txt = f"NULLIF(TRIM(CAST({c} AS VARCHAR)), '')"
        num = f"TRY_CAST({txt} AS DOUBLE)"
        missing = f"{txt} IS NULL"
        probs = [
            ("missing token count", missing),
            ("unparseable token count", f"{txt} IS NOT NULL AND {num} IS NULL "
                                        f"AND lower({txt}) NOT IN ('nan', '+nan', '-nan')"),
        ]
    probs += [
        ("NaN token count", f"isnan({num})"),
        ("infinite token count", f"isinf({num})"),
        ("negative token count", f"{num} < 0"),
        ("fractional token count", f"NOT isnan({num}) AND NOT isinf({num}) AND {num} <> floor({num})"),
    ]
    return f"TRY_CAST({num} AS BIGINT)", probs


def _text_expr(cols: tuple[str, ...], types: dict[str, str]) -> str:
    """Label expression: the column itself (empty text counts as missing); a tuple coalesces."""
    parts = []
    for c in cols:
        v = _q(c) if types.get(c) == "VARCHAR" else f"CAST({_q(c)} AS VARCHAR)"
        parts.append(v if len(cols) == 1 else f"NULLIF({v}, '')")
    return parts[0] if len(parts) == 1 else f"COALESCE({', '.join(parts)})"


def _impossible(cols: dict[str, str], stats: dict[str, dict]) -> set[str]:
    """Check conditions that a Parquet file's own column statistics prove false everywhere."""
    out: set[str] = set()
    for col, st in stats.items():
        if col not in cols:
            continue
        c = _q(col)
        if st["nulls"] == 0:
            out.add(f"{c} IS NULL")
            if cols[col] == "VARCHAR" and st["min_text"]:  # no null and no empty string
                out.add(f"({c} IS NULL OR {c} = '')")
        if cols[col] in _INT_TYPES and st["min_num"] is not None and st["min_num"] >= 0:
            out.add(f"{c} < 0")
    return out


def _plan(path: str, cols: dict[str, str], m: Mapping, stats: dict[str, dict] | None = None) -> _Plan:
    wanted = m.columns()
    missing = []
    present: dict[str, tuple[str, ...]] = {}
    for fld, srcs in wanted.items():
        have = tuple(s for s in srcs if s in cols)
        if not have:
            if fld not in m.optional:
                missing.append((fld, srcs))
            continue
        present[fld] = have
    if missing:
        desc = "; ".join(f"{f} <- {' or '.join(repr(s) for s in srcs)}" for f, srcs in missing)
        raise ValueError(
            f"{path}: missing column(s) for the {m.name!r} format: {desc}. "
            f"The file has columns {list(cols)}"
        )
    exprs: dict[str, str] = {}
    checks: list[_Check] = []

    def add(fld: str, colname: str, probs: list[tuple[str, str]], shown: str) -> None:
        for reason, cond in probs:
            checks.append(_Check(fld, colname, reason, cond, shown))

    # times
    col = present["arrival_time"][0]
    e, probs = _time_expr(col, cols[col], m)
    exprs["t"] = e
    add("arrival_time", col, probs, _q(col))
    for fld in ("first_token_time", "end_time"):
        if fld in present:
            col = present[fld][0]
            e, probs = _time_expr(col, cols[col], m)
            exprs[fld] = e
            # an empty value is allowed here; an unparseable one is not
            add(fld, col, [p for p in probs if not p[0].startswith("missing")], _q(col))
    if "end_time" not in present and "duration" in present:
        col = present["duration"][0]
        txt = f"NULLIF(TRIM(CAST({_q(col)} AS VARCHAR)), '')"
        num = f"TRY_CAST({txt} AS DOUBLE)"
        exprs["end_time"] = f"({exprs['t']} + TRY_CAST(round({num} * 1e6) AS BIGINT))"
        add("end_time", col, [
            ("unparseable duration", f"{txt} IS NOT NULL AND ({num} IS NULL OR isnan({num}))"),
            ("negative duration", f"{num} < 0"),
        ], _q(col))
    # tokens
    for fld in ("input_tokens", "output_tokens"):
        col = present[fld][0]
        e, probs = _token_expr(col, cols[col])
        exprs[fld] = e
        add(fld, col, probs, _q(col))
    # labels (used exactly as written: "Batch" and "batch" are two tiers)
    stem = Path(path).name.split(".")[0] or "model"
    for fld, default in (("model", m.default_model or stem), ("tier", m.default_tier)):
        if fld in present:
            e = _text_expr(present[fld], cols)
            exprs[fld] = e
            add(fld, "/".join(present[fld]), [(f"missing {fld}", f"({e} IS NULL OR {e} = '')")], e)
        else:
            exprs[fld] = _lit(default)
    if "tenant" in present:
        e = _text_expr(present["tenant"], cols)
        exprs["tenant"] = f"NULLIF({e}, '')"
    # status (values matched exactly)
    if "status" in present:
        col = present["status"][0]
        raw = _q(col) if cols[col] == "VARCHAR" else f"CAST({_q(col)} AS VARCHAR)"
        if m.status_values is not None:
            cases = " ".join(f"WHEN {_lit(k)} THEN {_lit(v)}" for k, v in m.status_values.items())
            e = f"(CASE {raw} {cases} ELSE NULL END)"
            allowed = list(m.status_values)
            thr = [k for k, v in m.status_values.items() if v == "throttled"]
        else:
            e = raw  # valid rows hold a canonical value
            allowed = list(STATUSES)
            thr = ["throttled"]
        throttled = f"{raw} IN ({', '.join(_lit(k) for k in thr)})" if thr else "false"
        if m.failed_if_zero_output:
            e = f"(CASE WHEN {exprs['output_tokens']} = 0 THEN 'failed' ELSE {e} END)"
        exprs["status"] = e
        add("status", col, [
            ("missing status", f"({raw} IS NULL OR {raw} = '')"),
            (f"unknown status (allowed: {', '.join(allowed)})",
             f"({raw} <> '' AND {raw} NOT IN ({', '.join(_lit(k) for k in allowed)}))"),
        ], raw)
    elif m.failed_if_zero_output:
        exprs["status"] = f"(CASE WHEN {exprs['output_tokens']} = 0 THEN 'failed' ELSE 'served' END)"
        throttled = "false"
    else:
        exprs["status"] = "'served'"
        throttled = "false"
    opt = [f for f in ("first_token_time", "end_time", "tenant") if f in exprs]
    if stats:
        gone = _impossible(cols, stats)
        checks = [ch for ch in checks if ch.cond not in gone]
    label_cols = [c for f in _LABEL_FIELDS for c in present.get(f, ())]
    return _Plan(exprs, checks, list(cols), opt, throttled, m.failed_if_zero_output,
                 list(dict.fromkeys(label_cols)))


# --------------------------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReplayArrays:
    """A request log as numpy arrays, sorted by arrival, for replay in a simulator.

    Attributes
    ----------
    arrival_s : ndarray of float64
        Arrival times in seconds after ``start`` (the first arrival is 0).
    input_tokens, output_tokens : ndarray of int64
        Tokens per request.
    model, tier, status : ndarray of str (object)
        Labels per request.
    start : pandas.Timestamp
        UTC time of the first arrival.
    """

    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    model: np.ndarray
    tier: np.ndarray
    status: np.ndarray
    start: pd.Timestamp

    def __len__(self) -> int:
        return len(self.arrival_s)


def _fetch_df(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence | None = None) -> pd.DataFrame:
    rel = con.execute(sql, params) if params else con.execute(sql)
    fetch = getattr(rel, "to_arrow_table", None) or rel.fetch_arrow_table
    return fetch().to_pandas()


def _utc(us: Any) -> pd.Timestamp:
    return pd.Timestamp(int(us), unit="us", tz="UTC")


class RequestLog:
    """A validated request log, read through DuckDB (create it with :func:`read_requests`).

    Attributes
    ----------
    path : str
        The source file.
    format : str
        The format or mapping name it was read with.
    rows : int
        Rows kept (after any drop).
    rows_read : int
        Data rows in the file.
    start, end : pandas.Timestamp
        First and last arrival (UTC).
    report : list of dict
        One entry per problem found and handled (dropped rows, rows sorted), with keys
        ``column``, ``reason``, ``rows``, ``first_rows``, ``action``. Empty for a clean file.
    columns : tuple of str
        Canonical columns present.
    """

    def __init__(self, *_: Any, **__: Any) -> None:  # pragma: no cover - use read_requests
        raise TypeError("create a RequestLog with capbook.traces.read_requests(path, ...)")

    # ---- construction (called by read_requests) -------------------------------------------
    @classmethod
    def _open(
        cls,
        path: str,
        mapping: Mapping,
        fmt_name: str,
        *,
        drop_invalid: bool,
        sort: bool,
        check_units: bool,
        progress: bool,
        con: duckdb.DuckDBPyConnection,
        source_sql: str,
        cols: dict[str, str],
    ) -> "RequestLog":
        self = object.__new__(cls)
        self.path = path
        self.format = fmt_name
        self.mapping = mapping
        self._con = con
        self._lock = threading.Lock()
        self._src = source_sql
        plan = _plan(path, cols, mapping, _parquet_stats(con, source_sql, path))
        self._plan = plan
        self.columns = tuple(
            c for c in CANONICAL_COLUMNS
            if c in ("arrival_time", "input_tokens", "output_tokens", "model", "tier", "status")
            or c in plan.optional_present
        )
        self.report: list[dict] = []
        self._validate(drop_invalid=drop_invalid, sort=sort, progress=progress)
        if check_units:
            self._check_units()
        return self

    def _row_sql(self, numbered: bool = False, flags: bool = True, rowhash: bool = False,
                 ok: bool = False) -> str:
        """SQL of every source row: canonical expressions, per-problem flags, optional extras."""
        p = self._plan
        e = p.exprs
        sel = [f"{e['t']} AS t", f"{e['input_tokens']} AS i", f"{e['output_tokens']} AS o",
               f"{e['model']} AS model", f"{e['tier']} AS tier", f"{e['status']} AS status"]
        for fld in ("first_token_time", "end_time"):
            sel.append(f"{e[fld]} AS {fld}" if fld in e else f"NULL::BIGINT AS {fld}")
        sel.append(f"{e['tenant']} AS tenant" if "tenant" in e else "NULL::VARCHAR AS tenant")
        if flags:
            for k, ch in enumerate(p.checks):
                sel.append(f"COALESCE({ch.cond}, false) AS bad{k}")
        if ok:
            sel.append(f"{p.ok()} AS ok")
        if rowhash:
            sel.append(f"hash({', '.join(_q(c) for c in p.raw_cols)}) AS rowhash")
        if numbered:
            sel.append("row_number() OVER () AS rn")
        return f"SELECT {', '.join(sel)} FROM {self._src}"

    def _validate(self, *, drop_invalid: bool, sort: bool, progress: bool) -> None:
        p = self._plan
        nchk = len(p.checks)
        valid = "ok"  # with _row_sql(ok=True)
        # pass A (parallel): hourly sums per model and tier of valid rows, and the number of
        # invalid rows; only when there are some, a second pass counts each problem.
        labels = "".join(f", {_q(c)}" for c in p.label_cols)
        row_ok = p.ok("row")
        nbad = f', count(*) FILTER (WHERE NOT "__ok") AS "__nbad"' if row_ok != "true" else ', 0 AS "__nbad"'
        nzero = (', count(*) FILTER (WHERE "__o" = 0) AS "__nzero"' if p.zero_output_fails
                 else ', 0 AS "__nzero"')
        # grouped by hour and the raw label columns: the checks on labels and the status run on
        # the few groups afterwards, not on every row
        sql_a = f"""
        SELECT "__t" // {_US_PER_H} AS "__h"{labels}, count(*) AS "__n"{nbad}{nzero},
               sum("__i") AS "__si", sum("__o") AS "__so", min("__t") AS "__tmin",
               max("__t") AS "__tmax"
        FROM (SELECT {p.exprs['t']} AS "__t", {p.exprs['input_tokens']} AS "__i",
                     {p.exprs['output_tokens']} AS "__o", {row_ok} AS "__ok"{labels}
              FROM {self._src})
        GROUP BY ALL
        """
        # pass B (streaming, arrival time only): rows earlier than, or tied with, the row above
        sql_b = (f"SELECT t, t < pt AS unsorted FROM (SELECT t, lag(t) OVER () AS pt FROM "
                 f"(SELECT {p.exprs['t']} AS t FROM {self._src})) WHERE t <= pt")
        try:
            self._run([f"CREATE OR REPLACE TABLE pass1 AS {sql_a}",
                       f"CREATE OR REPLACE TABLE pass2 AS {sql_b}"], progress)
        except duckdb.Error as exc:  # a malformed file (e.g. a CSV row with extra fields)
            lines = [ln for ln in str(exc).splitlines() if ln.strip()][:3]
            raise ValueError(f"{self.path}: malformed file: " + " | ".join(lines)) from None
        label_ok = p.ok("label")
        tot = self._con.execute(
            f'SELECT sum("__n"), sum(CASE WHEN {label_ok} THEN "__n" - "__nbad" ELSE 0 END), '
            f'min("__tmin"), max("__tmax") FROM pass1').fetchone()
        n_all = int(tot[0] or 0)
        n_valid = int(tot[1] or 0)
        self.rows_read = n_all
        if n_all == 0:
            raise ValueError(f"{self.path}: the file has a header but no data rows (empty log)")
        problems = []
        if n_valid < n_all:
            counts = self._con.execute(
                "SELECT " + ", ".join(f"count(*) FILTER (WHERE bad{k})" for k in range(nchk))
                + f" FROM ({self._row_sql()})").fetchone()
            problems = [(ch, int(c), k) for k, (ch, c) in enumerate(zip(p.checks, counts)) if c]
        n_unsorted, n_ties = self._con.execute(
            "SELECT count(*) FILTER (WHERE unsorted), count(*) FILTER (WHERE NOT unsorted) "
            "FROM pass2").fetchone()
        n_unsorted, self._ties = int(n_unsorted), int(n_ties)
        # duplicates among valid rows: identical in every source column (so same arrival time).
        # In a sorted log they sit in runs of tied arrival times, which pass B listed.
        n_dup = 0
        if n_ties or n_unsorted:
            restrict = "" if n_unsorted else " AND t IN (SELECT t FROM pass2)"
            n_dup = int(self._con.execute(
                f"SELECT COALESCE(sum(c - 1), 0) FROM (SELECT count(*) AS c FROM "
                f"({self._row_sql(flags=False, rowhash=True, ok=True)}) WHERE {valid}{restrict} "
                f"GROUP BY t, rowhash HAVING count(*) > 1)").fetchone()[0])

        if not drop_invalid and (problems or n_dup):
            raise ValueError(self._problem_message(problems, n_dup, valid, n_all))
        if n_unsorted and not sort:
            first = self._first_unsorted()
            raise ValueError(
                f"{self.path}: column {self._plan_col('arrival_time')!r}: {n_unsorted} rows arrive "
                f"before the row above them (the log is not sorted by arrival time); first "
                f"offending data rows: {first}. Pass sort=True to accept and sort them."
            )
        for ch, cnt, k in problems:
            # a row with several problems is counted under each of them
            self.report.append({
                "column": ch.column, "field": ch.field, "reason": ch.reason, "rows": cnt,
                "first_rows": self._first_rows(k), "action": "dropped",
            })
        if n_dup:
            self.report.append({
                "column": "(all columns)", "field": "(row)", "reason": "duplicated row",
                "rows": n_dup, "first_rows": self._first_duplicates(valid),
                "action": "dropped (first copy kept)",
            })
        if n_unsorted:
            self.report.append({
                "column": self._plan_col("arrival_time"), "field": "arrival_time",
                "reason": "row earlier than the row above it", "rows": n_unsorted,
                "first_rows": self._first_unsorted(), "action": "kept; sorted by arrival",
            })
        self.rows = n_valid - n_dup
        self.dropped = n_all - self.rows
        if self.dropped or n_unsorted:
            lines = [f"{r['rows']} rows: {r['reason']} in {r['column']!r} -> {r['action']}"
                     for r in self.report]
            warnings.warn(
                f"{self.path}: {self.dropped} of {n_all} rows dropped "
                f"({n_all - n_valid} invalid, {n_dup} duplicates); " + "; ".join(lines),
                UserWarning, stacklevel=4,
            )
        if self.rows == 0:
            raise ValueError(f"{self.path}: no valid rows left after dropping invalid rows")
        self._sorted = n_unsorted == 0
        self._dedupe = n_dup > 0
        # pass1's sums cover every row: usable only when no row was dropped
        self._pass1_ok = not problems and not self._dedupe
        # the canonical view every statistic reads
        if self._dedupe:
            base = (f"SELECT * FROM ({self._row_sql(flags=False, rowhash=True, ok=True)}) WHERE {valid} "
                    f"QUALIFY row_number() OVER (PARTITION BY t, rowhash) = 1")
        elif problems:
            base = f"SELECT * FROM ({self._row_sql(flags=False, ok=True)}) WHERE {valid}"
        else:
            base = self._row_sql(flags=False)
        self._con.execute(
            f"CREATE OR REPLACE TEMP VIEW req AS SELECT t, i, o, model, tier, status, "
            f"first_token_time, end_time, tenant FROM ({base})"
        )
        if self._pass1_ok:
            self._t_min, self._t_max = int(tot[2]), int(tot[3])
        else:
            lo, hi = self._con.execute("SELECT min(t), max(t) FROM req").fetchone()
            self._t_min, self._t_max = int(lo), int(hi)
        self.start = _utc(self._t_min)
        self.end = _utc(self._t_max)

    def _plan_col(self, fld: str) -> str:
        return "/".join(self.mapping.columns().get(fld, (fld,)))

    def _run(self, sqls: list[str], progress: bool) -> None:
        """Run the statements concurrently, each on its own cursor of this log's database
        (the streaming pass is single-threaded, so it overlaps the parallel one)."""
        if progress:
            self._con.execute("SET enable_progress_bar=true")
        cursors = [self._con] + [self._con.cursor() for _ in sqls[1:]]
        err: list[BaseException] = []

        def work(cur: duckdb.DuckDBPyConnection, sql: str) -> None:
            try:
                cur.execute(sql)
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                err.append(exc)

        threads = [threading.Thread(target=work, args=(c, q)) for c, q in zip(cursors, sqls)]
        for th in threads:
            th.start()
        if progress:
            from tqdm.auto import tqdm

            with tqdm(total=100, desc=f"reading {Path(self.path).name}", unit="%", delay=1.0,
                      bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed}") as bar:
                while threads[0].is_alive():
                    threads[0].join(0.2)
                    try:
                        pct = self._con.query_progress()
                    except Exception:  # noqa: BLE001 - the bar is cosmetic
                        pct = -1
                    if pct is not None and pct >= 0:
                        bar.n = min(99.0, float(pct))
                        bar.refresh()
                for th in threads:
                    th.join()
                bar.n = 100
                bar.refresh()
        for th in threads:
            th.join()
        for cur in cursors[1:]:
            cur.close()
        if err:
            raise err[0]

    def _first_rows(self, k: int) -> list[tuple[int, str]]:
        """The first data rows (1-based) with problem ``k``, and their raw values."""
        ch = self._plan.checks[k]
        sql = (
            f"SELECT rn, CAST(v AS VARCHAR) FROM (SELECT row_number() OVER () AS rn, "
            f"COALESCE({ch.cond}, false) AS f, {ch.shown} AS v FROM {self._src}) WHERE f "
            f"ORDER BY rn LIMIT {_FIRST_ROWS}"
        )
        return [(int(r[0]), r[1]) for r in self._con.execute(sql).fetchall()]

    def _first_unsorted(self) -> list[int]:
        rows = self._con.execute(
            f"SELECT rn FROM (SELECT row_number() OVER () AS rn, t, lag(t) OVER () AS pt FROM "
            f"(SELECT {self._plan.exprs['t']} AS t FROM {self._src})) "
            f"WHERE t < pt ORDER BY rn LIMIT {_FIRST_ROWS}"
        ).fetchall()
        return [int(r[0]) for r in rows]

    def _first_duplicates(self, valid: str) -> list[int]:
        rows = self._con.execute(
            f"SELECT rn FROM (SELECT rn, row_number() OVER (PARTITION BY t, rowhash ORDER BY rn) AS k "
            f"FROM ({self._row_sql(numbered=True, flags=False, rowhash=True, ok=True)}) WHERE {valid}) "
            f"WHERE k > 1 ORDER BY rn LIMIT {_FIRST_ROWS}"
        ).fetchall()
        return [int(r[0]) for r in rows]

    def _problem_message(self, problems, n_dup: int, valid: str, n_all: int) -> str:
        lines = [f"{self.path}: invalid rows (of {n_all} data rows; row numbers count data rows "
                 f"from 1, not the header):"]
        for ch, cnt, k in problems:
            first = self._first_rows(k)
            shown = ", ".join(f"row {r} ({v!r})" for r, v in first)
            lines.append(f"  column {ch.column!r} ({ch.field}): {cnt} rows with {ch.reason}; "
                         f"first: {shown}")
        if n_dup:
            lines.append(f"  {n_dup} duplicated rows (identical to an earlier row in every column); "
                         f"first: rows {self._first_duplicates(valid)}")
        lines.append("Fix the file, or pass drop_invalid=True to drop these rows (they are counted "
                     "in RequestLog.report).")
        return "\n".join(lines)

    def _check_units(self) -> None:
        span_s = (self._t_max - self._t_min) / _US_PER_S
        unit = self.mapping.time_unit
        hint = (f"the {self._plan_col('arrival_time')!r} column was read as "
                f"{'date-times' if unit == 'datetime' else unit + ' from ' + self.mapping.epoch}")
        end_hint = ("; check the time unit of the mapping (or pass check_units=False if the "
                    "times are right)")
        if self.start < _EARLIEST or self.end >= _LATEST:
            raise ValueError(f"{self.path}: arrival times run from {self.start} to {self.end}, "
                             f"outside 1970-2100: {hint}{end_hint}")
        if span_s > _MAX_SPAN_DAYS * 86400:
            raise ValueError(f"{self.path}: the log spans {span_s / 86400:,.0f} days, implausible "
                             f"for a request log: {hint}{end_hint}")
        rate = self.rows / span_s if span_s > 0 else math.inf
        if span_s > _SLOW_SPAN_DAYS * 86400 and rate < _SLOW_RATE:
            raise ValueError(
                f"{self.path}: {self.rows} requests over {span_s / 86400:,.1f} days is "
                f"{rate * 3600:.2f} requests per hour: suspiciously slow, as if milliseconds were "
                f"read as seconds ({hint}){end_hint}")
        if self.rows >= 1000 and rate > _FAST_RATE:
            raise ValueError(
                f"{self.path}: {self.rows} requests in {span_s:.3g} s is {rate:,.0f} requests per "
                f"second: suspiciously fast, as if seconds were read as milliseconds "
                f"({hint}){end_hint}")

    # ---- basic accessors ---------------------------------------------------------------------
    def __len__(self) -> int:
        return self.rows

    def __repr__(self) -> str:
        return (f"RequestLog({self.path!r}, format={self.format!r}, rows={self.rows:,}, "
                f"{self.start} -> {self.end})")

    @property
    def span_s(self) -> float:
        """Seconds from the first to the last arrival."""
        return (self._t_max - self._t_min) / _US_PER_S

    @property
    def rate(self) -> float:
        """Mean arrival rate, rows / span, in requests per second (inf for a zero span)."""
        return self.rows / self.span_s if self.span_s > 0 else math.inf

    def _q(self, sql: str) -> pd.DataFrame:
        with self._lock:
            return _fetch_df(self._con, sql)

    def _one(self, sql: str) -> tuple:
        with self._lock:
            return self._con.execute(sql).fetchone()

    def to_pandas(self, max_rows: int | None = 5_000_000) -> pd.DataFrame:
        """The log as a DataFrame with the canonical columns, sorted by arrival.

        Parameters
        ----------
        max_rows : int or None
            Refuse (ValueError) when the log has more rows; None lifts the guard.
        """
        if max_rows is not None and self.rows > max_rows:
            raise ValueError(f"to_pandas: the log has {self.rows:,} rows, more than "
                             f"max_rows={max_rows:,}; aggregate with hourly() or pass max_rows=None")
        order = " ORDER BY t"
        extra = "".join(f", {c}" for c in self._plan.optional_present)
        df = self._q(f"SELECT t, i AS input_tokens, o AS output_tokens, model, tier, status{extra} "
                     f"FROM req{order}")
        out = pd.DataFrame({
            "arrival_time": pd.to_datetime(df["t"].to_numpy("int64"), unit="us", utc=True).as_unit("ns"),
            "input_tokens": df["input_tokens"].to_numpy("int64"),
            "output_tokens": df["output_tokens"].to_numpy("int64"),
            "model": df["model"].astype(str),
            "tier": df["tier"].astype(str),
            "status": df["status"].astype(str),
        })
        for c in ("first_token_time", "end_time"):
            if c in df:
                out[c] = pd.to_datetime(df[c], unit="us", utc=True).dt.as_unit("ns")
        if "tenant" in df:
            out["tenant"] = df["tenant"]
        return out

    def arrays(self) -> ReplayArrays:
        """Arrival times (s from the first arrival), tokens and labels as numpy arrays.

        Returns
        -------
        ReplayArrays
            Sorted by arrival time.
        """
        order = " ORDER BY t"
        with self._lock:
            d = self._con.execute(f"SELECT t, i, o, model, tier, status FROM req{order}").fetchnumpy()
        t = np.asarray(d["t"], dtype=np.int64)
        return ReplayArrays(
            arrival_s=(t - self._t_min) / _US_PER_S,
            input_tokens=np.asarray(d["i"], dtype=np.int64),
            output_tokens=np.asarray(d["o"], dtype=np.int64),
            model=np.asarray(d["model"], dtype=object),
            tier=np.asarray(d["tier"], dtype=object),
            status=np.asarray(d["status"], dtype=object),
            start=self.start,
        )

    # ---- aggregates --------------------------------------------------------------------------
    def aggregate(self, period_s: float, by: Iterable[str] = ("model", "tier")) -> pd.DataFrame:
        """Requests and tokens per period on a complete time index.

        Parameters
        ----------
        period_s : float
            Period length in seconds (3600 for hourly). Periods are aligned to the Unix epoch
            (whole hours, whole minutes), in UTC.
        by : iterable of str
            Grouping columns among ``model``, ``tier``, ``status``, ``tenant``; empty for totals.

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
        if not (period_s > 0) or not math.isfinite(period_s):
            raise ValueError(f"period_s={period_s!r}: must be a positive number of seconds")
        p_us = int(round(period_s * _US_PER_S))
        if p_us < 1:
            raise ValueError(f"period_s={period_s!r}: shorter than a microsecond")
        keys = "".join(f", {b}" for b in by)
        if p_us == _US_PER_H and by in (("model", "tier"), ("tier", "model"), ("model",), ("tier",), ()) \
                and self._pass1_ok:
            e = self._plan.exprs
            lab = "".join(f", {e[b]} AS {b}" for b in by)
            src = (f'SELECT "__h" AS p{lab}, sum("__n") AS requests, '
                   f'sum(CASE WHEN {self._plan.throttled} THEN "__n" - "__nzero" ELSE 0 END) AS throttled, '
                   f'sum("__si") AS input_tokens, sum("__so") AS output_tokens FROM pass1 GROUP BY ALL')
        else:
            keys = "".join(f", COALESCE({b}, '(none)') AS {b}" if b == "tenant" else f", {b}"
                           for b in by)
            src = (f"SELECT t // {p_us} AS p{keys}, count(*) AS requests, "
                   f"count(*) FILTER (WHERE status = 'throttled') AS throttled, "
                   f"sum(i) AS input_tokens, sum(o) AS output_tokens FROM req GROUP BY ALL")
        agg = self._q(src)
        first, last = self._t_min // p_us, self._t_max // p_us
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
        if "tenant" in by and "tenant" not in self._plan.optional_present:
            raise ValueError("by contains 'tenant' but this log has no tenant column")

    def hourly(self, by: Iterable[str] = ("model", "tier")) -> pd.DataFrame:
        """Hourly sums per group on a complete hourly index; see :meth:`aggregate`."""
        return self.aggregate(3600, by)

    def per_minute(self, by: Iterable[str] = ("model", "tier")) -> pd.DataFrame:
        """Per-minute sums per group on a complete index; see :meth:`aggregate`."""
        return self.aggregate(60, by)

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
        for name, cap in (("output_cap", output_cap), ("input_cap", input_cap)):
            if cap is not None and (not isinstance(cap, (int, np.integer)) or cap < 0):
                raise ValueError(f"{name}={cap!r}: must be a non-negative integer number of tokens")
        by = (by,) if isinstance(by, str) else tuple(by or ())
        self._check_by(by)
        keys = "".join(f"{b}, " for b in by)
        parts = []
        for kind, col, cap in (("input_tokens", "i", input_cap), ("output_tokens", "o", output_cap)):
            capsql = f", avg(({col} > {int(cap)})::DOUBLE) AS share_above_cap" if cap is not None else ""
            parts.append(
                f"SELECT {keys}'{kind}' AS tokens, count(*) AS requests, avg({col}) AS mean, "
                f"quantile_cont({col}, 0.5) AS p50, quantile_cont({col}, 0.95) AS p95, "
                f"quantile_cont({col}, 0.99) AS p99, max({col}) AS max, min({col}) AS min{capsql} "
                f"FROM req GROUP BY {'ALL' if by else '()'}"
            )
        dfs = [self._q(s) for s in parts]
        df = pd.concat(dfs, ignore_index=True)
        if "share_above_cap" in df:  # not applicable (no cap) for the other kind: NA, not NaN
            df["share_above_cap"] = df["share_above_cap"].astype("Float64")
        df = df.sort_values([*by, "tokens"]).set_index([*by, "tokens"]) if by else df.set_index("tokens")
        for c in ("requests", "max", "min"):
            df[c] = df[c].astype("int64")
        return df

    def _interarrival_sql(self, distinct: bool = False) -> str:
        src = "(SELECT DISTINCT t FROM req)" if distinct else "req"
        return f"SELECT t - lag(t) OVER (ORDER BY t) AS d FROM {src}"

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
        if len(windows) == 0:
            raise ValueError("windows: give at least one window length in seconds")
        for w in windows:
            if not (isinstance(w, (int, float, np.integer, np.floating)) and w > 0 and math.isfinite(w)):
                raise ValueError(f"windows: {w!r} is not a positive number of seconds")
        if self.rows < 3:
            raise ValueError(f"arrival_stats needs at least 3 requests; the log has {self.rows}")
        r = self._one(
            f"SELECT count(d), avg(d::DOUBLE), var_pop(d::DOUBLE), avg((d = 0)::DOUBLE) "
            f"FROM ({self._interarrival_sql()}) WHERE d IS NOT NULL")
        n_gaps, mean_us, var_us, zero_share = r
        rd = self._one(
            f"SELECT count(d), avg(d::DOUBLE), var_pop(d::DOUBLE) "
            f"FROM ({self._interarrival_sql(True)}) WHERE d IS NOT NULL")
        distinct = int(rd[0]) + 1
        res = self._one(
            f"SELECT bool_and((t - {self._t_min}) % 1000000 = 0), bool_and((t - {self._t_min}) % 1000 = 0) FROM req")
        resolution = 1.0 if res[0] else (0.001 if res[1] else 1e-6)
        out: dict[str, Any] = {
            "requests": self.rows,
            "iat_mean_s": mean_us / _US_PER_S if mean_us is not None else math.nan,
            "ca2": var_us / mean_us**2 if mean_us else math.inf,
            "zero_gap_share": float(zero_share),
            "distinct_times": distinct,
            "mean_batch": self.rows / distinct,
            "ca2_distinct": (rd[2] / rd[1] ** 2) if (rd[0] and rd[1]) else math.nan,
            "resolution_s": resolution,
        }
        idc = {}
        span_us = self._t_max - self._t_min
        for w in windows:
            w_us = int(round(w * _US_PER_S))
            nbins = span_us // w_us + 1
            if w_us * 2 > span_us:
                continue
            s = self._one(f"SELECT sum(c::DOUBLE * c) FROM (SELECT count(*) AS c FROM req "
                          f"GROUP BY (t - {self._t_min}) // {w_us})")
            mean = self.rows / nbins
            var = s[0] / nbins - mean**2
            idc[float(w)] = var / mean
        out["idc"] = idc
        out["clumped"] = out["zero_gap_share"] > 0.05
        out["caveat"] = (
            f"{100 * out['zero_gap_share']:.1f} % of inter-arrival times are zero "
            f"({distinct:,} distinct timestamps for {self.rows:,} requests): arrivals are logged in "
            f"clumps, so Ca² mixes true batches with timestamp rounding; compare ca2_distinct and "
            f"the index of dispersion at windows longer than the clumps."
            if out["clumped"] else ""
        )
        return out

    def service_times(self, sweep: Any = None, concurrency: float | None = None) -> dict:
        """Service-time moments and where they came from; see :meth:`service_cv2`.

        Returns
        -------
        dict
            ``cs2``, ``mean_s`` (seconds), ``requests`` used, ``source`` (``"sweep"`` or
            ``"measured"``) and, for a sweep, ``prefill_rate_tps`` and ``tpot_s``.
        """
        if sweep is not None:
            prefill = getattr(sweep, "prefill_rate_tps", None)
            tpot_fn = getattr(sweep, "tpot", None)
            if prefill is None or tpot_fn is None:
                raise ValueError("sweep: needs attributes prefill_rate_tps (tokens/s) and tpot(n) "
                                 "(seconds per output token at concurrency n)")
            if concurrency is None:
                for name in ("S", "slots", "max_slots"):
                    v = getattr(sweep, name, None)
                    if isinstance(v, (int, float, np.integer, np.floating)):
                        concurrency = float(v)
                        break
            if concurrency is None:
                raise ValueError("concurrency: say at which concurrency to read the sweep's TPOT "
                                 "(the sweep has no S attribute)")
            tpot = float(tpot_fn(concurrency)) if callable(tpot_fn) else float(tpot_fn)
            prefill = float(prefill)
            if not (prefill > 0 and math.isfinite(prefill)):
                raise ValueError(f"sweep.prefill_rate_tps={prefill!r}: must be positive tokens/s")
            if not (tpot > 0 and math.isfinite(tpot)):
                raise ValueError(f"sweep.tpot({concurrency})={tpot!r}: must be positive seconds")
            a, b = 1.0 / prefill, tpot
            r = self._one(
                "SELECT count(*), avg(i::DOUBLE), avg(o::DOUBLE), avg(i::DOUBLE*i), "
                "avg(o::DOUBLE*o), avg(i::DOUBLE*o) FROM req WHERE status <> 'failed'")
            n, ei, eo, eii, eoo, eio = r
            if not n:
                raise ValueError("service_cv2: the log has no served or throttled requests")
            m1 = a * ei + b * eo
            m2 = a * a * eii + b * b * eoo + 2 * a * b * eio
            return {"cs2": m2 / m1**2 - 1.0, "mean_s": m1, "requests": int(n), "source": "sweep",
                    "prefill_rate_tps": prefill, "tpot_s": tpot, "concurrency": concurrency}
        if "end_time" not in self._plan.optional_present:
            raise ValueError(
                f"service_cv2: {self.path} has no end_time (or duration) column, so service "
                f"times cannot be measured; pass sweep= (an object with prefill_rate_tps and tpot)")
        r = self._one(
            "SELECT count(d), avg(d), var_pop(d), count(*) FILTER (WHERE d < 0) FROM "
            "(SELECT (end_time - t)::DOUBLE / 1e6 AS d FROM req "
            "WHERE status = 'served' AND end_time IS NOT NULL)")
        n, mean, var, neg = r
        if neg:
            raise ValueError(f"service_cv2: {neg} served rows of {self.path} end before they arrive")
        if not n or not mean:
            raise ValueError("service_cv2: no served row has an end time")
        return {"cs2": var / mean**2, "mean_s": mean, "requests": int(n), "source": "measured"}

    def service_cv2(self, sweep: Any = None, concurrency: float | None = None) -> float:
        """Squared coefficient of variation of service times, Cs².

        With a sweep, each request's service time is ``input_tokens / prefill_rate_tps +
        output_tokens * tpot(concurrency)`` (seconds; failed rows excluded, throttled rows kept
        as demand). Without one, the measured ``end_time - arrival_time`` of served rows is used
        (it includes any queueing in the logged system, so it overstates pure service time).

        Parameters
        ----------
        sweep : object, optional
            Anything with ``prefill_rate_tps`` (tokens per second) and ``tpot(n)`` (seconds per
            output token at concurrency n), e.g. :class:`capbook.sweep.Sweep`.
        concurrency : float, optional
            Concurrency at which to read TPOT; defaults to the sweep's ``S`` when it has one.

        Returns
        -------
        float
            Cs² = Var[T] / E[T]² (population variance).
        """
        return float(self.service_times(sweep, concurrency)["cs2"])

    def peak_to_mean(self, model: str | None = None, tier: str | None = None) -> pd.DataFrame:
        """Busiest hour against the mean hour, on the complete hourly index.

        Parameters
        ----------
        model, tier : str, optional
            Restrict to one model and/or tier (e.g. ``tier="interactive"``: batch can wait).

        Returns
        -------
        pandas.DataFrame
            Index ``requests``, ``input_tokens``, ``output_tokens``, ``total_tokens``; columns
            ``peak`` (per hour), ``mean`` (per hour, partial first and last hours included),
            ``ratio`` = peak / mean and ``peak_hour`` (UTC start of the busiest hour).
        """
        by = [b for b, v in (("model", model), ("tier", tier)) if v is not None]
        h = self.hourly(by=tuple(by))
        for b, v in (("model", model), ("tier", tier)):
            if v is not None:
                if v not in set(h[b]):
                    raise ValueError(f"{b}={v!r}: not in the log (has {sorted(set(h[b]))})")
                h = h[h[b] == v]
        h = h.groupby("period_start", sort=True)[["requests", "input_tokens", "output_tokens"]].sum()
        h["total_tokens"] = h["input_tokens"] + h["output_tokens"]
        rows = []
        for c in ("requests", "input_tokens", "output_tokens", "total_tokens"):
            s = h[c]
            mean = float(s.mean())
            rows.append({"measure": c, "peak": int(s.max()), "mean": mean,
                         "ratio": s.max() / mean if mean > 0 else math.nan, "peak_hour": s.idxmax()})
        return pd.DataFrame(rows).set_index("measure")

    def summary(self, sweep: Any = None, concurrency: float | None = None,
                output_cap: int | None = None) -> dict:
        """Everything the CLI prints: size, span, rate, tokens, burstiness, Cs², peak hour.

        Cs² is included when a sweep is given or the log has end times (else None); arrival
        statistics need at least three requests (else None).
        """
        tok = self.token_stats(output_cap=output_cap)
        arr = self.arrival_stats() if self.rows >= 3 else None
        try:
            svc = self.service_times(sweep, concurrency)
        except ValueError:
            if sweep is not None:
                raise
            svc = None
        ptm = self.peak_to_mean()
        status = self._q("SELECT status, count(*) AS n FROM req GROUP BY ALL ORDER BY status")
        models = self._q("SELECT model, tier, count(*) AS n FROM req GROUP BY ALL ORDER BY ALL")
        return {
            "path": self.path, "format": self.format, "rows": self.rows, "rows_read": self.rows_read,
            "dropped": self.dropped, "report": list(self.report),
            "start": self.start, "end": self.end, "span_s": self.span_s, "rate_rps": self.rate,
            "status": dict(zip(status["status"], status["n"].astype(int))),
            "groups": models, "tokens": tok, "arrivals": arr, "service": svc, "peak_to_mean": ptm,
        }


# --------------------------------------------------------------------------------------------
# public readers
# --------------------------------------------------------------------------------------------
def read_requests(
    path: str | os.PathLike,
    format: str = "auto",
    mapping: Mapping | None = None,
    drop_invalid: bool = False,
    *,
    sort: bool = False,
    check_units: bool = True,
    progress: bool = False,
    threads: int | None = None,
    memory_limit: str | None = None,
) -> RequestLog:
    """Read and validate a request log (CSV, Parquet or JSON lines) through DuckDB.

    Parameters
    ----------
    path : str or path-like
        The file. Its type comes from the extension (``.csv``, ``.tsv``, ``.parquet``,
        ``.jsonl``/``.json``, optionally ``.gz``). A glob pattern (``logs/*.parquet``) reads
        several files of one type as one log, in file-name order; row numbers in messages then
        count across the files.
    format : str
        ``"auto"`` (recognise the columns), ``"canonical"``, ``"azure2023"``, ``"azure2024"``,
        ``"burstgpt"``, ``"mooncake"`` or ``"litellm"``. Ignored when ``mapping`` is given.
    mapping : Mapping, optional
        Your own column mapping.
    drop_invalid : bool
        Drop invalid and duplicated rows instead of raising; the counts and reasons are in
        :attr:`RequestLog.report` and a ``UserWarning`` states them.
    sort : bool
        Accept rows out of arrival order (statistics then sort by arrival time).
    check_units : bool
        Run the span and rate sanity check that catches a wrong time unit.
    progress : bool
        Show a tqdm progress bar during the validating pass (appears after 1 s).
    threads, memory_limit : optional
        DuckDB settings (e.g. ``threads=2``, ``memory_limit="1GB"``).

    Returns
    -------
    RequestLog

    Raises
    ------
    ValueError
        Unknown format, missing columns, invalid rows (naming file, column, reason and first
        rows), empty file, implausible span or rate.
    FileNotFoundError
        No such file.
    """
    path = os.fspath(path)
    if mapping is None and format not in FORMATS:
        raise ValueError(f"format={format!r}: use one of {FORMATS} or pass mapping=")
    if mapping is not None and not isinstance(mapping, Mapping):
        raise TypeError(f"mapping must be a capbook.traces.Mapping, not {type(mapping).__name__}")
    if not any(ch in path for ch in "*?[") and not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file")
    con = _connect(threads, memory_limit)
    src, cols = _source_sql(con, path)
    if mapping is None:
        fmt = _detect(con, path, src, cols) if format == "auto" else format
        mapping = _BUILTIN[fmt]
    return RequestLog._open(path, mapping, mapping.name, drop_invalid=drop_invalid, sort=sort,
                            check_units=check_units, progress=progress, con=con,
                            source_sql=src, cols=cols)


def sample_requests_path() -> Path:
    """Path of the sample request log shipped in ``data/requests/``."""
    here = Path(__file__).resolve().parents[1] / "data" / "requests" / "sample_requests.parquet"
    if not here.exists():
        raise FileNotFoundError(
            f"{here}: the sample request log is missing; regenerate it with "
            "`python tools/make_request_log.py`")
    return here


def load_sample_requests(**kwargs: Any) -> RequestLog:
    """Read the generated sample request log (four weeks, two models, two tiers).

    Keyword arguments go to :func:`read_requests`.
    """
    return read_requests(sample_requests_path(), format="canonical", **kwargs)
