"""The ``capbook`` console script.

Each subcommand is one ``add_<name>_command(subparsers)`` function that adds its parser and sets
``func`` to a function taking the parsed arguments and returning an exit code. To add a command,
write such a function and append it to :data:`COMMANDS`.

Building the parser imports nothing but the standard library: a command imports the modules it
needs inside its ``run_<name>`` function, so ``capbook --help`` and ``capbook <command> --help``
start at once (tests/test_packaging.py checks that no pandas, duckdb, scipy or altair is loaded).
The number flags of ``trace``, ``predict``, ``book`` and the sweep-reading flags are read as text
and checked by :func:`_number` (capbook.validation underneath), so that every error is one line
naming the flag; the planning numbers of ``plan`` (``--horizon``, ``--headroom``, ...) are checked
by :func:`capbook.plan.steps.capacity_plan`, which knows their ranges.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import sys
import warnings
from typing import Callable, Sequence


__all__ = ["COMMANDS", "build_parser", "main", "plain_text"]


def _cli_message(message: str) -> str:
    """:func:`capbook.app.messages.cli_message`, imported on first use (``capbook --help`` needs none)."""
    from capbook.app.messages import cli_message

    return cli_message(message)


# --------------------------------------------------------------------------------------------
# capbook trace FILE
# --------------------------------------------------------------------------------------------
def add_trace_command(sub: argparse._SubParsersAction) -> None:
    """Register ``capbook trace``."""
    p = sub.add_parser(
        "trace",
        help="validate a request log and print its summary",
        description=(
            "Validate a request log (CSV, Parquet or JSON lines) and print rows, span, rate, "
            "token percentiles, Ca2, Cs2, the busiest clock hour and the busiest 60 minutes (a sliding window by "
            "output tokens: the one capbook plan sizes from). Exit status 2 when the log is invalid."
        ),
    )
    p.add_argument("file", metavar="LOG",
                   help="the request log (CSV, Parquet or JSON lines), or a glob of such files "
                        "('logs/*.parquet'; with --engine spark also a URL Spark reads, e.g. s3a://...). "
                        "Paths are paths: a file that exists is read as that file even with *, ? or [ "
                        "in its name; a glob is expanded only when no file has that name")
    p.add_argument("--format", default="auto", type=_log_format, metavar="FORMAT",
                   help=f"source format: auto (detect it) or one capbook.logs.requestlog reads (default: auto; "
                        f"{_LOG_FORMATS_HELP})")
    _add_log_reading_arguments(p)
    p.add_argument("--engine", default="duckdb", choices=("duckdb", "spark"),
                   help="where the aggregation runs: duckdb on this machine (default), or spark "
                        "(PySpark: pip install 'capbook[spark]' and Java 17+) for logs next to a "
                        "cluster; the same SQL and the same results")
    p.add_argument("--spark-master", default=None, metavar="URL",
                   help="the Spark master for --engine spark (default local[*]: every core here), "
                        "e.g. spark://host:7077 or yarn")
    p.add_argument("--no-unit-check", action="store_true",
                   help="skip the span/rate sanity check of the time unit")
    p.add_argument("--output-cap", default=None, metavar="TOKENS",
                   help="report the share of requests above this max-tokens cap")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--hourly", metavar="CSV", default=None,
                   help="also write the log's hourly sums per model, tier (and tenant) to CSV: the "
                        "history `capbook plan --history` reads. An existing file is replaced only when "
                        "it is such a CSV (capbook's hourly header), or with --force")
    p.add_argument("--force", action="store_true",
                   help="let --hourly replace a file that is not an hourly CSV of capbook's")
    g = p.add_argument_group("service times (Cs2 from token counts): a sweep, or two rates")
    g.add_argument("--sweep", default=None, metavar="PATH",
                   help=f"a sweep (a load generator's results, {_SWEEP_FORMATS_HELP}), read with the "
                        "flags below; needs --slots")
    g.add_argument("--slots", default=None, metavar="S",
                   help="slots per replica: the concurrency at which to read the sweep's TPOT")
    _add_sweep_reading_arguments(g, prefill_rate=False)
    g.add_argument("--prefill-rate", default=None, metavar="TPS",
                   help="prefill rate in input tokens/s (with --tpot, instead of --sweep)")
    g.add_argument("--tpot", default=None, metavar="SECONDS",
                   help="time per output token in seconds (with --prefill-rate, instead of --sweep)")
    p.set_defaults(func=run_trace)


def run_trace(args: argparse.Namespace) -> int:
    """Run ``capbook trace``; returns the exit code."""
    sweep = concurrency = prefill = tpot = None
    if (args.prefill_rate is None) != (args.tpot is None):
        print("capbook trace: give both --prefill-rate and --tpot (or neither)", file=sys.stderr)
        return 2
    if args.sweep is not None and args.prefill_rate is not None:
        print("capbook trace: give --sweep or --prefill-rate/--tpot, not both", file=sys.stderr)
        return 2
    try:
        output_cap = None if args.output_cap is None else _number(
            args.output_cap, "--output-cap", "a whole number of tokens >= 1", whole=True)
        if args.prefill_rate is not None:
            prefill = _number(args.prefill_rate, "--prefill-rate", "a positive number of tokens/s")
            tpot = _number(args.tpot, "--tpot", "a positive number of seconds")
        if args.sweep is not None:
            if args.slots is None:
                raise ValueError("--sweep needs --slots (the concurrency at which to read TPOT)")
            concurrency = _number(args.slots, "--slots", "a positive number of slots")
        sweep_opts = _sweep_options(args)  # the sweep-reading flags' numbers, checked
        # every input path before any reading: nothing is computed for a file that cannot be read
        if not (args.engine == "spark" and re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", args.file)):
            _check_path("", args.file, pattern=True)
        if args.sweep is not None:
            _check_path("--sweep", args.sweep, folder=True)
            sweep = _read_sweep_flag(args)
            try:  # the sweep is read, not extended: --slots must fall in what it measured
                sweep.tpot(concurrency)
            except ValueError as exc:
                raise ValueError(f"--slots {args.slots}: {exc}") from None
        elif set(sweep_opts) - {"prefill_rate_tps"}:  # trace's --prefill-rate goes with --tpot
            raise ValueError("--load, --repeats, --where, --max-num-seqs and --sweep-concurrency apply "
                             "to --sweep PATH; give the sweep they are for")
        if args.hourly is not None:  # where the hourly CSV goes, checked before the log is read
            _check_out_file(args.hourly, "--hourly", force=args.force, header=_HOURLY_HEADER)
    except (ValueError, FileNotFoundError) as exc:
        return _fail("trace", exc)
    if args.spark_master is not None and args.engine != "spark":
        return _fail("trace", ValueError("--spark-master applies to --engine spark; add --engine spark"))
    from capbook.logs.requestlog import read_requests

    size = os.path.getsize(args.file) if os.path.isfile(args.file) else 0
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # the report is printed below
            opts = _requests_options(args)
            if args.no_unit_check:
                opts["check_units"] = False
            if args.engine == "spark":
                opts.update(engine="spark", spark_master=args.spark_master)
            else:
                opts["progress"] = size > 20_000_000 and not _wants_plain(sys.stderr)
            log = read_requests(args.file, format=args.format, **opts)
        s = log.summary(sweep=sweep, concurrency=concurrency, output_cap=output_cap,
                        prefill_rate_tps=prefill, tpot_s=tpot)
    except (ValueError, FileNotFoundError) as exc:
        return _fail("trace", exc)
    if args.hourly is not None:
        try:
            rows, note = _write_hourly(log, args.hourly)
        except (ValueError, OSError) as exc:
            return _fail("trace", ValueError(f"--hourly {args.hourly}: {exc}"))
        print(f"capbook trace: wrote {rows:,} hourly rows to {args.hourly} (every hour of the log, "
              f"zeros included){'; ' + note if note else ''}", file=sys.stderr)
    if args.json:
        print(json.dumps(_jsonable(s), indent=2))
        return 0
    _print_summary(s)
    return 0


#: Rows ``trace --hourly`` writes per tenant at most: beyond, it writes per model and tier.
_HOURLY_MAX_ROWS = 5_000_000


def _write_hourly(log, path) -> tuple[int, str]:
    """Write ``log``'s hourly sums (per model, tier and tenant when it has one) as the CSV that
    :func:`capbook.logs.hourly.read_token_csv` and ``capbook plan --history`` read; returns the
    rows written and a note ("" or why the tenants were left out).

    Every hour from the log's first to its last arrival appears for every group, with zero
    counts in hours without requests (a forecast needs the silent hours too)."""
    note = ""
    if "tenant" in log.columns:
        groups = len(log.query("SELECT DISTINCT model, tier, COALESCE(tenant, '(none)') FROM req"))
        hours = log.last_us // 3_600_000_000 - log.first_us // 3_600_000_000 + 1
        if groups * hours <= _HOURLY_MAX_ROWS:
            hourly = log.hourly(by=("model", "tier", "tenant"))
        else:
            note = (f"{groups:,} model, tier and tenant groups over {hours:,} hours would be "
                    f"{groups * hours:,} rows: written per model and tier instead")
            hourly = log.hourly()
    else:
        hourly = log.hourly()
    hourly = hourly.copy()
    hourly["period_start"] = hourly["period_start"].dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    _atomic_write(path, hourly.to_csv(index=False, lineterminator="\n").encode("utf-8"))
    return len(hourly), note


#: The first columns of the CSV ``trace --hourly`` writes: a file that starts so is capbook's to replace.
_HOURLY_HEADER = "period_start,model,tier,"


def _check_out_file(path: str, flag: str, *, force: bool, header: str) -> None:
    """Refuse an output file before any computation: a folder in its place, a folder that is
    missing or cannot be written, a name too long, or an existing file that does not start with
    ``header`` (not capbook's output of this kind) unless ``force``; raises ValueError naming
    ``flag`` and the path."""
    import tempfile

    if not str(path).strip():
        raise ValueError(f"{flag}: give a file name")
    if os.path.isdir(path):
        raise ValueError(f"{flag} {path}: is a folder; name the CSV file to write")
    name = os.path.basename(os.path.abspath(path))
    if len(os.fsencode(name)) > 255:
        raise ValueError(f"{flag} {path[:60]}...: the file name is {len(os.fsencode(name))} bytes long; "
                         "a file name may have 255")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"{flag} {path}: the folder {folder} does not exist (or is a file); create it first")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".capbook-probe-", dir=folder)
        os.close(fd)
        os.remove(tmp)
    except OSError as exc:
        raise ValueError(f"{flag} {path}: cannot write in {folder} ({exc.strerror or exc})") from None
    if force or not os.path.lexists(path):
        return
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            first = f.readline()
    except OSError:
        first = ""
    if os.path.islink(path) or not first.startswith(header):
        raise ValueError(f"{flag} {path}: the file is there and is not capbook's (it does not start with "
                         f"{header.rstrip(',')!r}); pass --force to replace it, or name another file")


def _atomic_write(path: str, data: bytes) -> str:
    """Write ``data`` to ``path`` through a temporary file in the same folder renamed over it, so
    an interrupt leaves the old file or the new, never half; the file's mode is what ``open``
    would give it. Returns ``path``."""
    import tempfile

    umask = os.umask(0o022)
    os.umask(umask)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 -> what open() would have made
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path


def _jsonable(s: dict) -> dict:
    import pandas as pd

    tok = s["tokens"].reset_index().to_dict(orient="records")
    ptm = s["peak_to_mean"].reset_index()
    ptm["peak_hour"] = [None if pd.isna(t) else str(t) for t in ptm["peak_hour"]]
    out = {k: v for k, v in s.items() if k not in ("tokens", "peak_to_mean", "groups")}
    out["start"], out["end"] = str(s["start"]), str(s["end"])
    out["tokens"] = tok
    out["peak_to_mean"] = ptm.to_dict(orient="records")
    out["groups"] = s["groups"].to_dict(orient="records")
    if s.get("busiest_60min") is not None:
        out["busiest_60min"] = {k: (v.isoformat() if isinstance(v, pd.Timestamp) else v)
                                for k, v in s["busiest_60min"].items()}
    if s["arrivals"] is not None:
        out["arrivals"] = {k: v for k, v in s["arrivals"].items()}
        out["arrivals"]["idc"] = {str(k): v for k, v in s["arrivals"]["idc"].items()}

    return _clean_json(out)


def _pct(x) -> str:
    import pandas as pd

    return f"{'':>9}" if pd.isna(x) else f"{100 * float(x):>8.2f}%"


def _print_summary(s: dict) -> None:
    import pandas as pd

    from capbook.logs.stats import format_duration

    w = print
    w(f"file      {s['path']}")
    w(f"format    {s['format']}")
    w(f"rows      {s['rows']:,}" + (f" ({s['dropped']:,} of {s['rows_read']:,} dropped)"
                                   if s["dropped"] else ""))
    for r in s["report"]:
        w(f"          {r['rows']:,} rows: {r['reason']} in {r['column']!r} -> {r['action']}; "
          f"first rows {r['first_rows']}")
    w(f"span      {s['start']} -> {s['end']} ({format_duration(s['span_s'])})")
    if math.isfinite(s["rate_rps"]):
        w(f"rate      {s['rate_rps']:,.4g} requests/s ({s['rate_rps'] * 3600:,.0f} per hour)")
    else:
        w("rate      n/a (every request arrives at the same instant)")
    w("status    " + ", ".join(f"{k} {v:,}" for k, v in s["status"].items()))
    g = s["groups"]
    w("groups    " + ", ".join(f"{m}/{t} {n:,}" for m, t, n in zip(g["model"], g["tier"], g["n"])))
    w("")
    tok = s["tokens"]
    cap = "share_above_cap" in tok.columns
    w(f"{'tokens':<14}{'mean':>10}{'p50':>10}{'p95':>10}{'p99':>10}{'max':>10}"
      + (f"{'>cap':>9}" if cap else ""))
    for name, r in tok.iterrows():
        w(f"{name:<14}{r['mean']:>10,.1f}{r['p50']:>10,.0f}{r['p95']:>10,.0f}{r['p99']:>10,.0f}"
          f"{int(r['max']):>10,}" + (_pct(r["share_above_cap"]) if cap else ""))
    w("")
    a = s["arrivals"]
    if a is None:
        w("Ca2       n/a (fewer than 3 requests)")
    else:
        w(f"Ca2       {a['ca2']:.3f}  (inter-arrival time: mean {a['iat_mean_s']:.4g} s)")
        w("IDC       " + ", ".join(f"{k:g} s: {v:.2f}" for k, v in a["idc"].items() if math.isfinite(v)))
        if a["caveat"]:
            w(f"caveat    {_cli_message(a['caveat'])}")
    svc = s["service"]
    if svc is None:
        why = s.get("no_service") or "no end times in the log"
        why = why.split("; pass ")[0]  # the remedy is spelled below, in flags
        w(f"Cs2       n/a ({_cli_message(why)}; pass --sweep and --slots, or "
          "--prefill-rate and --tpot)")
    else:
        w(f"Cs2       {svc['cs2']:.3f}  ({svc['source']}; mean service time {svc['mean_s']:.3g} s)")
    p = s["peak_to_mean"]
    if s.get("full_hours", 1) and not pd.isna(p.loc["total_tokens", "peak"]):
        at = p.loc["total_tokens", "peak_hour"]
        w(f"peak hour clock hour {at:%Y-%m-%d %H:%M}–{at + pd.Timedelta(hours=1):%H:%M} UTC, the busiest by tokens: "
          f"{int(p.loc['total_tokens', 'peak']):,} tokens, {int(p.loc['requests', 'peak']):,} requests; peak-to-mean "
          f"{p.loc['total_tokens', 'ratio']:.2f} (tokens), {p.loc['requests', 'ratio']:.2f} (requests) over "
          f"{s['full_hours']:,} full hours")
    else:
        w("peak hour n/a (no fully covered clock hour)")
    b = s.get("busiest_60min")
    if b is not None:
        figures = (f"{b['requests']:,} requests ({b['request_rate']:,.4g}/s), "
                   f"{b['input_tokens'] + b['output_tokens']:,} tokens, {b['output_tps']:,.0f} output tokens/s")
        if b["whole_log"]:
            w(f"          busiest 60 minutes n/a: the log spans {format_duration(b['seconds'])}; over its span "
              f"{figures} (capbook plan sizes from the same span of its model and tier)")
        else:
            w(f"          busiest 60 minutes by output tokens {b['start']:%Y-%m-%d %H:%M}–{b['end']:%H:%M} UTC "
              f"(a sliding window; capbook plan sizes from the same window of its model and tier): {figures}")
    for note in s.get("notes", []):
        w(f"note      {_cli_message(note)}")
    for cav in s.get("caveats", []):
        w(f"caveat    {_cli_message(cav)}")


# --------------------------------------------------------------------------------------------
# capbook plan / capbook book (the capstone; see capbook.plan.steps and capbook.app.bookbuild)
# --------------------------------------------------------------------------------------------
def _log_format(text: str) -> str:
    """The value of ``--format``: ``auto`` or a format of :mod:`capbook.logs.requestlog`.

    A ``type=`` rather than ``choices=``: argparse lists choices in every ``--help``, and the
    registry's module imports pandas and duckdb, which ``capbook <command> --help`` must not wait for.

    Examples
    --------
    >>> _log_format("auto")
    'auto'
    >>> _log_format("nope")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: invalid choice: 'nope' (choose from auto, canonical, ...)
    """
    if text == "auto":
        return text
    from capbook.logs.requestlog import LOG_FORMATS

    if text not in LOG_FORMATS:
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from auto, {', '.join(LOG_FORMATS)})")
    return text


def _add_data_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("request log")
    g.add_argument("--requests", metavar="LOG", default=None,
                   help="request log (CSV, Parquet or JSON lines; a glob reads several files as one "
                        "log, but a file that exists is read as that file even with *, ? or [ in its "
                        "name); default: the sample log")
    g.add_argument("--format", default="auto", type=_log_format, metavar="FORMAT",
                   help=f"request log format: auto (detect it) or one capbook.logs.requestlog reads "
                        f"(default: auto; {_LOG_FORMATS_HELP})")
    _add_log_reading_arguments(g)
    g.add_argument("--engine", default="duckdb", choices=("duckdb", "spark"),
                   help="where the log's SQL runs: duckdb on this machine (default), or spark (PySpark and "
                        "Java 17+) for a log next to a cluster; only the busiest hours' rows reach pandas, "
                        "so a log of tens of millions of rows plans in bounded memory on either")
    g.add_argument("--spark-master", default=None, metavar="URL",
                   help="the Spark master for --engine spark (default local[*]), e.g. spark://host:7077")
    g = p.add_argument_group("sweep")
    g.add_argument("--sweep", metavar="PATH", default=None,
                   help=f"sweep of your deployment: a load generator's result file or folder "
                        f"({_SWEEP_FORMATS_HELP}; capbook is a capbook sweep CSV); default: a sample sweep")
    _add_sweep_reading_arguments(g)


def _add_history_argument(p) -> None:
    p.add_argument("--history", metavar="CSV", default=None,
                   help="with --requests: hourly sums of a longer history than the log (period_start, model, "
                        "tier, requests, throttled, input_tokens, output_tokens per hour) for the forecast; "
                        "the log then supplies lengths, burstiness and the replay (default: the log's own "
                        "hours; without --requests, the sample gateway's 26 weeks)")


#: The formats capbook.logs.requestlog and capbook.sweeps.importers read, for --help (which must not import them;
#: tests/test_importers_perrequest.py checks these against the registries).
_LOG_FORMAT_NAMES = ("canonical", "azure2023", "azure2024", "burstgpt", "mooncake", "litellm",
                     "lmbench", "per-request")
_SWEEP_FORMAT_NAMES = ("guidellm", "inference-benchmarker", "inference-perf", "llmperf",
                       "llmperf-wrapped", "aiperf", "genai-perf", "sglang", "vllm", "llmperf-requests",
                       "aiperf-csv", "guidellm-csv", "capbook", "lmbench", "per-request")
_SWEEP_FORMATS_HELP = f"formats read: {', '.join(_SWEEP_FORMAT_NAMES)}"
_LOG_FORMATS_HELP = f"formats read: {', '.join(_LOG_FORMAT_NAMES)}"
#: The canonical fields --columns maps, and the Mapping settings it takes.
_COLUMN_FIELDS = ("arrival_time", "input_tokens", "output_tokens", "model", "tier", "status",
                  "first_token_time", "end_time", "tenant", "request_id", "duration", "ttft", "error")
_COLUMN_SETTINGS = ("epoch", "duration_unit", "time_format", "default_model", "default_tier")


def _add_log_reading_arguments(g) -> None:
    g.add_argument("--columns", action="append", default=[], metavar="FIELD=COLUMN,...",
                   help="name the log's columns yourself instead of --format, e.g. "
                        "arrival_time=launch_time,input_tokens=prompt_tokens,output_tokens=generation_tokens"
                        " (needs those three; also end_time, first_token_time, ttft and duration (seconds "
                        "after arrival), model, tier, status, tenant, request_id, and epoch=DATE for "
                        "times counted from a start, duration_unit=ms)")
    g.add_argument("--drop-invalid", action="store_true",
                   help="drop invalid rows and exact duplicates (and report them) instead of failing "
                        "or keeping them")
    g.add_argument("--sort", action="store_true", help="accept rows out of arrival order")
    g.add_argument("--time-unit", default=None, choices=("s", "ms", "us", "ns"),
                   help="unit of numeric timestamps (default: the format's, or detected from their size)")


def _add_sweep_reading_arguments(g, *, prefill_rate: bool = True) -> None:
    g.add_argument("--load", default="auto", choices=("auto", "concurrency", "rate", "all"),
                   help="which load points of the sweep to use: closed-loop (concurrency), open-loop "
                        "(rate) or all; auto refuses a mix (default: auto)")
    g.add_argument("--repeats", default="error", choices=("error", "mean"),
                   help="several runs at one load level: refuse (error) or average them (mean)")
    g.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                   help="keep only the sweep's points with this value of a configuration key (e.g. "
                        "config=vllm, gpu=H100, max_num_seqs=128, or a vLLM --metadata key such as "
                        "deployment=base); repeat for several")
    g.add_argument("--max-num-seqs", default=None, metavar="N",
                   help="the engine's running-sequence limit (vLLM --max-num-seqs), when the sweep's "
                        "files do not record it")
    if prefill_rate:  # capbook predict fits prefill into the step cost and has no use for it
        g.add_argument("--prefill-rate", default=None, metavar="TPS",
                       help="a measured prefill rate (input tokens/s) instead of the one derived from "
                            "the sweep's lowest-level TTFT")
    g.add_argument("--sweep-concurrency", default=None, metavar="N",
                   help="the load level of a sweep file that does not record one (a lone aiperf CSV, "
                        "a per-request llmperf file); a per-request results file with launch times is "
                        "then read as this closed-loop level instead of an open-loop rate")


def _requests_options(args) -> dict:
    """Keyword arguments of capbook.logs.requestlog.read_requests from the CLI flags."""
    opts = {}
    if getattr(args, "drop_invalid", False):
        opts["drop_invalid"] = True
    if getattr(args, "sort", False):
        opts["sort"] = True
    if getattr(args, "time_unit", None):
        opts["time_unit"] = args.time_unit
    if getattr(args, "columns", None):
        opts["mapping"] = _columns_flag(args.columns, getattr(args, "format", "auto"))
    if getattr(args, "engine", "duckdb") == "spark" and hasattr(args, "requests"):
        opts["engine"] = "spark"
    if getattr(args, "spark_master", None) is not None and hasattr(args, "requests"):
        if getattr(args, "engine", "duckdb") != "spark":
            raise ValueError("--spark-master applies to --engine spark; add --engine spark")
        opts["spark_master"] = args.spark_master
    return opts


def _columns_flag(items, fmt: str = "auto") -> dict:
    """The fields of a ``capbook.logs.requestlog.Mapping`` from ``--columns FIELD=COLUMN,...`` (repeatable);
    raises ValueError naming the flag.

    Examples
    --------
    >>> _columns_flag(["arrival_time=ts,input_tokens=in", "output_tokens=out"])
    {'arrival_time': 'ts', 'input_tokens': 'in', 'output_tokens': 'out', 'name': '--columns'}
    """
    if fmt != "auto":
        raise ValueError(f"--columns names the columns itself: give --format {fmt} or --columns, not both")
    out: dict = {}
    for item in items:
        for part in item.split(","):
            key, sep, col = part.partition("=")
            key, col = key.strip(), col.strip()
            if not part.strip():
                continue
            if not sep or not key or not col:
                raise ValueError(f"--columns {item!r}: write FIELD=COLUMN pairs separated by commas, "
                                 "e.g. --columns arrival_time=ts,input_tokens=prompt,output_tokens=completion")
            if key not in _COLUMN_FIELDS + _COLUMN_SETTINGS:
                raise ValueError(f"--columns {item!r}: {key!r} is not a field; fields: "
                                 f"{', '.join(_COLUMN_FIELDS)}; settings: {', '.join(_COLUMN_SETTINGS)}")
            if key in out:
                raise ValueError(f"--columns: {key} is given twice ({out[key]!r} and {col!r})")
            out[key] = col
    need = [f for f in ("arrival_time", "input_tokens", "output_tokens") if f not in out]
    if need:
        raise ValueError(f"--columns needs {', '.join(f + '=COLUMN' for f in need)} (the columns of the "
                         "arrival time and the two token counts)")
    out["name"] = "--columns"
    return out


def _sweep_options(args) -> dict:
    """Keyword arguments of capbook.sweeps.importers.read_sweep from the CLI flags (raises ValueError)."""
    opts = {}
    if getattr(args, "load", "auto") != "auto":
        opts["load"] = args.load
    if getattr(args, "repeats", "error") != "error":
        opts["repeats"] = args.repeats
    where = {}
    for item in getattr(args, "where", None) or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ValueError(f"--where {item!r}: write KEY=VALUE, e.g. --where config=vllm")
        where[key.strip()] = value.strip()
    if where:
        opts["where"] = where
    if getattr(args, "max_num_seqs", None) is not None:
        opts["max_num_seqs"] = _number(args.max_num_seqs, "--max-num-seqs", "a whole number >= 1",
                                       whole=True)
    if getattr(args, "prefill_rate", None) is not None:
        opts["prefill_rate_tps"] = _number(args.prefill_rate, "--prefill-rate",
                                           "a positive number of tokens/s")
    if getattr(args, "sweep_concurrency", None) is not None:
        opts["concurrency"] = _number(args.sweep_concurrency, "--sweep-concurrency", "a positive number")
    return opts


#: Exit status of ``plan`` when the plan is written but NOT VERIFIED (no simulated fleet size meets
#: the objectives), and of ``simulate`` when the simulated replicas do not meet them.
EXIT_NOT_VERIFIED = 3

def _fail(command: str, exc: BaseException) -> int:
    """Print the input error in flag spelling and return exit status 2."""
    print(f"capbook {command}: {_cli_message(str(exc))}", file=sys.stderr)
    return 2


#: The help of ``--slo`` (plan and book take the same objectives).
_SLO_HELP = ("objectives, e.g. 'ttft=1,tpot=50ms,wait=0.5,late=1%%': any of ttft (s, at quantile "
             "ttft_q, 0.99), tpot (s, at percentile tpot_p, 95), wait (s), late (share of waits over "
             "wait), goodput (share meeting both); values take s or ms, shares a %% (default: p99 "
             "TTFT 1 s, p95 TPOT 50 ms, waits over 0.5 s for at most 1 %%)")


def add_plan_command(sub: argparse._SubParsersAction) -> None:
    """Register ``capbook plan``."""
    p = sub.add_parser(
        "plan",
        help="print the capacity plan for a request log and a sweep, and export it",
        description=(
            "Forecast the request log's tokens at the horizon of the decision's lead time, size the "
            "fleet from the sweep's rating, check it with Erlang C, the load-dependent model and a "
            "fleet simulation of the log's busiest hours, and write plan.csv, plan.md and tenants.csv (every tenant's "
            "tokens-per-minute limit). Exit status: 0 when the "
            "plan is written and the fleet simulation verified it (or --no-sim skipped the simulation, as asked); "
            "3 when the plan is written but NOT VERIFIED (no fleet size the simulation tried meets the "
            "objectives: read the plan's reason); 2 on invalid input (nothing is written); 1 on an internal error."
        ),
    )
    _add_data_arguments(p)
    _add_history_argument(p)
    p.add_argument("--model", default=None, metavar="NAME", help=_LOG_MODEL_HELP)
    p.add_argument("--tier", default="interactive", help="tier to plan ('all' for every tier; default interactive)")
    p.add_argument("--slo", default=None, metavar="SPEC", help=_SLO_HELP)
    p.add_argument("--horizon", default="4", metavar="WEEKS",
                   help="lead time of the decision in weeks: 1, 4 or 12 (default 4); at most as many weeks as the "
                        "history is long (never less than 12)")
    p.add_argument("--quantile", default="0.9", metavar="Q",
                   help="peak-hour quantile to plan for, between 0 and 1 (default 0.9)")
    p.add_argument("--headroom", default="0.8", metavar="SHARE",
                   help="share of each replica's rating to use, in (0, 1] (default 0.8)")
    p.add_argument("--scale", default="1", metavar="X",
                   help="demand multiplier for a known event on top of the forecast, up to 1000 (default 1)")
    p.add_argument("--growth", default="0", metavar="SHARE",
                   help="weekly growth for logs too short to forecast, from -0.5 to 1 (default 0)")
    p.add_argument("--spares", default="1", metavar="K", help="N+k spare replicas, 0 to 1000 (default 1)")
    p.add_argument("--zones", default=None, metavar="N",
                   help="survive losing one of this many zones (2 to 1000)")
    p.add_argument("--no-sim", action="store_true",
                   help="skip the fleet simulation (faster: the serving count is then Erlang C's, not verified)")
    p.add_argument("--out", default="capbook-plan", metavar="DIR",
                   help="folder for plan.csv, plan.md, tenants.csv and schedule.csv (default ./capbook-plan); files "
                        "there that capbook did not write are not replaced without --force")
    p.add_argument("--force", action="store_true",
                   help="replace plan.csv, plan.md, tenants.csv and schedule.csv in --out even when capbook did not "
                        "write them")
    _add_price_arguments(p.add_argument_group("cost, and the replica's hardware"))
    _add_hardware_arguments(p.add_argument_group("the replica's hardware (with --gpu, --tensor-parallel and --model)"),
                            model=False, gpu=False)
    g = p.add_argument_group("autoscaling")
    g.add_argument("--lag", default="8", metavar="MINUTES",
                   help="minutes from the autoscaler's trigger to a new replica serving (node, image pull, model "
                        "load); sizes the burst headroom and the simulated week (default 8)")
    g.add_argument("--no-autoscale", action="store_true",
                   help="skip the simulated week (about half a minute per policy at tens of requests per second): "
                        "no schedule.csv and no 'autoscaling' rows")
    p.set_defaults(func=run_plan)


def _add_price_arguments(g, *, replica: bool = True) -> None:
    g.add_argument("--prices", metavar="CSV", default=None,
                   help="price table: gpu,on_demand_usd_per_gpu_hour,reserved_usd_per_gpu_hour per GPU type (the "
                        "repository's data/prices/illustrative.csv holds illustrative round numbers); adds the "
                        "cost of the plan (rows with step 'cost' in plan.csv, a Cost section in plan.md)")
    if replica:
        _add_gpu_arguments(g)
        g.add_argument("--saturation-price", metavar="USD", default=None,
                       help="with --prices: dollars per request served late or refused (a product number); adds the "
                            "fleet, and the peak-hour quantile, that minimise capacity plus saturation cost")


def _prices_flag(args):
    """The price table at ``--prices CSV``, read and checked, or None; errors name the flag."""
    if getattr(args, "prices", None) is None:
        if getattr(args, "saturation_price", None) is not None:
            raise ValueError("--saturation-price weighs late requests against the price of replicas; give --prices CSV too")
        return None
    from capbook.cost.costs import read_prices

    _check_path("--prices", args.prices)
    try:
        return read_prices(args.prices)
    except ValueError as exc:
        msg = str(exc)
        raise ValueError("--" + msg if msg.startswith("prices ") else f"--prices {args.prices}: {msg}") from None


def _replica_flags(args) -> dict:
    """``gpu`` and ``tensor_parallel`` from --gpu and --tensor-parallel (raises ValueError naming them)."""
    out = {}
    if getattr(args, "gpu", None) is not None:
        if not args.gpu.strip():
            raise ValueError("--gpu: give the GPU type as the price table names it, e.g. H100-SXM-80GB")
        out["gpu"] = args.gpu.strip()
    if getattr(args, "tensor_parallel", None) is not None:
        out["tensor_parallel"] = _number(args.tensor_parallel, "--tensor-parallel",
                                         "a whole number of GPUs per replica >= 1", whole=True)
    return out


# --------------------------------------------------------------------------------------------
# the replica's hardware and model: --gpu, --tensor-parallel, --model, --gpu-memory-utilization,
# --max-model-len (see capbook.engine.hardware)
# --------------------------------------------------------------------------------------------
_MODEL_HELP = ("the model's architecture, a Hugging Face id or short name (meta-llama/Llama-3.1-8B-Instruct, "
               "llama-3.1-8b, qwen3-30b-a3b): sets the KV cache size and the physical step-time floor "
               "when the sweep does not name it")


def _add_gpu_arguments(g) -> None:
    """--gpu and --tensor-parallel: one replica's GPU and GPU count, for the engine model (memory,
    bandwidth, FLOP/s from capbook's table) and, with --prices, for its price."""
    g.add_argument("--gpu", metavar="NAME", default=None,
                   help="the GPU one replica runs on, when the sweep does not record it (or to plan and price it "
                        "as another): its memory, bandwidth and FLOP/s for the engine model and, with --prices, "
                        "its price (a GPU in capbook's table: H100, nvidia-h100-80gb, A100-SXM4-40GB, L40S, MI300X ...)")
    g.add_argument("--tensor-parallel", metavar="N", default=None,
                   help="GPUs per replica (tensor parallelism), when the sweep does not record it")


def _add_hardware_arguments(g, *, model: bool = True, gpu: bool = True) -> None:
    """Add the replica's hardware flags (those a command does not already have) to group ``g``."""
    if model:
        g.add_argument("--model", metavar="NAME", default=None, help=_MODEL_HELP)
    if gpu:
        _add_gpu_arguments(g)
    g.add_argument("--gpu-memory-utilization", metavar="X", default=None,
                   help="share of each GPU's memory the engine takes for weights and KV cache, in (0, 1] "
                        "(vLLM's --gpu-memory-utilization; default: recorded, else 0.9)")
    g.add_argument("--max-model-len", metavar="N", default=None,
                   help="longest context the engine admits, tokens (vLLM's --max-model-len; default: recorded, "
                        "else the model's max_position_embeddings)")


def _gpu_flag(args):
    """The GPU ``--gpu`` names (capbook.engine.hardware.GPU), None without the flag; raises ValueError
    naming the flag and listing close names when capbook's table has no such GPU."""
    name = getattr(args, "gpu", None)
    if name is None:
        return None
    from capbook.engine.hardware import GPUS, close_matches, find_gpu

    g = find_gpu(name.strip()) if name.strip() else None
    if g is None:
        near = close_matches(name, "gpu")
        raise ValueError(f"--gpu {name!r}: not a GPU capbook knows"
                         + (f" (close: {', '.join(near)})" if near else "")
                         + f"; known: {', '.join(GPUS)}")
    return g


def _arch_of(name):
    from capbook.engine.hardware import find_model

    return find_model(name) if isinstance(name, str) and name.strip() else None


def _unknown_model(name, extra: str = "") -> ValueError:
    from capbook.engine.hardware import MODELS, close_matches

    near = close_matches(name, "model")
    return ValueError(f"--model {name!r}: {extra}not a model architecture capbook knows"
                      + (f" (close: {', '.join(near)})" if near else "")
                      + f"; known: {', '.join(sorted(m.rsplit('/', 1)[-1] for m in MODELS))}")


def _hardware_numbers(args) -> dict:
    """--tensor-parallel, --gpu-memory-utilization and --max-model-len, checked, as keywords of
    capbook.engine.hardware.hardware_for (only those given)."""
    out = {}
    if getattr(args, "tensor_parallel", None) is not None:
        out["tensor_parallel"] = _number(args.tensor_parallel, "--tensor-parallel",
                                         "a whole number of GPUs per replica >= 1", whole=True)
    if getattr(args, "gpu_memory_utilization", None) is not None:
        out["gpu_memory_utilization"] = _number(args.gpu_memory_utilization, "--gpu-memory-utilization",
                                                "a share of the GPU memory in (0, 1]", lo=0, hi=1, lo_open=True)
    if getattr(args, "max_model_len", None) is not None:
        out["max_model_len"] = _number(args.max_model_len, "--max-model-len", "a whole number of tokens >= 1",
                                       whole=True)
    return out


def _log_model(args, sums, command: str) -> tuple:
    """``--model`` of plan, simulate and compare, which names both the request log's model to plan
    and, when capbook's table has it, the replica's architecture: returns (the log's model name to
    plan or None, the architecture or None, notes). A name that is not one of the log's models is
    taken as the log's model of the same architecture (``llama-3.1-8b`` for
    ``meta-llama/Llama-3.1-8B-Instruct``), or, when the log has one model, as that model's
    architecture; raises ValueError naming --model otherwise."""
    import pandas as pd

    name = getattr(args, "model", None)
    if name is None:
        return None, None, []
    try:
        models = sorted(map(str, pd.unique(sums.hourly["model"])))
    except (AttributeError, KeyError):
        models = []
    arch = _arch_of(name)
    if name in models or not models:
        return name, arch, []
    if arch is not None:
        same = [m for m in models if _arch_of(m) == arch]
        if len(same) == 1:
            return same[0], arch, [f"--model {name}: the request log's model {same[0]!r} is the same architecture "
                                   f"({arch.name}); planning it"]
        if len(models) == 1:
            return models[0], arch, [f"--model {name}: the request log has one model, {models[0]!r}; planning it "
                                     f"on the architecture {arch.name}"]
        raise ValueError(f"--model {name!r}: names the architecture {arch.name}, but the request log holds "
                         f"{len(models)} models ({', '.join(models[:8])}) and "
                         + (f"{len(same)} of them are that architecture" if same else "none of them is it")
                         + "; pass --model one of the log's models")
    raise _unknown_model(name, f"not a model of the request log ({', '.join(models[:8])}) and ")


def _attach_hardware(sweep, args, *, arch=None, path=None, only_missing: bool = False, kv_cache_tokens=None):
    """Build the replica's Hardware from the flags, the sweep and the files beside ``path``
    (capbook.engine.hardware.hardware_for) and set it as ``sweep.hardware`` (fit_engine reads it).
    ``only_missing``: --gpu and --tensor-parallel fill what the sweep does not record (compare)."""
    from capbook.engine.hardware import hardware_for

    gpu = _gpu_flag(args)
    nums = _hardware_numbers(args)
    tab = sweep.table
    if only_missing:
        def recorded(col):
            return col in tab and tab[col].notna().any()
        gpu = None if recorded("gpu") else gpu
        if recorded("tensor_parallel"):
            nums.pop("tensor_parallel", None)
        arch = None if recorded("model") else arch
    hw = hardware_for(sweep, model=arch.name if arch is not None else None,
                      gpu=gpu.name if gpu is not None else None, path=path, kv_cache_tokens=kv_cache_tokens, **nums)
    if kv_cache_tokens is not None:
        hw.sources["kv_cache_tokens"] = "--kv-cache-tokens"
    if gpu is not None:
        hw.sources["gpu"] = f"--gpu {args.gpu}" + (f" (read as {gpu.name})" if args.gpu != gpu.name else "")
    if arch is not None:
        hw.sources["model"] = f"--model {args.model}" + (f" (read as {arch.name})" if args.model != arch.name else "")
    for flag, key in (("--tensor-parallel", "tensor_parallel"), ("--gpu-memory-utilization", "gpu_memory_utilization"),
                      ("--max-model-len", "max_model_len")):
        if key in nums:
            hw.sources[key] = flag
    sweep.hardware = hw
    return hw


_LOG_MODEL_HELP = ("model of the request log to plan (default: the one with most output tokens); when capbook's table "
                   "has it (a Hugging Face id or short name such as llama-3.1-8b) also the replica's architecture for "
                   "the engine model, where the sweep does not name one; a log model of the same architecture "
                   "under another spelling is taken")


def _plan_inputs_with_hardware(args, command: str):
    """datasets.plan_inputs of plan and simulate, with --model read against the log (:func:`_log_model`)
    and the replica's Hardware set on the sweep; notes go to stderr."""
    import dataclasses

    from capbook.app import datasets

    log, sweep = _load_inputs(args)
    inputs = datasets.plan_inputs(log, sweep, model=args.model, history=_history_flag(args),
                                  history_label=args.history)
    name, arch, notes = _log_model(args, inputs.log, command)
    if name != args.model:
        if sweep is None:  # the sample sweep follows the log's model
            inputs = datasets.plan_inputs(log, None, model=name, history=_history_flag(args),
                                          history_label=args.history)
        else:
            inputs = dataclasses.replace(inputs, model=name)
    sw = inputs.sweep
    recorded = _arch_of(sw.config.get("model")) if isinstance(sw.config.get("model"), str) else None
    if arch is not None and recorded is not None and recorded != arch:
        notes.append(f"--model {args.model}: the sweep measured {recorded.name}, another architecture; the engine "
                     "model keeps the sweep's")
        arch = None
    elif recorded is not None:
        arch = None  # the sweep's own model (and its source) stands
    _attach_hardware(sw, args, arch=arch, path=getattr(args, "sweep", None))
    for n in notes:
        print(f"capbook {command}: note: {_cli_message(n)}", file=sys.stderr)
    return inputs


_GLOB_CHARS = "*?["


def _check_path(flag: str, path: str, *, folder: bool = False, pattern: bool = False) -> None:
    """Refuse an input path that cannot be read, before any computation: no such file, a
    folder where a file is wanted, or a file or folder this user may not read.

    Paths are paths: a name that exists is that file, even with glob characters in it; with
    ``pattern`` a name that does not exist and holds ``*``, ``?`` or ``[`` is a glob, whose
    every match is checked. ``folder``: a folder is allowed (every file under it is checked).

    Raises
    ------
    FileNotFoundError, ValueError
        Starting with ``flag`` and ``path`` and saying why.
    """
    import glob as _glob

    where = f"{flag} {path}".strip()
    if pattern and not os.path.lexists(path) and any(c in path for c in _GLOB_CHARS):
        found = sorted(_glob.glob(path))
        if not found:
            raise FileNotFoundError(f"{where}: no file matches this pattern")
        for f in found:
            _check_path(f"{where}: matched file", f)
        return
    try:
        st = os.stat(path)
    except PermissionError:
        raise ValueError(f"{where}: not readable (permission denied on a folder above it)") from None
    except FileNotFoundError:
        what = "no such file or folder" if folder else "no such file"
        raise FileNotFoundError(f"{where}: {what}") from None
    except OSError as exc:
        raise ValueError(f"{where}: cannot be opened ({exc.strerror or exc})") from None
    import stat

    if stat.S_ISDIR(st.st_mode):
        if not folder:
            hint = (f"; name a file, or its files with a glob such as {os.path.join(path, '*.parquet')}"
                    if pattern else "; name a file")
            raise ValueError(f"{where}: is a folder, not a file{hint}")
        if not os.access(path, os.R_OK | os.X_OK):
            raise ValueError(f"{where}: not readable (permission denied: the folder cannot be listed)")
        try:
            for root, dirs, files in os.walk(path, onerror=_raise):
                for name in files:
                    _check_path(f"{where}: file", os.path.join(root, name))
        except PermissionError as exc:
            raise ValueError(f"{where}: not readable (permission denied on {exc.filename})") from None
        return
    try:
        with open(path, "rb") as f:
            f.read(1)
    except PermissionError:
        raise ValueError(f"{where}: not readable (permission denied)") from None
    except OSError as exc:
        raise ValueError(f"{where}: cannot be read ({exc.strerror or exc})") from None


def _raise(exc: OSError) -> None:
    """os.walk's onerror: stop at an unreadable folder."""
    raise exc


def _check_input_paths(args) -> None:
    """Check every input path flag of plan, book and compare (:func:`_check_path`)."""
    if getattr(args, "requests", None) is not None:
        _check_path("--requests", args.requests, pattern=True)
    if getattr(args, "sweep", None) is not None:
        _check_path("--sweep", args.sweep, folder=True)
    for flag in ("history", "prices"):
        if getattr(args, flag, None) is not None:
            _check_path(f"--{flag}", getattr(args, flag))


def _load_inputs(args) -> tuple:
    """Check every input path flag, then read and validate --requests/--sweep; raises
    ValueError/FileNotFoundError."""
    from capbook.logs import requestlog as traces

    _check_input_paths(args)
    log = sweep = None
    if args.requests is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            try:
                log = traces.read_requests(args.requests, format=args.format, **_requests_options(args))
            except ValueError as exc:
                raise ValueError(f"--requests {args.requests}: {exc}") from None
    elif _requests_options(args) or args.format != "auto":
        raise ValueError("--drop-invalid, --sort, --time-unit, --format, --columns and --engine apply to --requests "
                         "LOG; give the log they are for")
    if args.sweep is not None:
        sweep = _read_sweep_flag(args)
    elif _sweep_options(args):
        raise ValueError("--load, --repeats, --where, --max-num-seqs, --prefill-rate and --sweep-concurrency apply "
                         "to --sweep PATH; give the sweep they are for")
    return log, sweep


def _history_flag(args):
    """The hourly history at ``--history CSV``, read and checked (a frame), or None; errors name the flag."""
    if args.history is None:
        return None
    from capbook.forecast.tokens import read_token_csv

    if args.requests is None:
        raise ValueError("--history applies to --requests LOG (the history of that log); give the log too")

    if not os.path.isfile(args.history):
        raise FileNotFoundError(f"--history {args.history}: no such file")
    try:
        return read_token_csv(args.history)
    except (ValueError, KeyError) as exc:
        msg = str(exc).removeprefix(f"{args.history}: ")
        raise ValueError(f"--history {args.history}: {msg}") from None


def _read_sweep_flag(args):
    """The sweep at ``--sweep PATH`` read with the sweep-reading flags; raises ValueError or
    FileNotFoundError naming the flag."""
    from capbook.sweeps import importers

    opts = _sweep_options(args)
    if not os.path.exists(args.sweep):
        raise FileNotFoundError(f"--sweep {args.sweep}: no such file or folder")
    try:
        return importers.read_sweep(args.sweep, **opts)
    except ValueError as exc:
        raise ValueError(f"--sweep {args.sweep}: {exc}") from None


#: The file in an output folder listing what capbook wrote there (name -> SHA-256 of the bytes):
#: capbook replaces its own unchanged files, and nothing else without ``--force``.
OUTPUTS_MANIFEST = ".capbook-outputs.json"


def _sha256(path) -> str | None:
    import hashlib

    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def _manifest(out) -> dict:
    try:
        with open(os.path.join(out, OUTPUTS_MANIFEST), encoding="utf-8") as f:
            data = json.load(f)
        return {str(k): str(v) for k, v in data.get("files", {}).items()} if isinstance(data, dict) else {}
    except (OSError, ValueError, AttributeError):
        return {}


def _check_out(out: str, names: Sequence[str], force: bool) -> None:
    """Refuse ``--out`` before any computation: a file in the way, a name too long, a folder that
    cannot be written, or files there capbook did not write (unless ``force``); raises ValueError
    naming ``--out`` and the path."""
    import tempfile

    if not str(out).strip():
        raise ValueError("--out: give a folder name")
    parts = [p for p in os.path.normpath(os.path.abspath(out)).split(os.sep) if p]
    too_long = [p for p in parts if len(os.fsencode(p)) > 255]
    if too_long:
        raise ValueError(f"--out {out}: the name {too_long[0][:40]!r}… is longer than the 255 bytes a file name "
                         "may have; choose a shorter folder name")
    probe = os.path.abspath(out)
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise ValueError(f"--out {out}: {probe} is a file, not a folder; choose another --out")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".capbook-probe-", dir=probe)
        os.close(fd)
        os.remove(tmp)
    except OSError as exc:
        raise ValueError(f"--out {out}: cannot write in {probe} ({exc.strerror or exc}); choose a folder you can "
                         "write to") from None
    if force or not os.path.isdir(out):
        return
    mine = _manifest(out)
    theirs = [n for n in names if os.path.lexists(os.path.join(out, n))
              and (os.path.isdir(os.path.join(out, n)) or mine.get(n) != _sha256(os.path.join(out, n)))]
    if theirs:
        raise ValueError(f"--out {out}: {', '.join(theirs)} already there and not written by capbook (or changed "
                         "since); pass --force to replace, or choose another --out")


def _write_outputs(out: str, files: dict) -> list:
    """Write ``{name: text}`` into ``out``, each to a temporary name in the same folder renamed over
    the old one (an interrupt leaves the old file or the new, never half), and record them in
    :data:`OUTPUTS_MANIFEST`; returns the paths. A file is no terminal: terminal codes (in a
    name from the user's data) are dropped."""
    import hashlib

    os.makedirs(out, exist_ok=True)
    mine = _manifest(out)
    written = []

    def put(name: str, data: bytes) -> str:
        return _atomic_write(os.path.join(out, name), data)

    for name, text in files.items():
        data = plain_text(text).encode("utf-8")
        written.append(put(name, data))
        mine[name] = hashlib.sha256(data).hexdigest()
    put(OUTPUTS_MANIFEST, (json.dumps({"written_by": "capbook", "files": mine}, indent=1, sort_keys=True)
                           + "\n").encode("utf-8"))
    return written


def _plan_numbers(args, *, compare: bool = False) -> dict:
    """The numeric flags of ``plan`` and ``compare`` as ``capacity_plan`` keywords, each checked
    (finite, in range) and named in the error."""
    from capbook.plan.steps import GROWTH_PER_WEEK_RANGE, MAX_DEMAND_SCALE

    kw = {"lead_time_weeks": _number(args.horizon, "--horizon", "a positive number of weeks"),
          "quantile": _number(args.quantile, "--quantile", "a quantile strictly between 0 and 1", lo=0, hi=1,
                              lo_open=True, hi_open=True),
          "headroom": _number(args.headroom, "--headroom", "a share of the rating in (0, 1]", lo=0, hi=1,
                              lo_open=True),
          "demand_scale": _number(args.scale, "--scale", f"a positive multiplier of at most {MAX_DEMAND_SCALE:g}",
                                  lo=0, hi=MAX_DEMAND_SCALE, lo_open=True)}
    if compare:
        return kw
    lo, hi = GROWTH_PER_WEEK_RANGE
    kw["growth_per_week"] = _number(args.growth, "--growth", f"a weekly growth from {lo:g} to {hi:g} "
                                    "(0.05 is 5 % a week)", lo=lo, hi=hi)
    kw["spares"] = _number(args.spares, "--spares", "a whole number of spare replicas from 0 to 1000",
                           whole=True, lo=0, hi=1000)
    kw["zones"] = None if args.zones is None else _number(args.zones, "--zones", "a whole number of zones from 2 "
                                                          "to 1000", whole=True, lo=1, hi=1000)
    return kw


def run_plan(args: argparse.Namespace) -> int:
    """Run ``capbook plan``; returns the exit code."""

    from capbook.app import datasets
    from capbook.plan.steps import SLO, capacity_plan

    try:
        numbers = _plan_numbers(args)
        _check_out(args.out, ["plan.csv", "plan.md", "tenants.csv"] + ([] if args.no_autoscale else ["schedule.csv"]),
                   args.force)
        slo = SLO.parse(args.slo) if args.slo else SLO()
        _gpu_flag(args)
        _hardware_numbers(args)  # the hardware flags checked before the data are read
        inputs = _plan_inputs_with_hardware(args, "plan")
        prices = _prices_flag(args)
        replica = _replica_flags(args)
        lag = _number(args.lag, "--lag", "a number of minutes >= 0", zero=True)
        plan = capacity_plan(**inputs.arguments, tier=None if args.tier == "all" else args.tier,
                             slo=slo, **numbers, lag_min=lag, simulate=not args.no_sim)
        if prices is not None:
            sat = None if args.saturation_price is None else _number(
                args.saturation_price, "--saturation-price", "a positive number of dollars per late request")
            from capbook.cost.costs import priced

            plan = priced(plan, inputs.arguments["sweep"], prices, saturation_usd=sat, **replica)
        if not args.no_autoscale:
            from capbook.autoscale.schedule import PLAN_CANDIDATES, WeekTooLarge, autoscaled

            print(f"simulating the forecast week under {len(PLAN_CANDIDATES)} scaling policies "
                  f"({', '.join(PLAN_CANDIDATES)}; --no-autoscale skips this) ...", file=sys.stderr, flush=True)
            try:
                plan = autoscaled(plan, inputs.arguments["sweep"], inputs.arguments["log"])
            except WeekTooLarge as exc:
                print(f"capbook plan: note: week not simulated: {exc}", file=sys.stderr)
    except (ValueError, FileNotFoundError) as exc:
        return _fail("plan", exc)
    print(_cli_message(plan.render()))
    files = {"plan.csv": _cli_message(plan.table().to_csv(index=False)), "plan.md": _cli_message(plan.to_markdown()),
             "tenants.csv": plan.tpm.reset_index().to_csv(index=False)}  # every tenant's limit, tokens/min
    if plan.autoscaling is not None:
        files["schedule.csv"] = plan.autoscaling.schedule_frame().to_csv(index=False)
    written = _write_outputs(args.out, files)
    print(f"wrote {', '.join(written[:-1])} and {written[-1]}")
    if plan.verified is False:  # written, but no fleet size met the objectives in the simulation
        print(f"capbook plan: the plan is NOT VERIFIED (exit status {EXIT_NOT_VERIFIED}): "
              f"{_cli_message(plan.verification.reason)}", file=sys.stderr)
        return EXIT_NOT_VERIFIED
    return 0


def add_book_command(sub: argparse._SubParsersAction) -> None:
    """Register ``capbook book``."""
    p = sub.add_parser(
        "book",
        help="re-run every chapter of the book on your data and build the site",
        description=(
            "Check DIR, validate the request log and sweep, execute every chapter on them (a fresh "
            "kernel per chapter, progress per chapter) and build the static site into DIR. The "
            "repository's own build and cache are not touched. DIR may hold an earlier capbook book "
            "build and nothing else (capbook deletes no file it did not write); the new site replaces "
            "it whole. A chapter that fails is shown unexecuted with its error and the rest of the "
            "site is built. Exit status 2 on invalid input or DIR, 1 when a chapter fails (the site "
            "is there), 130 when interrupted (DIR untouched, nothing left running)."
        ),
    )
    _add_data_arguments(p)
    _add_history_argument(p)
    p.add_argument("--out", default="capbook-book", metavar="DIR",
                   help="folder for the built site (default ./capbook-book); index.html inside. It must be "
                        "new, empty, or an earlier capbook book build holding nothing else")
    p.add_argument("--timeout", default="300", metavar="SECONDS",
                   help="seconds allowed per notebook cell (default 300)")
    p.add_argument("--keep", action="store_true", help="keep the executed notebooks in DIR/notebooks")
    p.add_argument("--jobs", default="2", metavar="N", help="chapters executed at once (default 2)")
    p.add_argument("--prices", metavar="CSV", default=None,
                   help="price table for the chapter on costs (gpu,on_demand_usd_per_gpu_hour,"
                        "reserved_usd_per_gpu_hour; default: the illustrative data/prices/illustrative.csv)")
    p.add_argument("--slo", default=None, metavar="SPEC",
                   help=_SLO_HELP.replace("default:", "every chapter with objectives uses them, as plan does; "
                                          "default: each chapter's own, the plan's being"))
    p.add_argument("--gpu", metavar="NAME", default=None,
                   help="the GPU type one replica of the sweep runs on, when the sweep does not record it "
                        "(every chapter reads the sweep with it: KV cache, prices)")
    p.add_argument("--tensor-parallel", metavar="N", default=None,
                   help="GPUs per replica, when the sweep does not record it")
    p.add_argument("--chapters", default=None, help=argparse.SUPPRESS)  # comma-separated stems (tests)
    p.set_defaults(func=run_book)


def run_book(args: argparse.Namespace) -> int:
    """Run ``capbook book``; returns the exit code."""
    from capbook.app import bookbuild

    try:
        timeout = _number(args.timeout, "--timeout", "a whole number of seconds >= 1", whole=True)
        jobs = _number(args.jobs, "--jobs", "a whole number of chapters >= 1", whole=True)
        bookbuild.check_out(args.out)  # before the data are read and long before any chapter runs
        if args.slo is not None:  # as plan reads it, before the data are read
            from capbook.plan.steps import SLO

            try:
                SLO.parse(args.slo)
            except ValueError as exc:
                raise ValueError(f"--slo {args.slo!r}: {exc}") from None
        sweep_options = _sweep_options(args)
        hardware = _replica_flags(args)   # --gpu, --tensor-parallel: filled where the sweep is silent
        if hardware:
            sweep_options["config"] = hardware
        _load_inputs(args)
        prices = args.prices if args.prices is not None and _prices_flag(args) is not None else None
        return bookbuild.build_book(args.out, requests=args.requests, requests_format=args.format,
                                    sweep=args.sweep, timeout=timeout, keep_notebooks=args.keep,
                                    jobs=jobs, requests_options=_requests_options(args),
                                    sweep_options=sweep_options,
                                    history=args.history if _history_flag(args) is not None else None,
                                    prices=prices, slo=args.slo,
                                    chapters=args.chapters.split(",") if args.chapters else None)
    except (ValueError, FileNotFoundError) as exc:
        return _fail("book", exc)


# --------------------------------------------------------------------------------------------
# capbook predict --sweep PATH --rate R (see capbook.engine.predict)
# --------------------------------------------------------------------------------------------
def add_predict_command(sub: argparse._SubParsersAction) -> None:
    """Register ``capbook predict``."""
    p = sub.add_parser(
        "predict",
        help="predict one replica's latency at an arrival rate from a sweep (three models side by side)",
        description=(
            "Fit a step-level model of the engine to a sweep and predict one replica at an open-loop "
            "arrival rate: saturation rate, whether the rate is below it, TTFT p50 and p99, TPOT p50 "
            "and mean E2E, from M/M/c, the load-dependent queue and the engine simulation (the model "
            "the plan relies on). Exit status 2 on invalid input."
        ),
    )
    p.add_argument("--sweep", metavar="PATH", default=None,
                   help=f"the sweep: a load generator's result file or folder ({_SWEEP_FORMATS_HELP}; "
                        "capbook is a capbook sweep CSV) (required)")
    p.add_argument("--rate", metavar="R", default=None,
                   help="arrival rate, requests per second (> 0; required)")
    p.add_argument("--arrivals", metavar="{poisson,uniform}", default="poisson",
                   help="arrival process: Poisson or evenly spaced (default: poisson)")
    p.add_argument("--kv-cache-tokens", metavar="N", default=None,
                   help="tokens the engine's KV cache holds (default: estimated from the model and GPU "
                        "the sweep names)")
    p.add_argument("--ttft-p99-target", metavar="SECONDS", default=None,
                   help="a TTFT p99 objective in seconds: adds the highest rate that meets it")
    p.add_argument("--seed", metavar="N", default="0",
                   help="seed of the simulation; the same seed gives the same numbers (default 0)")
    p.add_argument("--json", action="store_true", help="print the prediction as JSON")
    _add_sweep_reading_arguments(p.add_argument_group("sweep"), prefill_rate=False)
    _add_hardware_arguments(p.add_argument_group(
        "the replica's hardware and model (default: what the sweep and the files beside it record)"))
    p.set_defaults(func=run_predict)


def _number(text, flag: str, what: str, *, whole: bool = False, zero: bool = False,
            lo: float | None = None, hi: float | None = None, lo_open: bool = False,
            hi_open: bool = False) -> float | int:
    """The number given to ``flag``: positive and finite (``zero``: >= 0; ``whole``: an integer;
    ``lo``/``hi``: within those bounds instead, ``lo_open``/``hi_open`` strict), checked by
    :mod:`capbook.validation`; raises ValueError naming the flag and saying ``what``.

    Examples
    --------
    >>> _number("2.5", "--rate", "a positive number of requests per second")
    2.5
    >>> _number("1e3", "--max-num-seqs", "a whole number >= 1", whole=True)
    1000
    >>> _number("nan", "--rate", "a positive number of requests per second")
    Traceback (most recent call last):
    ...
    ValueError: --rate 'nan': must be a positive number of requests per second
    >>> _number("1.5", "--growth", "a weekly growth from -0.5 to 1", lo=-0.5, hi=1)
    Traceback (most recent call last):
    ...
    ValueError: --growth '1.5': must be a weekly growth from -0.5 to 1
    """
    from capbook.validation import integer, nonnegative, number, positive

    try:
        if lo is not None or hi is not None:
            v = number(float(text), flag, lo=lo, hi=hi, lo_open=lo_open, hi_open=hi_open)
        else:
            v = (nonnegative if zero else positive)(float(text), flag)
        return integer(v, flag) if whole else v
    except (TypeError, ValueError):
        raise ValueError(f"{flag} {text!r}: must be {what}") from None


def _predict_inputs(args) -> tuple:
    """(sweep, keyword arguments of capbook.engine.predict.predict) from the flags; raises ValueError or
    FileNotFoundError naming the flag."""
    if args.sweep is None:
        raise ValueError("--sweep PATH is required: a load generator's result file or folder, or a "
                         "capbook sweep CSV")
    if args.rate is None:
        raise ValueError("--rate R is required: the arrival rate in requests per second")
    kw = {"rate_rps": _number(args.rate, "--rate", "a positive number of requests per second")}
    if args.arrivals not in ("poisson", "uniform"):
        raise ValueError(f"--arrivals {args.arrivals!r}: must be poisson or uniform")
    kw["arrivals"] = args.arrivals
    kw["seed"] = _number(args.seed, "--seed", "a whole number >= 0", whole=True, zero=True)
    if args.kv_cache_tokens is not None:
        kw["kv_cache_tokens"] = _number(args.kv_cache_tokens, "--kv-cache-tokens",
                                        "a whole number of tokens >= 1", whole=True)
    if args.ttft_p99_target is not None:
        kw["ttft_p99_target_s"] = _number(args.ttft_p99_target, "--ttft-p99-target",
                                          "a positive number of seconds")
    # --max-num-seqs goes to the reader (which flags saturated points by it) and to the engine
    kw["max_num_seqs"] = _sweep_options(args).get("max_num_seqs")
    arch = _arch_of(args.model) if args.model is not None else None
    if args.model is not None and arch is None:
        raise _unknown_model(args.model)
    _gpu_flag(args)
    _hardware_numbers(args)  # every flag checked before the sweep is read
    sweep = _read_sweep_flag(args)
    _attach_hardware(sweep, args, arch=arch, path=args.sweep, kv_cache_tokens=kw.get("kv_cache_tokens"))
    return sweep, kw


def run_predict(args: argparse.Namespace) -> int:
    """Run ``capbook predict``; returns the exit code."""
    from capbook.engine.predict import predict

    try:
        sweep, kw = _predict_inputs(args)
        prediction = predict(sweep, **kw)
    except (ValueError, FileNotFoundError) as exc:
        return _fail("predict", exc)
    hw = getattr(sweep, "hardware", None)
    if args.json:
        d = prediction.as_dict()
        if hw is not None:
            d["hardware"] = hw.as_dict()
        print(json.dumps(_clean_json(d), indent=2))
        return 0
    _print_prediction(prediction.as_dict(), sweep.name)
    if hw is not None:
        for line in hw.assumptions():
            print(f"assume    {_cli_message(line)}")
    return 0


def _print_prediction(d: dict, name) -> None:
    """The readable table of ``capbook predict``."""
    def cell(v, scale=1.0, fmt=".4g"):
        return "-" if v is None else f"{v * scale:{fmt}}"

    w = print
    target = d["ttft_p99_target_s"]
    w(f"sweep     {name}")
    w(f"rate      {d['rate_rps']:g} requests/s ({d['arrivals']} arrivals)"
      + (f"; TTFT p99 target {target * 1e3:.4g} ms" if target is not None else ""))
    w("")
    cols = ("saturation", "stable", "TTFT p50", "TTFT p99", "TPOT p50", "E2E mean", "max rate")
    units = ("req/s", "", "ms", "ms", "ms", "s", "req/s")
    w(f"{'model':<16}" + "".join(f"{c:>11}" for c in cols))
    w(f"{'':<16}" + "".join(f"{u:>11}" for u in units))
    for model, m in d["models"].items():
        w(f"{model:<16}{cell(m['saturation_rps']):>11}{'yes' if m['stable'] else 'no':>11}"
          f"{cell(m['ttft_p50_s'], 1e3):>11}{cell(m['ttft_p99_s'], 1e3):>11}{cell(m['tpot_p50_s'], 1e3):>11}"
          f"{cell(m['e2e_mean_s']):>11}{cell(m['max_rate_rps']):>11}")
    w("")
    w(f"the plan relies on {d['model']}: the step-level engine simulation; mmc and load_dependent are "
      "shown for comparison" if d["model"] == "simulation" else f"the plan relies on {d['model']}")
    e = d["engine"]
    kv = "not binding" if e["kv_cache_tokens"] is None else f"{e['kv_cache_tokens']:,} tokens"
    w(f"engine    {e['slots']} slots (max_num_seqs {e['max_num_seqs']}, KV cache {kv}), batched-token "
      f"budget {e['max_num_batched_tokens']:,}, chunked prefill {'on' if e['chunked_prefill'] else 'off'}, "
      f"{e['policy']} prefill and decode steps")
    w(f"step      t0 {e['step_t0_s'] * 1e3:.3g} ms + {e['step_c_s'] * 1e6:.3g} µs per token"
      + (f" + {e['step_c2_s'] * 1e9:.3g} ns per token²" if e["step_c2_s"] else "")
      + f"; requests of {e['prompt_tokens']:.0f} prompt and {e['output_tokens']:.0f} output tokens")
    for note in d["notes"]:
        w(f"note      {_cli_message(note)}")


# --------------------------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------------------------
# --------------------------------------------------------------------------------------------
# capbook compare SWEEP... --prices CSV (see capbook.cost.whatif.compare_configurations)
# --------------------------------------------------------------------------------------------
def add_compare_command(sub: argparse._SubParsersAction) -> None:
    """Register ``capbook compare``."""
    p = sub.add_parser(
        "compare",
        help="plan the same traffic on several configurations of one model and rank them by cost",
        description=(
            "Plan the request log on each sweep (GPU types, tensor-parallel layouts of one model) with the "
            "same objectives and rules as capbook plan, price each plan, and print the ranking with what "
            "binds on each; write compare.csv and compare.md. Exit status 2 on invalid input."
        ),
    )
    p.add_argument("sweeps", nargs="*", metavar="SWEEP",
                   help=f"sweeps to compare: result files or folders of a load generator ({_SWEEP_FORMATS_HELP}), "
                        "capbook sweep CSVs, or "
                        "names of sample sweeps (default: the sample sweeps of the 8B model: illustrative_chat, "
                        "llama8b_h100_chat, llama8b_l4_chat)")
    g = p.add_argument_group("request log")
    g.add_argument("--requests", metavar="LOG", default=None,
                   help="request log (default: the sample gateway)")
    g.add_argument("--format", default="auto", type=_log_format, metavar="FORMAT",
                   help=f"request log format (default: auto; {_LOG_FORMATS_HELP})")
    _add_log_reading_arguments(g)
    _add_history_argument(p)
    g = p.add_argument_group("sweeps")
    _add_sweep_reading_arguments(g)
    p.add_argument("--model", default=None, metavar="NAME", help=_LOG_MODEL_HELP)
    p.add_argument("--tier", default="interactive", help="tier to plan ('all' for every tier; default interactive)")
    p.add_argument("--slo", default=None, metavar="SPEC", help="objectives, as for capbook plan")
    p.add_argument("--horizon", default="4", metavar="WEEKS", help="lead time in weeks (default 4)")
    p.add_argument("--quantile", default="0.9", metavar="Q", help="peak-hour quantile (default 0.9)")
    p.add_argument("--headroom", default="0.8", metavar="SHARE", help="share of the rating used (default 0.8)")
    p.add_argument("--scale", default="1", metavar="X",
                   help="demand multiplier on top of the forecast, e.g. 10 to compare at ten times the traffic (default 1)")
    p.add_argument("--no-sim", action="store_true",
                   help="skip the fleet simulation of each plan (faster; the queueing models only)")
    p.add_argument("--reserved", action="store_true", help="rank by the reserved price instead of on demand")
    g = p.add_argument_group("cost")
    g.add_argument("--prices", metavar="CSV", default=None,
                   help="price table (default: the illustrative data/prices/illustrative.csv, round numbers, not quotes)")
    g.add_argument("--gpu", metavar="NAME", default=None,
                   help="GPU type for the sweeps that do not record one")
    g.add_argument("--tensor-parallel", metavar="N", default=None,
                   help="GPUs per replica for the sweeps that do not record it")
    _add_hardware_arguments(p.add_argument_group("every replica's hardware (with --gpu, --tensor-parallel and --model)"),
                            model=False, gpu=False)
    p.add_argument("--out", default="capbook-compare", metavar="DIR",
                   help="folder for compare.csv and compare.md (default ./capbook-compare); files there that "
                        "capbook did not write are not replaced without --force")
    p.add_argument("--force", action="store_true",
                   help="replace compare.csv and compare.md in --out even when capbook did not write them")
    p.set_defaults(func=run_compare)


#: The default configurations of ``capbook compare``: the sample sweeps of the 8B model.
COMPARE_DEFAULT = ("illustrative_chat", "llama8b_h100_chat", "llama8b_l4_chat")


def _compare_sweeps(args) -> dict:
    """The sweeps named on the command line, read (paths) or loaded (sample names)."""
    from capbook.sweeps import importers
    from capbook.sweeps.sweep import list_sample_sweeps, load_sample_sweep

    names = list(args.sweeps) or list(COMPARE_DEFAULT)
    opts = _sweep_options(args)
    replica = _replica_flags(args)
    out = {}
    for item in names:
        if os.path.exists(item):
            try:
                sw = importers.read_sweep(item, **opts)
            except ValueError as exc:
                raise ValueError(f"sweep {item}: {exc}") from None
        elif item in list_sample_sweeps():
            sw = load_sample_sweep(item)
        else:
            raise FileNotFoundError(f"sweep {item}: no such file or folder, and not a sample sweep "
                                    f"({', '.join(list_sample_sweeps())})")
        cfg = dict(sw.config)
        for key, val in replica.items():
            if cfg.get(key) is None or (isinstance(cfg.get(key), float) and cfg[key] != cfg[key]):
                sw.config[key] = val
        label = sw.name or os.path.basename(os.path.normpath(item))
        if label in out:
            label = item
        out[label] = sw
    return out


def run_compare(args: argparse.Namespace) -> int:
    """Run ``capbook compare``; returns the exit code."""

    import pandas as pd

    from capbook.app import datasets
    from capbook.cost.costs import compare_configurations, load_sample_prices
    from capbook.plan.steps import SLO

    try:
        numbers = _plan_numbers(args, compare=True)
        _check_out(args.out, ["compare.csv", "compare.md"], args.force)
        slo = SLO.parse(args.slo) if args.slo else SLO()
        prices = _prices_flag(args) if args.prices is not None else load_sample_prices()
        log, _ = _load_inputs(argparse.Namespace(**{**vars(args), "sweep": None, "load": "auto", "repeats": "error",
                                                     "where": [], "max_num_seqs": None, "prefill_rate": None,
                                                     "sweep_concurrency": None}))
        sums = datasets.plan_log(log, history=_history_flag(args), history_label=args.history)
        _gpu_flag(args)
        _hardware_numbers(args)
        model, arch, notes = _log_model(args, sums, "compare")
        sweeps = _compare_sweeps(args)
        for item, sw in zip(list(args.sweeps) or list(COMPARE_DEFAULT), sweeps.values()):
            _attach_hardware(sw, args, arch=arch, path=item if os.path.exists(item) else None, only_missing=True)
        for n in notes:
            print(f"capbook compare: note: {_cli_message(n)}", file=sys.stderr)
        cmp = compare_configurations(sums, sweeps, prices, basis="reserved" if args.reserved else "on_demand",
                                     model=model, tier=None if args.tier == "all" else args.tier, slo=slo,
                                     **numbers, simulate=not args.no_sim)
    except (ValueError, FileNotFoundError) as exc:
        return _fail("compare", exc)
    src = f"{sums.label}; prices {prices.source}" + ("" if args.prices else " (illustrative round numbers, not quotes)")
    text = _cli_message(f"Configurations ranked by cost ({src})\n\n{cmp.explain()}\n")
    print(text)
    cols = ["sweep", "gpu", "gpus_per_replica", "slots", "replicas", "gpus", "usd_per_hour", "usd_per_week",
            "usd_per_m_output", "binding", "status"]
    from capbook.plan.steps import _md_text  # sweep, GPU and file names are the reader's: no markup from them

    t = cmp.table[cols].copy()
    md = ["# " + _md_text(text.splitlines()[0]), "", *map(_md_text, text.splitlines()[2:]), "",
          "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in t.itertuples(index=False):
        md.append("| " + " | ".join("" if pd.isna(v) else _md_text(f"{v:,.2f}" if isinstance(v, float) else v)
                                    for v in row) + " |")
    csv_path, md_path = _write_outputs(args.out, {"compare.csv": cmp.table.to_csv(index=False),
                                                  "compare.md": "\n".join(md) + "\n"})
    print(f"wrote {csv_path} and {md_path}")
    return 0


# --------------------------------------------------------------------------------------------
# capbook simulate --replicas N (see capbook.plan.replay.check_fleet)
# --------------------------------------------------------------------------------------------
#: Defaults of ``capbook simulate``'s simulation flags: the plan's own (capbook.plan.steps.capacity_plan),
#: so that ``capbook simulate --replicas <serving>`` reproduces the plan's verdicts.
SIMULATE_DEFAULTS = {"sim_requests": "30000", "seeds": "2", "seed": "2026", "router": "pooled"}
#: Fewest requests per replication ``capbook simulate`` runs: a p99 and its batch-means margin need them.
SIM_MIN_REQUESTS = 1000
#: Replicas listed one per row in ``capbook simulate``'s table; beyond, it prints min, median and max.
SIMULATE_TABLE_ROWS = 32


def add_simulate_command(sub: argparse._SubParsersAction) -> None:
    """Register ``capbook simulate``."""
    p = sub.add_parser(
        "simulate",
        help="simulate N serving replicas on the log's busiest hours and say whether they meet the objectives",
        description=(
            "What if I run N replicas? Replay the request log's busiest hours, time-scaled to the plan's peak "
            "(or --rate, or --scale times the peak), through N engine replicas fitted to the sweep behind a "
            "router, and judge them as capbook plan does: the TTFT quantile and goodput of the objectives with "
            "95 %% confidence margins, TPOT, refusals, preemptions, prefix-cache hits and a per-replica table. "
            "With the default simulation flags, --replicas <the plan's serving count> meets the objectives and "
            "one fewer does not. Exit status: 0 when the replicas meet the objectives, 3 when they do not (the "
            "verdict says which objective they miss), 2 on invalid input, 1 on an internal error."
        ),
    )
    _add_data_arguments(p)
    _add_history_argument(p)
    g = p.add_argument_group("what to simulate (the plan's traffic and objectives)")
    g.add_argument("--model", default=None, metavar="NAME", help=_LOG_MODEL_HELP.replace("to plan", "to replay"))
    g.add_argument("--tier", default="interactive",
                   help="tier to replay ('all' for every tier; default interactive)")
    g.add_argument("--slo", default=None, metavar="SPEC",
                   help="objectives, as for capbook plan, e.g. 'ttft=1,tpot=50ms' (default: p99 TTFT 1 s, TPOT "
                        "50 ms, goodput 99 %%)")
    g.add_argument("--horizon", default="4", metavar="WEEKS",
                   help="the plan's lead time in weeks, which sets its peak (default 4)")
    g.add_argument("--quantile", default="0.9", metavar="Q",
                   help="the plan's peak-hour quantile, between 0 and 1 (default 0.9)")
    g.add_argument("--growth", default="0", metavar="SHARE",
                   help="weekly growth for logs too short to forecast, from -0.5 to 1 (default 0)")
    g = p.add_argument_group("the fleet simulation")
    g.add_argument("--replicas", default=None, metavar="N",
                   help="serving replicas to simulate, a whole number from 1 to 1000 (required)")
    g.add_argument("--router", default=SIMULATE_DEFAULTS["router"], metavar="NAME",
                   help="router in front of the replicas: pooled, jsq, p2c, random, strict-round-robin or "
                        "prefix-affinity (default pooled, the plan's)")
    rate = g.add_mutually_exclusive_group()
    rate.add_argument("--rate", default=None, metavar="R",
                      help="arrival rate to replay the busiest hours at, requests per second (default: the plan's "
                           "peak)")
    rate.add_argument("--scale", default=None, metavar="X",
                      help="arrival rate as a multiple of the plan's peak, e.g. 2 for twice the peak (default 1)")
    g.add_argument("--sim-requests", default=SIMULATE_DEFAULTS["sim_requests"], metavar="K",
                   help="requests per replication, from the log's busiest hours (default 30000, the plan's)")
    g.add_argument("--seeds", default=SIMULATE_DEFAULTS["seeds"], metavar="S",
                   help="replications, each stacking the busy hours in another order (default 2, the plan's; two "
                        "more are run when a 95 %% margin straddles its objective)")
    g.add_argument("--seed", default=SIMULATE_DEFAULTS["seed"], metavar="SEED",
                   help="seed of the simulation; the same seed gives the same numbers (default 2026, the plan's)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    _add_hardware_arguments(p.add_argument_group(
        "the replica's hardware (default: what the sweep and the files beside it record)"), model=False)
    p.set_defaults(func=run_simulate)


def _simulate_flags(args) -> dict:
    """The simulation flags of ``capbook simulate``, checked; raises ValueError naming the flag."""
    from capbook.sim.fleetsim import ROUTERS, router_name
    from capbook.plan.steps import MAX_DEMAND_SCALE
    from capbook.plan.replay import SIM_CAP_MAX

    if args.replicas is None:
        raise ValueError("--replicas N is required: the number of serving replicas to simulate")
    out = {"replicas": _number(args.replicas, "--replicas", f"a whole number of replicas from 1 to {SIM_CAP_MAX:,}",
                               whole=True, lo=1, hi=SIM_CAP_MAX),
           "n_requests": _number(args.sim_requests, "--sim-requests", f"a whole number of requests >= {SIM_MIN_REQUESTS:,} "
                                 "(fewer give no confidence margin)", whole=True, lo=SIM_MIN_REQUESTS),
           "seeds": _number(args.seeds, "--seeds", "a whole number of replications from 1 to 100", whole=True,
                            lo=1, hi=100),
           "seed": _number(args.seed, "--seed", "a whole number >= 0", whole=True, zero=True)}
    try:
        out["router"] = router_name(args.router)
    except ValueError:
        raise ValueError(f"--router {args.router!r}: must be one of {', '.join(ROUTERS)}") from None
    out["rate"] = None if args.rate is None else _number(args.rate, "--rate",
                                                         "a positive number of requests per second")
    out["scale"] = 1.0 if args.scale is None else _number(
        args.scale, "--scale", f"a positive multiple of the plan's peak of at most {MAX_DEMAND_SCALE:g}",
        lo=0, hi=MAX_DEMAND_SCALE, lo_open=True)
    return out


def _simulate_plan_numbers(args) -> dict:
    """--horizon, --quantile and --growth as ``capacity_plan`` keywords (they set the plan's peak)."""
    from capbook.plan.steps import GROWTH_PER_WEEK_RANGE

    lo, hi = GROWTH_PER_WEEK_RANGE
    return {"lead_time_weeks": _number(args.horizon, "--horizon", "a positive number of weeks"),
            "quantile": _number(args.quantile, "--quantile", "a quantile strictly between 0 and 1", lo=0, hi=1,
                                lo_open=True, hi_open=True),
            "growth_per_week": _number(args.growth, "--growth", f"a weekly growth from {lo:g} to {hi:g} "
                                       "(0.05 is 5 % a week)", lo=lo, hi=hi)}


def run_simulate(args: argparse.Namespace) -> int:
    """Run ``capbook simulate``; returns the exit code."""
    from capbook.app import datasets
    from capbook.plan.steps import SLO, capacity_plan
    from capbook.plan.replay import check_fleet

    try:
        flags = _simulate_flags(args)
        numbers = _simulate_plan_numbers(args)
        try:
            slo = SLO.parse(args.slo) if args.slo is not None else SLO()
        except ValueError as exc:
            raise ValueError(f"--slo {args.slo!r}: {exc}") from None
        _gpu_flag(args)
        _hardware_numbers(args)  # the hardware flags checked before the data are read
        inputs = _plan_inputs_with_hardware(args, "simulate")
        # the plan without its simulated search: its peak, model, tier and objectives are all that is used
        plan = capacity_plan(**inputs.arguments, tier=None if args.tier == "all" else args.tier, slo=slo,
                             **numbers, simulate=False)
        rate = flags["rate"] if flags["rate"] is not None else flags["scale"] * plan.request_rate
        s = check_fleet(plan, inputs.arguments["log"], inputs.arguments["sweep"], flags["replicas"], rate=rate,
                        n_requests=flags["n_requests"], seeds=flags["seeds"], seed=flags["seed"],
                        router=flags["router"])
    except (ValueError, FileNotFoundError) as exc:
        return _fail("simulate", exc)
    if flags["rate"] is not None:
        how = f"--rate; the plan's peak is {plan.request_rate:,.4g} requests/s"
    else:
        d = plan.demand
        pk = d.peaks.get(d.horizon_weeks)
        if pk is not None and pk.method == "observed":
            desc = "the log's busiest hour, too short a history to forecast"
        else:
            desc = f"the P{100 * d.quantile:g} busiest hour forecast {d.horizon_weeks:g} weeks ahead"
        how = (f"the plan's peak: {desc}" if flags["scale"] == 1 else
               f"{flags['scale']:g} × the plan's peak of {plan.request_rate:,.4g} requests/s, {desc}")
    notes = [n for n in plan.traffic.notes + plan.input_notes + plan.demand.notes] + list(s.pop("notes", []))
    verdict = _simulate_verdict(s, plan.slo)
    if args.json:
        out = {"requests": plan.source["requests"], "sweep": plan.source["sweep"], "model": plan.source["model"],
               "tier": plan.source["tier"], "plan_request_rate": plan.request_rate, "rate_source": how,
               "slo": {"ttft_target_s": slo.ttft_target_s, "ttft_quantile": slo.ttft_quantile,
                       "tpot_target_s": slo.tpot_target_s, "goodput_share": slo.goodput_share},
               "requested_seeds": flags["seeds"], "seed": flags["seed"], "n_requests": flags["n_requests"],
               **{k: v for k, v in s.items() if k != "per_replica"},
               "per_replica": s["per_replica"].reset_index().to_dict(orient="records"),
               "verdict": verdict, "notes": notes}
        print(json.dumps(_clean_json(out), indent=2))
        return 0 if s["meets"] else EXIT_NOT_VERIFIED
    _print_simulation(s, plan, flags, how, notes, verdict)
    return 0 if s["meets"] else EXIT_NOT_VERIFIED


#: Keys of the ``--json`` outputs whose values are the user's own data (paths, names), left as
#: they are; every other text (notes, verdicts, reasons, caveats) speaks CLI (:func:`cli_message`).
_JSON_DATA_KEYS = frozenset({"path", "file", "requests", "sweep", "source", "source_file", "model", "tier",
                             "tenant", "point", "format", "name", "gpu", "start", "end", "peak_hour"})


def _clean_json(x, key: str | None = None):
    """``x`` with NumPy scalars as Python numbers, NaN or infinity as None (JSON has neither), and
    the package's keyword hints in its texts as flags (``pass kv_cache_tokens=`` → ``pass
    --kv-cache-tokens N``): what ``--json`` prints speaks the command line, as the text output does."""
    if isinstance(x, dict):
        return {str(k): _clean_json(v, str(k)) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean_json(v, key) for v in x]
    if hasattr(x, "item"):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, str) and key not in _JSON_DATA_KEYS:
        return _cli_message(x)
    return x


def _margin(x) -> float:
    """A 95 % margin as the verdict uses it: one too wide to estimate counts as 0 (capbook.plan.replay._meets)."""
    return float(x) if math.isfinite(x) else 0.0


def _simulate_verdict(s: dict, slo) -> str:
    """The last line of ``capbook simulate``: meets, does not meet (which objective), or cannot."""
    n = s["replicas"]
    fleet = f"{n} replica{'s' if n != 1 else ''}"
    rough = not (math.isfinite(s["ttft_q_margin_s"]) and math.isfinite(s["goodput_margin"]))
    if s["meets"]:
        return (f"{fleet} meet{'s' if n == 1 else ''} the objectives"
                + (" on the estimates alone (too few requests for a 95 % margin)" if rough
                   else " with 95 % confidence"))
    qn = f"p{100 * slo.ttft_quantile:g}"
    tq, mt = s["ttft_q_s"], _margin(s["ttft_q_margin_s"])
    g, mg = s["goodput_share"], _margin(s["goodput_margin"])
    why = []
    if not math.isfinite(tq):
        why.append(f"{qn} TTFT is not reached: over {100 * (1 - slo.ttft_quantile):g} % of the requests got no "
                   "first token before the replay ended (the fleet falls behind)")
    elif tq > slo.ttft_target_s:
        why.append(f"{qn} TTFT {_pm(tq, mt, 's')} is over the {slo.ttft_target_s:g} s objective")
    elif tq + mt > slo.ttft_target_s:
        why.append(f"{qn} TTFT {_pm(tq, mt, 's')} may be over the {slo.ttft_target_s:g} s objective (its 95 % "
                   "margin reaches past it)")
    if not g - mg >= slo.goodput_share:
        word = "is below" if g < slo.goodput_share else "may be below"
        tail = "" if g < slo.goodput_share else " (its 95 % margin reaches past it)"
        why.append(f"goodput {100 * g:.2f} ± {100 * mg:.2f} % {word} the {100 * slo.goodput_share:g} % target{tail} "
                   f"(first replication: {100 * s['ttft_miss_share']:.2f} % of requests over the TTFT objective, "
                   f"{100 * s['tpot_miss_share']:.2f} % over the {1000 * slo.tpot_target_s:g} ms TPOT objective, "
                   f"{s['refused']:,} refused)")
    text = "; ".join(why)
    if s.get("impossible"):
        return ("no fleet size can meet the objectives, so adding replicas cannot help: "
                + "; ".join(_cli_message(w) for w in s["impossible"]) + f". At {fleet}: {text}")
    return f"{fleet} do{'es' if n == 1 else ''} not meet the objectives with 95 % confidence: {text}"


def _secs(x, digits: int = 3) -> str:
    """Seconds for ``capbook simulate``: 'never' for a request never served, 'n/a' when not measured."""
    if x is None or x != x:
        return "n/a"
    return "never (not served)" if math.isinf(x) else f"{_fixed(x, digits)} s"


def _pm(x: float, m: float, unit: str) -> str:
    """``x ± m unit``: the margin to the decimals of the value (or one significant digit when those
    would show it as zero); 'n/a' for a margin too wide to estimate."""
    v = _fixed(x)
    if not math.isfinite(m):
        return f"{v} ± n/a {unit}"
    dec = len(v.split(".")[1]) if "." in v else 0
    mt = f"{m:,.{dec}f}"
    if m > 0 and float(mt.replace(",", "")) == 0:
        mt = _fixed(m)
    return f"{v} ± {mt} {unit}"


def _fixed(x: float, digits: int = 3) -> str:
    """``x`` with ``digits`` decimals below 1, three significant digits from 1 on, and a margin
    below the last decimal shown with one significant digit (not as 0.000)."""
    a = abs(x)
    if a >= 100:
        return f"{x:,.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 1:
        return f"{x:.2f}"
    if a == 0 or a >= 10 ** -digits:
        return f"{x:.{digits}f}"
    return f"{x:.{-math.floor(math.log10(a))}f}"


def _print_simulation(s: dict, plan, flags: dict, how: str, notes: list, verdict: str) -> None:
    """The readable report of ``capbook simulate``."""
    import pandas as pd

    w = print
    slo = plan.slo
    qn = f"p{100 * slo.ttft_quantile:g}"
    src = plan.source
    n = s["replicas"]
    pct = lambda x: "n/a" if x is None or x != x else f"{100 * x:.2f} %"  # noqa: E731
    w(f"capbook simulate: {n} serving replica{'s' if n != 1 else ''} behind the {s['router']} router")
    w("")
    w(f"log         {src['requests']}: model {src['model']}, tier {src['tier']}")
    kv = "not bounded (size unknown)" if s["kv_cache_tokens"] is None else f"{s['kv_cache_tokens']:,} tokens"
    w(f"sweep       {src['sweep']}; one replica: max_num_seqs {s['max_num_seqs']:,}, KV cache {kv}")
    w(f"rate        {s['rate']:,.4g} requests/s ({how})"
      + ("" if not math.isfinite(s["measured_rate"]) or abs(s["measured_rate"] / s["rate"] - 1) < 0.01
         else f"; replayed at {s['measured_rate']:,.4g}"))
    more = s["seeds"] - flags["seeds"]
    w(f"replay      {s['replayed_requests']:,} requests of the log's busiest hours × {s['seeds']} replications "
      f"(seed {flags['seed']})"
      + (f"; {more} more than --seeds, because a 95 % margin straddled its objective" if more > 0 else "")
      + (f"; the log holds only {s['replayed_requests']:,} of the {flags['n_requests']:,} asked for"
         if s["replayed_requests"] < flags["n_requests"] else ""))
    for note in notes:
        w(f"note        {_cli_message(note)}")
    w("")
    w("objectives  (over every replication; ± is the 95 % confidence half-width)")
    tq, mt = s["ttft_q_s"], s["ttft_q_margin_s"]
    ok_t = math.isfinite(tq) and tq + _margin(mt) <= slo.ttft_target_s
    ok_g = s["goodput_share"] - _margin(s["goodput_margin"]) >= slo.goodput_share
    rough = not (math.isfinite(mt) and math.isfinite(s["goodput_margin"]))
    t_txt = _secs(tq) if not math.isfinite(tq) else _pm(tq, mt, "s")
    obj = f"objective {slo.ttft_target_s:g} s"
    # 'not confirmed': the estimate meets the objective, its 95 % margin reaches past it
    lab_t = "met" if ok_t else ("not confirmed" if math.isfinite(tq) and tq <= slo.ttft_target_s else "NOT MET")
    lab_g = "met" if ok_g else ("not confirmed" if s["goodput_share"] >= slo.goodput_share else "NOT MET")
    w(f"  {qn + ' TTFT':<12}{t_txt:<22}{obj:<22}{lab_t}")
    g_txt = (f"{100 * s['goodput_share']:.2f} ± "
             + (f"{100 * s['goodput_margin']:.2f}" if math.isfinite(s["goodput_margin"]) else "n/a") + " %")
    obj = f"target {100 * slo.goodput_share:g} %"
    w(f"  {'goodput':<12}{g_txt:<22}{obj:<22}{lab_g:<14}"
      f"(requests served with TTFT <= {slo.ttft_target_s:g} s and TPOT <= {1000 * slo.tpot_target_s:g} ms)")
    if "not confirmed" in (lab_t, lab_g):
        w(f"  (not confirmed: the estimate meets the objective, but its 95 % margin reaches past it after "
          f"{s['seeds']} replications; the verdict counts it as not met)")
    if rough:
        w("  (± n/a: fewer than 200 requests measured per replication, too few for a 95 % margin; the verdict "
          "reads the estimate alone)")
    w("")
    w(f"first replication ({s['requests']:,} requests measured after the warm-up)")
    w(f"  TTFT        p50 {_secs(s['ttft_p50_s'])}, p99 {_secs(s['ttft_p99_s'])}; {pct(s['ttft_miss_share'])} "
      f"over the {slo.ttft_target_s:g} s objective")
    tp = lambda x: "n/a" if x is None or x != x else f"{1000 * x:.1f} ms"  # noqa: E731
    w(f"  TPOT        p50 {tp(s['tpot_p50_s'])}, p99 {tp(s['tpot_p99_s'])}; {pct(s['tpot_miss_share'])} of requests "
      f"over the {1000 * slo.tpot_target_s:g} ms objective")
    w(f"  E2E         p50 {_secs(s['e2e_p50_s'], 2)}")
    w(f"  served      {s['served']:,} of {s['requests']:,}")
    w(f"  refused     {s['refused']:,} (prompt + output above one replica's KV cache"
      + (f" of {kv})" if s["kv_cache_tokens"] is not None else
         "; not bounded here: the sweep does not say enough to size it)"))
    if s["unfinished"]:
        w(f"  unfinished  {s['unfinished']:,} (still queued or running when the replay ended: the fleet falls behind)")
    w(f"  preemptions {s['preemptions']:,} (sequences evicted from a full KV cache and recomputed)")
    w(f"  cache hits  {pct(s['cache_hit_share'])} of prompt tokens found in a replica's prefix cache")
    w(f"  utilisation slots {pct(s['slot_utilisation'])} of max_num_seqs, KV cache {pct(s['kv_utilisation'])} "
      "(fleet means over time)")
    w("")
    per = s["per_replica"]
    if per is not None and len(per):
        t = pd.DataFrame({"requests": per["requests"], "busy %": 100 * per["busy_share"],
                          "slots %": 100 * per["slot_utilisation"], "KV cache %": 100 * per["kv_utilisation"],
                          "preemptions": per["preemptions"]})
        t.index.name = "replica"
        if len(t) > SIMULATE_TABLE_ROWS:
            t = t.describe().loc[["min", "50%", "max"]].rename(index={"50%": "median"})
            t.index.name = f"of {len(per)}"
        head = f"  {t.index.name:>8}" + "".join(f"{c:>13}" for c in t.columns)
        w("per replica (first replication; requests: routed to it, the warm-up included; busy: share of time a step ran; slots: mean sequences in flight over "
          "max_num_seqs; KV cache: mean tokens held over its size)")
        w(head)
        for idx, row in t.iterrows():
            cells = []
            for c in t.columns:
                v = row[c]
                if v != v:
                    cells.append(f"{'n/a':>13}")
                elif c in ("requests", "preemptions"):
                    cells.append(f"{v:>13,.0f}")
                else:
                    cells.append(f"{v:>13.1f}")
            w(f"  {str(idx):>8}" + "".join(cells))
        w("")
    w(f"verdict     {verdict}")


#: Functions that each register one subcommand; append yours.
COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [add_trace_command, add_plan_command,
                                                                 add_book_command, add_predict_command,
                                                                 add_compare_command, add_simulate_command]


def plain_text(text: str) -> str:
    """``text`` without terminal control sequences (colours, cursor moves, hyperlinks).

    Examples
    --------
    >>> plain_text("\x1b[31merror\x1b[0m: bad row")
    'error: bad row'
    """
    from capbook.app.bookbuild import strip_ansi   # one definition of a terminal code

    return strip_ansi(text)


def _wants_plain(stream) -> bool:
    """True when ``stream`` should get no terminal codes: it is not a terminal (a file, a pipe, a
    test's capture), or ``NO_COLOR`` is set to anything but the empty string (no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return True
    try:
        return not stream.isatty()
    except (AttributeError, ValueError, OSError):
        return True


class _PlainStream:
    """A text stream that drops terminal control sequences from what is written to it (the
    package's messages and the user's own names and values can carry them)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(plain_text(text))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextlib.contextmanager
def _plain_output():
    """Inside: ``sys.stdout`` and ``sys.stderr`` drop terminal codes when they are not terminals
    or ``NO_COLOR`` is set; restored after."""
    saved = sys.stdout, sys.stderr
    if _wants_plain(sys.stdout):
        sys.stdout = _PlainStream(sys.stdout)
    if _wants_plain(sys.stderr):
        sys.stderr = _PlainStream(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every registered subcommand."""
    from capbook import __version__

    parser = argparse.ArgumentParser(
        prog="capbook", description="Capacity planning for LLM serving (see the capbook book).")
    parser.add_argument("--version", action="version", version=f"capbook {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for register in COMMANDS:
        register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``capbook`` command line; returns the exit code.

    0 on success, 3 when ``plan`` writes a plan that is NOT VERIFIED or ``simulate`` finds that
    the replicas do not meet the objectives, 2 on invalid input (one message naming the flag or
    file), 1 on an internal error (one line; ``CAPBOOK_DEBUG=1`` shows the traceback), 130 when interrupted. A closed
    output pipe (``capbook trace LOG | head``) ends the command quietly.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    with _plain_output():  # no terminal codes into files, pipes and NO_COLOR terminals
        return _run_command(args, argv)


def _run_command(args: argparse.Namespace, argv) -> int:
    """Run the parsed command: its exit code, one line for an error, never a traceback."""
    try:
        code = int(args.func(args))
        sys.stdout.flush()
        return code
    except BrokenPipeError as exc:
        if _raised_by_an_interrupt(exc):  # a library's clean-up after Ctrl-C, not our reader
            return _interrupted(args, argv)
        # the reader of our output went away (`| head`): stop writing, without a traceback
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 0
    except KeyboardInterrupt:
        return _interrupted(args, argv)
    except Exception as exc:  # noqa: BLE001 - the last line of defence: never a traceback
        if os.environ.get("CAPBOOK_DEBUG"):
            raise
        if _raised_by_an_interrupt(exc):  # e.g. py4j's socket clean-up after Ctrl-C failed
            return _interrupted(args, argv)
        print(f"capbook {args.command}: internal error: {type(exc).__name__}: {_cli_message(str(exc))}\n"
              "  this is a bug in capbook, not in your data; run again with CAPBOOK_DEBUG=1 for the "
              "traceback and report it", file=sys.stderr)
        return 1


def _interrupted(args: argparse.Namespace, argv) -> int:
    """Ctrl-C: one line and exit code 130."""
    if argv is None:  # the command line itself: a second Ctrl-C while it stops changes nothing
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)
    print(f"capbook {args.command}: interrupted", file=sys.stderr)
    return 130


def _raised_by_an_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` was raised while a ``KeyboardInterrupt`` was handled (its chain has one)."""
    from capbook.logs.engines import raised_by_an_interrupt

    return raised_by_an_interrupt(exc)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
