"""The one definition of a request log's aggregates: portable SQL for DuckDB and Spark SQL.

Everything capbook computes from the raw rows of a request log is SQL written once in this
module and in the expression builders of :mod:`capbook.logs.requestlog`: the canonical value of every
row and every validation check, the validating pass (counts of each problem, rows out of
order, repeated ids, exact duplicates), the hourly input and output tokens per model, tier,
tenant and status, and the statistics the book needs (inter-arrival moments for Ca², counts per
window for the index of dispersion, token percentiles, service-time moments). The SQL keeps to
what DuckDB and Spark SQL (with ANSI mode and double-quoted identifiers, as
:func:`capbook.logs.engines.spark_session` sets them) read alike: ``TRY_CAST``, ``count(*) FILTER
(WHERE ...)``, ``percentile_cont(q) WITHIN GROUP (ORDER BY x)``, ``var_pop``, ``GROUP BY
ALL``, ``x::DOUBLE``. The few spellings that differ between the two engines are the methods of
a :class:`Dialect`; :data:`DUCKDB` and :data:`SPARK` are the two. Why portable SQL rather than
a dataframe library that compiles to both is in CONTRIBUTING.md.

The relation the statistics read is ``req``: one row per validated request with ``t``
(arrival, integer microseconds since the Unix epoch), ``i`` and ``o`` (input and output
tokens), ``model``, ``tier``, ``status``, ``first_token_time`` and ``end_time``
(microseconds, NULL when absent) and ``tenant``.

Examples
--------
>>> DUCKDB.idiv("t", 3600000000), SPARK.idiv("t", 3600000000)
('(t) // 3600000000', '(t) DIV 3600000000')
>>> print(hourly_sql(DUCKDB, 3600000000, ("model",)))  # doctest: +NORMALIZE_WHITESPACE
SELECT (t) // 3600000000 AS p, model, count(*) AS requests,
  count(*) FILTER (WHERE status = 'throttled') AS throttled, sum(i) AS input_tokens,
  sum(o) AS output_tokens FROM req GROUP BY ALL
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

__all__ = [
    "DUCKDB",
    "SPARK",
    "Dialect",
    "gap_moments_sql",
    "busy_hours_sql",
    "busy_rows_sql",
    "group_counts_sql",
    "hourly_sql",
    "minute_counts_sql",
    "traffic_where",
    "measured_service_sql",
    "resolution_sql",
    "service_moments_sql",
    "status_counts_sql",
    "token_stats_sql",
    "window_counts_sql",
]

# strptime directives and their java.time.format.DateTimeFormatter patterns (Spark's)
_JAVA_PATTERN = {"%Y": "yyyy", "%m": "MM", "%d": "dd", "%H": "HH", "%M": "mm", "%S": "ss",
                 "%f": "SSSSSS", "%y": "yy", "%b": "MMM", "%B": "MMMM", "%j": "DDD", "%p": "a",
                 "%I": "hh", "%z": "XX", "%%": "%"}


@dataclass(frozen=True)
class Dialect:
    """The spellings in which DuckDB and Spark SQL differ; everything else is shared.

    Parameters
    ----------
    name : str
        ``"duckdb"`` or ``"spark"``.
    """

    name: str

    @property
    def spark(self) -> bool:
        return self.name == "spark"

    def idiv(self, a: str, b: int | str) -> str:
        """Integer division (truncating; capbook divides non-negative microseconds)."""
        return f"({a}) DIV {b}" if self.spark else f"({a}) // {b}"

    def epoch_us(self, ts: str) -> str:
        """Microseconds since the Unix epoch of a timestamp expression."""
        return f"unix_micros({ts})" if self.spark else f"epoch_us({ts})"

    def isinf(self, x: str) -> str:
        """True for +inf and -inf (a double expression)."""
        return f"(abs({x}) = CAST('Infinity' AS DOUBLE))" if self.spark else f"isinf({x})"

    @property
    def wide_int(self) -> str:
        """An exact integer type wider than BIGINT (for scaling times without overflow)."""
        return "DECIMAL(38,0)" if self.spark else "HUGEINT"

    @property
    def timestamptz(self) -> str:
        """The type a date-time string with or without a UTC offset is cast to."""
        return "TIMESTAMP" if self.spark else "TIMESTAMPTZ"

    def strptime(self, text: str, fmt: str) -> str:
        """Parse ``text`` with a strptime format; NULL where it does not parse."""
        lit = "'" + fmt.replace("'", "''") + "'"
        if not self.spark:
            return f"try_strptime({text}, {lit})"
        return f"try_to_timestamp({text}, {_lit(java_pattern(fmt))})"

    def regexp(self, text: str, pattern: str) -> str:
        """True where ``text`` contains a match of the regular expression ``pattern`` (keep to
        what RE2 and java.util.regex read alike, and no backslashes: Spark unescapes them)."""
        if "\\" in pattern:
            raise ValueError(f"pattern={pattern!r}: write it without backslashes ([0-9] for \\d)")
        return f"({text} RLIKE {_lit(pattern)})" if self.spark else f"regexp_matches({text}, {_lit(pattern)})"

    def rowhash(self, cols: Sequence[str]) -> str:
        """A 64-bit hash of the listed (quoted) columns."""
        return f"xxhash64({', '.join(cols)})" if self.spark else f"hash({', '.join(cols)})"


def _lit(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def java_pattern(fmt: str) -> str:
    """The Spark (java.time) pattern of a strptime format, e.g. ``%d/%m/%Y`` -> ``dd/MM/yyyy``.

    Raises
    ------
    ValueError
        For a directive without an equivalent (the message names it).
    """
    out, k = [], 0
    while k < len(fmt):
        if fmt[k] == "%":
            d = fmt[k:k + 2]
            if d not in _JAVA_PATTERN:
                raise ValueError(f"time_format={fmt!r}: the directive {d!r} has no Spark "
                                 f"equivalent; use {', '.join(sorted(_JAVA_PATTERN))}")
            out.append(_JAVA_PATTERN[d])
            k += 2
            continue
        run = re.match(r"[^%]+", fmt[k:]).group(0)
        letters = re.sub(r"[^A-Za-z]+", "", run)
        out.append(f"'{run}'" if letters else run)  # quote literal letters (the T of ISO 8601)
        k += len(run)
    return "".join(out)


#: DuckDB, the default engine.
DUCKDB = Dialect("duckdb")
#: Spark SQL (ANSI mode, double-quoted identifiers).
SPARK = Dialect("spark")


# --------------------------------------------------------------------------------------------
# the statistics over the validated rows (relation ``req``)
# --------------------------------------------------------------------------------------------
def hourly_sql(d: Dialect, period_us: int, by: Sequence[str]) -> str:
    """Requests, throttled requests and tokens per period and group of the validated rows.

    Parameters
    ----------
    d : Dialect
    period_us : int
        Period length in microseconds (3,600,000,000 for an hour), aligned to the Unix epoch.
    by : sequence of str
        Grouping columns among ``model``, ``tier``, ``status``, ``tenant`` (a missing tenant
        is ``'(none)'``).

    Returns
    -------
    str
        SQL with columns ``p`` (period number since the epoch), the ``by`` columns,
        ``requests``, ``throttled``, ``input_tokens``, ``output_tokens`` (periods without
        requests are absent).
    """
    keys = "".join(f", COALESCE({b}, '(none)') AS {b}" if b == "tenant" else f", {b}" for b in by)
    return (f"SELECT {d.idiv('t', int(period_us))} AS p{keys}, count(*) AS requests, "
            f"count(*) FILTER (WHERE status = 'throttled') AS throttled, "
            f"sum(i) AS input_tokens, sum(o) AS output_tokens FROM req GROUP BY ALL")


def token_stats_sql(d: Dialect, col: str, kind: str, by: Sequence[str], cap: int | None) -> str:
    """Count, mean, p50, p95, p99 (linear interpolation), max and min of one token column.

    ``col`` is ``i`` or ``o``; ``kind`` the label of the ``tokens`` column; ``cap`` adds
    ``share_above_cap``, the share of rows above it.

    The percentiles are read from the counts per token value (a few thousand distinct values,
    whatever the rows), not from every row held in memory as ``percentile_cont`` holds them: the
    order statistic of 0-based rank ``k`` is the smallest value whose running count exceeds
    ``k``, and ``p`` interpolates between ranks ``floor(p (n - 1))`` and ``ceil(p (n - 1))``
    as ``percentile_cont`` does, with the same result."""
    keys = "".join(f"{b}, " for b in by)
    part = f"PARTITION BY {', '.join(by)} " if by else ""
    capsql = (f", COALESCE(sum(c) FILTER (WHERE v > {int(cap)}), 0)::DOUBLE / sum(c) AS share_above_cap"
              if cap is not None else "")
    qs = []
    for p in (0.5, 0.95, 0.99):
        rank = f"CAST({p} AS DOUBLE) * (n - 1)"   # a double, as percentile_cont's rank
        lo = f"min(v) FILTER (WHERE cum > floor({rank}))"
        hi = f"min(v) FILTER (WHERE cum > ceil({rank}))"
        top = f"CAST({p} AS DOUBLE) * (max(n) - 1)"
        frac = f"({top} - floor({top}))"
        qs.append(f"{lo} + {frac} * ({hi} - {lo}) AS p{int(p * 100)}")
    group = " GROUP BY ALL" if by else ""
    counts = f"SELECT {keys}{col} AS v, count(*) AS c FROM req GROUP BY ALL"
    running = (f"SELECT *, sum(c) OVER ({part}ORDER BY v ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) "
               f"AS cum, sum(c) OVER ({part.strip()}) AS n FROM ({counts})")
    return (f"SELECT {keys}'{kind}' AS tokens, sum(c) AS requests, sum(v * c)::DOUBLE / sum(c) AS mean, "
            f"{', '.join(qs)}, max(v) AS max, min(v) AS min{capsql} FROM ({running}){group}")


def _token_stats_rows_sql(d: Dialect, col: str, kind: str, by: Sequence[str], cap: int | None) -> str:
    """:func:`token_stats_sql` with ``percentile_cont`` over every row (its reference)."""
    keys = "".join(f"{b}, " for b in by)
    capsql = (f", avg(CAST({col} > {int(cap)} AS DOUBLE)) AS share_above_cap"
              if cap is not None else "")
    q = ", ".join(f"percentile_cont({p}) WITHIN GROUP (ORDER BY {col}) AS p{int(p * 100)}"
                  for p in (0.5, 0.95, 0.99))
    group = " GROUP BY ALL" if by else ""
    return (f"SELECT {keys}'{kind}' AS tokens, count(*) AS requests, avg({col}) AS mean, "
            f"{q}, max({col}) AS max, min({col}) AS min{capsql} FROM req{group}")


def gap_moments_sql(d: Dialect, distinct: bool = False) -> str:
    """Count, mean and population variance of the inter-arrival times (microseconds), and the
    share of zero gaps; ``distinct``: between distinct arrival times."""
    src = "(SELECT DISTINCT t FROM req)" if distinct else "req"
    return ("SELECT count(g), avg(g::DOUBLE), var_pop(g::DOUBLE), "
            "avg(CAST(g = 0 AS DOUBLE)) FROM "
            f"(SELECT t - lag(t) OVER (ORDER BY t) AS g FROM {src}) WHERE g IS NOT NULL")


def resolution_sql(d: Dialect, first_us: int) -> str:
    """Whether every arrival falls on a whole second, and on a whole millisecond, after the
    first."""
    return (f"SELECT bool_and((t - {int(first_us)}) % 1000000 = 0), "
            f"bool_and((t - {int(first_us)}) % 1000 = 0) FROM req")


def window_counts_sql(d: Dialect, first_us: int, window_us: int) -> str:
    """The sum of squared counts of requests per window (windows from the first arrival; with
    the number of windows and requests it gives the index of dispersion)."""
    return (f"SELECT sum(c::DOUBLE * c) FROM (SELECT count(*) AS c FROM req GROUP BY "
            f"{d.idiv(f't - {int(first_us)}', int(window_us))})")


def service_moments_sql(d: Dialect) -> str:
    """Moments of the token counts of requests that were not failed (for modelled Cs²)."""
    return ("SELECT count(*), avg(i::DOUBLE), avg(o::DOUBLE), avg(i::DOUBLE * i), "
            "avg(o::DOUBLE * o), avg(i::DOUBLE * o) FROM req WHERE status <> 'failed'")


def measured_service_sql(d: Dialect) -> str:
    """Count, mean and population variance of measured end-to-end times of served rows (s), and
    the count of rows that end before they arrive."""
    return ("SELECT count(s), avg(s), var_pop(s), count(*) FILTER (WHERE s < 0) FROM "
            "(SELECT (end_time - t)::DOUBLE / 1e6 AS s FROM req "
            "WHERE status = 'served' AND end_time IS NOT NULL)")


def status_counts_sql(d: Dialect) -> str:
    """Requests per status."""
    return "SELECT status, count(*) AS n FROM req GROUP BY ALL ORDER BY status"


def group_counts_sql(d: Dialect) -> str:
    """Requests per model and tier."""
    return "SELECT model, tier, count(*) AS n FROM req GROUP BY ALL ORDER BY model, tier"


# --------------------------------------------------------------------------------------------
# the replay's busy hours and the autoscaling week's aggregates (one model and tier)
# --------------------------------------------------------------------------------------------
def traffic_where(model: str | None = None, tier: str | None = None, *, with_tokens: bool = False) -> str:
    """The WHERE condition of one model's and tier's rows (None: every model, every tier);
    ``with_tokens`` keeps only rows that record a prompt and an output token."""
    cond = [f"model = {_lit(model)}"] if model is not None else []
    if tier is not None:
        cond.append(f"tier = {_lit(tier)}")
    if with_tokens:
        cond.append("i >= 1 AND o >= 1")
    return " AND ".join(cond) or "true"


def busy_hours_sql(d: Dialect, where: str, period_us: int = 3_600_000_000) -> str:
    """Requests and first and last arrival (microseconds) per period of the rows ``where``.

    Returns
    -------
    str
        SQL with columns ``p`` (period number since the Unix epoch), ``n``, ``lo``, ``hi``;
        one row per period with requests.
    """
    return (f"SELECT {d.idiv('t', int(period_us))} AS p, count(*) AS n, min(t) AS lo, max(t) AS hi "
            f"FROM req WHERE {where} GROUP BY ALL")


def busy_rows_sql(d: Dialect, where: str, periods: Sequence[int], period_us: int = 3_600_000_000) -> str:
    """The rows ``where`` of the listed periods (numbers since the Unix epoch), by arrival:
    ``t`` (microseconds), ``input_tokens``, ``output_tokens``, ``tier``."""
    listed = ", ".join(str(int(p)) for p in periods)
    return (f"SELECT t, i AS input_tokens, o AS output_tokens, tier FROM req WHERE ({where}) AND "
            f"{d.idiv('t', int(period_us))} IN ({listed}) ORDER BY t")


def minute_counts_sql(d: Dialect, where: str, first_us: int, window_us: int = 60_000_000) -> str:
    """Requests per window (windows from ``first_us``) of the rows ``where``: columns ``w``
    (window number) and ``n``."""
    return (f"SELECT {d.idiv(f't - {int(first_us)}', int(window_us))} AS w, count(*) AS n FROM req "
            f"WHERE {where} GROUP BY ALL")
