"""Request logs: one canonical schema, the formats of public traces, reading and validation.

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

A source file needs only the arrival time and the two token counts. Without a ``model``
column every row gets the file's name as model, without ``tier`` the tier ``interactive``,
without ``status`` the status ``served``; :attr:`RequestLog.notes` says so. Arrival times are
date-time strings, typed timestamps or numbers: Unix epoch seconds, milliseconds or
microseconds (the unit is detected from the magnitude and stated in a note, or given with
``time_unit=``). Formats whose times count from the trace start (Mooncake, BurstGPT) have
their unit built in. An optional request-id column (``request_id`` or ``id`` in the canonical
layout) tells a request logged twice from two identical requests.

The data stay in the source file: :func:`read_requests` runs one streaming DuckDB pass that
validates every row and aggregates hourly sums at the same time, and every later statistic is
another DuckDB query over the file. A log of tens of millions of rows is therefore summarised
with bounded memory; pandas only ever sees the small results (and :meth:`RequestLog.to_pandas`
for logs that fit in memory).

Validation never drops a row silently. A missing column, an unparseable timestamp, a token
count that is missing, negative, fractional, NaN or above :data:`MAX_TOKENS` (10 million), an
``end_time`` before its arrival, an unknown status, rows out of arrival
order, a request id on more than one row, or an empty file raise :class:`ValueError` naming the
file, the column, the reason and the first offending rows. Rows identical to an earlier row in
every column are kept and counted (two identical requests in the same millisecond are normal
in logs with coarse timestamps); a note and a ``report`` entry with action ``"kept"`` say how
many. With ``drop_invalid=True`` bad rows, exact duplicates and repeated request ids are
dropped and counted in :attr:`RequestLog.report` (and a warning says how many and why); with
``sort=True`` rows out of order are accepted and sorted. A sanity check on span and rate
catches a time unit read wrongly (milliseconds read as seconds, seconds as milliseconds) and
names the unit to try. Files that are not request logs (empty, binary, a header without rows,
ragged CSV rows, malformed JSON, a ServeGen rate descriptor) are refused with a message saying
what is wrong, never with a raw DuckDB error. Error messages spell every remedy as
``pass <keyword>=<value>``. For Parquet files, a check that the file's own column statistics
rule out (no nulls in a column, no negative minimum) is skipped.

The statistics of a log (volumes per hour, token percentiles, Ca², Cs², peak-to-mean) are in
:mod:`capbook.logs.stats`; each is also a method of :class:`RequestLog`. The formats this
module reads are :data:`LOG_FORMATS`.

Examples
--------
>>> log = load_sample_requests()
>>> log.format, detect_log_format(log.path)
('canonical', 'canonical')
>>> log.columns[:3]
('arrival_time', 'input_tokens', 'output_tokens')
"""
from __future__ import annotations

import functools
import glob as _glob
import math
import os
import re
import threading
import warnings
import weakref
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, NamedTuple, Sequence

import duckdb
import numpy as np
import pandas as pd

from capbook.formats import FileFormat
from capbook.logs.engines import DuckDBEngine, ENGINES, SparkEngine, raised_by_an_interrupt
from capbook.logs.sql import Dialect, DUCKDB, SPARK
from capbook.logs.stats import LogStats, US_PER_H as _US_PER_H, US_PER_S as _US_PER_S, utc as _utc
from capbook.paths import data_path
from capbook.sweeps.perrequest import match_columns
from capbook.validation import choice, integer

__all__ = [
    "CANONICAL_COLUMNS",
    "LOG_FORMATS",
    "MAX_TOKENS",
    "STATUSES",
    "Mapping",
    "RequestLog",
    "ReplayArrays",
    "detect_log_format",
    "load_sample_requests",
    "read_requests",
    "SAMPLE_REQUESTS",
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
#: The largest token count a row may hold (input or output tokens): 10 million, above the
#: largest context window any served model offers (about 1-2 million tokens in 2025-26). A
#: larger count is a corrupt or mis-scaled value, and one such row would size a fleet for
#: terabytes of tokens, so it is an invalid row (refused, or dropped with drop_invalid=True).
MAX_TOKENS = 10_000_000

_US_PER_UNIT = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": 0.001}
_UNIT_NAMES = {"s": "seconds", "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}
_UNITS = ("s", "ms", "us", "ns")  # coarse to fine
# Unix epoch times from 1973-03 to 2103 in each unit (for detecting the unit from magnitude)
_EPOCH_BANDS = {"s": (1e8, 4.2e9), "ms": (1e11, 4.2e12), "us": (1e14, 4.2e15), "ns": (1e17, 4.2e18)}
_UNIT_SAMPLE = 1000  # rows sampled to detect a numeric time column's unit
_FIRST_ROWS = 5  # offending rows quoted in an error message
_SHOWN_CHARS = 80  # characters of an offending value quoted (a 3 MB field is cut)

# sanity limits of the span/rate check (see RequestLog._check_units)
_MAX_SPAN_DAYS = 400.0
_SLOW_SPAN_DAYS = 7.0
_SLOW_RATE = 1 / 200  # requests per second (18 per hour)
_FAST_RATE = 20_000.0  # requests per second
_SHORT_SPAN_S = 600.0  # a whole log this short ...
_SHORT_FAST_RATE = 1_000.0  # ... at this many requests per second is seconds read as ms
_TINY_SPAN_S = 60.0  # ... and a whole log shorter than this, at any rate
_MIN_ROWS_FAST = 1000  # the fast-rate checks need at least this many requests
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
        is None (or an optional column is absent) every row gets ``default_model`` (or the
        file's stem); when ``tier`` is None every row gets ``default_tier``.
    request_id : str or tuple of str, optional
        Source column that identifies a request (a tuple: the first of these columns that the
        file has). A value on more than one row is an error (the same request logged twice);
        without it, rows identical in every column are kept as separate requests.
    status : str, optional
        Source column of the outcome. Its values are translated through ``status_values``
        (raw value -> ``served``/``throttled``/``failed``); without ``status_values`` the
        values must already be canonical (case and surrounding blanks ignored). Without a
        status column every row is ``served`` unless ``failed_if_zero_output``.
    first_token_time, end_time : str, optional
        Source columns, read like ``arrival_time``. Empty values are allowed (a throttled
        request has no first token).
    duration : str, optional
        Source column of the end-to-end time (in ``duration_unit``); sets ``end_time =
        arrival_time + duration`` when ``end_time`` is None.
    ttft : str, optional
        Source column of the time to first token (in ``duration_unit``), as load generators
        record it; sets ``first_token_time = arrival_time + ttft`` when ``first_token_time`` is
        None (LMBench's ``ttft``).
    error : str, optional
        Source column of a request's error, as load generators record it: a value other than
        empty, 0, false, none or 200 makes the request ``failed`` (used when there is no
        ``status`` column).
    duration_unit : {"s", "ms", "us"}
        Unit of ``duration`` and ``ttft`` (default seconds).
    benchmark_run : bool
        The file is one load-generator run (LMBench's CSVs, a per-request results file): its rows
        are written in completion or per-user order, so they are sorted by arrival (as with
        ``sort=True``), and a glob of several such files is refused (one file per request rate
        is several runs, not one log).
    time_unit : {"datetime", "s", "ms", "us", "ns"}
        ``"datetime"``: times are date-time strings (ISO 8601; no zone means UTC) or typed
        timestamps; a column of numbers is then read as Unix epoch times in the unit its
        magnitude shows (see :func:`read_requests`). Otherwise times are numbers in that unit
        counted from ``epoch``.
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
    request_id: str | tuple[str, ...] | None = None
    duration: str | None = None
    ttft: str | None = None
    error: str | None = None
    duration_unit: str = "s"
    time_unit: str = "datetime"
    time_format: str | None = None
    epoch: str = "1970-01-01 00:00:00"
    default_model: str | None = None
    default_tier: str = "interactive"
    status_values: dict[str, str] | None = None
    failed_if_zero_output: bool = False
    optional: tuple[str, ...] = ()
    name: str = "custom"
    benchmark_run: bool = False

    def __post_init__(self) -> None:
        if self.time_unit not in ("datetime", *_US_PER_UNIT):
            raise ValueError(
                f"Mapping.time_unit={self.time_unit!r}: use 'datetime', 's', 'ms', 'us' or 'ns'"
            )
        if self.duration_unit not in ("s", "ms", "us"):
            raise ValueError(f"Mapping.duration_unit={self.duration_unit!r}: use 's', 'ms' or 'us'")
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
                  "first_token_time", "end_time", "tenant", "request_id", "duration", "ttft", "error"):
            v = getattr(self, f)
            if v is None:
                continue
            out[f] = (v,) if isinstance(v, str) else tuple(v)
        return out


class _LogProbe(NamedTuple):
    """What format detection sees of a log: its column names, and the first value of a column."""

    columns: frozenset
    first: Callable[[str], str]


def _has(*cols: str) -> Callable[[_LogProbe], bool]:
    return lambda p: set(cols) <= p.columns


def _zoned(text: str | None) -> bool:
    """A date-time string that ends with a UTC offset or Z."""
    return bool(re.search(r"(\+|-)\d\d:?\d\d$|Z$", text or ""))


_AZURE = _has("TIMESTAMP", "ContextTokens", "GeneratedTokens")

#: The request-log formats :func:`read_requests` reads, by name, in the order
#: :func:`detect_log_format` tries them (``format="auto"``); each one's ``read`` is the
#: :class:`Mapping` of its columns.
LOG_FORMATS: dict[str, FileFormat] = {f.name: f for f in (
    FileFormat(
        "canonical", "capbook's canonical layout (arrival_time, input_tokens, output_tokens, ...)",
        _has("arrival_time", "input_tokens", "output_tokens"),
        Mapping(arrival_time="arrival_time", input_tokens="input_tokens", output_tokens="output_tokens",
                model="model", tier="tier", status="status", first_token_time="first_token_time",
                end_time="end_time", tenant="tenant", request_id=("request_id", "id"),
                optional=("model", "tier", "status", "first_token_time", "end_time", "tenant",
                          "request_id"),
                name="canonical")),
    # TIMESTAMP has 7 fractional digits and no zone (UTC)
    FileFormat(
        "azure2023", "Azure LLM inference trace 2023 (TIMESTAMP without a zone, ContextTokens, "
        "GeneratedTokens)",
        lambda p: _AZURE(p) and not _zoned(p.first("TIMESTAMP")),
        Mapping(arrival_time="TIMESTAMP", input_tokens="ContextTokens",
                output_tokens="GeneratedTokens", name="azure2023")),
    # the week-long variant: same columns, timestamps with "+00:00" (fraction optional)
    FileFormat(
        "azure2024", "Azure LLM inference trace 2024 (the week-long variant: TIMESTAMP with +00:00)",
        lambda p: _AZURE(p) and _zoned(p.first("TIMESTAMP")),
        Mapping(arrival_time="TIMESTAMP", input_tokens="ContextTokens",
                output_tokens="GeneratedTokens", name="azure2024")),
    # seconds from 00:00 of the trace's first day; release 3 adds Session ID and Elapsed time
    # (end-to-end seconds). Zero response tokens marks a failed request.
    FileFormat(
        "burstgpt", "BurstGPT (Timestamp in s from the first day, Request tokens, Response tokens)",
        _has("Timestamp", "Request tokens", "Response tokens"),
        Mapping(arrival_time="Timestamp", input_tokens="Request tokens",
                output_tokens="Response tokens", model="Model", duration="Elapsed time",
                time_unit="s", failed_if_zero_output=True, optional=("duration",),
                name="burstgpt")),
    FileFormat(
        "mooncake", "Mooncake FAST'25 (timestamp in ms from the trace start, input_length, "
        "output_length)",
        _has("timestamp", "input_length", "output_length"),
        Mapping(arrival_time="timestamp", input_tokens="input_length",
                output_tokens="output_length", time_unit="ms", name="mooncake")),
    FileFormat(
        "litellm", "LiteLLM spend logs exported to CSV/Parquet (startTime, prompt_tokens, "
        "completion_tokens, ...)",
        _has("startTime", "prompt_tokens", "completion_tokens"),
        Mapping(arrival_time="startTime", input_tokens="prompt_tokens",
                output_tokens="completion_tokens", model=("model_group", "model"), status="status",
                first_token_time="completionStartTime", end_time="endTime",
                tenant=("team_id", "user"), request_id="request_id",
                status_values={"success": "served", "failure": "failed"},
                optional=("status", "first_token_time", "end_time", "tenant", "request_id"),
                name="litellm")),
    # LMCache LMBench: one CSV per request rate; rows per user session, epoch seconds
    FileFormat(
        "lmbench", "LMCache LMBench per-request CSV (launch_time, finish_time in epoch s, ttft, "
        "prompt_tokens, generation_tokens); one file = one run",
        _has("launch_time", "finish_time", "ttft", "prompt_tokens", "generation_tokens"),
        Mapping(arrival_time="launch_time", input_tokens="prompt_tokens",
                output_tokens="generation_tokens", end_time="finish_time", ttft="ttft",
                time_unit="s", benchmark_run=True, name="lmbench")),
    # any per-request results file whose columns capbook.sweeps.perrequest recognises
    FileFormat(
        "per-request", "a load generator's per-request results (launch/start time, TTFT, latency or "
        "finish time, prompt and output tokens; names in capbook.sweeps.perrequest.COLUMN_SYNONYMS)",
        lambda p: _perrequest_mapping(p.columns) is not None,
        lambda cols: _perrequest_mapping(cols)),
)}


def _perrequest_mapping(columns) -> Mapping | None:
    """The mapping of a per-request results file's columns (:mod:`capbook.sweeps.perrequest`'s table of
    names), or None when it lacks a launch time, a token count, or TTFT / latency / finish time."""
    found = match_columns(columns)
    if not {"launch_time", "input_tokens", "output_tokens"} <= set(found):
        return None
    if not {"ttft", "latency", "generation_time", "finish_time"} & set(found):
        return None
    units = {found[f][1] for f in ("ttft", "latency") if f in found and found[f][1]}
    if len(units) > 1 or units - {"s", "ms", "us"}:
        return None
    lunit = found["launch_time"][1]
    fin = found.get("finish_time")
    if fin and fin[1] != lunit:
        return None
    return Mapping(arrival_time=found["launch_time"][0], input_tokens=found["input_tokens"][0],
                   output_tokens=found["output_tokens"][0],
                   end_time=fin[0] if fin else None,
                   duration=found["latency"][0] if "latency" in found and not fin else None,
                   ttft=found["ttft"][0] if "ttft" in found else None,
                   error=found["error"][0] if "error" in found else None,
                   duration_unit=units.pop() if units else "s",
                   time_unit=lunit if lunit in _US_PER_UNIT else "datetime",
                   benchmark_run=True, name="per-request")


def _format_mapping(fmt: str, cols: dict[str, str]) -> Mapping:
    """The :class:`Mapping` of a registry format for a file's columns (a format's ``read`` is a
    Mapping, or a function of the columns that builds one)."""
    read = LOG_FORMATS[fmt].read
    return read if isinstance(read, Mapping) else read(list(cols))


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


_COMPRESSED = (".gz", ".zst", ".zstd")
_PEEK_BYTES = 8192
#: The longest CSV line DuckDB's reader accepts (bytes): 8 MiB, four times DuckDB's default (a
#: prompt logged with its request can be megabytes long). Reading costs about the same up to
#: 8 MiB; at 16 MiB a read takes twice as long (DuckDB's buffers grow), so the limit stays here.
_MAX_LINE_BYTES = 8 * 1024 * 1024


_GLOB_CHARS = "*?["


def _files(path: str) -> list[str]:
    """The files a path or glob pattern names (sorted); raises FileNotFoundError for none.

    Paths are paths: a name that exists is that file, even when it holds glob characters
    (``log[1].csv``); a pattern is expanded only when no file has that name."""
    if os.path.exists(path) or not any(ch in path for ch in _GLOB_CHARS):
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path}: no such file")
        if os.path.isdir(path):
            raise ValueError(f"{path}: is a folder, not a file; name a file, or the files in it "
                             f"with a glob such as {os.path.join(path, '*.parquet')}")
        return [path]
    found = sorted(p for p in _glob.glob(path) if os.path.isfile(p))
    if not found:
        raise FileNotFoundError(f"{path}: no file matches this pattern")
    return found


def _duck_path(path: str) -> str:
    """``path`` as DuckDB's readers take it: an existing file's glob characters escaped (each
    as a one-character class, ``[[]``), so that ``log[1].csv`` reads that file, not ``log1.csv``."""
    if not os.path.exists(path):
        return path  # a pattern (or a URL DuckDB reads)
    return re.sub(r"([*?\[])", r"[\1]", path)


def _spark_path(path: str) -> str:
    """An existing file's path as Spark (Hadoop's glob) takes it: glob characters escaped."""
    return re.sub(r"([*?\[\]{}\\])", r"\\\1", path)


# the first bytes of compressed files: (magic, name, what DuckDB calls the codec or None)
_MAGIC = ((b"\x1f\x8b", "gzip", "gzip"), (b"\x28\xb5\x2f\xfd", "zstd", "zstd"),
          (b"BZh", "bzip2", None), (b"\xfd7zXZ\x00", "xz", None), (b"PK\x03\x04", "zip", None))


def _utf16(head: bytes) -> str | None:
    """``"little-endian"`` or ``"big-endian"`` (with ``", with a byte-order mark"``) when the
    bytes are UTF-16 text, else None (text of ASCII characters in UTF-16 has a NUL in every
    other byte)."""
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return ("little" if head[:2] == b"\xff\xfe" else "big") + "-endian, with a byte-order mark"
    even, odd = head[0:200:2], head[1:200:2]
    if len(head) >= 8:
        if odd.count(0) >= 0.8 * len(odd) and even.count(0) <= 0.1 * len(even):
            return "little-endian, without a byte-order mark"
        if even.count(0) >= 0.8 * len(even) and odd.count(0) <= 0.1 * len(odd):
            return "big-endian, without a byte-order mark"
    return None


def _peek(path: str, kind: str) -> str | None:
    """Refuse a file that cannot be a request log from its first bytes (empty, binary, UTF-16
    text, a compression DuckDB cannot read, a Parquet file under another name, or the
    reverse). Returns ``"array"`` for a JSON file that holds one array rather than one object
    per line, ``"gzip"`` or ``"zstd"`` for compressed text under a name without ``.gz`` or
    ``.zst``, else None."""
    with open(path, "rb") as f:
        head = f.read(_PEEK_BYTES)
    if not head:
        raise ValueError(f"{path}: the file is empty (0 bytes)")
    if path.lower().endswith(_COMPRESSED):
        return None
    packed = next(((name, codec) for magic, name, codec in _MAGIC if head.startswith(magic)), None)
    if packed is not None and kind != "parquet":
        name, codec = packed
        if codec is None:
            raise ValueError(f"{path}: the file is {name}-compressed (its first bytes are {name}'s "
                             f"signature), a compression capbook cannot read; decompress it, or "
                             f"compress it with gzip and name it {Path(path).name}.gz")
        return codec
    if kind == "parquet":
        if head[:4] != b"PAR1":
            looks = ("; it looks like text: a CSV or JSON-lines file needs a .csv or .jsonl name"
                     if b"\0" not in head else "")
            raise ValueError(f"{path}: not a Parquet file (it does not start with the Parquet "
                             f"magic bytes 'PAR1'){looks}")
        return None
    if head[:4] == b"PAR1":
        raise ValueError(f"{path}: this is a Parquet file (it starts with the Parquet magic "
                         f"bytes); name it .parquet")
    wide = _utf16(head)
    if wide is not None:
        import shlex

        stem, ext = os.path.splitext(path)
        enc = "UTF-16" if "with a" in wide else ("UTF-16LE" if wide.startswith("l") else "UTF-16BE")
        raise ValueError(f"{path}: UTF-16 text ({wide}): capbook reads UTF-8; convert it with "
                         f"`iconv -f {enc} -t UTF-8 {shlex.quote(path)} > "
                         f"{shlex.quote(stem + '.utf8' + ext)}`")
    if b"\0" in head:
        raise ValueError(f"{path}: the file holds binary data, not text (NUL bytes in its first "
                         f"{len(head):,} bytes); capbook reads request logs as CSV, JSON lines "
                         f"or Parquet")
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if len(head) < _PEEK_BYTES or exc.start < len(head) - 3:  # not a character cut by the peek
            raise ValueError(f"{path}: the file is not UTF-8 text (byte 0x{head[exc.start]:02x} "
                             f"at offset {exc.start}): binary data, or text in another "
                             f"encoding; save it as UTF-8") from None
        text = head[: exc.start].decode("utf-8")
    if not text.strip() and os.path.getsize(path) <= len(head):
        raise ValueError(f"{path}: the file is empty (only blank space)")
    if kind == "json" and text.lstrip("\ufeff \t\r\n").startswith("["):
        return "array"
    return None


def _compression(path: str, shapes: dict[str, str | None]) -> str | None:
    """The codec of compressed files named without ``.gz``/``.zst`` (None when there are none);
    raises when only some of a glob's files are."""
    codecs = {v for v in shapes.values() if v in ("gzip", "zstd")}
    if not codecs:
        return None
    if len(codecs) > 1 or len(codecs) < len(set(shapes.values())):
        raise ValueError(f"{path}: some of the files this pattern matches are compressed and some "
                         f"not (or with different codecs); name compressed files .gz or .zst")
    return codecs.pop()


def _duck_error(path: str, kind: str, exc: BaseException) -> str:
    """Translate a DuckDB reader error into what is wrong with the file (a line number when
    DuckDB gives one), never the raw error with its list of reader options."""
    msg = str(exc)
    m = re.search(r"CSV Error on Line: (\d+)", msg)
    if m:
        where = f"{path}: line {m.group(1)} of the file"
        orig = re.search(r"Original Line: ?(.*)", msg)
        shown = f" ({orig.group(1)[:80]!r})" if orig else ""
        cols = re.search(r"Expected Number of Columns: (\d+) Found: (\d+)", msg)
        if cols:  # DuckDB stops counting at the first field too many
            want, got = int(cols.group(1)), int(cols.group(2))
            has = f"more than {want} fields" if got > want else f"{got} fields"
            return (f"{where}{shown} has {has} where the header has {want}: a ragged row (a "
                    f"missing or extra delimiter, or a delimiter inside an unquoted value); fix "
                    f"that line")
        size = re.search(r"Maximum line size of (\d+) bytes exceeded", msg)
        if size:  # before "quote", which DuckDB's list of reader options always mentions
            line, length = _long_line(path, int(size.group(1)))
            where = (f"{path}: line {line:,} of the file ({length:,} bytes)" if line
                     else f"{path}: a line of the file")
            return (f"{where} is longer than the CSV reader's limit of {int(size.group(1)):,} "
                    f"bytes per line: a field that long (a logged prompt?), binary data, or rows "
                    f"not separated by newlines; shorten or drop that field")
        if "unicode" in msg.lower() or "utf-8" in msg.lower():
            return f"{where} is not UTF-8 text (binary data, or another encoding); save it as UTF-8"
        if "quote" in msg.lower():
            return f"{where}{shown} opens a quote that is never closed"
        return f"{where}{shown} cannot be read as CSV"
    if "Error when sniffing file" in msg:
        return (f"{path}: the CSV reader could not work out the file's layout (delimiter, quotes, "
                f"header) from its first rows: it is probably not a CSV file, or its first rows "
                f"have different numbers of fields")
    m = re.search(r"Malformed JSON.*?at byte (\d+) in line (\d+): ([^.\n]*)", msg)
    if m:
        return (f"{path}: malformed JSON at line {m.group(2)} ({m.group(3).strip()} at byte "
                f"{m.group(1)}): that line, or an object left unclosed on a line above it, is "
                f"broken; a JSON-lines file holds one complete JSON object per line")
    if "Parquet" in msg and ("too small" in msg or "magic" in msg.lower()):
        return f"{path}: not a Parquet file (or a truncated one): {msg.splitlines()[0]}"
    if "Schema mismatch between globbed files" in msg:
        main = re.search(r"Main file schema: (.*)", msg)
        cur = re.search(r"Current file: (.*)", msg)
        why = re.search(r"(Column with name.*)", msg)
        return (f"{path}: the files this pattern matches do not all have the same columns: "
                f"{cur.group(1) if cur else 'one file'} differs from "
                f"{main.group(1) if main else 'the first'}"
                + (f" ({why.group(1).strip()})" if why else ""))
    m = re.search(r"Could not convert string '(.*?)' to '?(\w+)'?", msg)
    if m:
        line = re.search(r"[Ll]ine:? (\d+)", msg)
        return (f"{path}: the value {m.group(1)!r}" + (f" on line {line.group(1)}" if line else "")
                + f" cannot be read as {m.group(2)}")
    first = re.sub(r"^[A-Za-z ]*Error: ", "", msg.strip().splitlines()[0] if msg.strip() else "")
    return f"{path}: cannot read the file as {'JSON lines' if kind == 'json' else kind}: {first}"


def _long_line(path: str, limit: int) -> tuple[int | None, int]:
    """The number (from 1) and length in bytes of the first line of ``path`` longer than
    ``limit`` bytes, or (None, 0) (the error path only: reads the file once more)."""
    if not os.path.isfile(path) or path.lower().endswith(_COMPRESSED):
        return None, 0
    line, length, found = 1, 0, None
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            pieces = chunk.split(b"\n")
            for k, piece in enumerate(pieces):
                length += len(piece)
                last = k == len(pieces) - 1  # no newline after it in this chunk
                if found is None and length > limit:
                    found = line
                if found is not None and not last:
                    return found, length
                if not last:
                    line, length = line + 1, 0
    return (found, length) if found is not None else (None, 0)


def _source_sql(con: duckdb.DuckDBPyConnection, path: str,
                notes: list[str] | None = None) -> tuple[str, dict[str, str]]:
    """SQL table function reading ``path`` leniently, and the column -> type of its columns.

    Refuses, with a message saying what is wrong, files that are empty (0 bytes, blank, a
    header or schema without rows), binary, malformed for their type, or a ServeGen rate
    descriptor. ``notes`` receives a sentence when a JSON file is an array."""
    kind = _file_kind(path)
    files = _files(path)
    shapes = {f: _peek(f, kind) for f in files}
    lp = _lit(_duck_path(path))
    codec = _compression(path, shapes)
    packed = ""
    if codec is not None:
        packed = f", compression='{codec}'"
        lp += packed
        if notes is not None:
            notes.append(f"the file is {codec}-compressed although its name does not say so; read "
                         f"it decompressed (naming it {Path(files[0]).name}"
                         f"{'.gz' if codec == 'gzip' else '.zst'} says so)")
    if kind == "csv":
        sql = f"read_csv({lp}, header=true, all_varchar=true, max_line_size={_MAX_LINE_BYTES})"
    elif kind == "parquet":
        sql = f"read_parquet({lp})"
    else:
        # sniff the keys, then read every key as text so that a bad value cannot abort the read
        jfmt = "array" if "array" in shapes.values() else "newline_delimited"
        if jfmt == "array" and notes is not None:
            notes.append("the file holds one JSON array rather than one JSON object per line; "
                         "each element was read as one request")
        try:
            desc = con.execute(f"DESCRIBE SELECT * FROM read_json({lp}, format='{jfmt}')").fetchall()
        except duckdb.Error as exc:
            raise ValueError(_duck_error(path, kind, exc)) from None
        cols = ", ".join(f"{_lit(r[0])}: 'VARCHAR'" for r in desc)
        sql = f"read_json({lp}, format='{jfmt}', columns={{{cols}}})"
    try:
        desc = con.execute(f"DESCRIBE SELECT * FROM {sql}").fetchall()
        has_rows = con.execute(f"SELECT 1 FROM {sql} LIMIT 1").fetchone() is not None
    except duckdb.Error as exc:
        raise ValueError(_duck_error(path, kind, exc)) from None
    cols = {r[0]: r[1] for r in desc}
    if kind == "csv" and len(desc) == 1 and any(d in desc[0][0] for d in (",", ";", "\t", "|")):
        raise ValueError(_ragged_header(con, path, desc[0][0]))
    if not has_rows:
        if kind == "csv":
            raise ValueError(f"{path}: the file holds a header but no rows (columns {list(cols)})")
        if kind == "parquet":
            raise ValueError(f"{path}: the file holds columns {list(cols)} but no rows")
        raise ValueError(f"{path}: the file holds no rows (no JSON objects)")
    if kind == "csv" and len(cols) == 6:
        _refuse_servegen(con, path)
    return sql, cols


def _ragged_header(con: duckdb.DuckDBPyConnection, path: str, header: str) -> str:
    """The sniffer kept the header as one column: find the ragged line with the delimiter
    the header uses (the error path only; reads the file once more)."""
    delim = max((",", ";", "\t", "|"), key=header.count)
    names = ", ".join(f"'c{k}': 'VARCHAR'" for k in range(header.count(delim) + 1))
    try:  # no sniffing: the header's delimiter, strict parsing
        con.execute(f"SELECT count(*) FROM read_csv({_lit(_duck_path(path))}, header=true, auto_detect=false, "
                    f"max_line_size={_MAX_LINE_BYTES}, delim={_lit(delim)}, quote='\"', columns={{{names}}})").fetchone()
    except duckdb.Error as exc:
        return _duck_error(path, "csv", exc)
    return (f"{path}: the CSV reader could not split the header {header!r} into columns; a row "
            "near the top probably has a different number of fields than the header")


def _refuse_servegen(con: duckdb.DuckDBPyConnection, path: str) -> None:
    """Raise when a six-column headerless CSV has the shape of a ServeGen per-client workload
    descriptor (window_start_s, rate, iat_cv, iat_dist, shape, scale; 600 s windows)."""
    try:
        r = con.execute(
            f"SELECT count(*), count(*) FILTER (WHERE TRY_CAST(column0 AS DOUBLE) % 600 = 0), "
            f"count(*) FILTER (WHERE COALESCE(column3, '') IN ('Gamma', 'Weibull', '')), "
            f"count(*) FILTER (WHERE column3 IN ('Gamma', 'Weibull')) FROM "
            f"(SELECT * FROM read_csv({_lit(_duck_path(path))}, header=false, all_varchar=true, "
            f"max_line_size={_MAX_LINE_BYTES}) LIMIT 200)"
        ).fetchone()
    except duckdb.Error:
        return
    n, windows, dists, named = r
    if n and windows == n and dists == n and named:
        raise ValueError(
            f"{path}: this is a ServeGen per-client rate descriptor (aggregated rates per 600 s "
            f"window), not a request log; capbook reads request logs with one row per request. "
            f"(Its six headerless columns are window_start_s, rate_req_per_s, iat_cv, iat_dist, "
            f"shape, scale; capbook.forecast.tokens.read_servegen_hourly reads a folder of them as an "
            f"hourly request-count series.)")


def _parquet_stats(con: duckdb.DuckDBPyConnection, sql: str, path: str) -> dict[str, dict]:
    """Per-column null count, numeric min and text min over every row group of a Parquet file
    (only for columns whose statistics are present in every row group)."""
    if not sql.startswith("read_parquet("):
        return {}
    try:
        rows = con.execute(
            "SELECT path_in_schema, count(*) = count(stats_null_count), sum(stats_null_count), "
            "min(TRY_CAST(stats_min_value AS DOUBLE)), count(*) = count(stats_min_value), "
            f"min(stats_min_value) FROM parquet_metadata({_lit(_duck_path(path))}) GROUP BY 1"
        ).fetchall()
    except duckdb.Error:
        return {}
    return {r[0]: {"nulls": int(r[2]) if r[1] else None, "min_num": r[3] if r[4] else None,
                   "min_text": r[5] if r[4] else None} for r in rows}


def detect_log_format(path: str | os.PathLike) -> str:
    """Name the format of a request log from its column names (see :data:`LOG_FORMATS`).

    Parameters
    ----------
    path : str or path-like
        CSV, Parquet or JSON-lines file.

    Returns
    -------
    str
        A key of :data:`LOG_FORMATS`: ``canonical``, ``azure2023``, ``azure2024``,
        ``burstgpt``, ``mooncake``, ``litellm``, ``lmbench`` or ``per-request``.
    """
    path = os.fspath(path)
    con = _connect()
    try:
        sql, cols = _source_sql(con, path)
        return _detect(DuckDBEngine(con), path, sql, cols)
    except duckdb.Error as exc:
        raise ValueError(_duck_error(path, _file_kind(path), exc)) from None


def _detect(eng: DuckDBEngine | SparkEngine, path: str, sql: str, cols: dict[str, str]) -> str:
    names = set(cols)

    def first(col: str) -> str:
        row = eng.one(f"SELECT CAST({_q(col)} AS STRING) FROM {sql} "
                      f"WHERE {_q(col)} IS NOT NULL LIMIT 1")
        return row[0] if row else ""

    probe = _LogProbe(frozenset(names), first)
    for f in LOG_FORMATS.values():
        if f.detect(probe):
            return f.name
    # a header of values (numbers, dates) means the file has no header row
    valuelike = [n for n in names if re.fullmatch(r"[-+0-9.eE:T /Z]+", n.strip() or "x")]
    nohead = (f" Its first line looks like data ({', '.join(sorted(valuelike)[:3])}), not a header: "
              f"add a header row naming the columns (arrival_time,input_tokens,output_tokens at "
              f"least)." if len(valuelike) * 2 > len(names) else "")
    raise ValueError(
        f"{path}: cannot recognise the format from its columns {sorted(names)}; pass "
        f"format= one of {tuple(LOG_FORMATS)} or a capbook.logs.requestlog.Mapping naming your columns "
        f"(a load generator's per-request results are recognised by the column names of "
        f"capbook.sweeps.perrequest.COLUMN_SYNONYMS: a launch time such as launch_time or start_time, the "
        f"token counts, and ttft, latency or finish_time).{nohead}"
    )


def _resolve_time_unit(eng: DuckDBEngine | SparkEngine, path: str, sql: str, cols: dict[str, str],
                       m: Mapping, time_unit: str | None) -> tuple[Mapping, list[str]]:
    """The mapping with its time unit settled, and the note saying how.

    ``time_unit`` given: it replaces the mapping's unit. Otherwise a mapping that reads
    date-times whose arrival column holds numbers gets the Unix-epoch unit its magnitude shows
    (from the first rows); numbers too small for epoch times, or of mixed magnitude, raise."""
    srcs = [c for c in m.columns()["arrival_time"] if c in cols]
    if not srcs or (time_unit is None and m.time_unit != "datetime"):
        return m, []  # a missing column is reported by _plan; the format's unit stands
    col = srcs[0]
    ctype = cols[col]
    if ctype.startswith("TIMESTAMP") or ctype == "DATE":  # typed times need no unit
        return m, []
    txt = f"NULLIF(TRIM(CAST({_q(col)} AS STRING)), '')"
    n_txt, n_num, lo, hi, first = eng.one(
        f"SELECT count(x), count(v), min(v), max(v), first(x) FILTER (WHERE v IS NULL) FROM "
        f"(SELECT {txt} AS x, TRY_CAST({txt} AS DOUBLE) AS v FROM {sql} LIMIT {_UNIT_SAMPLE})")
    if time_unit is not None:
        if n_txt and not n_num:
            raise ValueError(
                f"{path}: column {col!r} holds date-times ({first!r}), not numbers: time_unit= "
                f"applies to numeric timestamps only; leave it out for this file")
        note = (f"timestamps in {col!r} read as {_UNIT_NAMES[time_unit]} from {m.epoch} "
                f"(time_unit={time_unit!r})")
        return replace(m, time_unit=time_unit), [note]
    if not n_num or n_num < n_txt:  # date-time strings (or a mixture, reported row by row)
        return m, []
    band = [next((u for u, (a, b) in _EPOCH_BANDS.items() if a <= abs(v) < b), None) for v in (lo, hi)]
    shown = f"{lo:,.10g} to {hi:,.10g} in the first {_UNIT_SAMPLE:,} rows"
    if band[0] is None or band[0] != band[1]:
        small = hi < _EPOCH_BANDS["s"][0]
        why = ("too small for Unix epoch times (times relative to the start of the trace?)"
               if small else "not Unix epoch times of one unit (s, ms, us or ns) from 1973-2100")
        raise ValueError(
            f"{path}: column {col!r} holds numbers ({shown}), {why}. Say their unit: pass "
            f"time_unit='s' (or 'ms', 'us'); they then count from 1970-01-01 (a "
            f"capbook.logs.requestlog.Mapping with another epoch sets their start)")
    unit = band[0]
    note = (f"column {col!r} holds numbers ({shown}): timestamps read as epoch "
            f"{_UNIT_NAMES[unit]} (detected from magnitude; pass time_unit= to override)")
    return replace(m, time_unit=unit), [note]


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
    id_col: str | None = None  # source column of the request id
    defaults: dict[str, str] = field(default_factory=dict)  # label field -> what every row gets (prose)
    zoned: str | None = None  # SQL boolean: the arrival date-time text has a UTC offset

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


def _time_expr(col: str, ctype: str, m: Mapping, d: Dialect = DUCKDB) -> tuple[str, list[tuple[str, str]]]:
    """Expression for microseconds since the Unix epoch, and (reason, condition) problems."""
    c = _q(col)
    if ctype.startswith("TIMESTAMP") or ctype == "DATE":
        typed = ctype == "DATE" or d.spark  # Spark: a naive timestamp reads as UTC, like DuckDB's
        expr = d.epoch_us(f"CAST({c} AS TIMESTAMP)" if typed else c)
        return expr, [("missing timestamp", f"{c} IS NULL")]
    if m.time_unit == "datetime":
        if ctype in _INT_TYPES or ctype in ("DOUBLE", "FLOAT") or ctype.startswith("DECIMAL"):
            raise ValueError(
                f"column {col!r} holds numbers ({ctype}) but the mapping reads it as date-times; "
                "pass time_unit='s' (or 'ms', 'us', 'ns'), or set Mapping.time_unit"
            )
        txt = f"NULLIF(TRIM(CAST({c} AS STRING)), '')"
        if m.time_format:
            parsed = d.strptime(txt, m.time_format)
        else:
            parsed = f"TRY_CAST({txt} AS {d.timestamptz})"
        expr = d.epoch_us(parsed)
        return expr, [
            ("missing timestamp", f"{txt} IS NULL"),
            ("unparseable timestamp", f"{txt} IS NOT NULL AND {parsed} IS NULL"),
        ]
    ep = pd.Timestamp(m.epoch)
    ep = ep.tz_localize("UTC") if ep.tzinfo is None else ep.tz_convert("UTC")
    epoch_us = int(ep.value // 1000)
    f = _US_PER_UNIT[m.time_unit]
    if ctype in _INT_TYPES:  # exact integer arithmetic (a double loses nanoseconds)
        big = f"CAST({c} AS {d.wide_int})"
        scaled = f"{big} * {int(f)}" if f >= 1 else d.idiv(f"{big} + 500", 1000)
        expr = f"TRY_CAST({epoch_us} + {scaled} AS BIGINT)"
        probs = [("missing timestamp", f"{c} IS NULL")]
        fine = f"{c} IS NOT NULL"
    else:
        txt = f"NULLIF(TRIM(CAST({c} AS STRING)), '')"
        num = f"TRY_CAST({txt} AS DOUBLE)"
        expr = f"TRY_CAST({epoch_us} + round({num} * {f!r}) AS BIGINT)"
        probs = [
            ("missing timestamp", f"{txt} IS NULL"),
            ("unparseable timestamp",
             f"{txt} IS NOT NULL AND ({num} IS NULL OR isnan({num}) OR {d.isinf(num)})"),
        ]
        fine = f"{num} IS NOT NULL AND NOT isnan({num}) AND NOT {d.isinf(num)}"
    finer = _UNITS[_UNITS.index(m.time_unit) + 1:]
    hint = f"; pass time_unit={finer[0]!r} if they are finer" if finer else ""
    probs.append((f"timestamp out of range when read as {_UNIT_NAMES[m.time_unit]}{hint}",
                  f"{fine} AND {expr} IS NULL"))
    return expr, probs


_ABOVE_MAX = (f"token count above {MAX_TOKENS:,} (capbook.logs.requestlog.MAX_TOKENS, more than the "
              f"largest context any model serves)")


def _token_expr(col: str, ctype: str, d: Dialect = DUCKDB) -> tuple[str, list[tuple[str, str]]]:
    """Expression of a token count (BIGINT; NULL for a row that fails a check, so that no sum
    can overflow on either engine), and (reason, condition) problems.

    Text is read as a DOUBLE and compared with :data:`MAX_TOKENS` before any cast to BIGINT:
    ``9223372036854775813``, ``1e30`` and ``"1e12"`` are rows above the limit, never a NULL
    or an overflow."""
    c = _q(col)
    if ctype in _INT_TYPES:  # compared in the column's own type (HUGEINT, UBIGINT: no cast)
        return f"(CASE WHEN {c} <= {MAX_TOKENS} THEN TRY_CAST({c} AS BIGINT) END)", [
            ("missing token count", f"{c} IS NULL"),
            ("negative token count", f"{c} < 0"),
            (_ABOVE_MAX, f"{c} > {MAX_TOKENS}"),
        ]
    if ctype in ("DOUBLE", "FLOAT") or ctype.startswith("DECIMAL"):
        num = f"CAST({c} AS DOUBLE)"
        missing = f"{c} IS NULL"
        probs = [("missing token count", missing)]
    else:
        txt = f"NULLIF(TRIM(CAST({c} AS STRING)), '')"
        num = f"TRY_CAST({txt} AS DOUBLE)"
        missing = f"{txt} IS NULL"
        probs = [
            ("missing token count", missing),
            ("unparseable token count", f"{txt} IS NOT NULL AND {num} IS NULL "
                                        f"AND lower({txt}) NOT IN ('nan', '+nan', '-nan')"),
        ]
    probs += [
        ("NaN token count", f"isnan({num})"),
        ("infinite token count", d.isinf(num)),
        ("negative token count", f"{num} < 0"),
        # floor() only of counts in range (Spark's floor is a BIGINT: 1e30 would overflow)
        ("fractional token count", f"(CASE WHEN abs({num}) <= {MAX_TOKENS} THEN {num} <> floor({num}) "
                                   f"ELSE false END)"),
        (_ABOVE_MAX, f"NOT isnan({num}) AND NOT {d.isinf(num)} AND {num} > {MAX_TOKENS}"),
    ]
    return f"(CASE WHEN {num} <= {MAX_TOKENS} THEN TRY_CAST({num} AS BIGINT) END)", probs


def _text_expr(cols: tuple[str, ...], types: dict[str, str]) -> str:
    """Label expression: the column itself (empty text counts as missing); a tuple coalesces."""
    parts = []
    for c in cols:
        v = _q(c) if types.get(c) == "VARCHAR" else f"CAST({_q(c)} AS STRING)"
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


def _plan(path: str, cols: dict[str, str], m: Mapping, stats: dict[str, dict] | None = None,
          d: Dialect = DUCKDB) -> _Plan:
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
            f"The file has columns {list(cols)}; pass format= or a capbook.logs.requestlog.Mapping "
            f"naming the columns"
        )
    defaults: dict[str, str] = {}
    exprs: dict[str, str] = {}
    checks: list[_Check] = []

    def add(fld: str, colname: str, probs: list[tuple[str, str]], shown: str) -> None:
        for reason, cond in probs:
            checks.append(_Check(fld, colname, reason, cond, shown))

    # times
    col = present["arrival_time"][0]
    e, probs = _time_expr(col, cols[col], m, d)
    exprs["t"] = e
    add("arrival_time", col, probs, _q(col))
    for fld in ("first_token_time", "end_time"):
        if fld in present:
            col = present[fld][0]
            e, probs = _time_expr(col, cols[col], m, d)
            exprs[fld] = e
            # an empty value is allowed here; an unparseable one is not
            add(fld, col, [p for p in probs if not p[0].startswith("missing")], _q(col))
    if "end_time" in present:  # one row ending before it arrives is that row's problem only
        col = present["end_time"][0]
        add("end_time", col, [(f"end_time before its arrival ({present['arrival_time'][0]!r})",
                               f"{exprs['end_time']} < {exprs['t']}")], _q(col))
    us = _US_PER_UNIT[m.duration_unit]
    for fld, src in (("end_time", "duration"), ("first_token_time", "ttft")):
        if fld in present or src not in present:
            continue
        col = present[src][0]
        txt = f"NULLIF(TRIM(CAST({_q(col)} AS STRING)), '')"
        num = f"TRY_CAST({txt} AS DOUBLE)"
        exprs[fld] = f"({exprs['t']} + TRY_CAST(round({num} * {float(us)!r}) AS BIGINT))"
        add(fld, col, [
            (f"unparseable {src}", f"{txt} IS NOT NULL AND ({num} IS NULL OR isnan({num}) OR "
                                   f"{d.isinf(num)})"),
            (f"negative {src}", f"{num} < 0"),
            # a finite duration whose end overflows (1e30 s) is not silently an empty end time
            (f"{src} out of range", f"{num} >= 0 AND NOT {d.isinf(num)} AND "
                                    f"{exprs[fld]} IS NULL AND {exprs['t']} IS NOT NULL"),
        ], _q(col))
    # tokens
    for fld in ("input_tokens", "output_tokens"):
        col = present[fld][0]
        e, probs = _token_expr(col, cols[col], d)
        exprs[fld] = e
        add(fld, col, probs, _q(col))
    # labels (used exactly as written: "Batch" and "batch" are two tiers)
    # the name less its file extensions (a dot inside the name stays: "run_output_0.5.csv")
    stem = re.sub(r"(\.(csv|tsv|txt|parquet|jsonl|json|ndjson|gz|zst|zstd))+$", "", Path(path).name,
                  flags=re.I) or "model"
    for fld, default in (("model", m.default_model or stem), ("tier", m.default_tier)):
        if fld in present:
            e = _text_expr(present[fld], cols)
            exprs[fld] = e
            add(fld, "/".join(present[fld]), [(f"missing {fld}", f"({e} IS NULL OR {e} = '')")], e)
        else:
            exprs[fld] = _lit(default)
            defaults[fld] = repr(default)
    if "tenant" in present:
        e = _text_expr(present["tenant"], cols)
        exprs["tenant"] = f"NULLIF({e}, '')"
    # status (values matched exactly)
    if "status" in present:
        col = present["status"][0]
        raw = _q(col) if cols[col] == "VARCHAR" else f"CAST({_q(col)} AS STRING)"
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
    elif "error" in present:
        col = present["error"][0]
        txt = f"lower(TRIM(CAST({_q(col)} AS STRING)))"
        exprs["status"] = (f"(CASE WHEN {_q(col)} IS NOT NULL AND {txt} NOT IN ('', '0', '0.0', 'none', "
                           f"'null', 'nan', 'false', '200') THEN 'failed' ELSE 'served' END)")
        throttled = "false"
    else:
        exprs["status"] = "'served'"
        throttled = "false"
    if "status" not in present:
        defaults["status"] = ("'failed' when it has 0 output tokens, else 'served'"
                              if m.failed_if_zero_output else
                              f"'failed' when {present['error'][0]!r} holds an error, else 'served'"
                              if "error" in present else "'served'")
    opt = [f for f in ("first_token_time", "end_time", "tenant") if f in exprs]
    if stats:
        gone = _impossible(cols, stats)
        checks = [ch for ch in checks if ch.cond not in gone]
    label_cols = [c for f in _LABEL_FIELDS for c in present.get(f, ())]
    id_col = present["request_id"][0] if "request_id" in present else None
    zoned = None
    col = present["arrival_time"][0]
    if m.time_unit == "datetime" and not m.time_format and cols[col] == "VARCHAR":
        zoned = d.regexp(f"TRIM({_q(col)})", _ZONED)
    return _Plan(exprs, checks, list(cols), opt, throttled, m.failed_if_zero_output,
                 list(dict.fromkeys(label_cols)), id_col, defaults, zoned)


# a date-time text that ends with a UTC offset (Z, UTC, +02, +02:00, -0500) after its time
_ZONED = ":[0-9][0-9]([.,][0-9]+)? ?(Z|z|UTC|GMT|[+-][0-9][0-9](:?[0-9][0-9])?)$"


_PART = 8589934592  # 2**33: Spark's monotonically_increasing_id() is partition << 33 | row


def _unsorted_sql(d: Dialect, t: str, src: str) -> str:
    """Rows whose arrival time ``t`` is earlier than, or tied with, the row above them in the
    file (columns ``t`` and ``unsorted``: earlier, not tied).

    DuckDB streams the file in order (``lag(t) OVER ()``). Spark reads it in partitions (each
    a run of consecutive rows of one file, ``__file`` and ``__pos`` in its source view): the
    rows inside each partition, then the first row of each partition against the last row of
    the one before it (in file-name order, then file order)."""
    if not d.spark:
        return (f"SELECT t, t < pt AS unsorted FROM (SELECT t, lag(t) OVER () AS pt FROM "
                f"(SELECT {t} AS t FROM {src})) WHERE t <= pt")
    rows = f'SELECT {t} AS t, "__file", "__pos", "__pos" DIV {_PART} AS "__part" FROM {src}'
    inside = (f'SELECT t, t < pt AS unsorted FROM (SELECT t, lag(t) OVER (PARTITION BY "__file", '
              f'"__part" ORDER BY "__pos") AS pt FROM ({rows})) WHERE t <= pt')
    ends = (f'SELECT "__file", "__part", min_by(t, "__pos") AS first_t, max_by(t, "__pos") AS '
            f'last_t FROM ({rows}) GROUP BY ALL')
    across = (f'SELECT first_t AS t, first_t < pt AS unsorted FROM (SELECT first_t, lag(last_t) '
              f'OVER (ORDER BY "__file", "__part") AS pt FROM ({ends})) WHERE first_t <= pt')
    return f"{inside} UNION ALL {across}"


_SPARK_TYPES = {"string": "VARCHAR", "bigint": "BIGINT", "int": "INTEGER", "smallint": "SMALLINT",
                "tinyint": "TINYINT", "double": "DOUBLE", "float": "FLOAT", "boolean": "BOOLEAN",
                "timestamp": "TIMESTAMP WITH TIME ZONE", "timestamp_ntz": "TIMESTAMP",
                "date": "DATE"}


def _spark_type(simple: str) -> str:
    """The DuckDB name of a Spark SQL type (the expression builders read DuckDB's names)."""
    if simple.startswith("decimal"):
        return simple.upper()
    return _SPARK_TYPES.get(simple, simple.upper())


def _remote(path: str) -> bool:
    """A URL that Spark reads (s3a://, hdfs://, abfss://, gs://, file://, ...), not a path."""
    return bool(re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", path))


def _spark_source(eng: SparkEngine, path: str, notes: list[str]) -> tuple[str, str, dict[str, str]]:
    """Register ``path`` as a Spark view; returns the view, the view with each row's number in
    the file (``__rn``, from 1, across the files of a glob in name order) and the column types.

    A local file is first opened by DuckDB's reader without being read through: the same
    refusals (empty, binary, a header without rows, malformed JSON, a ServeGen descriptor) with
    the same messages as the DuckDB engine, and the CSV dialect (delimiter, quote, escape) that
    Spark's reader is then given."""
    from pyspark.sql import functions as F

    kind = _file_kind(path)
    sep, quote, escape, array = ",", '"', '"', False
    if not _remote(path):
        files = _files(path)
        con = _connect()
        try:
            _source_sql(con, path, notes)
            shapes = {f: _peek(f, kind) for f in files}
            array = "array" in shapes.values()
            codec = _compression(path, shapes)
            if codec is not None:  # Spark picks the codec from the name alone
                raise ValueError(
                    f"{path}: the file is {codec}-compressed although its name does not say so; "
                    f"Spark chooses how to decompress a file from its name: name it "
                    f"{Path(files[0]).name}{'.gz' if codec == 'gzip' else '.zst'} (the DuckDB "
                    f"engine reads it as it is)")
            if kind == "csv":
                r = con.execute(f"SELECT Delimiter, Quote, Escape FROM sniff_csv({_lit(_duck_path(files[0]))})").fetchone()
                given = [v if v and len(v) == 1 else None for v in r]  # "(empty)": none found
                sep, quote = given[0] or ",", given[1] or '"'
                escape = given[2] or quote
        except duckdb.Error as exc:
            raise ValueError(_duck_error(path, kind, exc)) from None
        finally:
            con.close()
        files = [_spark_path(os.path.abspath(f)) for f in files]
    else:  # Spark alone sees it: the CSV dialect is the usual one, by the file's name
        files = [path]
        if re.search(r"\.tsv(\.gz)?$", path.lower()):
            sep = "\t"
    rd = eng.spark.read.option("mode", "FAILFAST")
    try:
        if kind == "csv":
            sdf = (rd.option("header", True).option("inferSchema", False).option("sep", sep)
                   .option("quote", quote).option("escape", escape).csv(files))
        elif kind == "json":
            sdf = rd.option("primitivesAsString", True).option("multiLine", array).json(files)
        else:
            sdf = rd.parquet(*files)
    except Exception as exc:  # noqa: BLE001 - AnalysisException, Py4JJavaError
        raise ValueError(_spark_error(path, exc)) from None
    cols = {f.name: _spark_type(f.dataType.simpleString()) for f in sdf.schema.fields}
    sdf = (sdf.withColumn("__file", F.col("_metadata.file_path"))
           .withColumn("__pos", F.monotonically_increasing_id()))
    src = eng.table("src")
    sdf.createOrReplaceTempView(src)
    if _remote(path) and not sdf.limit(1).count():
        raise ValueError(f"{path}: the file holds columns {list(cols)} but no rows")
    # the number of each row in the file, without a global sort: each partition's offset is
    # the rows of the partitions before it
    parts = f'(SELECT *, "__pos" DIV {_PART} AS "__part" FROM {src})'
    offsets = (f'(SELECT "__file", "__part", COALESCE(sum(n) OVER (ORDER BY "__file", "__part" '
               f'ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS "__off" FROM '
               f'(SELECT "__file", "__part", count(*) AS n FROM {parts} GROUP BY ALL))')
    numbered = eng.table("src_numbered")
    eng.spark.sql(
        f'SELECT s.*, o."__off" + row_number() OVER (PARTITION BY s."__file", s."__part" ORDER BY '
        f's."__pos") AS "__rn" FROM {parts} s JOIN {offsets} o ON s."__file" = o."__file" AND '
        f's."__part" = o."__part"').createOrReplaceTempView(numbered)
    return src, numbered, cols


def _spark_error(path: str, exc: BaseException) -> str:
    """What is wrong with a file that Spark could not read (never the Java stack trace).

    An error raised while py4j cleaned up after Ctrl-C (its chain holds the
    ``KeyboardInterrupt``) says nothing of the file: it is raised again as the interrupt.
    """
    if raised_by_an_interrupt(exc):
        raise KeyboardInterrupt from exc
    msg = str(exc)
    if "PATH_NOT_FOUND" in msg or "Path does not exist" in msg:
        return f"{path}: no such file (Spark: path does not exist)"
    if "MALFORMED_RECORD_IN_PARSING" in msg or "Malformed records are detected" in msg:
        return (f"{path}: a row cannot be parsed (a ragged CSV row with more or fewer fields "
                f"than the header, an unclosed quote, or a broken JSON line); fix that row")
    if "UNABLE_TO_INFER_SCHEMA" in msg:
        return f"{path}: Spark cannot read a schema from the file (is it empty, or not {_file_kind(path)}?)"
    first = next((ln.strip() for ln in msg.splitlines() if ln.strip()), type(exc).__name__)
    return f"{path}: Spark could not read the file: {first[:300]}"


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


def _statistic(name: str):
    """A method of :class:`RequestLog` that is :class:`capbook.logs.stats.LogStats`' ``name``."""
    impl = getattr(LogStats, name)

    @functools.wraps(impl)
    def method(self, *args, **kwargs):
        return impl(LogStats(self), *args, **kwargs)

    method.__qualname__ = f"RequestLog.{name}"
    method.__module__ = __name__
    return method


class RequestLog:
    """A validated request log, read through DuckDB (create it with :func:`read_requests`).

    The log reads and validates its source and holds the canonical view of the rows kept
    (:meth:`query`); its statistics (:meth:`hourly`, :meth:`token_stats`,
    :meth:`arrival_stats`, :meth:`service_times`, :meth:`peak_to_mean`, :meth:`summary`, ...)
    are those of :class:`capbook.logs.stats.LogStats`.

    Parameters
    ----------
    path : str
        The source file (or glob pattern).
    mapping : Mapping
        Its columns, with the time unit settled.
    engine, source_sql, cols
        The engine the source is opened on (:class:`capbook.logs.engines.DuckDBEngine` or
        :class:`capbook.logs.engines.SparkEngine`), the SQL relation that reads it and its column
        types (as :func:`read_requests` opens them).
    notes : sequence of str
        What reading it already noted (a JSON array, a time unit detected).
    drop_invalid, sort, check_units, progress : bool
        As in :func:`read_requests`.

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
        One entry per problem found and handled (dropped rows, rows sorted, exact duplicates
        kept), with keys ``column``, ``field``, ``reason``, ``rows``, ``first_rows`` (1-based
        data rows) and ``action`` (``"dropped"``, ``"dropped (first copy kept)"``,
        ``"dropped (first row of each id kept)"``, ``"kept; sorted by arrival"`` or
        ``"kept"``). Empty for a clean file.
    notes : list of str
        What the reader decided that the user should know, one sentence each: labels given a
        default value (no model, tier or status column), a time unit detected or given,
        exact duplicates kept, a JSON array read as rows, times counted from 1970-01-01.
    columns : tuple of str
        Canonical columns present.
    first_us, last_us : int
        First and last arrival, microseconds since the Unix epoch.
    """

    def __init__(
        self,
        path: str,
        mapping: Mapping,
        *,
        engine: DuckDBEngine | SparkEngine,
        source_sql: str,
        cols: dict[str, str],
        numbered_sql: str | None = None,
        notes: Sequence[str] = (),
        drop_invalid: bool = False,
        sort: bool = False,
        check_units: bool = True,
        progress: bool = False,
    ) -> None:
        # read_requests opens the source (``con``, its reading SQL and column types) and settles
        # the mapping; the constructor validates every row and builds the canonical view
        self.path = path
        self.notes = list(notes)
        self.format = mapping.name
        self.mapping = mapping
        self.engine = engine.name
        self._eng = engine
        self._d = engine.dialect
        if engine.name == "spark":  # the log's cached tables go when the log does
            weakref.finalize(self, engine.release)
        self._lock = threading.Lock()
        self._src = source_sql
        # DuckDB numbers rows in file order with row_number() OVER (); Spark's source view
        # carries the row's number in the file as a column (see _spark_source)
        self._nsrc = numbered_sql or f'(SELECT *, row_number() OVER () AS "__rn" FROM {source_sql})'
        stats = _parquet_stats(engine.con, source_sql, path) if engine.name == "duckdb" else {}
        plan = _plan(path, cols, mapping, stats, self._d)
        self._plan = plan
        self.columns = tuple(
            c for c in CANONICAL_COLUMNS
            if c in ("arrival_time", "input_tokens", "output_tokens", "model", "tier", "status")
            or c in plan.optional_present
        )
        self.report: list[dict] = []
        if plan.defaults:
            given = ", ".join(f"{k} {v}" for k, v in plan.defaults.items())
            fields = list(plan.defaults)
            which = fields[0] if len(fields) == 1 else ", ".join(fields[:-1]) + " or " + fields[-1]
            self.notes.append(f"no {which} column: every row gets {given}")
        self._validate(drop_invalid=drop_invalid, sort=sort, progress=progress)
        if check_units:
            self._check_units()
        if self.start.year == 1970:
            self.notes.append(
                f"arrival times fall in 1970 (first {self.start:%Y-%m-%d %H:%M:%S}): they count "
                f"from the start of the trace (or of its first day), not from a calendar date, so "
                f"dates and weekdays are not the real ones (a capbook.logs.requestlog.Mapping with an epoch "
                f"sets the real start)")

    def _row_sql(self, numbered: bool = False, flags: bool = True, rowhash: bool = False,
                 ok: bool = False, ids: bool = False) -> str:
        """SQL of every source row: canonical expressions, per-problem flags, optional extras."""
        p = self._plan
        e = p.exprs
        sel = [f"{e['t']} AS t", f"{e['input_tokens']} AS i", f"{e['output_tokens']} AS o",
               f"{e['model']} AS model", f"{e['tier']} AS tier", f"{e['status']} AS status"]
        for fld in ("first_token_time", "end_time"):
            sel.append(f"{e[fld]} AS {fld}" if fld in e else f"CAST(NULL AS BIGINT) AS {fld}")
        sel.append(f"{e['tenant']} AS tenant" if "tenant" in e else "CAST(NULL AS STRING) AS tenant")
        if flags:
            for k, ch in enumerate(p.checks):
                sel.append(f"COALESCE({ch.cond}, false) AS bad{k}")
        if ok:
            sel.append(f"{p.ok()} AS ok")
        if rowhash:
            sel.append(f"{self._d.rowhash([_q(c) for c in p.raw_cols])} AS rowhash")
        if ids:
            sel.append(f"{self._id_sql()} AS id")
        if numbered:
            sel.append('"__rn" AS rn')
        return f"SELECT {', '.join(sel)} FROM {self._nsrc if numbered else self._src}"

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
        # date-times with and without a UTC offset (those without are read as UTC)
        zoned = (f', count(*) FILTER (WHERE "__z") AS "__nzoned", count(*) FILTER (WHERE NOT '
                 f'"__z") AS "__nnaive"' if p.zoned else ', 0 AS "__nzoned", 0 AS "__nnaive"')
        zcol = (f', CASE WHEN {p.exprs["t"]} IS NOT NULL THEN {p.zoned} END AS "__z"'
                if p.zoned else "")
        # grouped by hour and the raw label columns: the checks on labels and the status run on
        # the few groups afterwards, not on every row
        sql_a = f"""
        SELECT {self._d.idiv('"__t"', _US_PER_H)} AS "__h"{labels}, count(*) AS "__n"{nbad}{nzero},
               sum("__i") AS "__si", sum("__o") AS "__so", min("__t") AS "__tmin",
               max("__t") AS "__tmax"{zoned}
        FROM (SELECT {p.exprs['t']} AS "__t", {p.exprs['input_tokens']} AS "__i",
                     {p.exprs['output_tokens']} AS "__o", {row_ok} AS "__ok"{labels}{zcol}
              FROM {self._src})
        GROUP BY ALL
        """
        # pass B (streaming, arrival time only): rows earlier than, or tied with, the row above
        sql_b = _unsorted_sql(self._d, p.exprs["t"], self._src)
        sqls = [("pass1", sql_a), ("pass2", sql_b)]
        if p.id_col:  # pass C (parallel): request ids on more than one row
            sqls.append(("pass3", f"SELECT id, count(*) AS c FROM "
                         f"(SELECT {self._id_sql()} AS id FROM {self._src}) WHERE id IS NOT NULL "
                         f"GROUP BY id HAVING count(*) > 1"))
        try:
            self._run(sqls, progress)
        except duckdb.Error as exc:  # a malformed file (e.g. a CSV row with extra fields)
            raise ValueError(_duck_error(self.path, _file_kind(self.path), exc)) from None
        except Exception as exc:  # noqa: BLE001 - Spark's errors (py4j, AnalysisException)
            if self.engine != "spark":
                raise
            raise ValueError(_spark_error(self.path, exc)) from None
        label_ok = p.ok("label")
        tot = self._eng.one(
            f'SELECT sum("__n"), sum(CASE WHEN {label_ok} THEN "__n" - "__nbad" ELSE 0 END), '
            f'min("__tmin"), max("__tmax"), sum("__nzoned"), sum("__nnaive") FROM pass1')
        n_all = int(tot[0] or 0)
        if tot[4] and tot[5]:
            self.notes.append(self._mixed_zones_note(int(tot[4]), int(tot[5])))
        n_valid = int(tot[1] or 0)
        self.rows_read = n_all
        if n_all == 0:
            raise ValueError(f"{self.path}: the file holds a header but no rows")
        problems = []
        if n_valid < n_all:
            counts = self._eng.one(
                "SELECT " + ", ".join(f"count(*) FILTER (WHERE bad{k})" for k in range(nchk))
                + f" FROM ({self._row_sql()})")
            problems = [(ch, int(c), k) for k, (ch, c) in enumerate(zip(p.checks, counts)) if c]
        n_unsorted, n_ties = self._eng.one(
            "SELECT count(*) FILTER (WHERE unsorted), count(*) FILTER (WHERE NOT unsorted) "
            "FROM pass2")
        n_unsorted, self._ties = int(n_unsorted), int(n_ties)
        # duplicates among valid rows: identical in every source column (so same arrival time).
        # In a sorted log they sit in runs of tied arrival times, which pass B listed.
        n_dup = 0
        if n_ties or n_unsorted:
            restrict = "" if n_unsorted else " AND t IN (SELECT t FROM pass2)"
            n_dup = int(self._eng.one(
                f"SELECT COALESCE(sum(c - 1), 0) FROM (SELECT count(*) AS c FROM "
                f"({self._row_sql(flags=False, rowhash=True, ok=True)}) WHERE {valid}{restrict} "
                f"GROUP BY t, rowhash HAVING count(*) > 1)")[0])
        ids = None  # (ids repeated, extra rows)
        if p.id_col:
            r = self._eng.one("SELECT count(*), COALESCE(sum(c - 1), 0) FROM pass3")
            ids = (int(r[0]), int(r[1])) if r[0] else None

        if not drop_invalid and (problems or ids):
            raise ValueError(self._problem_message(problems, ids, n_all))
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
            first = self._first_duplicates(valid)
            self.report.append({
                "column": "(all columns)", "field": "(row)", "reason": "duplicated row",
                "rows": n_dup, "first_rows": first,
                "action": "dropped (first copy kept)" if drop_invalid else "kept",
            })
            if not drop_invalid:
                one = n_dup == 1
                self.notes.append(
                    f"{n_dup:,} {'row is' if one else 'rows are'} identical to an earlier row in "
                    f"every column (first: data {'row' if one else 'rows'} "
                    f"{', '.join(map(str, first))}); kept as separate requests, since identical "
                    f"requests at the same instant are normal in logs with coarse timestamps"
                    + ("" if p.id_col else " and this log has no request-id column")
                    + ". Pass drop_invalid=True to drop them.")
        if ids:
            self.report.append({
                "column": p.id_col, "field": "request_id", "reason": "repeated request id",
                "rows": ids[1], "first_rows": self._first_repeated_ids(later=True),
                "action": "dropped (first row of each id kept)",
            })
        if n_unsorted:
            self.report.append({
                "column": self._plan_col("arrival_time"), "field": "arrival_time",
                "reason": "row earlier than the row above it", "rows": n_unsorted,
                "first_rows": self._first_unsorted(), "action": "kept; sorted by arrival",
            })
        dedupe = drop_invalid and n_dup > 0  # drop exact duplicates
        self._pass1_ok = not problems and not dedupe and not ids  # pass1 sums cover every row
        # the canonical view every statistic reads
        if dedupe or ids:
            base = (f"SELECT * FROM ({self._row_sql(numbered=True, flags=False, rowhash=dedupe, ok=True, ids=bool(ids))}) "
                    f"WHERE {valid}")
            if dedupe:  # the first copy of each row
                base = (f'SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY t, rowhash '
                        f'ORDER BY rn) AS "__k" FROM ({base})) WHERE "__k" = 1')
            if ids:  # the first row of each id
                base = (f'SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY id ORDER BY '
                        f'rn) AS "__j" FROM ({base})) WHERE id IS NULL OR "__j" = 1')
        elif problems:
            base = f"SELECT * FROM ({self._row_sql(flags=False, ok=True)}) WHERE {valid}"
        else:
            base = self._row_sql(flags=False)
        self._eng.view("req", f"SELECT t, i, o, model, tier, status, first_token_time, "
                              f"end_time, tenant FROM ({base})")
        if self._pass1_ok:
            self.rows = n_valid
            self.first_us, self.last_us = (int(tot[2]), int(tot[3])) if n_valid else (0, 0)
        else:
            n, lo, hi = self._eng.one("SELECT count(*), min(t), max(t) FROM req")
            self.rows = int(n)
            self.first_us, self.last_us = (int(lo), int(hi)) if n else (0, 0)
        self.dropped = n_all - self.rows
        # a benchmark run's rows are out of order by design (a note says so): no warning for that
        if self.dropped or (n_unsorted and not self.mapping.benchmark_run):
            lines = [f"{r['rows']} rows: {r['reason']} in {r['column']!r} -> {r['action']}"
                     for r in self.report]
            n_dup_dropped = n_dup if dedupe else 0
            warnings.warn(
                f"{self.path}: {self.dropped} of {n_all} rows dropped "
                f"({n_all - n_valid} invalid, {n_dup_dropped} duplicates"
                + (f", {self.dropped - (n_all - n_valid) - n_dup_dropped} repeated request ids"
                   if ids else "") + "); " + "; ".join(lines),
                UserWarning, stacklevel=4,
            )
        if self.rows == 0:
            raise ValueError(f"{self.path}: no valid rows left after dropping invalid rows")
        self._sorted = n_unsorted == 0
        self.start = _utc(self.first_us)
        self.end = _utc(self.last_us)

    def _mixed_zones_note(self, n_zoned: int, n_naive: int) -> str:
        """The note on an arrival column whose date-times have a UTC offset on some rows and
        none on others (those are read as UTC), naming the first row of each kind."""
        p = self._plan
        first = self._eng.all(
            f'SELECT z, min(rn) FROM (SELECT "__rn" AS rn, {p.zoned} AS z FROM {self._nsrc} '
            f"WHERE {p.exprs['t']} IS NOT NULL) GROUP BY z")
        row = {bool(z): int(rn) for z, rn in first}
        col = self._plan_col("arrival_time")
        return (f"column {col!r} mixes date-times with a UTC offset ({n_zoned:,} rows, first: data "
                f"row {row.get(True)}) and without one ({n_naive:,} rows, first: data row "
                f"{row.get(False)}); those without were read as UTC. If they are local times, "
                f"add their offset to the file")

    def _id_sql(self) -> str:
        """SQL of the request id of a source row (text; empty means none)."""
        return f"NULLIF(TRIM(CAST({_q(self._plan.id_col)} AS STRING)), '')"

    def _first_repeated_ids(self, later: bool = False, n_ids: int = 3) -> Any:
        """The first repeated ids and the data rows holding each (``later``: the first rows
        after the first of their id, i.e. the rows a drop removes)."""
        numbered = (f"SELECT id, rn, row_number() OVER (PARTITION BY id ORDER BY rn) AS k FROM "
                    f'(SELECT {self._id_sql()} AS id, "__rn" AS rn FROM {self._nsrc}) '
                    f"WHERE id IN (SELECT id FROM pass3)")
        if later:
            rows = self._eng.all(f"SELECT rn FROM ({numbered}) WHERE k > 1 ORDER BY rn "
                                 f"LIMIT {_FIRST_ROWS}")
            return [int(r[0]) for r in rows]
        rows = self._eng.all(
            f"SELECT id, rn, first_rn FROM (SELECT id, rn, k, min(rn) OVER (PARTITION BY id) AS "
            f"first_rn FROM ({numbered})) WHERE k <= {_FIRST_ROWS} ORDER BY first_rn, rn "
            f"LIMIT {_FIRST_ROWS * n_ids}")
        out: dict[Any, list[int]] = {}
        for i, rn, _ in rows:
            if i in out or len(out) < n_ids:
                out.setdefault(i, []).append(int(rn))
        return list(out.items())

    def _plan_col(self, fld: str) -> str:
        return "/".join(self.mapping.columns().get(fld, (fld,)))

    def _run(self, tables: list[tuple[str, str]], progress: bool) -> None:
        """Compute the named tables: on DuckDB concurrently, each on its own cursor of this
        log's database (the streaming pass is single-threaded, so it overlaps the parallel
        one); on Spark one after the other (each is a parallel job of its own)."""
        if self.engine != "duckdb":
            for name, sql in tables:
                self._eng.materialize(name, sql)
            return
        con = self._eng.con
        sqls = [f"CREATE OR REPLACE TABLE {name} AS {sql}" for name, sql in tables]
        if progress:
            con.execute("SET enable_progress_bar=true")
        cursors = [con] + [con.cursor() for _ in sqls[1:]]
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
                        pct = con.query_progress()
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
            f'SELECT rn, substr(CAST(v AS STRING), 1, {_SHOWN_CHARS}) FROM (SELECT "__rn" AS rn, '
            f"COALESCE({ch.cond}, false) AS f, {ch.shown} AS v FROM {self._nsrc}) WHERE f "
            f"ORDER BY rn LIMIT {_FIRST_ROWS}"
        )
        return [(int(r[0]), r[1] if r[1] is None or len(r[1]) < _SHOWN_CHARS else r[1] + "...")
                for r in self._eng.all(sql)]

    def _first_unsorted(self) -> list[int]:
        over = "OVER ()" if self.engine == "duckdb" else "OVER (ORDER BY rn)"
        rows = self._eng.all(
            f"SELECT rn FROM (SELECT rn, t, lag(t) {over} AS pt FROM "
            f'(SELECT "__rn" AS rn, {self._plan.exprs["t"]} AS t FROM {self._nsrc})) '
            f"WHERE t < pt ORDER BY rn LIMIT {_FIRST_ROWS}")
        return [int(r[0]) for r in rows]

    def _first_duplicates(self, valid: str) -> list[int]:
        rows = self._eng.all(
            f"SELECT rn FROM (SELECT rn, row_number() OVER (PARTITION BY t, rowhash ORDER BY rn) AS k "
            f"FROM ({self._row_sql(numbered=True, flags=False, rowhash=True, ok=True)}) WHERE {valid}) "
            f"WHERE k > 1 ORDER BY rn LIMIT {_FIRST_ROWS}")
        return [int(r[0]) for r in rows]

    def _problem_message(self, problems, ids: tuple[int, int] | None, n_all: int) -> str:
        lines = [f"{self.path}: invalid rows (of {n_all} data rows; row numbers count data rows "
                 f"from 1, not the header):"]
        for ch, cnt, k in problems:
            first = self._first_rows(k)
            shown = ", ".join(f"row {r} ({v!r})" for r, v in first)
            lines.append(f"  column {ch.column!r} ({ch.field}): {cnt} rows with {ch.reason}; "
                         f"first: {shown}")
        if ids:
            shown = "; ".join(f"{i!r} on rows {rows}" for i, rows in self._first_repeated_ids())
            many = f"{ids[0]} ids appear" if ids[0] > 1 else "1 id appears"
            lines.append(f"  column {self._plan.id_col!r} (request id): {many} on more than one row "
                         f"({ids[1]} rows more than one per id): the same request logged more than "
                         f"once; first: {shown}")
        lines.append("Fix the file, or pass drop_invalid=True to drop these rows (they are counted "
                     "in RequestLog.report"
                     + ("; the first row of each id is kept" if ids else "") + ").")
        return "\n".join(lines)

    def _check_units(self) -> None:
        """Refuse a span or rate no request log has: the sign of a time unit read wrongly.

        Too slow (a span of over 400 days, or over a week at under 18 requests an hour) reads
        like a finer unit read as a coarser one (milliseconds read as seconds); too fast (over
        20,000 requests/s, over 1,000 requests/s for a whole log shorter than 10 minutes, or a
        whole log shorter than a minute; each with at least 1,000 requests) like the reverse. The message names the unit used and
        the one to try with ``time_unit=``."""
        span_s = (self.last_us - self.first_us) / _US_PER_S
        unit = self.mapping.time_unit
        col = self._plan_col("arrival_time")
        read = ("date-times" if unit == "datetime"
                else f"{_UNIT_NAMES[unit]} from {self.mapping.epoch}")
        hint = f"the {col!r} column was read as {read}"

        def remedy(step: int) -> str:  # step +1: try a finer unit, -1: a coarser one
            k = _UNITS.index(unit) + step if unit in _UNITS else -1
            if 0 <= k < len(_UNITS):
                return (f". If the times are {_UNIT_NAMES[_UNITS[k]]}, pass time_unit="
                        f"{_UNITS[k]!r}; if they are right, pass check_units=False")
            return ". Check the time column; if the times are right, pass check_units=False"

        def mistake(step: int) -> str:
            k = _UNITS.index(unit) + step if unit in _UNITS else -1
            if 0 <= k < len(_UNITS):
                return f"as if {_UNIT_NAMES[_UNITS[k]]} were read as {_UNIT_NAMES[unit]}"
            return ("as if milliseconds were read as seconds" if step > 0
                    else "as if seconds were read as milliseconds")

        if self.start < _EARLIEST or self.end >= _LATEST:
            raise ValueError(f"{self.path}: arrival times run from {self.start} to {self.end}, "
                             f"outside 1970-2100: {hint}{remedy(1 if self.end >= _LATEST else 0)}")
        if span_s > _MAX_SPAN_DAYS * 86400:
            raise ValueError(f"{self.path}: the log spans {span_s / 86400:,.0f} days, implausible "
                             f"for a request log ({mistake(1)}): {hint}{remedy(1)}")
        rate = self.rows / span_s if span_s > 0 else math.inf
        if span_s > _SLOW_SPAN_DAYS * 86400 and rate < _SLOW_RATE:
            raise ValueError(
                f"{self.path}: {self.rows} requests over {span_s / 86400:,.1f} days is "
                f"{rate * 3600:.2f} requests per hour: suspiciously slow, {mistake(1)} "
                f"({hint}){remedy(1)}")
        if self.rows >= _MIN_ROWS_FAST and (rate > _FAST_RATE or span_s < _TINY_SPAN_S or (
                span_s < _SHORT_SPAN_S and rate > _SHORT_FAST_RATE)):
            raise ValueError(
                f"{self.path}: {self.rows} requests in {span_s:.3g} s is {rate:,.0f} requests per "
                f"second for the whole log: suspiciously fast, {mistake(-1)} ({hint}){remedy(-1)}")

    # ---- basic accessors ---------------------------------------------------------------------
    def __len__(self) -> int:
        return self.rows

    def __repr__(self) -> str:
        return (f"RequestLog({self.path!r}, format={self.format!r}, rows={self.rows:,}, "
                f"{self.start} -> {self.end})")

    @property
    def span_s(self) -> float:
        """Seconds from the first to the last arrival."""
        return (self.last_us - self.first_us) / _US_PER_S

    @property
    def rate(self) -> float:
        """Mean arrival rate, rows / span, in requests per second (inf for a zero span)."""
        return self.rows / self.span_s if self.span_s > 0 else math.inf

    def query(self, sql: str) -> pd.DataFrame:
        """The result of a SQL query over the log's validated rows, as a DataFrame.

        The query runs on the log's engine (DuckDB, or Spark SQL for ``engine="spark"``).

        The rows are the view ``req`` with columns ``t`` (arrival, integer microseconds since
        the Unix epoch), ``i`` and ``o`` (input and output tokens), ``model``, ``tier``,
        ``status``, ``first_token_time`` and ``end_time`` (microseconds, NULL when absent) and
        ``tenant``; e.g. ``log.query("SELECT tier, avg(o) FROM req GROUP BY tier")``.
        """
        with self._lock:
            return self._eng.df(sql)

    def query_one(self, sql: str) -> tuple:
        """The first row of a query over the view ``req`` (see :meth:`query`)."""
        with self._lock:
            return self._eng.one(sql)

    @property
    def dialect(self) -> Dialect:
        """The SQL spelling of the log's engine (:data:`capbook.logs.sql.DUCKDB` or
        :data:`~capbook.logs.sql.SPARK`), for queries written with :mod:`capbook.logs.sql`."""
        return self._d

    def _validated_hourly_sql(self, by: tuple[str, ...]) -> str | None:
        """SQL of the hourly sums per ``by`` that the validating pass already computed, when
        they cover exactly the kept rows (no row dropped) and ``by`` is among model and tier;
        else None. Columns ``p`` (the hour since the epoch), the ``by`` columns,
        ``requests``, ``throttled``, ``input_tokens``, ``output_tokens``."""
        if not self._pass1_ok or by not in (("model", "tier"), ("tier", "model"), ("model",),
                                              ("tier",), ()):
            return None
        e = self._plan.exprs
        lab = "".join(f", {e[b]} AS {b}" for b in by)
        return (f'SELECT "__h" AS p{lab}, sum("__n") AS requests, '
                f'sum(CASE WHEN {self._plan.throttled} THEN "__n" - "__nzero" ELSE 0 END) AS throttled, '
                f'sum("__si") AS input_tokens, sum("__so") AS output_tokens FROM pass1 GROUP BY ALL')

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
        df = self.query(f"SELECT t, i AS input_tokens, o AS output_tokens, model, tier, status{extra} "
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
            d = self._eng.numpy(f"SELECT t, i, o, model, tier, status FROM req{order}")
        t = np.asarray(d["t"], dtype=np.int64)
        return ReplayArrays(
            arrival_s=(t - self.first_us) / _US_PER_S,
            input_tokens=np.asarray(d["i"], dtype=np.int64),
            output_tokens=np.asarray(d["o"], dtype=np.int64),
            model=np.asarray(d["model"], dtype=object),
            tier=np.asarray(d["tier"], dtype=object),
            status=np.asarray(d["status"], dtype=object),
            start=self.start,
        )

    # ---- statistics (capbook.logs.stats) -------------------------------------------------
    aggregate = _statistic("aggregate")
    hourly = _statistic("hourly")
    per_minute = _statistic("per_minute")
    token_stats = _statistic("token_stats")
    arrival_stats = _statistic("arrival_stats")
    service_times = _statistic("service_times")
    service_cv2 = _statistic("service_cv2")
    coverage = _statistic("coverage")
    peak_to_mean = _statistic("peak_to_mean")
    summary = _statistic("summary")


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
    time_unit: str | None = None,
    progress: bool = False,
    threads: int | None = None,
    memory_limit: str | None = None,
    engine: str = "duckdb",
    spark_master: str | None = None,
) -> RequestLog:
    """Read and validate a request log (CSV, Parquet or JSON lines) through DuckDB or Spark.

    Parameters
    ----------
    path : str or path-like
        The file. Its type comes from the extension (``.csv``, ``.tsv``, ``.parquet``,
        ``.jsonl``/``.json``, optionally ``.gz``). A glob pattern (``logs/*.parquet``) reads
        several files of one type as one log, in file-name order; row numbers in messages then
        count across the files. A ``.json``/``.jsonl`` file may also hold one JSON array.
    format : str
        ``"auto"`` (recognise the columns) or a name of :data:`LOG_FORMATS`: ``"canonical"``,
        ``"azure2023"``, ``"azure2024"``, ``"burstgpt"``, ``"mooncake"``, ``"litellm"``,
        ``"lmbench"`` (one LMBench run: launch time, TTFT, finish time) or ``"per-request"``
        (a load generator's per-request results, columns recognised by the names of
        :data:`capbook.sweeps.perrequest.COLUMN_SYNONYMS`). Ignored when ``mapping`` is given. A file
        of one load-generator run (``lmbench``, ``per-request``) is read sorted by launch time,
        and a glob of several such files is refused.
    mapping : Mapping or dict, optional
        Your own column mapping (a dict holds its fields, e.g. ``{"arrival_time": "ts",
        "input_tokens": "prompt", "output_tokens": "completion"}``).
    drop_invalid : bool
        Drop invalid rows, rows identical to an earlier row, and repeated request ids (all but
        the first row of each id) instead of raising or keeping them; the counts and reasons
        are in :attr:`RequestLog.report` and a ``UserWarning`` states them. Without it, exact
        duplicates are kept (and counted in a note) and only a repeated request id raises.
    sort : bool
        Accept rows out of arrival order (statistics then sort by arrival time).
    check_units : bool
        Run the span and rate sanity check that catches a wrong time unit.
    time_unit : {"s", "ms", "us", "ns"}, optional
        Unit of numeric timestamps (seconds, milliseconds, microseconds, nanoseconds since
        the mapping's epoch, 1970-01-01 by default), overriding the format's own. Default:
        the format's unit (Mooncake ms, BurstGPT s) or, for a numeric timestamp column where
        date-times are expected (the canonical layout), the Unix-epoch unit its magnitude
        shows (about 1.7e9 s, 1.7e12 ms, 1.7e15 us); a note states the unit detected.
    progress : bool
        Show a tqdm progress bar during the validating pass (appears after 1 s).
    threads, memory_limit : optional
        DuckDB settings (e.g. ``threads=2``, ``memory_limit="1GB"``).
    engine : {"duckdb", "spark"}
        Where the SQL runs (:mod:`capbook.logs.sql`, the same definition on both). ``"spark"``
        reads the file with PySpark (the extra ``capbook[spark]`` and a Java runtime): for logs
        that live in a data lake (``path`` may then be an ``s3a://``, ``hdfs://``, ``abfss://``
        URL or a glob Spark expands) and a cluster next to them. Results are those of DuckDB:
        hourly sums exactly, statistics within floating-point rounding.
    spark_master : str, optional
        The Spark master for ``engine="spark"`` (default ``local[*]``); see
        :func:`capbook.logs.engines.spark_session`.

    Returns
    -------
    RequestLog

    Raises
    ------
    ValueError
        Unknown format, missing columns, invalid rows (naming file, column, reason and first
        rows), a request id on several rows, an empty, binary or malformed file, a file that
        is not a request log, implausible span or rate. Remedies are spelled ``pass
        <keyword>=<value>`` (``drop_invalid=True``, ``sort=True``, ``time_unit='ms'``,
        ``format=``, ``check_units=False``).
    FileNotFoundError
        No such file.
    """
    path = os.fspath(path)
    if mapping is None:
        choice(format, "format", ("auto", *LOG_FORMATS))
    if isinstance(mapping, dict):  # the Mapping's fields (the command line's --columns)
        try:
            mapping = Mapping(**mapping)
        except TypeError as exc:
            raise ValueError(f"mapping={mapping!r}: {exc}") from None
    if mapping is not None and not isinstance(mapping, Mapping):
        raise TypeError(f"mapping must be a capbook.logs.requestlog.Mapping, not {type(mapping).__name__}")
    if time_unit is not None:
        choice(time_unit, "time_unit", _UNITS)
    if threads is not None:
        threads = integer(threads, "threads", minimum=1)
    choice(engine, "engine", ENGINES)
    if engine == "spark":
        return _read_spark(path, format, mapping, drop_invalid, sort=sort, check_units=check_units,
                           time_unit=time_unit, threads=threads, memory_limit=memory_limit,
                           spark_master=spark_master)
    if spark_master is not None:
        raise ValueError("spark_master= applies to engine='spark' only; pass engine='spark'")
    _files(path)  # FileNotFoundError when nothing is there
    con = _connect(threads, memory_limit)
    notes: list[str] = []
    try:  # a reader error in any query (e.g. the second file of a glob) says what is wrong
        src, cols = _source_sql(con, path, notes)
        eng = DuckDBEngine(con)
        if mapping is None:
            fmt = _detect(eng, path, src, cols) if format == "auto" else format
            mapping = _format_mapping(fmt, cols)
            if mapping is None:
                raise ValueError(f"{path}: format={format!r}: {LOG_FORMATS[fmt].description}; the "
                                 f"file's columns {sorted(cols)} are not that")
        sort = _one_run(path, mapping, sort, notes)
        mapping, unit_notes = _resolve_time_unit(eng, path, src, cols, mapping, time_unit)
        return RequestLog(path, mapping, drop_invalid=drop_invalid, sort=sort,
                          check_units=check_units, progress=progress, engine=eng,
                          source_sql=src, cols=cols, notes=notes + unit_notes)
    except duckdb.Error as exc:
        raise ValueError(_duck_error(path, _file_kind(path), exc)) from None


def _read_spark(path: str, format: str, mapping: Mapping | None, drop_invalid: bool, *, sort: bool,
                check_units: bool, time_unit: str | None, threads: int | None,
                memory_limit: str | None, spark_master: str | None) -> RequestLog:
    """:func:`read_requests` with ``engine="spark"``."""
    if threads is not None or memory_limit is not None:
        raise ValueError("threads= and memory_limit= are DuckDB settings; with engine='spark' the "
                         "Spark session's own configuration (spark.driver.memory, the master's "
                         "cores) sets them")
    if not _remote(path):
        _files(path)  # FileNotFoundError when nothing is there
    try:
        eng = SparkEngine(spark_master)
    except RuntimeError as exc:  # no pyspark, or no Java 17+: spark_unavailable's sentence
        raise ValueError(f"engine='spark': {exc}") from None
    notes: list[str] = []
    src, numbered, cols = _spark_source(eng, path, notes)
    try:
        if mapping is None:
            fmt = _detect(eng, path, src, cols) if format == "auto" else format
            mapping = _format_mapping(fmt, cols)
            if mapping is None:
                raise ValueError(f"{path}: format={format!r}: {LOG_FORMATS[fmt].description}; the "
                                 f"file's columns {sorted(cols)} are not that")
        sort = _one_run(path, mapping, sort, notes)
        mapping, unit_notes = _resolve_time_unit(eng, path, src, cols, mapping, time_unit)
        return RequestLog(path, mapping, drop_invalid=drop_invalid, sort=sort,
                          check_units=check_units, engine=eng, source_sql=src, cols=cols,
                          numbered_sql=numbered, notes=notes + unit_notes)
    except ValueError:
        raise
    except Exception as exc:  # noqa: BLE001 - Spark's reader errors surface at the first query
        raise ValueError(_spark_error(path, exc)) from None


def _one_run(path: str, mapping: Mapping, sort: bool, notes: list[str]) -> bool:
    """``sort`` for a benchmark run's file (its rows are in completion or per-user order: sorted by
    arrival, and a note says so); several such files in a glob are refused."""
    if not mapping.benchmark_run:
        return sort
    if not _remote(path):
        files = _files(path)
        if len(files) > 1:
            raise ValueError(
                f"{path}: {len(files)} files of the {mapping.name!r} format: each is one load-generator "
                f"run (one request rate), and runs at several rates concatenated are not one log "
                f"(their clocks and rates differ); read one file, e.g. {files[0]}, or read them "
                "together as a sweep (capbook.sweeps.importers.read_sweep, the command line's --sweep)")
    if not sort:
        notes.append(f"{mapping.name}: one load-generator run; its rows are in completion or "
                     "per-user order and are read sorted by arrival (launch) time")
    return True


#: Where the sample request log lies inside :func:`capbook.paths.data_dir`.
SAMPLE_REQUESTS = ("requests", "sample_requests.parquet")


def load_sample_requests(**kwargs: Any) -> RequestLog:
    """Read the generated sample request log (four weeks, two models, two tiers).

    The file is ``requests/sample_requests.parquet`` in :func:`capbook.paths.data_dir`
    (``CAPBOOK_DATA`` moves it). Keyword arguments go to :func:`read_requests`.
    """
    path = data_path(*SAMPLE_REQUESTS)
    if not path.exists():
        raise FileNotFoundError(
            f"{path}: the sample request log is missing; regenerate it with "
            "`python tools/make_request_log.py`")
    return read_requests(path, format="canonical", **kwargs)
