"""NVIDIA AIPerf and its predecessor genai-perf: ``profile_export*.json`` (metrics as
``{unit, avg, p50, …}``; formats ``aiperf`` and ``genai-perf``) and AIPerf's
``profile_export_aiperf.csv`` (``Metric,avg,…`` blocks; format ``aiperf-csv``), whose load point
comes from the JSON export beside it."""
from __future__ import annotations

import csv
import io
import json
import math
from typing import Mapping

from capbook.formats import FileFormat
from capbook.sweeps.importers._common import (
    _Failed, _NAN, _completion_check, _err, _get, _is_map, _num, _opt, _renamed, _row, _set_tokens,
    _tpot_check,
)


def _pct_obj(d, name, path, scale, *, required=True):
    """(p50, p95, p99) of an aiperf/genai-perf metric object in its unit × scale."""
    m = d.get(name)
    if not isinstance(m, Mapping):
        if required:
            raise _err(path, f"missing field {name!r}")
        return (_NAN, _NAN, _NAN), None
    unit = m.get("unit")
    return tuple(_opt(m, k, scale) for k in ("p50", "p95", "p99")), unit


def _ms_scale(unit, path, field):
    if unit in ("ms",):
        return 1e-3
    if unit in ("s", "sec", "seconds"):
        return 1.0
    if unit in ("ns",):
        return 1e-9
    raise _err(path, f"field {field!r} has unit {unit!r}; expected ms, s or ns")


def _parse_profile_export(d, path, fmt):
    ttft_unit = _get(d, ["time_to_first_token", "unit"], path)
    itl_unit = _get(d, ["inter_token_latency", "unit"], path, "TPOT")
    (t50, t95, t99), _ = _pct_obj(d, "time_to_first_token", path, _ms_scale(ttft_unit, path, "time_to_first_token.unit"))
    (p50, p95, p99), _ = _pct_obj(d, "inter_token_latency", path, _ms_scale(itl_unit, path, "inter_token_latency.unit"))
    rps = _num(_get(d, ["request_throughput", "avg"], path), path, "request_throughput.avg")
    tps = _num(_get(d, ["output_token_throughput", "avg"], path), path, "output_token_throughput.avg")
    isl = _num(_get(d, ["input_sequence_length", "avg"], path), path, "input_sequence_length.avg")
    osl = _num(_get(d, ["output_sequence_length", "avg"], path), path, "output_sequence_length.avg")
    count = d.get("request_count", {}).get("avg") if isinstance(d.get("request_count"), Mapping) else None
    if count is None:
        count = _get(d, ["time_to_first_token", "count"], path, "request count")
    failed = _opt(d.get("error_request_count", {}), "avg") if isinstance(d.get("error_request_count"), Mapping) else 0.0
    if not float(count) > 0:
        raise _Failed(f"{path}: field 'request_count' is {count}: no request succeeded; this run "
                      "holds no measurement")
    ic = d.get("input_config") or {}
    kind, n, rate, src = _profile_load_point(ic, path)
    lat = d.get("request_latency", {})
    mean_lat = _NAN
    if isinstance(lat, Mapping) and lat.get("avg") is not None:
        mean_lat = _num(lat["avg"], path, "request_latency.avg") * _ms_scale(lat.get("unit"), path, "request_latency.unit")
    eff = d.get("effective_concurrency")
    eff = float(eff["avg"]) if isinstance(eff, Mapping) and eff.get("avg") is not None else _NAN
    if kind == "rate":
        if math.isnan(mean_lat):
            raise _err(path, "missing field 'request_latency.avg' (needed for an open-loop point's "
                             "concurrency)")
        if math.isfinite(eff):  # AIPerf's own time-averaged requests in flight
            n, src = eff, "measured"
        else:
            n, src = rps * mean_lat, "littles_law"
    model = _profile_model(ic)
    row = _row(
        concurrency=n, ttft_p50_s=t50, ttft_p95_s=t95, ttft_p99_s=t99,
        tpot_p50_s=p50, tpot_p95_s=p95, tpot_p99_s=p99,
        request_throughput_rps=rps, output_throughput_tps=tps,
        mean_input_tokens=isl, mean_output_tokens=osl, num_requests=float(count),
        model=model, engine=None, load_kind=kind, concurrency_source=src,
        request_rate_target=rate, failed_requests=failed, format=fmt, offered_rps=rate,
    )
    if math.isfinite(eff):
        row["effective_concurrency"] = eff
    _set_tokens(row, _renamed(d.get("output_sequence_length"), {}),
                _renamed(d.get("input_sequence_length"), {}), "output_sequence_length, input_sequence_length")
    ttft_mean = _opt(d["time_to_first_token"], "avg", _ms_scale(ttft_unit, path, "time_to_first_token.unit"))
    itl_mean = _opt(d["inter_token_latency"], "avg", _ms_scale(itl_unit, path, "inter_token_latency.unit"))
    _tpot_check(row, e2e=mean_lat, ttft=ttft_mean, out=osl, reported=itl_mean,
                what="inter_token_latency (mean)")
    if kind == "rate":
        _completion_check(row, rate=rate, count=float(count), e2e=mean_lat)
    return [row]


def _profile_load_point(ic, path):
    """(load_kind, concurrency, rate, source) from an aiperf / genai-perf input_config."""
    phases = ic.get("phases")
    if isinstance(phases, list) and phases:
        prof = [p for p in phases if not p.get("exclude_from_results")] or phases
        p = prof[-1]
        if p.get("type") == "concurrency" and p.get("concurrency") is not None:
            return "concurrency", float(p["concurrency"]), _NAN, "set"
        if p.get("rate") is not None:
            return "rate", _NAN, float(p["rate"]), None
        raise _err(path, f"input_config.phases[-1] has neither 'concurrency' nor 'rate': {p}")
    lg = ic.get("loadgen")
    if isinstance(lg, Mapping):
        if lg.get("concurrency") is not None and lg.get("request_rate") is None:
            return "concurrency", float(lg["concurrency"]), _NAN, "set"
        if lg.get("request_rate") is not None:
            return "rate", _NAN, float(lg["request_rate"]), None
    stim = (ic.get("perf_analyzer") or {}).get("stimulus") if isinstance(ic.get("perf_analyzer"), Mapping) else None
    if isinstance(stim, Mapping):
        if stim.get("concurrency") is not None:
            return "concurrency", float(stim["concurrency"]), _NAN, "set"
        if stim.get("request_rate") is not None:
            return "rate", _NAN, float(stim["request_rate"]), None
    if ic.get("concurrency") is not None and ic.get("request_rate") is None:
        return "concurrency", float(ic["concurrency"]), _NAN, "set"
    if ic.get("request_rate") is not None:
        return "rate", _NAN, float(ic["request_rate"]), None
    raise _err(path, "missing field 'input_config' load point (phases / loadgen.concurrency / "
                     "perf_analyzer.stimulus / concurrency): cannot tell the concurrency")


def _profile_model(ic):
    try:
        return ic["models"]["items"][0]["name"]
    except (KeyError, IndexError, TypeError):
        pass
    for keys in (("endpoint", "model_names"), ("model_names",), ("model",)):
        cur = ic
        try:
            for k in keys:
                cur = cur[k]
            return cur[0] if isinstance(cur, list) else cur
        except (KeyError, IndexError, TypeError):
            continue
    return None


_AIPERF_CSV_FIELDS = {
    "Time to First Token (ms)": "ttft",
    "Inter Token Latency (ms)": "tpot",
    "Input Sequence Length (tokens)": "isl",
    "Output Sequence Length (tokens)": "osl",
}


def _parse_aiperf_csv(text, path, concurrency=None):
    stats, scalars = {}, {}
    for rec in csv.reader(io.StringIO(text)):
        if len(rec) >= 14 and (rec[0] in _AIPERF_CSV_FIELDS or rec[0] == "Request Latency (ms)"):
            stats[rec[0]] = rec
        elif len(rec) == 2 and rec[0] != "Metric":
            scalars[rec[0]] = rec[1]
    header = next(csv.reader(io.StringIO(text)))
    idx = {h: i for i, h in enumerate(header)}
    for f in _AIPERF_CSV_FIELDS:
        if f not in stats:
            raise _err(path, f"missing metric row {f!r}")
    for f in ("Request Throughput (requests/sec)", "Output Token Throughput (tokens/sec)"):
        if f not in scalars:
            raise _err(path, f"missing metric {f!r}")

    def st(field, col, scale=1.0):
        return _num(stats[field][idx[col]], path, f"{field}/{col}") * scale

    kind, rate, src = "concurrency", _NAN, "set"
    sib = path.with_name("profile_export_aiperf.json")
    if concurrency is not None:
        n = float(concurrency)
    elif sib.exists():
        sd = json.loads(sib.read_text())
        kind, n, rate, src = _profile_load_point(sd.get("input_config") or {}, sib)
        if kind == "rate":
            n, src = float(sd["request_throughput"]["avg"]) * float(sd["request_latency"]["avg"]) / 1e3, "littles_law"
    else:
        raise _err(path, "an aiperf CSV does not record the load point (concurrency); keep "
                         "profile_export_aiperf.json beside it or pass concurrency=")
    count = scalars.get("Request Count")
    row = _row(
        concurrency=n,
        ttft_p50_s=st("Time to First Token (ms)", "p50", 1e-3),
        ttft_p95_s=st("Time to First Token (ms)", "p95", 1e-3),
        ttft_p99_s=st("Time to First Token (ms)", "p99", 1e-3),
        tpot_p50_s=st("Inter Token Latency (ms)", "p50", 1e-3),
        tpot_p95_s=st("Inter Token Latency (ms)", "p95", 1e-3),
        tpot_p99_s=st("Inter Token Latency (ms)", "p99", 1e-3),
        request_throughput_rps=_num(scalars["Request Throughput (requests/sec)"], path, "Request Throughput"),
        output_throughput_tps=_num(scalars["Output Token Throughput (tokens/sec)"], path, "Output Token Throughput"),
        mean_input_tokens=st("Input Sequence Length (tokens)", "avg"),
        mean_output_tokens=st("Output Sequence Length (tokens)", "avg"),
        num_requests=_num(count, path, "Request Count") if count is not None else _NAN,
        load_kind=kind, concurrency_source=src, request_rate_target=rate, format="aiperf-csv",
        offered_rps=rate,
    )

    def quantiles(field):
        return {h: stats[field][i] for h, i in idx.items() if i < len(stats[field])}
    _set_tokens(row, quantiles("Output Sequence Length (tokens)"), quantiles("Input Sequence Length (tokens)"),
                "Output / Input Sequence Length (tokens) rows")
    if "Request Latency (ms)" in stats:
        e2e = st("Request Latency (ms)", "avg", 1e-3)
        _tpot_check(row, e2e=e2e, ttft=st("Time to First Token (ms)", "avg", 1e-3),
                    out=row["mean_output_tokens"], reported=st("Inter Token Latency (ms)", "avg", 1e-3),
                    what="Inter Token Latency (avg)")
        if kind == "rate":
            _completion_check(row, rate=rate, count=row["num_requests"], e2e=e2e)
    return [row]


def _is_profile_export(d) -> bool:
    ttft = d.get("time_to_first_token") if _is_map(d) else None
    return _is_map(ttft) and "unit" in ttft


#: This family's formats (:data:`capbook.sweeps.importers.SWEEP_FORMATS` orders them for detection).
_FORMATS = (
    FileFormat("aiperf", "aiperf profile_export*.json (metrics as {unit, avg, p50, ...})",
               lambda p: _is_profile_export(p.json)
               and ("aiperf_version" in p.json or "schema_version" in p.json),
               lambda p, path, o: _parse_profile_export(p.json, path, "aiperf")),
    FileFormat("genai-perf", "genai-perf profile_export*.json (metrics as {unit, avg, p50, ...})",
               lambda p: _is_profile_export(p.json),
               lambda p, path, o: _parse_profile_export(p.json, path, "genai-perf")),
    FileFormat("aiperf-csv", "aiperf profile_export_aiperf.csv (Metric,avg,... blocks)",
               lambda p: p.header[:2] == ("Metric", "avg"),
               lambda p, path, o: _parse_aiperf_csv(p.text, path, o.concurrency)),
)
