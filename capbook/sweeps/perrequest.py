"""Per-request results of a load generator: their columns, and one load point from them.

Several load generators write one record per request instead of (or beside) a summary:
llmperf's ``*_individual_responses.json``, LMCache's LMBench (one CSV per request rate,
``prompt_tokens,generation_tokens,ttft,generation_time,user_id,question_id,launch_time,finish_time``
in epoch seconds), and many home-grown scripts. This module reads them the one way
:mod:`capbook.sweeps.importers` (as a sweep level) and :mod:`capbook.logs.requestlog` (as a request log) both
use:

- :data:`COLUMN_SYNONYMS`, the table of column names recognised for each field, and
  :func:`match_columns`, which finds them in a file's columns (case, blanks and a unit suffix
  such as ``_ms`` or ``_s`` ignored; the suffix sets the unit);
- :func:`requests_from_frame`, which turns a table of such records into :class:`Requests`
  (seconds and tokens, failed requests marked), refusing values that are not measurements;
- :func:`summarise`, the one per-request → load-point function: percentiles of TTFT, TPOT and
  E2E from the requests; throughput = completed / span of the run; the offered rate from the
  launch times; concurrency by Little's law from the requests' own intervals (time in flight
  summed over the span); and the saturation checks below.

**Saturation** of an open-loop run (launch and finish times known) is detected from the run
itself: the *backlog* criterion flags a run whose median TTFT over the last third of its
launches is at least :data:`BACKLOG_RATIO` times the median over the first third and
:data:`BACKLOG_MIN_S` seconds longer (a queue that grows through the run: the engine completes
less than is launched); the *shortfall* criterion flags a run whose launch rate is below
:data:`LAUNCH_SHARE` of the rate it was asked for (or below 1 − 3/√k of it for k launch
intervals, when lower: a short Poisson run falls that far short by chance) (a client that could not send on time because
the engine had not answered, as LMBench's users wait for their previous answer).

Examples
--------
>>> match_columns(["launch_time", "finish_time", "TTFT (ms)", "prompt_tokens", "output_tokens"])
... # doctest: +NORMALIZE_WHITESPACE
{'launch_time': ('launch_time', None), 'finish_time': ('finish_time', None),
 'ttft': ('TTFT (ms)', 'ms'), 'input_tokens': ('prompt_tokens', None),
 'output_tokens': ('output_tokens', None)}
>>> rate_from_name("mystack_synthetic_output_0.7.csv")
0.7
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["COLUMN_SYNONYMS", "Requests", "match_columns", "missing_columns_message",
           "rate_from_name", "series_from_name", "requests_from_frame", "summarise", "BACKLOG_RATIO", "BACKLOG_MIN_S",
           "LAUNCH_SHARE"]

#: The column names recognised for each field of a per-request record, in the order they are
#: preferred (matched after lower-casing, turning blanks, dashes and dots into ``_`` and taking
#: off a unit suffix: ``_s``, ``_sec``, ``_seconds``, ``_ms``, ``_us``, ``(ms)``…).
COLUMN_SYNONYMS: dict[str, tuple[str, ...]] = {
    "launch_time": ("launch_time", "start_time", "send_time", "sent_time", "request_start_time",
                    "request_start", "start_timestamp", "arrival_time", "scheduled_time",
                    "issue_time", "submit_time", "started_at", "sent_at", "timestamp", "start"),
    "finish_time": ("finish_time", "end_time", "completion_time", "request_end_time",
                    "request_end", "end_timestamp", "done_time", "finished_at", "completed_at",
                    "end"),
    "ttft": ("ttft", "time_to_first_token", "first_token_latency", "first_token_time_delta",
             "ttft_latency"),
    "latency": ("latency", "e2e_latency", "end_to_end_latency", "e2el", "e2e",
                "request_latency", "total_latency", "response_time", "duration", "elapsed"),
    "generation_time": ("generation_time", "decode_time", "decoding_time", "gen_time"),
    "input_tokens": ("input_tokens", "prompt_tokens", "number_input_tokens", "num_input_tokens",
                     "prompt_len", "input_len", "prompt_length", "input_length", "isl",
                     "num_prompt_tokens"),
    "output_tokens": ("output_tokens", "generation_tokens", "completion_tokens",
                      "number_output_tokens", "num_output_tokens", "generated_tokens",
                      "output_len", "output_length", "osl", "num_completion_tokens"),
    "error": ("error", "error_code", "error_msg", "error_message", "err"),
    "success": ("success", "succeeded", "ok", "is_success"),
}
#: What each field is, for messages.
_WHAT = {"launch_time": "when the request was sent", "finish_time": "when its last token came",
         "ttft": "time to first token", "latency": "end-to-end latency",
         "generation_time": "time from the first token to the last",
         "input_tokens": "prompt tokens", "output_tokens": "generated tokens"}
_UNIT_SUFFIX = re.compile(r"(?:_|\()(s|sec|secs|seconds|ms|msec|millis|milliseconds|us|usec|"
                          r"micros|microseconds|ns|nanoseconds)\)?$")
_UNIT_NAMES = {"s": "s", "sec": "s", "secs": "s", "seconds": "s", "ms": "ms", "msec": "ms",
               "millis": "ms", "milliseconds": "ms", "us": "us", "usec": "us", "micros": "us",
               "microseconds": "us", "ns": "ns", "nanoseconds": "ns"}
_SCALE = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
#: Unix epoch times from 1973 to 2103, by unit (the unit of launch / finish times).
_EPOCH_BANDS = {"s": (1e8, 4.2e9), "ms": (1e11, 4.2e12), "us": (1e14, 4.2e15), "ns": (1e17, 4.2e18)}
#: A median end-to-end latency above this many "seconds" is a column in milliseconds.
_LATENCY_MAX_S = 600.0

#: Backlog criterion: median TTFT of the last third of launches over that of the first third.
BACKLOG_RATIO = 2.0
#: ... and at least this many seconds longer (a growth of a few ms is noise, not a queue).
BACKLOG_MIN_S = 0.5
#: Shortfall criterion: launch rate below this share of the requested rate.
LAUNCH_SHARE = 0.90
#: Fewest completed requests for the backlog criterion (10 in each third).
_BACKLOG_MIN_N = 30


def _key(name: str) -> tuple[str, str | None]:
    """A column name as (base, unit): ``'TTFT (ms)'`` -> ``('ttft', 'ms')``."""
    k = re.sub(r"[\s.\-/]+", "_", str(name).strip().lower()).strip("_")
    m = _UNIT_SUFFIX.search(k)
    if m and m.start() > 0:
        return k[:m.start()].rstrip("_"), _UNIT_NAMES[m.group(1)]
    return k, None


def match_columns(columns) -> dict[str, tuple[str, str | None]]:
    """The columns that hold each field of :data:`COLUMN_SYNONYMS`, with the unit their name states.

    Parameters
    ----------
    columns : iterable of str
        A file's column names.

    Returns
    -------
    dict
        ``{field: (column, unit or None)}`` for the fields found; the first synonym in the
        table's order wins when several columns match.
    """
    keys: dict[str, list] = {}
    for c in columns:
        base, unit = _key(c)
        keys.setdefault(base, []).append((c, unit))
    out = {}
    for fld, names in COLUMN_SYNONYMS.items():
        for n in names:
            if n in keys:
                out[fld] = keys[n][0]
                break
    return out


def missing_columns_message(found: dict, columns, what: str) -> str | None:
    """What a per-request file lacks to be read as ``what`` (None when nothing): the fields
    needed, the names recognised for each, and the columns the file has."""
    need = []
    if "ttft" not in found:
        need.append("ttft")
    if not ({"latency", "generation_time"} & set(found) or {"launch_time", "finish_time"} <= set(found)):
        need.append("latency (or generation_time, or launch_time and finish_time)")
    need += [f for f in ("input_tokens", "output_tokens") if f not in found]
    if not need:
        return None
    desc = "; ".join(f"{n} ({_WHAT.get(n.split()[0], '')}: one of "
                     f"{', '.join(COLUMN_SYNONYMS[n.split()[0]][:6])}, ...)" for n in need)
    shown = [str(c) if len(str(c)) <= 80 else str(c)[:80] + "…" for c in list(columns)[:20]]
    return (f"a per-request results file needs, to be read as {what}, a column for each of: {desc}. "
            f"Found columns {shown}{' …' if len(list(columns)) > 20 else ''}; recognised "
            + (", ".join(f"{k} <- {v[0]!r}" for k, v in found.items()) or "none")
            + " (a unit suffix such as _ms or _s sets a column's unit)")


_RATE_IN_NAME = re.compile(r"(?:^|[_\-.])(?:output|qps|rate|rps|request_rate|req_rate)[_=\-]?"
                           r"(\d+(?:\.\d+)?)$", re.I)


def _stem(name: str) -> str:
    return re.sub(r"(\.(csv|tsv|jsonl?|json))+$", "", Path(name).name, flags=re.I)


def rate_from_name(name: str) -> float | None:
    """The request rate a results file's name states (LMBench ``..._output_0.7.csv``,
    ``..._qps_2.0.csv``, ``rate=4.jsonl``), in requests per second; None when it states none."""
    m = _RATE_IN_NAME.search(_stem(name))
    if not m:
        return None
    v = float(m.group(1))
    return v if v > 0 else None


def series_from_name(name: str) -> str | None:
    """The run series a results file belongs to: its name less the rate it states
    (``stack_sharegpt_output_2.0.csv`` -> ``stack_sharegpt``, LMBench's ``{KEY}_{workload}``);
    None when the name states no rate.

    Examples
    --------
    >>> series_from_name("stack_sharegpt_output_2.0.csv"), series_from_name("results.csv")
    ('stack_sharegpt', None)
    """
    stem = _stem(name)
    m = _RATE_IN_NAME.search(stem)
    if not m:
        return None
    return stem[:m.start()].strip("_-.") or None


@dataclass(frozen=True)
class Requests:
    """Per-request records in seconds and tokens.

    Attributes
    ----------
    ttft_s, e2e_s : numpy.ndarray
        Time to first token and end-to-end latency of each request, seconds (NaN for a failed one).
    input_tokens, output_tokens : numpy.ndarray
        Tokens per request.
    ok : numpy.ndarray of bool
        Whether the request completed (failed ones count in ``failed_requests`` only).
    launch_s, finish_s : numpy.ndarray or None
        When each request was sent and completed, seconds on one clock (epoch or the run's own).
    notes : tuple of str
        How units were read.
    """

    ttft_s: np.ndarray
    e2e_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    ok: np.ndarray
    launch_s: np.ndarray | None = None
    finish_s: np.ndarray | None = None
    notes: tuple = ()


def _numbers(df: pd.DataFrame, col: str, path, row_name, failed: np.ndarray) -> np.ndarray:
    """A column as numbers (NaN where empty); a value that is not a number, in a request not
    marked failed, raises naming the row."""
    v = pd.to_numeric(df[col], errors="coerce").to_numpy(float)
    bad = np.flatnonzero(~np.isfinite(v) & df[col].notna().to_numpy() & ~failed)
    if len(bad):
        i = bad[0]
        raise ValueError(f"{path}: {row_name(i)}: column {col!r} is {df[col].iloc[i]!r}, not a number")
    return v


def _failed(df: pd.DataFrame, found: dict) -> np.ndarray:
    """Requests a column marks as failed: a non-empty error (not 0, None or false), or success false."""
    bad = np.zeros(len(df), bool)
    if "error" in found:
        e = df[found["error"][0]]
        txt = e.astype(str).str.strip().str.lower()
        bad |= e.notna().to_numpy() & ~txt.isin(["", "0", "0.0", "none", "null", "nan", "false",
                                                 "200"]).to_numpy()
    if "success" in found:
        s = df[found["success"][0]].astype(str).str.strip().str.lower()
        bad |= s.isin(["false", "0", "no", "0.0"]).to_numpy()
    return bad


def requests_from_frame(df: pd.DataFrame, path, *, what: str = "a sweep level",
                        row_name=None) -> Requests:
    """Read a table of per-request records (columns found by :func:`match_columns`).

    Parameters
    ----------
    df : pandas.DataFrame
        One row per request.
    path : str or Path
        The file, for messages.
    what : str
        What the file is read as, for messages.
    row_name : callable, optional
        ``row_name(i) -> str``: how a message names row ``i`` (default ``"row i+1"``).

    Returns
    -------
    Requests
        A request is failed (counted, never timed) when an error column holds a value other
        than empty, 0, false or 200, a success column is false, it has no TTFT, or it produced
        no output token. Durations in seconds: a column's unit from its name's suffix; else
        launch and finish times in the epoch unit their magnitude shows (seconds on the run's
        own clock when they are too small for epoch times); TTFT, latency and generation time
        in the coarsest unit that fits them between launch and finish, else seconds unless the
        median latency exceeds 600 (then milliseconds; a note says so).

    Raises
    ------
    ValueError
        A needed column is missing (the message names the columns found and the ones needed),
        or a value is not a number, negative, or a request ends before it starts.
    """
    if row_name is None:
        def row_name(i):
            return f"row {i + 1}"
    found = match_columns(df.columns)
    msg = missing_columns_message(found, df.columns, what)
    if msg:
        raise ValueError(f"{path}: {msg}")
    notes = []
    fail = _failed(df, found)
    num = {f: _numbers(df, c, path, row_name, fail) for f, (c, _) in found.items()
           if f not in ("error", "success")}
    # times: the unit a name states, else the epoch unit their magnitude shows
    launch = finish = None
    if "launch_time" in found:
        lo = num["launch_time"]
        unit = found["launch_time"][1]
        if unit is None:
            med = float(np.nanmedian(lo)) if np.isfinite(lo).any() else 0.0
            unit = next((u for u, (a, b) in _EPOCH_BANDS.items() if a <= abs(med) < b), "s")
        launch = lo * _SCALE[unit]
        if "finish_time" in found:
            funit = found["finish_time"][1] or unit
            finish = num["finish_time"] * _SCALE[funit]
    span_e2e = finish - launch if finish is not None else None

    def duration(fld):
        col, unit = found[fld]
        v = num[fld]
        if unit is not None:
            return v * _SCALE[unit]
        if span_e2e is not None:
            ok = np.isfinite(v) & np.isfinite(span_e2e) & (span_e2e > 0)
            if ok.any():
                # the coarsest unit in which the column fits inside finish - launch
                for u in ("s", "ms", "us"):
                    if np.mean(v[ok] * _SCALE[u] <= span_e2e[ok] * 1.05 + 1e-3) >= 0.9:
                        break
                if u != "s":
                    notes.append(f"column {col!r} read in {u} (in seconds it would not fit "
                                 "between launch and finish)")
                return v * _SCALE[u]
        return v
    ttft = duration("ttft")
    if "latency" in found:
        e2e = duration("latency")
    elif "generation_time" in found:
        e2e = ttft + duration("generation_time")
    else:
        e2e = span_e2e
    stated = any(found[f][1] for f in ("ttft", "latency", "generation_time") if f in found)
    if span_e2e is None and not stated:
        med = float(np.nanmedian(e2e)) if np.isfinite(e2e).any() else 0.0
        if med > _LATENCY_MAX_S:
            ttft, e2e = ttft * 1e-3, e2e * 1e-3
            notes.append(f"latencies read in milliseconds (a median of {med:.4g} s per request "
                         "is not plausible; name the columns with _s or _ms to say which)")
    if launch is not None and finish is None:
        finish = launch + e2e
    out_tok = num["output_tokens"]
    inp_tok = num["input_tokens"]
    # a request with no output token completed nothing that can be timed
    fail = fail | ~(out_tok > 0) | ~np.isfinite(ttft)
    ok = ~fail
    for fld, v in (("ttft", ttft), ("latency", e2e), ("input_tokens", inp_tok),
                   ("output_tokens", out_tok)):
        neg = np.flatnonzero(ok & ~(v >= 0))
        if len(neg):
            i = neg[0]
            col = found[fld][0] if fld in found else "finish_time - launch_time"
            raise ValueError(f"{path}: {row_name(i)}: {fld} ({col!r}) is {v[i]:g}: a completed request "
                             "has a time and token counts >= 0")
    late = np.flatnonzero(ok & (e2e < ttft * (1 - 1e-9) - 1e-6))
    if len(late):
        i = late[0]
        raise ValueError(f"{path}: {row_name(i)}: the end-to-end latency {e2e[i]:.6g} s is shorter "
                         f"than the time to first token {ttft[i]:.6g} s")
    return Requests(ttft, e2e, inp_tok, out_tok, ok, launch, finish, tuple(notes))


def _pcts(v) -> dict:
    return {p: float(np.percentile(v, p)) for p in (50, 95, 99)}


def summarise(req: Requests, *, concurrency=None, rate_rps=None, throughput_rps=None) -> dict:
    """One load point from per-request records.

    Parameters
    ----------
    req : Requests
        The run's requests.
    concurrency : float, optional
        The number of requests the client held in flight (a closed-loop run): the point is a
        ``concurrency`` level. Without it the run must have launch and finish times and is an
        open-loop (``rate``) level.
    rate_rps : float, optional
        The request rate the run was asked for (requests per second), e.g. from the file name;
        default: estimated from the launch times.
    throughput_rps : float, optional
        A measured request throughput (requests per second) from elsewhere (a summary beside the
        file); default: completed / span of the run, or for a closed-loop run without times
        concurrency / mean E2E (Little's law, an upper bound).

    Returns
    -------
    dict
        Sweep-table values (``ttft_p50_s`` ... ``tpot_p99_s``, ``request_throughput_rps``,
        ``output_throughput_tps``, ``mean_input_tokens``, ``mean_output_tokens``,
        ``num_requests``, ``failed_requests``, ``concurrency``, ``load_kind``,
        ``concurrency_source``, ``request_rate_target``, ``offered_rps``, ``mean_e2e_s``,
        ``mean_ttft_s``, ``e2e_p50_s``, ``e2e_p99_s``), ``notes`` (how values were
        derived), ``saturation`` (reasons; empty when none), and the per-request token arrays
        ``output_tokens`` and ``input_tokens``.

    Raises
    ------
    ValueError
        No request completed, no request has two output tokens (TPOT undefined), or the run is
        open loop without launch and finish times.

    Examples
    --------
    >>> t = np.arange(40.0)
    >>> r = Requests(ttft_s=np.full(40, 0.2), e2e_s=np.full(40, 2.2), input_tokens=np.full(40, 100.0),
    ...              output_tokens=np.full(40, 101.0), ok=np.ones(40, bool), launch_s=t, finish_s=t + 2.2)
    >>> s = summarise(r)
    >>> round(s["tpot_p50_s"], 3), round(s["offered_rps"], 3), s["load_kind"], s["saturation"]
    (0.02, 1.0, 'rate', [])
    """
    ok = req.ok
    n_ok, n_all = int(ok.sum()), len(ok)
    if n_ok == 0:
        raise ValueError(f"all {n_all} requests failed or produced no token: no measurement")
    tt, e2e = req.ttft_s[ok], req.e2e_s[ok]
    out, inp = req.output_tokens[ok], req.input_tokens[ok]
    multi = out > 1
    if not multi.any():
        raise ValueError("no completed request has more than one output token: the time per "
                         "output token is undefined")
    tpot = (e2e[multi] - tt[multi]) / (out[multi] - 1)
    notes = list(req.notes)
    p_tt, p_tp, p_e2e = _pcts(tt), _pcts(tpot), _pcts(e2e)
    vals = dict(
        ttft_p50_s=p_tt[50], ttft_p95_s=p_tt[95], ttft_p99_s=p_tt[99],
        tpot_p50_s=p_tp[50], tpot_p95_s=p_tp[95], tpot_p99_s=p_tp[99],
        e2e_p50_s=p_e2e[50], e2e_p99_s=p_e2e[99],
        mean_input_tokens=float(inp.mean()), mean_output_tokens=float(out.mean()),
        num_requests=float(n_ok), failed_requests=float(n_all - n_ok),
        mean_e2e_s=float(e2e.mean()), mean_ttft_s=float(tt.mean()),
        request_rate_target=float(rate_rps) if rate_rps else math.nan, offered_rps=math.nan,
        output_tokens=out, input_tokens=inp,
    )
    sat: list[str] = []
    timed = req.launch_s is not None and req.finish_s is not None
    if timed:
        launch, finish = req.launch_s, req.finish_s
        span = float(np.nanmax(finish[ok]) - np.nanmin(launch))
        if not span > 0:
            raise ValueError("the run's launch and finish times span no time")
        x = n_ok / span
        in_flight = float(np.sum(finish[ok] - launch[ok]) / span)
        lt = np.sort(launch[np.isfinite(launch)])
        launch_rate = (len(lt) - 1) / float(lt[-1] - lt[0]) if len(lt) > 1 and lt[-1] > lt[0] else math.nan
        vals.update(request_throughput_rps=x, output_throughput_tps=float(out.sum()) / span,
                    in_flight_mean=in_flight, launch_rps=launch_rate)
        # the backlog criterion: TTFT grows through the run
        order = np.argsort(launch[ok], kind="stable")
        if n_ok >= _BACKLOG_MIN_N:
            third = n_ok // 3
            first, last = float(np.median(tt[order[:third]])), float(np.median(tt[order[-third:]]))
            if last >= BACKLOG_RATIO * first and last - first >= BACKLOG_MIN_S:
                sat.append(f"backlog: the median TTFT grew from {first:.3g} s over the first third of "
                           f"the launches to {last:.3g} s over the last third (at least {BACKLOG_RATIO:g}× "
                           f"and {BACKLOG_MIN_S:g} s longer): completions fell behind launches")
        if rate_rps:
            offered = float(rate_rps)
            # k Poisson launches estimate their rate within about 1/sqrt(k): a short run falls short
            # of the requested rate by chance, so the bar is three of those below it when lower
            k = len(lt) - 1
            share = min(LAUNCH_SHARE, 1.0 - 3.0 / math.sqrt(k)) if k > 0 else 0.0
            if math.isfinite(launch_rate) and launch_rate < share * offered:
                sat.append(f"shortfall: requests were launched at {launch_rate:.3g} req/s, "
                           f"{launch_rate / offered:.0%} of the requested {offered:g} req/s (below "
                           f"{share:.0%}, what {k + 1} Poisson launches reach by chance): the client "
                           "waited for the engine")
        else:
            offered = launch_rate
            notes.append(f"offered rate {launch_rate:.4g} req/s estimated from the launch times "
                         "(the file name states no rate)")
        vals["offered_rps"] = offered
    if throughput_rps is not None:
        vals["request_throughput_rps"] = float(throughput_rps)
        vals["output_throughput_tps"] = float(throughput_rps) * float(out.mean())
    if concurrency is not None:
        vals.update(concurrency=float(concurrency), load_kind="concurrency", concurrency_source="set")
        if throughput_rps is None and not timed:
            x = float(concurrency) / float(e2e.mean())
            vals.update(request_throughput_rps=x, output_throughput_tps=x * float(out.mean()))
            notes.append("request throughput by Little's law (concurrency / mean end-to-end latency): "
                         "an upper bound, since the file records no times")
    elif timed:
        vals.update(concurrency=vals["in_flight_mean"], load_kind="rate",
                    concurrency_source="littles_law")
        notes.append("concurrency is the requests' time in flight summed over the run's span "
                     "(Little's law on the run's own intervals)")
    else:
        raise ValueError("the file records no launch and finish times, so its load level is "
                         "unknown; pass concurrency= (the requests the client held in flight)")
    vals["notes"] = notes
    vals["saturation"] = sat
    return vals
